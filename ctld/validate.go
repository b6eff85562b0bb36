package ctld

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/qos"
	"corral/submit"
)

// The server is the trust boundary: every request is validated here before
// anything is proposed, whoever the client is. The stateless rules of a
// job request are package submit's (submit.ValidateSpec, the same code the
// CLI runs); this file adds the checks that need the cluster's state. The
// other requests' checks are in validate_requests.go.

// maxJobsPerRequest bounds the jobs of one POST /v1/jobs: as many as one
// SubmitJobs entry holds.
const maxJobsPerRequest = maxJobsPerEntry

// fieldError is a refusal that names the offending field.
type fieldError struct {
	Field string
	Msg   string
}

func (e *fieldError) Error() string { return e.Msg }

func refuse(i int, field, format string, args ...any) error {
	return &fieldError{Field: field, Msg: fmt.Sprintf("job %d of the batch: ", i+1) + fmt.Sprintf(format, args...)}
}

// refuseSpec turns a *submit.Error for job i of a batch into a refusal
// that keeps its field.
func refuseSpec(i int, err error) error {
	var se *submit.Error
	if errors.As(err, &se) {
		return &fieldError{Field: se.Field, Msg: fmt.Sprintf("job %d of the batch: %v", i+1, err)}
	}
	return refuse(i, "", "%v", err)
}

// validateSpec checks job i of a batch: the stateless rules shared with the
// CLI first, then what the cluster's state decides — the partition, QoS,
// account, image and dependency targets exist, a negative nice comes from
// root, and some node of the partition could ever hold the job.
func (c *Controller) validateSpec(i int, sp *api.JobSpec, s *state.State, parts []api.Partition, now time.Time, fits *fitChecker, earlier map[qosKey]int) error {
	if err := submit.ValidateSpec(sp, now); err != nil {
		return refuseSpec(i, err)
	}
	if sp.Nice < 0 && sp.User != "root" {
		return refuse(i, "nice", "nice %d: only root may give a negative nice, which raises a job's priority; use 0 or more", sp.Nice)
	}
	part, err := findPartition(i, sp, parts)
	if err != nil {
		return err
	}
	if err := checkPolicy(i, sp, s, earlier); err != nil {
		return err
	}
	if sp.Image != "" {
		if err := checkImage(i, sp.Image, s); err != nil {
			return err
		}
	}
	if err := checkDependencyTargets(i, sp.Dependency, s); err != nil {
		return err
	}
	if err := checkLicenseTotals(i, sp, s.Config); err != nil {
		return err
	}
	if err := checkNodeSelection(i, sp, part, s); err != nil {
		return err
	}
	if err := refuseUnplaced(i, sp); err != nil {
		return err
	}
	return fits.check(i, sp, part)
}

// findPartition returns the job's partition, refusing an unknown one and a
// time limit above the partition's.
func findPartition(i int, sp *api.JobSpec, parts []api.Partition) (*api.Partition, error) {
	names := make([]string, 0, len(parts))
	for k := range parts {
		p := &parts[k]
		names = append(names, p.Name)
		if p.Name != sp.Partition {
			continue
		}
		if p.MaxTime > 0 && sp.TimeLimit > p.MaxTime {
			return nil, refuse(i, "time_limit_s", "--time=%ds exceeds partition %s's limit of %ds", sp.TimeLimit, p.Name, p.MaxTime)
		}
		return p, partitionAdmits(i, sp, p)
	}
	return nil, refuse(i, "partition", "invalid partition %q (valid: %s)", sp.Partition, strings.Join(names, ", "))
}

// partitionAdmits refuses a job the partition does not take: it is DRAIN
// or INACTIVE, or the job's account or QoS is not among those it allows.
func partitionAdmits(i int, sp *api.JobSpec, p *api.Partition) error {
	switch {
	case !p.TakesJobs():
		return refuse(i, "partition", "partition %s is %s: it takes no new jobs (scontrol update PartitionName=%s State=UP opens it)", p.Name, p.State, p.Name)
	case len(p.AllowAccounts) > 0 && !slices.Contains(p.AllowAccounts, sp.Account):
		return refuse(i, "account", "Invalid account or account/partition combination specified: partition %s takes jobs of accounts %s only; account %q is not one (use -A)", p.Name, strings.Join(p.AllowAccounts, ", "), sp.Account)
	case slices.Contains(p.DenyAccounts, sp.Account):
		return refuse(i, "account", "Invalid account or account/partition combination specified: partition %s refuses jobs of account %s", p.Name, sp.Account)
	case len(p.AllowQos) > 0 && !slices.Contains(p.AllowQos, sp.QOS):
		return refuse(i, "qos", "partition %s takes jobs of QoS %s only; QoS %q is not one (use --qos)", p.Name, strings.Join(p.AllowQos, ", "), sp.QOS)
	}
	return nil
}

// qosKey counts a request's jobs of one user in one QoS.
type qosKey struct{ user, qos string }

// checkPolicy checks the job's QoS and account against the policy objects;
// earlier counts the request's jobs before this one by user and QoS.
func checkPolicy(i int, sp *api.JobSpec, s *state.State, earlier map[qosKey]int) error {
	if sp.QOS != "" {
		q := s.QOS[sp.QOS]
		if q == nil {
			return refuse(i, "qos", "invalid QoS %q (QoS: %s)", sp.QOS, strings.Join(s.QOSNames(), ", "))
		}
		// The jobs before this one in the same request count too; the
		// apply counts again, with what was committed meanwhile.
		if err := qos.SubmitLimit(q, sp.User, s.ActiveInQOS(sp.User, q.Name)+earlier[qosKey{sp.User, q.Name}]); err != nil {
			return refuse(i, "qos", "%v", err)
		}
		earlier[qosKey{sp.User, q.Name}]++
	}
	if sp.Account != "" && len(s.Accounts) > 0 {
		if s.Accounts[sp.Account] == nil {
			return refuse(i, "account", "Invalid account or account/partition combination specified: account %q does not exist; %s",
				sp.Account, userAccounts(s, sp.User))
		}
		if s.Users[state.UserKey{Account: sp.Account, User: sp.User}] == nil {
			return refuse(i, "account", "Invalid account or account/partition combination specified: user %s is not in account %s (corral user add %s --account %s); %s",
				sp.User, sp.Account, sp.User, sp.Account, userAccounts(s, sp.User))
		}
	}
	return nil
}

// userAccounts says which accounts user may submit to, for a refusal.
func userAccounts(s *state.State, user string) string {
	var names []string
	for k := range s.Users {
		if k.User == user {
			names = append(names, k.Account)
		}
	}
	if len(names) == 0 {
		return "user " + user + " is in no account: an administrator adds them with corral user add " + user + " --account NAME"
	}
	slices.Sort(names)
	return "user " + user + "'s accounts: " + strings.Join(names, ", ") + " (use -A)"
}

// checkLicenseTotals refuses, in Slurm's words, a job that asks for a
// license the cluster does not have, or more of one than it has in all.
func checkLicenseTotals(i int, sp *api.JobSpec, c api.SchedConfig) error {
	for _, l := range sp.Licenses {
		total := c.LicenseTotal(l.Name)
		switch {
		case total == 0 && len(c.Licenses) == 0:
			return refuse(i, "licenses", "Invalid license specification: the cluster has no licenses (an administrator sets them with corral config set Licenses=%s:N)", l.Name)
		case total == 0:
			return refuse(i, "licenses", "Invalid license specification: the cluster has no license %s (it has %s)", l.Name, api.FormatLicenses(c.Licenses))
		case l.Count > total:
			return refuse(i, "licenses", "Invalid license specification: %d of license %s asked for; the cluster has %d in all", l.Count, l.Name, total)
		}
	}
	return nil
}

// checkDependencyTargets refuses a dependency on a job that does not
// exist; its syntax was checked by submit.ValidateSpec.
func checkDependencyTargets(i int, d *api.Dependency, s *state.State) error {
	if d == nil {
		return nil
	}
	for _, cl := range d.Clauses {
		for _, raw := range cl.JobIDs {
			ref, err := api.ParseJobRef(raw)
			if err != nil {
				return refuse(i, "dependency", "--dependency=%s: %v", d.Raw, err)
			}
			if _, exists := s.Jobs[ref.ID]; !exists {
				return refuse(i, "dependency", "--dependency=%s: job %d does not exist", d.Raw, ref.ID)
			}
		}
	}
	return nil
}

// checkImage refuses a guest image that no node offers, listing those that
// exist.
func checkImage(i int, image string, s *state.State) error {
	seen := map[string]bool{}
	for _, n := range s.Nodes {
		for _, im := range n.Images {
			if im == image {
				return nil
			}
			seen[im] = true
		}
	}
	names := make([]string, 0, len(seen))
	for im := range seen {
		names = append(names, im)
	}
	sort.Strings(names)
	have := "no node offers any image (start node daemons with --runner vm)"
	if len(names) > 0 {
		have = "images that exist: " + strings.Join(names, ", ")
	}
	return refuse(i, "image", "--image=%s: no node has this image; %s", image, have)
}

// arrayText writes an array given without its expression as one: the
// canonical index set and the task limit, e.g. "0-12:4,20%2", so that
// listings show what the ranges say.
func arrayText(a *api.ArraySpec) string {
	text := api.NewIndexSet(a.Ranges).String()
	if a.Throttle > 0 {
		text += fmt.Sprintf("%%%d", a.Throttle)
	}
	return text
}
