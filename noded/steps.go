package noded

import (
	"io"
	"net/http"
	"strconv"
	"sync"

	"corral/api"
)

// A step's tasks run on this node as exec sessions that name their step
// (?step= on the exec, which srun sends through the controllers). The
// daemon keeps them by job and step, so that a cancelled step (scancel
// JOB.STEP) has its tasks killed here when the controllers ask.

// stepKey names a step of a job.
type stepKey struct {
	job  uint64
	step int
}

// stepSessions are the running tasks of steps, by step.
type stepSessions struct {
	mu sync.Mutex
	m  map[stepKey]map[ExecSession]struct{}
}

func (t *stepSessions) add(k stepKey, s ExecSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[stepKey]map[ExecSession]struct{}{}
	}
	if t.m[k] == nil {
		t.m[k] = map[ExecSession]struct{}{}
	}
	t.m[k][s] = struct{}{}
}

func (t *stepSessions) remove(k stepKey, s ExecSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m[k], s)
	if len(t.m[k]) == 0 {
		delete(t.m, k)
	}
}

// kill closes (and so kills) every task of step k and says how many.
func (t *stepSessions) kill(k stepKey) int {
	t.mu.Lock()
	var sessions []ExecSession
	for s := range t.m[k] {
		sessions = append(sessions, s)
	}
	t.mu.Unlock()
	for _, s := range sessions {
		s.Close()
	}
	return len(sessions)
}

// stepOf reads an exec's ?step=N: the step the command is a task of, and
// whether it is one.
func stepOf(r *http.Request) (int, bool, error) {
	v := r.URL.Query().Get("step")
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false, refuse(http.StatusBadRequest, "step=%q is not a step id", v)
	}
	return n, true, nil
}

// handleKillStep kills a step's tasks on this node, for the controllers
// that cancelled it.
func (d *Daemon) handleKillStep(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	step, serr := strconv.Atoi(r.PathValue("step"))
	switch caller := r.Header.Get(api.UserHeader); {
	case err != nil || serr != nil || step < 0:
		writeAPIError(w, refuse(http.StatusBadRequest, "give a job id and a step id"))
		return
	case caller == "":
		writeAPIError(w, refuse(http.StatusUnauthorized, "no caller named (%s)", api.UserHeader))
		return
	}
	if runs := d.runs.Load(); runs != nil {
		if run := (*runs)[id]; run != nil && r.Header.Get(api.UserHeader) != run.job.Spec.User && r.Header.Get(api.UserHeader) != "root" {
			writeAPIError(w, refuse(http.StatusForbidden, "job %d belongs to %s", id, run.job.Spec.User))
			return
		}
	}
	n := d.steps.kill(stepKey{job: id, step: step})
	d.log.Info("a step's tasks killed", "job", id, "step", step, "tasks", n)
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}\n")
}
