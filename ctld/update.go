package ctld

import (
	"errors"
	"fmt"
	"net/http"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

func (c *Controller) handleUpdateJob(w http.ResponseWriter, r *http.Request) error {
	var req api.UpdateJobRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	noteTarget(r, "job %d", req.ID)
	if err := submit.ValidateDependency(req.Dependency); err != nil {
		return refuseUpdate(req.ID, err) // the request's own fields first
	}
	p := principalFrom(r)
	now := c.clock.Now().UTC()
	var cmd *state.UpdateJob
	var err error
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[req.ID]
		var l level
		if j != nil {
			l = viewerOf(s, p).level(j)
		}
		switch {
		case j == nil || l == hidden:
			err = notFound("job %d: no such job", req.ID)
		case l < managed:
			err = forbidden("%s", deniedJob(req.ID, l, j.Spec.User))
		case req.Changes == nil:
			cmd = &state.UpdateJob{Now: now, ID: req.ID, By: p.name}
			cmd.Dependency, err = checkDependencyChange(s, j, req.Dependency)
		default:
			cmd, err = c.checkChanges(s, j, &req, p, now)
		}
	})
	if err != nil {
		return err
	}
	if _, err := c.propose(state.CmdUpdateJob, cmd); err != nil {
		return badRequest("%v", err)
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// checkDependencyChange checks a new dependency of pending job j and
// resolves its references, once, here, into the typed targets the entry
// carries; the cycle check reads those targets as the pass will.
func checkDependencyChange(s *state.State, j *state.Job, d *api.Dependency) (*state.Dependency, error) {
	if j.State != api.StatePending {
		return nil, badRequest("job %d is %s; only pending jobs can be updated", j.ID, j.State)
	}
	if d == nil {
		return nil, nil
	}
	for _, cl := range d.Clauses {
		for _, raw := range cl.JobIDs {
			ref, perr := api.ParseJobRef(raw)
			if perr != nil || s.Jobs[ref.ID] == nil {
				return nil, &fieldError{Field: "dependency", Msg: fmt.Sprintf("job %d: --dependency=%s names %s, which is no job", j.ID, d.Raw, raw)}
			}
		}
	}
	dep := s.ResolveDependency(stateDependency(d))
	if cycle := state.DependencyCycle(s, j.ID, dep); cycle != nil {
		return nil, &fieldError{Field: "dependency", Msg: fmt.Sprintf("job %d: --dependency=%s would make a cycle: %s; a job in a cycle could never start", j.ID, d.Raw, state.CycleText(cycle))}
	}
	return dep, nil
}

// refuseUpdate names the job an update was refused for, keeping the field
// of a *submit.Error.
func refuseUpdate(id uint64, err error) error {
	var se *submit.Error
	if errors.As(err, &se) {
		return &fieldError{Field: se.Field, Msg: fmt.Sprintf("job %d: %v", id, err)}
	}
	return badRequest("job %d: %v", id, err)
}
