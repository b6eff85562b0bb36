package ctld

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
	"corral/fairshare"
)

// handlePolicy shows the settings and QoS to every user, and the accounts
// and users of the caller's own tenants (all of them to operators).
func (c *Controller) handlePolicy(w http.ResponseWriter, r *http.Request) error {
	var v api.PolicyView
	c.fsm.Read(func(s *state.State) {
		v = s.PolicyView()
		// A webhook URL often carries its secret in its path or query
		// (chat services' incoming hooks do): only its origin is shown.
		v.Config.MailWebhook = api.RedactURL(v.Config.MailWebhook)
		vw := viewerOf(s, principalFrom(r))
		v.Accounts = slices.DeleteFunc(v.Accounts, func(a api.Account) bool { return !vw.seesAccount(a.Name) })
		v.Users = slices.DeleteFunc(v.Users, func(u api.AccountUser) bool { return !vw.seesAccount(u.Account) })
	})
	writeJSON(w, http.StatusOK, v)
	return nil
}

// proposePolicy commits a policy change the leader checked first, so a bad
// one is a 400 naming the field and never reaches the log.
func (c *Controller) proposePolicy(t state.CommandType, cmd any, check func(s *state.State) error) error {
	var err error
	c.fsm.Read(func(s *state.State) { err = check(s) })
	if err != nil {
		return badRequest("%v", err)
	}
	if _, err := c.propose(t, cmd); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

func (c *Controller) handleConfig(w http.ResponseWriter, r *http.Request) error {
	var req api.ConfigRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Settings) == 0 {
		return badRequest("no settings: give NAME=VALUE pairs (settings: %v)", api.ConfigKeys())
	}
	if err := validateSettings(req.Settings); err != nil {
		return err
	}
	cmd := &state.SetConfig{Settings: req.Settings, By: principalFrom(r).name}
	err := c.proposePolicy(state.CmdSetConfig, cmd, func(s *state.State) error {
		cfg := s.Config
		for _, kv := range req.Settings {
			if err := cfg.Set(kv[0], kv[1]); err != nil {
				return fmt.Errorf("%s: %w", kv[0], err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (c *Controller) handleQOS(w http.ResponseWriter, r *http.Request) error {
	var req api.QOSRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := validateQOS(&req.QOS); err != nil {
		return err
	}
	if err := c.proposePolicy(state.CmdPutQOS, &state.PutQOS{QOS: req.QOS, Delete: req.Delete, By: principalFrom(r).name}, func(s *state.State) error {
		return s.CheckQOS(&req.QOS, req.Delete)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (c *Controller) handleAccount(w http.ResponseWriter, r *http.Request) error {
	var req api.AccountRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := validateAccount(&req.Account); err != nil {
		return err
	}
	if err := c.proposePolicy(state.CmdPutAccount, &state.PutAccount{Account: req.Account, Delete: req.Delete, By: principalFrom(r).name}, func(s *state.State) error {
		a := req.Account
		return s.CheckAccount(&a, req.Delete)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (c *Controller) handleUser(w http.ResponseWriter, r *http.Request) error {
	var req api.UserRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := validateAccountUser(&req.User); err != nil {
		return err
	}
	if p := principalFrom(r); !p.admin() {
		var ok bool
		c.fsm.Read(func(s *state.State) { ok = p.coordinates(s, req.User.Account) })
		if !ok {
			return forbidden("%s may not change the users of account %s: an admin or the account's coordinator may (corral role set USER --role coordinator --account %s)", p, req.User.Account, req.User.Account)
		}
	}
	// The apply's own checks are the whole validation; CheckUser runs
	// them on a scratch copy of the users so nothing changes here.
	if err := c.proposePolicy(state.CmdPutUser, &state.PutUser{User: req.User, Delete: req.Delete, By: principalFrom(r).name}, func(s *state.State) error {
		return s.CheckUser(req.User, req.Delete)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// priorityRows computes sprio's view: every pending job's factors in snap.
func priorityRows(snap *sched.Snapshot) []api.PriorityRow {
	total := 0
	for _, n := range snap.Nodes {
		total += n.CPUs
	}
	rows := make([]api.PriorityRow, 0, len(snap.Pending))
	for _, j := range snap.Pending {
		f := sched.Priority(j, snap, total)
		rows = append(rows, api.PriorityRow{
			JobID: j.ID, Ref: j.Ref(), User: j.Spec.User, Account: j.Spec.Account, QOS: j.Spec.QOS,
			Partition: j.Spec.Partition, Priority: f.Priority, Age: f.Age, Fairshare: f.Fairshare,
			QOSF: f.QOS, PartF: f.Partition, JobSize: f.JobSize, Site: f.Site, Nice: f.Nice,
			Weights: snap.Config.Weights,
		})
	}
	sort.Slice(rows, func(a, b int) bool {
		if rows[a].Priority != rows[b].Priority {
			return rows[a].Priority > rows[b].Priority
		}
		return rows[a].JobID < rows[b].JobID
	})
	return rows
}

// handlePriority shows the pending jobs' priority factors, of the jobs the
// caller may see.
func (c *Controller) handlePriority(w http.ResponseWriter, r *http.Request) error {
	rows := priorityRows(c.snapshotForSched(c.clock.Now().UTC()))
	if p := principalFrom(r); !p.admin() {
		c.fsm.Read(func(s *state.State) {
			vw := viewerOf(s, p)
			rows = slices.DeleteFunc(rows, func(row api.PriorityRow) bool {
				j := s.Jobs[row.JobID]
				return j == nil || vw.level(j) == hidden
			})
		})
	}
	writeJSON(w, http.StatusOK, rows)
	return nil
}

func (c *Controller) handleShare(w http.ResponseWriter, r *http.Request) error {
	var rows []api.ShareRow
	c.fsm.Read(func(s *state.State) {
		fr, _ := fairshare.Compute(s.FairshareTree(c.clock.Now().UTC()), s.FairshareAlgorithm())
		rows = make([]api.ShareRow, 0, len(fr))
		vw := viewerOf(s, principalFrom(r))
		for _, x := range fr {
			if x.Account != "root" && !vw.seesAccount(x.Account) {
				continue // another tenant's usage
			}
			if x.User != "" && x.User != vw.p.name && s.Config.Private("usage") && !vw.p.operator() && !vw.p.coordinates(s, x.Account) {
				continue // PrivateData=usage: another user's
			}
			row := api.ShareRow{Account: x.Account, User: x.User, Depth: x.Depth, RawShares: x.RawShares,
				NormShares: x.NormShares, RawUsage: x.RawUsage, EffectvUsage: x.EffectvUsage, LevelFS: x.LevelFS, FairShare: x.FairShare}
			if math.IsInf(row.LevelFS, 0) || math.IsNaN(row.LevelFS) {
				row.LevelFS, row.LevelFSInf = 0, true
			}
			rows = append(rows, row)
		}
	})
	writeJSON(w, http.StatusOK, rows)
	return nil
}
