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
		return refuseUpdate(req.ID, err)
	}
	var err error
	var dep *state.Dependency
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[req.ID]
		var l level
		if j != nil {
			l = viewerOf(s, principalFrom(r)).level(j)
		}
		switch {
		case j == nil || l == hidden:
			err = notFound("job %d: no such job", req.ID)
		case l < managed:
			err = forbidden("%s", deniedJob(req.ID, l, j.Spec.User))
		case j.State != api.StatePending:
			err = badRequest("job %d is %s; only pending jobs can be updated", req.ID, j.State)
		case req.Dependency != nil:
			for _, cl := range req.Dependency.Clauses {
				for _, raw := range cl.JobIDs {
					ref, perr := api.ParseJobRef(raw)
					if perr != nil || s.Jobs[ref.ID] == nil {
						err = &fieldError{Field: "dependency", Msg: fmt.Sprintf("job %d: --dependency=%s names %s, which is no job", req.ID, req.Dependency.Raw, raw)}
						return
					}
				}
			}
			// The references are resolved once, here, into the typed
			// targets the entry carries; the cycle check reads those
			// targets as the pass will.
			dep = s.ResolveDependency(stateDependency(req.Dependency))
			if cycle := state.DependencyCycle(s, req.ID, dep); cycle != nil {
				err = &fieldError{Field: "dependency", Msg: fmt.Sprintf("job %d: --dependency=%s would make a cycle: %s; a job in a cycle could never start", req.ID, req.Dependency.Raw, state.CycleText(cycle))}
			}
		}
	})
	if err != nil {
		return err
	}
	if _, err := c.propose(state.CmdUpdateJob, &state.UpdateJob{Now: c.clock.Now().UTC(), ID: req.ID, Dependency: dep, By: principalFrom(r).name}); err != nil {
		return badRequest("%v", err)
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
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
