package ctld

import (
	"fmt"
	"sort"
	"strings"

	"corral/api"
)

// MaxScriptBytes is the largest job script accepted (Slurm's default
// max_script_size is 4 MiB).
const MaxScriptBytes = 4 << 20

// fieldError is a refusal that names the offending field.
type fieldError struct {
	Field string
	Msg   string
}

// MaxArrayIndex is the largest array task index a job may use (Slurm's
// largest MaxArraySize less one). An array is one record however many
// tasks it has, so the limit is about index width, not memory.
const MaxArrayIndex = 4_000_000

func (e *fieldError) Error() string { return e.Msg }

func refuse(i int, field, format string, args ...any) error {
	return &fieldError{Field: field, Msg: fmt.Sprintf("job %d of the batch: ", i+1) + fmt.Sprintf(format, args...)}
}

// validateSpec checks what the API must never accept, whoever the client
// is; the CLI's own checks (package submit) come first and say more.
func (c *Controller) validateSpec(i int, sp *api.JobSpec, s *State, parts []api.Partition) error {
	switch {
	case sp.Script == "":
		return refuse(i, "script", "the script is empty; give a script file or --wrap")
	case len(sp.Script) > MaxScriptBytes:
		return refuse(i, "script", "the script is %d bytes; the limit is %d (4 MiB): stage large data in files instead", len(sp.Script), MaxScriptBytes)
	case !strings.HasPrefix(sp.Script, "#!"):
		return refuse(i, "script", "this does not look like a batch script: the first line must start with #! followed by the path to an interpreter, e.g. #!/bin/sh")
	case sp.User == "":
		return refuse(i, "user", "no user: set the user field")
	case sp.NTasks < 0 || sp.CPUsPerTask < 0:
		return refuse(i, "ntasks", "--ntasks and --cpus-per-task must be positive")
	case sp.MemPerNode < 0 || sp.MemPerCPU < 0:
		return refuse(i, "mem", "--mem must be positive")
	case sp.TimeLimit < 0:
		return refuse(i, "time", "--time must be positive")
	case sp.Nodes > 1:
		return refuse(i, "nodes", "--nodes=%d: jobs span one node for now; ask for --nodes=1", sp.Nodes)
	}
	if sp.Partition != "" {
		found := false
		var names []string
		for _, p := range parts {
			names = append(names, p.Name)
			if p.Name == sp.Partition {
				found = true
				if p.MaxTime > 0 && sp.TimeLimit > p.MaxTime {
					return refuse(i, "time", "--time=%ds exceeds partition %s's limit of %ds", sp.TimeLimit, p.Name, p.MaxTime)
				}
			}
		}
		if !found {
			return refuse(i, "partition", "invalid partition %q (valid: %s)", sp.Partition, strings.Join(names, ", "))
		}
	}
	for _, g := range sp.Gres {
		if g.Name != "gpu" && g.Name != "vf" {
			return refuse(i, "gres", "--gres=%s: unknown generic resource %q (corral knows gpu, gpu:TYPE, gpu:MIGPROFILE and vf)", g.Name, g.Name)
		}
	}
	if sp.NUMA != "" && sp.NUMA != api.NUMAPrefer && sp.NUMA != api.NUMAStrict && sp.NUMA != api.NUMANone {
		return refuse(i, "numa", "--numa=%s: use prefer, strict or none", sp.NUMA)
	}
	if sp.QOS != "" {
		q := s.QOS[sp.QOS]
		if q == nil {
			return refuse(i, "qos", "invalid QoS %q (QoS: %s)", sp.QOS, strings.Join(s.qosNames(), ", "))
		}
		if q.MaxSubmitPerUser > 0 && s.activeInQOS(sp.User, q.Name) >= q.MaxSubmitPerUser {
			return refuse(i, "qos", "QOSMaxSubmitJobPerUserLimit: user %s already has %d jobs pending or running in QoS %s, its limit", sp.User, q.MaxSubmitPerUser, q.Name)
		}
	}
	if sp.Account != "" && len(s.Accounts) > 0 {
		if s.Accounts[sp.Account] == nil {
			return refuse(i, "account", "invalid account %q: see corral account list", sp.Account)
		}
		if s.Users[UserKey{Account: sp.Account, User: sp.User}] == nil {
			return refuse(i, "account", "user %s is not in account %s (corral user add %s --account %s)", sp.User, sp.Account, sp.User, sp.Account)
		}
	}
	if a := sp.Array; a != nil {
		set := api.NewIndexSet(a.Ranges)
		switch {
		case set.Empty():
			return refuse(i, "array", "--array=%s names no task: give indexes such as 0-99", a.Raw)
		case set.Min() < 0 || set.Max() > MaxArrayIndex:
			return refuse(i, "array", "--array=%s: indexes must be 0 to %d", a.Raw, MaxArrayIndex)
		case a.Throttle < 0:
			return refuse(i, "array", "--array=%s: the %%N task limit must be positive", a.Raw)
		}
	}
	if sp.Image != "" {
		if err := checkImage(i, sp.Image, s); err != nil {
			return err
		}
	}
	if sp.Dependency != nil {
		for _, cl := range sp.Dependency.Clauses {
			for _, ref := range cl.JobIDs {
				id, ok := parseJobRef(ref)
				if !ok {
					return refuse(i, "dependency", "--dependency=%s: %q is not a job id", sp.Dependency.Raw, ref)
				}
				if _, exists := s.Jobs[id]; !exists {
					return refuse(i, "dependency", "--dependency=%s: job %d does not exist", sp.Dependency.Raw, id)
				}
			}
		}
	}
	return nil
}

// checkImage refuses a guest image that no node offers, listing those that
// exist.
func checkImage(i int, image string, s *State) error {
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
