package ctld

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// The step routes: srun asks for a step of a running job (its id and
// layout over the run's nodes), runs its tasks with execs on their nodes
// (jobio.go, with ?node= and ?step=), and reports its end; scancel
// JOB.STEP cancels one, and the controllers then kill its tasks on their
// nodes. A step is the job owner's (or an admin's) to begin and end; srun
// inside a job reaches the controllers through its node's daemon, which
// forwards as the node with api.JobHeader naming the job (actingForJob).

// actingForJob turns a node daemon's request forwarded from inside one of
// its jobs (srun) into the job's owner's, for that job only: the node must
// hold an active allocation of the job the request's path names. A
// request of any other principal is left as it is.
func (c *Controller) actingForJob(p principal, r *http.Request) (principal, error) {
	header := r.Header.Get(api.JobHeader)
	if header == "" || p.kind != kindNode {
		return p, nil
	}
	id, err := strconv.ParseUint(header, 10, 64)
	if err != nil || r.PathValue("id") != header {
		return p, forbidden("node %s forwarded a request of job %q for %q: a job's requests reach its own routes only", p.name, submit.Shown(header), r.PathValue("id"))
	}
	var owner string
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[id]
		if j == nil {
			return
		}
		for _, a := range s.ActiveAllocs(j) {
			if a.Node == p.name {
				owner = j.Spec.User
			}
		}
	})
	if owner == "" {
		return p, forbidden("node %s holds no run of job %d: it may forward only its own jobs' requests", p.name, id)
	}
	return principal{kind: kindUser, name: owner, role: api.RoleUser, via: fmt.Sprintf("node %s for its job %d", p.name, id)}, nil
}

// stepJob checks that p may begin or end steps of job id (its owner, or
// an admin) and returns the job as s holds it.
func stepJob(s *state.State, p principal, id uint64) (*state.Job, error) {
	j := s.Jobs[id]
	if j == nil || viewerOf(s, p).level(j) == hidden {
		return nil, notFound("job %d: no such job", id)
	}
	if p.open && p.name != j.Spec.User && p.name != "root" || !p.open && viewerOf(s, p).level(j) < owned {
		return nil, forbidden("job %d belongs to %s: only its owner (or an admin) runs steps in it", id, j.Spec.User)
	}
	return j, nil
}

func (c *Controller) handleBeginStep(w http.ResponseWriter, r *http.Request) error {
	id, err := pathJobID(r)
	if err != nil {
		return err
	}
	var req api.StepRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		fe := err.(*api.FieldError)
		return &fieldError{Field: fe.Field, Msg: fmt.Sprintf("job %d: %s", id, fe.Msg)}
	}
	// The name reaches squeue -s and sacct: no control characters.
	if why := submit.TextProblem(req.Name, api.MaxStepNameLen); why != "" {
		return &fieldError{Field: "name", Msg: fmt.Sprintf("job %d: the step's name %s", id, why)}
	}
	noteTarget(r, "job %d", id)
	var begin state.StepBegin
	var layout []int
	c.fsm.Read(func(s *state.State) {
		var j *state.Job
		if j, err = stepJob(s, principalFrom(r), id); err == nil {
			begin, layout, err = stepLayout(s, j, req)
		}
	})
	if err != nil {
		return err
	}
	res, err := c.propose(state.CmdSteps, &state.Steps{Now: c.clock.Now().UTC(), Begin: []state.StepBegin{begin}})
	if err != nil {
		return err
	}
	out := res.(*state.StepsResult)
	if len(out.IDs) != 1 || out.IDs[0] < 0 {
		return &httpError{status: http.StatusConflict, msg: fmt.Sprintf("job %d: no step: %v", id, out.Errors)}
	}
	writeJSON(w, http.StatusOK, api.Step{Job: id, ID: out.IDs[0], Name: begin.Name, Nodes: begin.Nodes, Tasks: layout,
		NTasks: begin.NTasks, CPUsPerTask: begin.CPUsPerTask, State: api.StateRunning})
	return nil
}

// stepLayout lays a step out over the nodes of job j's run, in rank order:
// the nodes it asks for (-N; else as many as its tasks need, at most all),
// its tasks split evenly over them, each node's within what the job holds
// there. Without -n and -N a step is the job's own layout.
func stepLayout(s *state.State, j *state.Job, req api.StepRequest) (state.StepBegin, []int, error) {
	if j.State != api.StateRunning {
		return state.StepBegin{}, nil, &httpError{status: http.StatusConflict, msg: fmt.Sprintf("job %d is %s: steps run in a running job", j.ID, j.State)}
	}
	run := s.ActiveAllocs(j)
	slices.SortFunc(run, func(a, b *state.Allocation) int { return a.Rank - b.Rank })
	k := len(run)
	n, nodes, per := req.NTasks, req.Nodes, req.NTasksPerNode
	bad := func(field, format string, args ...any) (state.StepBegin, []int, error) {
		return state.StepBegin{}, nil, &fieldError{Field: field, Msg: fmt.Sprintf("job %d: ", j.ID) + fmt.Sprintf(format, args...)}
	}
	switch {
	case n == 0 && nodes == 0 && per == 0:
		nodes, n = k, api.TasksOn(j.Spec.NTasks, j.Spec.NTasksPerNode, k)
	case nodes == 0 && n > 0 && per > 0:
		nodes = min(k, (n+per-1)/per)
	case nodes == 0 && n > 0:
		nodes = min(k, n)
	case nodes == 0:
		nodes = k
	}
	if n == 0 {
		n = nodes * max(per, 1)
	}
	switch {
	case nodes > k:
		return bad("nodes", "the step asks for %d nodes; the job runs on %d", nodes, k)
	case n < nodes:
		return bad("ntasks", "%d tasks on %d nodes: every node of a step runs a task at least", n, nodes)
	case per > 0 && n > nodes*per:
		return bad("ntasks", "%d tasks do not fit on %d nodes of %d tasks (--ntasks-per-node)", n, nodes, per)
	}
	cpt := req.CPUsPerTask
	if cpt == 0 {
		cpt = max(j.Spec.CPUsPerTask, 1)
	}
	counts := api.TaskCounts(n, 0, nodes)
	b := state.StepBegin{Job: j.ID, Run: run[0].StartIndex, Name: req.Name, NTasks: n, CPUsPerTask: cpt}
	for i, a := range run[:nodes] {
		if int64(counts[i])*int64(cpt) > int64(a.CPUs) {
			return bad("ntasks", "the step's %d tasks of %d CPUs on node %s need %d CPUs; the job holds %d there", counts[i], cpt, a.Node, counts[i]*cpt, a.CPUs)
		}
		b.Nodes = append(b.Nodes, a.Node)
	}
	return b, counts, nil
}

// pathJobID reads the job id of a step route.
func pathJobID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, &fieldError{Field: "id", Msg: fmt.Sprintf("%q is not a job id", submit.Shown(r.PathValue("id")))}
	}
	return id, nil
}

// pathStep reads the job id and step id of a step route.
func pathStep(r *http.Request) (uint64, int, error) {
	id, err := pathJobID(r)
	if err != nil {
		return 0, 0, err
	}
	step, err := strconv.Atoi(r.PathValue("step"))
	if err != nil || step < 0 {
		return 0, 0, &fieldError{Field: "step", Msg: fmt.Sprintf("%q is not a step id (steps are 0, 1, ...)", submit.Shown(r.PathValue("step")))}
	}
	return id, step, nil
}

func (c *Controller) handleEndStep(w http.ResponseWriter, r *http.Request) error {
	id, step, err := pathStep(r)
	if err != nil {
		return err
	}
	var end api.StepEnd
	if err := decode(r, &end); err != nil {
		return err
	}
	if !end.State.Terminal() || end.ExitCode < 0 || end.ExitCode > 255 || end.Signal < 0 || end.Signal > 64 {
		return &fieldError{Field: "state", Msg: fmt.Sprintf("step %d.%d: end as a final state (COMPLETED, FAILED, ...) with an exit code of 0 to 255 and a signal of 0 to 64", id, step)}
	}
	noteTarget(r, "step %d.%d", id, step)
	c.fsm.Read(func(s *state.State) { _, err = stepJob(s, principalFrom(r), id) })
	if err != nil {
		return err
	}
	res, err := c.propose(state.CmdSteps, &state.Steps{Now: c.clock.Now().UTC(),
		End: []state.StepEnd{{Job: id, Step: step, State: end.State, ExitCode: end.ExitCode, Signal: end.Signal}}})
	if err != nil {
		return err
	}
	if out := res.(*state.StepsResult); len(out.Errors) > 0 {
		return &httpError{status: http.StatusConflict, msg: out.Errors[0]}
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// handleCancelStep cancels a running step (scancel JOB.STEP) and kills
// its tasks on their nodes.
func (c *Controller) handleCancelStep(w http.ResponseWriter, r *http.Request) error {
	id, step, err := pathStep(r)
	if err != nil {
		return err
	}
	noteTarget(r, "step %d.%d", id, step)
	p := principalFrom(r)
	var nodes []nodeTarget
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[id]
		if j == nil || viewerOf(s, p).level(j) == hidden {
			err = notFound("job %d: no such job", id)
			return
		}
		if p.open && p.name != j.Spec.User && p.name != "root" || !p.open && viewerOf(s, p).level(j) < managed {
			err = forbidden("job %d belongs to %s: only its owner, its account's coordinator or an admin may cancel its steps", id, j.Spec.User)
			return
		}
		st := j.Step(step)
		if st == nil {
			err = notFound("step %d.%d: no such step", id, step)
			return
		}
		for _, n := range st.Nodes {
			if nd := s.Nodes[n]; nd != nil && nd.APIAddr != "" {
				nodes = append(nodes, nodeTarget{job: id, node: n, addr: nd.APIAddr, as: j.Spec.User})
			}
		}
	})
	if err != nil {
		return err
	}
	res, err := c.propose(state.CmdSteps, &state.Steps{Now: c.clock.Now().UTC(), Cancel: []state.StepEnd{{Job: id, Step: step}}, By: p.name})
	if err != nil {
		return err
	}
	if out := res.(*state.StepsResult); len(out.Errors) > 0 {
		return &httpError{status: http.StatusConflict, msg: out.Errors[0]}
	}
	for _, t := range nodes {
		if err := c.killStepOn(r.Context(), t, step); err != nil {
			c.log.Warn("a cancelled step's tasks could not be killed on their node", "job", id, "step", step, "node", t.node, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// handleListSteps lists the steps of the jobs the caller may see (squeue
// -s), of one job with ?job=ID.
func (c *Controller) handleListSteps(w http.ResponseWriter, r *http.Request) error {
	var only uint64
	if v := r.URL.Query().Get("job"); v != "" {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return &fieldError{Field: "job", Msg: fmt.Sprintf("job=%q is not a job id", submit.Shown(v))}
		}
		only = id
	}
	out := []api.Step{}
	p := principalFrom(r)
	c.fsm.Read(func(s *state.State) {
		vw := viewerOf(s, p)
		add := func(j *state.Job) {
			if j.Steps == nil || vw.level(j) == hidden {
				return
			}
			for _, st := range j.Steps.List {
				out = append(out, apiStep(j, &st))
			}
		}
		if only != 0 {
			if j := s.Jobs[only]; j != nil {
				add(j)
			}
			return
		}
		var ids []uint64
		for id, j := range s.Jobs {
			if j.Steps != nil {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			add(s.Jobs[id])
		}
	})
	writeJSON(w, http.StatusOK, out)
	return nil
}

// killStepOn tells node t to kill step step's tasks of job t.job.
func (c *Controller) killStepOn(ctx context.Context, t nodeTarget, step int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := t.addr + "/v1/jobs/" + strconv.FormatUint(t.job, 10) + "/steps/" + strconv.Itoa(step) + "/kill"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.UserHeader, t.as)
	resp, err := c.nodes.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// apiStep is step st of job j as the API shows it.
func apiStep(j *state.Job, st *state.Step) api.Step {
	return api.Step{Job: j.ID, ID: st.ID, Name: st.Name, Nodes: st.Nodes, Tasks: api.TaskCounts(st.NTasks, 0, len(st.Nodes)),
		NTasks: st.NTasks, CPUsPerTask: st.CPUsPerTask, State: st.State, ExitCode: st.ExitCode, Signal: st.Signal,
		Start: st.Start, End: st.End, Message: st.Message, User: j.Spec.User, Partition: j.Spec.Partition}
}
