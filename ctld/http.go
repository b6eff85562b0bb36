package ctld

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/pki"
	"corral/submit"
)

// write runs h on the leader and forwards the request there from followers.
func (c *Controller) write(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.isLeading() {
			c.proxy.forward(w, r)
			return
		}
		if err := h(w, r); err != nil {
			c.writeErr(w, r, err)
		}
	}
}

// read serves from local state; ?consistent sends the read to the leader,
// which confirms its leadership first.
func (c *Controller) read(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.URL.Query()["consistent"]; ok {
			if !c.isLeading() {
				c.proxy.forward(w, r)
				return
			}
			if err := c.node.raft.VerifyLeader().Error(); err != nil {
				writeError(w, http.StatusServiceUnavailable, "", "leadership could not be confirmed; retry")
				return
			}
		}
		if err := h(w, r); err != nil {
			c.writeErr(w, r, err)
		}
	}
}

func (c *Controller) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	if isUI(r) {
		c.writeUIError(w, r, err)
		return
	}
	var fe *fieldError
	var he *httpError
	switch {
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, fe.Field, fe.Msg)
	case errors.As(err, &he):
		if he.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(he.retryAfter))
		}
		writeError(w, he.status, he.field, he.msg)
	case errors.Is(err, errNotLeader), errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		writeError(w, http.StatusServiceUnavailable, "", "leadership changed while handling the request; retry (it is safe: submissions carry request ids)")
	default:
		c.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "", err.Error())
	}
}

type httpError struct {
	status int
	field  string
	msg    string
	// retryAfter, when positive, is sent as Retry-After (seconds).
	retryAfter int
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &httpError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, status int, field, msg string) {
	writeJSON(w, status, api.Error{Error: msg, Field: field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body strictly: unknown fields and trailing data are
// refused so that a typo never silently drops a request field.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if be := bodyError(err); be != nil {
			return be
		}
		return &httpError{status: http.StatusBadRequest, field: "body", msg: fmt.Sprintf("malformed JSON request body: %v", err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if be := bodyError(err); be != nil {
			return be
		}
		return &httpError{status: http.StatusBadRequest, field: "body", msg: "malformed JSON request body: unexpected data after the JSON value"}
	}
	return nil
}

func (c *Controller) handleSubmit(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeSubmit(r)
	if err != nil {
		return err
	}
	if len(req.Jobs) == 0 {
		return badRequest("no jobs in the request: send {\"jobs\": [ ... ]}")
	}
	if err := stampOwner(principalFrom(r), req.Jobs); err != nil {
		return err
	}
	specs, err := c.admitJobs(req.Jobs, c.clock.Now())
	if err != nil {
		return err
	}
	if req.TestOnly {
		noteTarget(r, "test only, %d jobs", len(specs))
		writeJSON(w, http.StatusOK, api.SubmitResponse{Results: []api.SubmitResult{}, WillRun: c.willRun(specs, c.clock.Now().UTC())})
		return nil
	}
	results, err := c.submit(r.Context(), specs)
	if err != nil {
		return err
	}
	// The apply refuses a job whose QoS limit was reached meanwhile (by a
	// request committed between the check above and this one): a request
	// of which it refused every job is refused; one of which it took some
	// is answered job by job.
	refused := 0
	for _, res := range results {
		if res.Error != "" {
			refused++
		}
	}
	ids := make([]uint64, 0, len(results))
	for _, res := range results {
		if res.JobID != 0 {
			ids = append(ids, res.JobID)
			if !res.Duplicate {
				c.metrics.submitted.Inc()
			}
		}
	}
	noteTarget(r, "jobs %s", idsText(ids))
	if refused == len(results) {
		return &fieldError{Field: "qos", Msg: results[0].Error}
	}
	writeJSON(w, http.StatusOK, api.SubmitResponse{Results: results})
	return nil
}

// admitJobs fills in each job's defaults and validates the batch against
// the state: what a submission goes through before it is proposed. It
// changes the specs in place and returns them as the state records them,
// or the first job's refusal.
func (c *Controller) admitJobs(jobs []api.JobSpec, now time.Time) ([]state.JobSpec, error) {
	var verr error
	out := make([]state.JobSpec, len(jobs))
	c.fsm.Read(func(s *state.State) {
		parts := s.PartitionList()
		fits := newFitChecker(s, parts, s.Config.DefMemPerCPU)
		earlier := map[qosKey]int{}
		for i := range jobs {
			sp := &jobs[i]
			// As sbatch does: a job without -A is charged to the user's
			// default account (here the first, by name, they belong to).
			if sp.Account == "" {
				sp.Account = s.DefaultAccount(sp.User)
			}
			// A job that names a reservation and no partition goes to
			// the reservation's, as in Slurm.
			if verr = checkJobReservation(i, sp, s, now, sp.Partition != ""); verr != nil {
				return
			}
			if sp.Partition == "" {
				sp.Partition = defaultPartitionName(parts)
			}
			// As Slurm does with DefMemPerCPU: a job that asks for no
			// memory records the default, so it shows what it will get.
			if sp.MemPerNode == 0 && sp.MemPerCPU == 0 && !sp.MemAll {
				sp.MemPerCPU = s.Config.DefMemPerCPU
			}
			if verr = c.validateSpec(i, sp, s, parts, now, fits, earlier); verr != nil {
				return
			}
			if a := sp.Array; a != nil && a.Raw == "" {
				a.Raw = arrayText(a)
			}
			out[i] = stateSpec(sp)
			out[i].Dependency = s.ResolveDependency(out[i].Dependency)
		}
	})
	if verr != nil {
		return nil, verr
	}
	return out, nil
}

func defaultPartitionName(parts []api.Partition) string {
	for _, p := range parts {
		if p.Default {
			return p.Name
		}
	}
	return api.DefaultPartition
}

// filterFromQuery reads squeue-style filters from the URL.
func filterFromQuery(r *http.Request) (api.JobFilter, error) {
	q := r.URL.Query()
	var f api.JobFilter
	if len(q["id"]) > maxIDs {
		return f, &fieldError{Field: "id", Msg: fmt.Sprintf("%d job ids; the most is %d", len(q["id"]), maxIDs)}
	}
	for _, s := range q["id"] {
		ref, err := api.ParseJobRef(s)
		if err != nil {
			return f, badRequest("id: %v", err)
		}
		if ref.HasTask {
			f.Tasks = append(f.Tasks, api.TaskRef{Array: ref.ID, Task: ref.Task})
		} else {
			f.IDs = append(f.IDs, ref.ID)
		}
	}
	for _, s := range q["state"] {
		st, err := api.ParseJobState(s)
		if err != nil {
			return f, badRequest("state: %v", err)
		}
		f.States = append(f.States, st)
	}
	f.Users, f.Names, f.Partitions, f.Accounts = q["user"], q["name"], q["partition"], q["account"]
	f.QOS, f.Nodes, f.Reservations = q["qos"], q["node"], q["reservation"]
	return f, validateFilter(&f)
}

func matches(j *state.Job, f *api.JobFilter) bool {
	return (!f.HasJobs() || matchesRef(j, f)) &&
		(len(f.Users) == 0 || slices.Contains(f.Users, j.Spec.User)) &&
		(len(f.Names) == 0 || slices.Contains(f.Names, j.Spec.Name)) &&
		(len(f.States) == 0 || slices.Contains(f.States, j.State)) &&
		(len(f.Partitions) == 0 || slices.Contains(f.Partitions, j.Spec.Partition)) &&
		(len(f.Accounts) == 0 || slices.Contains(f.Accounts, j.Spec.Account)) &&
		(len(f.QOS) == 0 || slices.Contains(f.QOS, j.Spec.QOS)) &&
		(len(f.Reservations) == 0 || slices.Contains(f.Reservations, j.Spec.Reservation))
}

// onNodes reports whether the view's job runs or ran on one of the nodes
// the filter names (squeue -w); a job that never ran is on none.
func onNodes(v jobView, f *api.JobFilter) bool {
	return len(f.Nodes) == 0 || v.run != nil && slices.Contains(f.Nodes, v.run.Node)
}

// matchesRef reports whether the filter names j: by its id, by its array's
// id, or as one of its array's tasks (a pending task matches the array's
// pending record).
func matchesRef(j *state.Job, f *api.JobFilter) bool {
	if slices.Contains(f.IDs, j.ID) || j.ArrayJobID != 0 && slices.Contains(f.IDs, j.ArrayJobID) {
		return true
	}
	for _, t := range f.Tasks {
		if j.IsArrayTask() && j.ArrayJobID == t.Array && j.ArrayTaskID == t.Task ||
			j.IsArrayPending() && j.ID == t.Array && j.ArrayPending.Contains(t.Task) {
			return true
		}
	}
	return false
}

// jobView is a job and its newest allocation (nil for a pending job or
// one that never ran), taken together under the read lock, with what the
// request's principal may do with it. Both are immutable records, so a
// view can be read and shown after the lock is released without the
// state's maps.
type jobView struct {
	job *state.Job
	run *state.Allocation
	// runs are every allocation of a multi-node job's run, in rank order
	// (run is the first); nil for a single-node job.
	runs []*state.Allocation
	lvl  level
}

// viewOf returns j's view in s for the viewer.
func viewOf(s *state.State, j *state.Job, vw *viewer) jobView {
	v := jobView{job: j, lvl: vw.level(j)}
	if j.State == api.StatePending || len(j.Allocs) == 0 {
		return v
	}
	if !j.Spec.MultiNode() {
		v.run = currentAlloc(s, j) // the run a migration did not give up
		return v
	}
	if v.runs = s.RunAllocs(j); len(v.runs) > 0 {
		v.run = v.runs[0]
	}
	return v
}

// api is the view as the API shows the job to its viewer: all of it to
// its owner, without its script, environment and paths to others.
func (v jobView) api() api.Job {
	if v.lvl >= owned {
		return v.withRuns(apiJobRun(v.job, v.run))
	}
	return v.slim()
}

// slim is the view as listings show it: without the script and
// environment (and the paths, to a viewer that does not own the job).
func (v jobView) slim() api.Job {
	out := v.withRuns(apiJobRunSlim(v.job, v.run))
	redact(&out, v.lvl)
	return out
}

// withRuns adds a multi-node run's nodes to out.
func (v jobView) withRuns(out api.Job) api.Job {
	if len(v.runs) > 1 {
		return withRun(out, v.runs)
	}
	return out
}

// selectJobs returns the jobs matching f that p may see, ordered by id.
func (c *Controller) selectJobs(p principal, f *api.JobFilter) []jobView {
	out := c.matchJobs(p, f)
	sort.Slice(out, func(a, b int) bool { return out[a].job.ID < out[b].job.ID })
	return out
}

// matchJobs returns the jobs matching f that p may see, in no particular
// order.
func (c *Controller) matchJobs(p principal, f *api.JobFilter) []jobView {
	var out []jobView
	c.fsm.Read(func(s *state.State) {
		vw := viewerOf(s, p)
		add := func(j *state.Job) {
			if v := viewOf(s, j, vw); v.lvl > hidden && onNodes(v, f) {
				out = append(out, v)
			}
		}
		if f.HasJobs() && !namesArray(s, f) {
			for _, id := range f.IDs {
				if j := s.Jobs[id]; j != nil && matches(j, f) {
					add(j)
				}
			}
			return
		}
		out = make([]jobView, 0, len(s.Jobs))
		for _, j := range s.Jobs {
			if matches(j, f) {
				add(j)
			}
		}
	})
	return out
}

// namesArray reports whether f names an array or one of its tasks: their
// records are found by scanning, not by id.
func namesArray(s *state.State, f *api.JobFilter) bool {
	if len(f.Tasks) > 0 {
		return true
	}
	for _, id := range f.IDs {
		if j := s.Jobs[id]; j != nil && j.ArrayJobID != 0 {
			return true
		}
	}
	return false
}

func (c *Controller) handleListJobs(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r)
	if err != nil {
		return err
	}
	jobs := c.selectJobs(principalFrom(r), &f)
	prio := c.priorityFunc(c.clock.Now())
	switch r.URL.Query().Get("format") {
	case "rows":
		w.Header().Set("Content-Type", api.JobRowsType)
		rows := make([]*api.Job, len(jobs))
		for i, v := range jobs {
			row := v.slim()
			row.Priority = prio(v.job)
			rows[i] = &row
		}
		return api.EncodeJobRows(w, rows)
	case "", "json":
		w.Header().Set("Content-Type", "application/json")
		return writeJobList(w, jobs, prio, c.migrationFunc())
	}
	return badRequest("format=%q: use json (the default) or rows", r.URL.Query().Get("format"))
}

// handleGetJob answers GET /v1/jobs/{id}: a job ("12") or one task of an
// array ("12_5"). A task not started yet is answered with the array's
// pending record, as squeue shows it.
func (c *Controller) handleGetJob(w http.ResponseWriter, r *http.Request) error {
	view, err := c.showJob(principalFrom(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// showJob is job id as p may see it (scontrol show job), with its
// priority and migration; another tenant's job is not found.
func (c *Controller) showJob(p principal, id string) (*api.Job, error) {
	ref, err := api.ParseJobRef(id)
	if err != nil {
		return nil, &fieldError{Field: "id", Msg: err.Error()}
	}
	var j *state.Job
	var v jobView
	var next uint64
	var minAge int64
	var migs []api.Migration
	var ck *api.JobCheckpoint
	c.fsm.Read(func(s *state.State) {
		if ref.HasTask {
			j, _ = s.ResolveTask(api.TaskRef{Array: ref.ID, Task: ref.Task})
		} else {
			j = s.Jobs[ref.ID]
		}
		if j != nil {
			if v = viewOf(s, j, viewerOf(s, p)); v.lvl == hidden {
				j = nil // another tenant's job does not exist for the caller
			}
		}
		next, minAge = s.NextJobID, s.Config.MinJobAge
		if j != nil {
			migs = apiMigrations(s, j)
			ck = apiCheckpoint(j)
		}
	})
	switch {
	case j == nil && ref.HasTask:
		return nil, &httpError{status: http.StatusNotFound, field: "id", msg: fmt.Sprintf("job %d_%d: array %d has no task %d (see corral queue -j %d)", ref.ID, ref.Task, ref.ID, ref.Task, ref.ID)}
	case j == nil && ref.ID < next && minAge > 0:
		return nil, &httpError{status: http.StatusNotFound, field: "id", msg: fmt.Sprintf("job %d: no such job: a finished job leaves the controllers MinJobAge (%s) after it ends", ref.ID, time.Duration(minAge)*time.Second)}
	case j == nil:
		return nil, &httpError{status: http.StatusNotFound, field: "id", msg: fmt.Sprintf("job %d: no such job", ref.ID)}
	}
	view := withPriority(v, c.priorityFunc(c.clock.Now()))
	c.migrationFunc()(view)
	view.Migrations, view.Checkpoint = migs, ck
	return view, nil
}

func (c *Controller) handleListNodes(w http.ResponseWriter, r *http.Request) error {
	var nodes []api.Node
	c.fsm.Read(func(s *state.State) {
		for _, name := range sortedKeys(s.Nodes) {
			nodes = append(nodes, apiNode(s, s.Nodes[name]))
		}
		markReserved(s, nodes, c.clock.Now().UTC())
	})
	if nodes == nil {
		nodes = []api.Node{}
	}
	writeJSON(w, http.StatusOK, nodes)
	return nil
}

func (c *Controller) handleGetNode(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if why := submit.NameProblem(name, maxNodeNameBytes); why != "" {
		return &fieldError{Field: "name", Msg: fmt.Sprintf("node %q %s", submit.Shown(name), why)}
	}
	var n *api.Node
	c.fsm.Read(func(s *state.State) {
		if rec := s.Nodes[name]; rec != nil {
			v := []api.Node{apiNode(s, rec)}
			markReserved(s, v, c.clock.Now().UTC())
			n = &v[0]
		}
	})
	if n == nil {
		return notFound("node %s: no such node", name)
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

func (c *Controller) handlePartitions(w http.ResponseWriter, r *http.Request) error {
	var parts []api.Partition
	c.fsm.Read(func(s *state.State) { parts = s.PartitionList() })
	writeJSON(w, http.StatusOK, parts)
	return nil
}

// handleDesired answers a node's blocking query: it returns as soon as the
// node's allocation index passes ?index, or after ?wait with the current
// state.
func (c *Controller) handleDesired(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q := r.URL.Query()
	if why := submit.NameProblem(name, maxNodeNameBytes); why != "" {
		writeError(w, http.StatusBadRequest, "name", fmt.Sprintf("node %q %s", submit.Shown(name), why))
		return
	}
	if err := c.checkNode(r, name); err != nil {
		c.writeErr(w, r, err) // the jobs' scripts and environments are the node's alone
		return
	}
	index, err := strconv.ParseUint(q.Get("index"), 10, 64)
	if q.Get("index") != "" && err != nil {
		writeError(w, http.StatusBadRequest, "index", "index must be a Raft index, a whole number ≥ 0")
		return
	}
	wait, err := time.ParseDuration(q.Get("wait"))
	if q.Get("wait") == "" {
		wait, err = 0, nil
	}
	if err != nil || wait < 0 || wait > 5*time.Minute {
		writeError(w, http.StatusBadRequest, "wait", "wait must be a duration up to 5m, e.g. 30s")
		return
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		ch := c.fsm.WatchNode(name)
		var d api.Desired
		c.fsm.Read(func(s *state.State) { d = desired(s, name) })
		if !d.Known || d.Index > index || wait == 0 {
			writeJSON(w, http.StatusOK, d)
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, d)
			return
		case <-r.Context().Done():
			return
		}
	}
}

func (c *Controller) handleRegister(w http.ResponseWriter, r *http.Request) error {
	var info api.NodeInfo
	if err := decode(r, &info); err != nil {
		return err
	}
	if err := validateNodeInfo(&info); err != nil {
		return err
	}
	noteTarget(r, "node %s", info.Name)
	if err := c.checkNode(r, info.Name); err != nil {
		return err
	}
	var aerr error
	c.fsm.Read(func(s *state.State) { aerr = c.checkAttested(s, info.Name) })
	if aerr != nil {
		return &httpError{status: http.StatusForbidden, field: "name", msg: aerr.Error()}
	}
	if len(info.Reports) > api.MaxRegisterReports {
		return &fieldError{Field: "reports", Msg: fmt.Sprintf("node %s: the registration carries %d job reports, at most %d (send the rest as reports after registering)",
			info.Name, len(info.Reports), api.MaxRegisterReports)}
	}
	var dropped []error
	info.Reports, dropped = validCarriedReports(info.Reports)
	c.takeStartTimes(info.Name, info.Runner, info.Reports)
	for _, err := range dropped {
		c.log.Warn("node registration carried a report that is not valid; dropping it", "node", info.Name, "err", err)
	}
	if len(info.Partitions) == 0 {
		c.fsm.Read(func(s *state.State) { info.Partitions = []string{defaultPartitionName(s.PartitionList())} })
	}
	now := c.clock.Now().UTC()
	res, err := c.propose(state.CmdRegisterNode, &state.RegisterNode{Now: now, Info: info, Key: c.callerKey(r)})
	if err != nil {
		return err
	}
	if e, ok := res.(error); ok {
		return &httpError{status: http.StatusForbidden, field: "name", msg: e.Error()}
	}
	c.mu.Lock()
	c.seen[info.Name] = c.clock.Now() // with its monotonic reading (see livenessLoop)
	c.seenDirty = true
	c.mu.Unlock()
	ack := c.nodeAck()
	// The node's allocation index is the registration's or a later one.
	c.fsm.Read(func(s *state.State) {
		if n := s.Nodes[info.Name]; n != nil {
			ack.Index = n.AllocIndex
		}
	})
	c.log.Info("node registered", "node", info.Name, "cpus", info.CPUs, "mem_mb", info.MemMB, "runner", info.Runner,
		"running", len(info.Running), "reports", len(info.Reports), "index", ack.Index)
	writeJSON(w, http.StatusOK, ack)
	return nil
}

// nodeAck is the answer to a node's registration or heartbeat: its lease.
// The lease is half the node timeout, so that a node cut off from the
// controllers has stopped its jobs (lease, then its kill grace, which the
// daemon keeps under a fifth of the timeout) well before the controllers
// declare it DOWN and requeue them; docs/architecture.md has the timeline.
// The controllers tell it rather than each daemon being configured, so the
// two can never disagree.
func (c *Controller) nodeAck() api.NodeAck {
	return api.NodeAck{LeaseMS: (c.cfg.NodeTimeout / 2).Milliseconds(), NodeTimeoutMS: c.cfg.NodeTimeout.Milliseconds(), StartTimes: true}
}

// knownNode checks that a reporting daemon is the node's current
// incarnation; a 404 tells it to register again.
func (c *Controller) knownNode(name, bootID string) error {
	var n *state.Node
	c.fsm.Read(func(s *state.State) { n = s.Nodes[name] })
	switch {
	case n == nil:
		return notFound("node %s is not registered; register first", name)
	case n.Down:
		return notFound("node %s is DOWN; register again", name)
	case bootID != "" && n.BootID != bootID:
		return notFound("node %s registered with another boot id; register again", name)
	}
	return nil
}

// nodeMessage decodes a node daemon's message, checks that it comes from
// the node's current incarnation and records that the node is alive.
func (c *Controller) nodeMessage(r *http.Request) (api.NodeStatus, error) {
	var st api.NodeStatus
	if err := decode(r, &st); err != nil {
		return st, err
	}
	if err := validateNodeStatus(&st); err != nil {
		return st, err
	}
	if err := c.checkNode(r, st.Name); err != nil {
		return st, err
	}
	if err := c.knownNode(st.Name, st.BootID); err != nil {
		return st, err
	}
	c.mu.Lock()
	c.seen[st.Name] = c.clock.Now()
	c.seenDirty = true
	c.mu.Unlock()
	return st, nil
}

func (c *Controller) handleHeartbeat(w http.ResponseWriter, r *http.Request) error {
	if _, err := c.nodeMessage(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c.nodeAck())
	return nil
}

func (c *Controller) handleNodeStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := c.nodeMessage(r)
	if err != nil {
		return err
	}
	if st.Health != nil {
		if err := c.takeHealth(st.Name, st.Health); err != nil {
			return err
		}
	}
	if len(st.Checkpoints) > 0 {
		if err := c.takeCheckpointReports(st.Name, st.Checkpoints); err != nil {
			return err
		}
	}
	if len(st.Migrations) > 0 {
		// Before the job reports: a destination's loaded comes before
		// the end of a source it stopped.
		if err := c.takeMigrationReports(st.Name, st.Migrations); err != nil {
			return err
		}
	}
	if len(st.Reports) > 0 {
		c.takeStartTimes(st.Name, "", st.Reports)
		cmd := &state.JobReports{Now: c.clock.Now().UTC(), Node: st.Name, BootID: st.BootID, Reports: st.Reports}
		if _, err := c.propose(state.CmdJobReports, cmd); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// handleForgetKey answers POST /v1/nodes/forget-key: an operator lets a
// reinstalled node register with its new key.
func (c *Controller) handleForgetKey(w http.ResponseWriter, r *http.Request) error {
	var req api.DrainRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if why := submit.NameProblem(req.Node, maxNodeNameBytes); why != "" {
		return &fieldError{Field: "node", Msg: fmt.Sprintf("node %q %s", submit.Shown(req.Node), why)}
	}
	noteTarget(r, "node %s", req.Node)
	if err := c.proposeChecked(state.CmdForgetNodeKey, &state.ForgetNodeKey{Node: req.Node, By: principalFrom(r).name}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// handleNodeFeatures sets a node's features for an operator, or gives
// them back to its daemon's report.
func (c *Controller) handleNodeFeatures(w http.ResponseWriter, r *http.Request) error {
	var req api.NodeFeaturesRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	noteTarget(r, "node %s", submit.Shown(req.Node))
	if err := validateNodeFeatures(&req); err != nil {
		return err
	}
	cmd := &state.SetNodeFeatures{Node: req.Node, Features: req.Features, Reset: req.Reset, By: principalFrom(r).name}
	if err := c.proposeChecked(state.CmdSetNodeFeatures, cmd); err != nil {
		if strings.Contains(err.Error(), "no such node") {
			return notFound("%v", err)
		}
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (c *Controller) handleDrain(w http.ResponseWriter, r *http.Request) error {
	var req api.DrainRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	noteTarget(r, "node %s", submit.Shown(req.Node))
	if err := validateDrain(&req); err != nil {
		return err
	}
	if req.Drain && strings.TrimSpace(req.Reason) == "" {
		return &fieldError{Field: "reason", Msg: fmt.Sprintf("node %s: draining needs a reason (--reason), as in Slurm", req.Node)}
	}
	if req.Migrate && !req.Drain {
		return &fieldError{Field: "migrate", Msg: fmt.Sprintf("node %s: --migrate goes with a drain, not a resume", req.Node)}
	}
	cmd := &state.NodeDrain{Now: c.clock.Now().UTC(), Node: req.Node, Drain: req.Drain, Reason: req.Reason, By: principalFrom(r).name, Migrate: req.Migrate}
	if _, err := c.propose(state.CmdNodeDrain, cmd); err != nil {
		if strings.Contains(err.Error(), "no such node") {
			return notFound("%v", err)
		}
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (c *Controller) handleSetMember(w http.ResponseWriter, r *http.Request) error {
	var m state.SetMember
	if err := decode(r, &m); err != nil {
		return err
	}
	if m.ID == "" || m.HTTPAddr == "" {
		return badRequest("member id and http_addr are required")
	}
	if why := submit.NameProblem(m.ID, submit.MaxNameBytes); why != "" {
		return &fieldError{Field: "id", Msg: fmt.Sprintf("member id %q %s", submit.Shown(m.ID), why)}
	}
	if id, ok := c.caller(r); c.tls != nil && (!ok || id.Role != pki.RoleMember || id.Name != m.ID) {
		return &httpError{status: http.StatusForbidden, field: "id", msg: fmt.Sprintf("member %s may be announced only by itself, with its certificate", submit.Shown(m.ID))}
	}
	if why := submit.TextProblem(m.HTTPAddr, submit.MaxNameBytes); why != "" || strings.ContainsAny(m.HTTPAddr, " /") {
		return &fieldError{Field: "http_addr", Msg: fmt.Sprintf("http_addr %q must be HOST:PORT", submit.Shown(m.HTTPAddr))}
	}
	if _, err := c.propose(state.CmdSetMember, &m); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

func (c *Controller) handleStatus(w http.ResponseWriter, r *http.Request) {
	rf := c.node.raft
	stats := rf.Stats()
	_, leaderID := rf.LeaderWithID()
	st := api.ClusterStatus{
		Self: c.cfg.ID, Leader: string(leaderID), State: rf.State().String(),
		Nodes: map[string]int{}, Jobs: map[string]int{},
	}
	st.Term, _ = strconv.ParseUint(stats["term"], 10, 64)
	st.CommitIndex = rf.CommitIndex()
	st.AppliedIndex = rf.AppliedIndex()
	st.LastIndex = rf.LastIndex()
	if r.URL.Query().Get("hash") != "" {
		st.StateHash, st.AppliedIndex = c.fsm.HashAt()
	}
	var members map[string]string
	c.fsm.Read(func(s *state.State) {
		members = make(map[string]string, len(s.Members))
		for k, v := range s.Members {
			members[k] = v
		}
		for _, n := range s.Nodes {
			st.Nodes[string(n.State())]++
		}
		for _, j := range s.Jobs {
			st.Jobs[string(j.State)]++
		}
	})
	if f := rf.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			m := api.Member{ID: string(srv.ID), RaftAddr: string(srv.Address), HTTPAddr: members[string(srv.ID)],
				Voter: srv.Suffrage == raft.Voter, Leader: srv.ID == leaderID}
			if m.ID == c.cfg.ID {
				m.HTTPAddr = c.cfg.HTTPAddr
			}
			st.Members = append(st.Members, m)
		}
	}
	writeJSON(w, http.StatusOK, st)
}
