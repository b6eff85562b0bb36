package ctld

import (
	"fmt"
	"net/http"
	"slices"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// This file holds the job changes a user asks for (cancel, hold, suspend)
// and who a submitted job belongs to, each through the query layer.

// stampOwner makes the request's principal the owner of each job: a job
// names no user or its caller; only an admin may submit for another user
// (as root may with sbatch --uid). On a cluster that does not
// authenticate users the job's user field stands.
func stampOwner(p principal, jobs []api.JobSpec) error {
	for i := range jobs {
		// --priority is an operator's: root on a cluster that does not
		// authenticate users.
		if sp := &jobs[i]; sp.Priority != 0 && (p.open && sp.User != "root" || !p.open && !p.operator()) {
			return &httpError{status: http.StatusForbidden, field: "priority", msg: fmt.Sprintf(
				"job %d of the batch: --priority=%d: only operators and administrators may set a job's priority; lower yours with --nice", i+1, sp.Priority)}
		}
	}
	if p.open {
		return nil
	}
	for i := range jobs {
		sp := &jobs[i]
		if sp.Nice < 0 && !p.admin() {
			return &httpError{status: http.StatusForbidden, field: "nice", msg: fmt.Sprintf(
				"job %d of the batch: nice %d: only an admin may give a negative nice, which raises a job's priority; use 0 or more", i+1, sp.Nice)}
		}
		switch {
		case sp.User == "" || sp.User == p.name:
			sp.User = p.name
		case !p.admin():
			return &httpError{status: http.StatusForbidden, field: "user", msg: fmt.Sprintf(
				"job %d of the batch: user %q: %s may submit only as %s; only an admin may submit for another user", i+1, submit.Shown(sp.User), p, p.name)}
		}
	}
	return nil
}

func (c *Controller) handleCancel(w http.ResponseWriter, r *http.Request) error {
	var req api.CancelRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	f := req.Filter
	if err := validateFilter(&f); err != nil {
		return err
	}
	if why := submit.TextProblem(req.By, submit.MaxNameBytes); why != "" {
		return &fieldError{Field: "by", Msg: fmt.Sprintf("by %q %s", submit.Shown(req.By), why)}
	}
	if !f.HasJobs() && len(f.Users) == 0 && len(f.Names) == 0 && len(f.States) == 0 && len(f.Partitions) == 0 && len(f.Accounts) == 0 &&
		len(f.Reservations) == 0 {
		return badRequest("no jobs selected: name job ids or a filter (user, name, state, partition, account, reservation)")
	}
	resp := api.CancelResponse{Errors: map[uint64]string{}}
	// Jobs named by id go to the FSM as they are, unknown and finished ones
	// included: it says why each cannot be cancelled. Jobs selected by a
	// filter alone are skipped quietly once finished, as scancel -u does.
	// A task of an array that has started is its own record; one that has
	// not is taken out of the array's pending record.
	var ids []uint64
	var tasks []api.TaskRef
	byID := f
	byID.Tasks = nil
	p := principalFrom(r)
	c.fsm.Read(func(s *state.State) {
		vw := viewerOf(s, p)
		for _, id := range f.IDs {
			switch j := s.Jobs[id]; {
			case j == nil:
				ids = append(ids, id) // the apply says why
			case vw.level(j) == hidden:
				resp.Errors[id] = deniedJob(id, hidden, "")
			}
		}
		for _, t := range f.Tasks {
			switch j, pending := s.ResolveTask(t); {
			case j == nil || vw.level(j) == hidden:
				resp.Errors[t.Array] = fmt.Sprintf("no task %s", t)
			case vw.level(j) < managed:
				resp.Errors[t.Array] = deniedJob(j.ID, vw.level(j), j.Spec.User)
			case pending:
				if matches(j, &api.JobFilter{Users: f.Users, Names: f.Names, States: f.States, Partitions: f.Partitions, Accounts: f.Accounts, Reservations: f.Reservations}) {
					tasks = append(tasks, t)
				}
			default:
				if matches(j, &api.JobFilter{Users: f.Users, Names: f.Names, States: f.States, Partitions: f.Partitions, Accounts: f.Accounts, Reservations: f.Reservations}) {
					ids = append(ids, j.ID)
				}
			}
		}
	})
	if byID.HasJobs() || len(f.Tasks) == 0 {
		for _, v := range c.selectJobs(p, &byID) {
			j := v.job
			named := slices.Contains(f.IDs, j.ID)
			switch {
			case !named && (j.State.Terminal() || j.State == api.StateCompleting):
				continue // selected by a filter or as a task of a named array
			case v.lvl < managed && named:
				resp.Errors[j.ID] = deniedJob(j.ID, v.lvl, j.Spec.User)
				continue
			case v.lvl < managed:
				continue // scancel -u bob by alice: not hers to cancel
			}
			ids = append(ids, j.ID)
		}
	}
	noteTarget(r, "jobs %s", idsText(ids))
	if len(ids) > 0 || len(tasks) > 0 {
		by := req.By
		if !p.open {
			by = p.name // who cancelled is who the credentials prove
		}
		res, err := c.propose(state.CmdCancelJobs, &state.CancelJobs{Now: c.clock.Now().UTC(), IDs: ids, Tasks: tasks, By: by})
		if err != nil {
			return err
		}
		ir := res.(*state.IDsResult)
		resp.Cancelled = ir.Changed
		for id, e := range ir.Errors {
			resp.Errors[id] = e
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (c *Controller) handleHold(w http.ResponseWriter, r *http.Request) error {
	var req api.HoldRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	return c.changeJobs(w, r, req.IDs, func(p principal, ids []uint64) (state.CommandType, any) {
		return state.CmdHoldRelease, &state.HoldRelease{Now: c.clock.Now().UTC(), IDs: ids, Hold: req.Hold, By: p.name, Admin: p.isAdmin()}
	})
}

func (c *Controller) handleRequeue(w http.ResponseWriter, r *http.Request) error {
	var req api.RequeueRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	return c.changeJobs(w, r, req.IDs, func(p principal, ids []uint64) (state.CommandType, any) {
		return state.CmdRequeueJobs, &state.RequeueJobs{Now: c.clock.Now().UTC(), IDs: ids, Hold: req.Hold, By: p.name, Admin: p.isAdmin()}
	})
}

func (c *Controller) handleSuspend(w http.ResponseWriter, r *http.Request) error {
	var req api.SuspendRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	return c.changeJobs(w, r, req.IDs, func(p principal, ids []uint64) (state.CommandType, any) {
		return state.CmdSuspendJobs, &state.SuspendJobs{Now: c.clock.Now().UTC(), IDs: ids, Suspend: req.Suspend, ByUser: p.name}
	})
}

// isAdmin reports whether p's hold is an administrator's: on a cluster
// that authenticates no one, root's word makes one, as Slurm's does.
func (p principal) isAdmin() bool {
	return p.open && p.name == "root" || !p.open && p.admin()
}

// privileged reports whether p may do what Slurm keeps for operators and
// administrators (lower a nice value, raise a time limit past the job's
// bounds): on a cluster that authenticates no one, root.
func (p principal) privileged() bool {
	return p.open && p.name == "root" || !p.open && p.operator()
}

// changeJobs checks the job ids a hold or suspend names, commits the
// command entry makes of those the request's principal may change, and
// answers with what changed and why each other id did not.
func (c *Controller) changeJobs(w http.ResponseWriter, r *http.Request, reqIDs []uint64, entry func(p principal, ids []uint64) (state.CommandType, any)) error {
	if len(reqIDs) == 0 {
		return badRequest("no job ids given")
	}
	if err := validateIDs("ids", reqIDs); err != nil {
		return err
	}
	p := principalFrom(r)
	ids, denied := c.managedJobs(p, reqIDs)
	noteTarget(r, "jobs %s", idsText(reqIDs))
	resp := api.HoldResponse{Errors: denied}
	if len(ids) > 0 {
		res, err := c.propose(entry(p, ids))
		if err != nil {
			return err
		}
		ir := res.(*state.IDsResult)
		resp.Changed = ir.Changed
		for id, e := range ir.Errors {
			resp.Errors[id] = e
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// managedJobs splits ids into those p may change (unknown ones included:
// the apply says why) and the refusals of the others.
func (c *Controller) managedJobs(p principal, ids []uint64) ([]uint64, map[uint64]string) {
	out := make([]uint64, 0, len(ids))
	denied := map[uint64]string{}
	c.fsm.Read(func(s *state.State) {
		vw := viewerOf(s, p)
		for _, id := range ids {
			j := s.Jobs[id]
			if j == nil {
				out = append(out, id)
				continue
			}
			if l := vw.level(j); l < managed {
				denied[id] = deniedJob(id, l, j.Spec.User)
				continue
			}
			out = append(out, id)
		}
	})
	return out, denied
}
