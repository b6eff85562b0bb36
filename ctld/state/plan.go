package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/migrate"
	"corral/submit"
)

// ApplyPlan commits one scheduling pass, whole, as one entry: the jobs it
// cancels because their dependency can never be met, the running jobs it
// preempts (by the mode of their QoS), the preempted jobs it resumes, the
// jobs it starts (each a new allocation), and the reasons and reservations
// of the jobs it leaves pending. Migrations have a place in it already;
// none is applied yet.
//
// The apply takes the plan node by node, in node name order, and on each
// node stops before it resumes and resumes before it starts, as Nomad's
// plan applier does; every stop, resume and start is checked against the
// state as it stands at that point (the earlier ones of the plan applied),
// and one that no longer holds is skipped and named in the result. Nothing
// re-checks a plan before it is proposed: this check is the only one, and
// it is deterministic, so every replica skips the same.
type ApplyPlan struct {
	Now     time.Time    `json:"now"`
	Cancels []PlanCancel `json:"cancels,omitempty"`
	Stops   []PlanStop   `json:"stops,omitempty"`
	Resumes []uint64     `json:"resumes,omitempty"`
	Starts  []PlanStart  `json:"starts,omitempty"`
	Reasons []PlanReason `json:"reasons,omitempty"`
	// Migrations are moves of running jobs to other nodes: requested
	// migrations the pass placed, and those it begins itself (a drained
	// node's jobs, a preemption's victims). They apply after the node by
	// node part, each checked then (migrations.go).
	Migrations []PlanMigration `json:"migrations,omitempty"`
	// DrainNotes set what nodes drained with --migrate say of the jobs
	// that stay on them (Node.DrainNote).
	DrainNotes []PlanDrainNote `json:"drain_notes,omitempty"`
}

// PlanDrainNote is one drained node's note.
type PlanDrainNote struct {
	Node string `json:"node"`
	Note string `json:"note,omitempty"`
}

// PlanCancel cancels a pending job whose dependency can never be met
// (--kill-on-invalid-dep=yes).
type PlanCancel struct {
	JobID  uint64 `json:"job_id"`
	Reason string `json:"reason"`
	// Deadline cancels a job that could no longer end by its --deadline:
	// it ends DEADLINE, reason DeadLine.
	Deadline bool `json:"deadline,omitempty"`
}

// PlanStop preempts a running job for job By: cancel ends it PREEMPTED,
// requeue puts it back in the queue once its node stopped it, suspend
// pauses it and lends its CPUs to By, checkpoint saves it to a file and
// puts it back in the queue, to be restored from the file, once saved. (A
// preemption by migration is a plan's migration, PlanMigration.)
type PlanStop struct {
	JobID uint64          `json:"job_id"`
	Mode  api.PreemptMode `json:"mode"`
	By    uint64          `json:"by"`
}

// PlanStart starts one job on one node with the given resources.
type PlanStart struct {
	JobID uint64 `json:"job_id"`
	Node  string `json:"node"`
	CPUs  int    `json:"cpus"`
	MemMB int64  `json:"mem_mb"`
	// OverheadMB is the node runner's own memory charged for the job.
	OverheadMB int64 `json:"overhead_mb,omitempty"`
	// TmpMB is the node-local scratch space the job holds (--tmp).
	TmpMB int64 `json:"tmp_mb,omitempty"`
	// For a task of an array (JobID is the array's pending record): Array
	// is set, Task is the index, and NewID the id the leader reserved for
	// the task's own record (unused when it is the array's last task,
	// which keeps JobID).
	Array bool   `json:"array,omitempty"`
	Task  int    `json:"task,omitempty"`
	NewID uint64 `json:"new_id,omitempty"`
	// Placement is the exact set inside the node (nodes with inventory).
	Placement *api.Placement `json:"placement,omitempty"`
	// Parts are a multi-node job's other nodes, in the order of their
	// ranks (1, 2, ...); Node is rank 0, where the batch script runs. A
	// start is applied whole or not at all.
	Parts []PlanPart `json:"parts,omitempty"`
}

// PlanPart is one more node of a multi-node job's start: what it gives
// the job there.
type PlanPart struct {
	Node       string `json:"node"`
	CPUs       int    `json:"cpus"`
	MemMB      int64  `json:"mem_mb"`
	OverheadMB int64  `json:"overhead_mb,omitempty"`
	// TmpMB is the node-local scratch space the job holds there (--tmp
	// is per node).
	TmpMB     int64          `json:"tmp_mb,omitempty"`
	Placement *api.Placement `json:"placement,omitempty"`
}

// AllParts returns every node of the start, rank 0 first.
func (st *PlanStart) AllParts() []PlanPart {
	return append([]PlanPart{{Node: st.Node, CPUs: st.CPUs, MemMB: st.MemMB, OverheadMB: st.OverheadMB, TmpMB: st.TmpMB, Placement: st.Placement}}, st.Parts...)
}

// PlanReason sets the pending reason of a job the pass left pending, and
// its reservation.
type PlanReason struct {
	JobID  uint64     `json:"job_id"`
	Reason api.Reason `json:"reason"`
	// Start and Node are the job's reservation: when and where it is
	// expected to start; zero when it holds none.
	Start time.Time `json:"start,omitempty"`
	Node  string    `json:"node,omitempty"`
	// Message says why, for api.ReasonInvalidJob: the job is held with it
	// (see sched.Plan.Invalid).
	Message string `json:"message,omitempty"`
}

// PlanMigration moves a running job's allocation to another node: the
// destination gets a new allocation of CPUs, MemMB (and OverheadMB) and
// Placement there.
type PlanMigration struct {
	JobID uint64 `json:"job_id"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Migration is the requested migration placed; 0 for one the pass
	// begins itself, for Cause, asked By (the drained node, the
	// preemptor), with the stream Token the leader stamped.
	Migration  uint64         `json:"migration,omitempty"`
	Cause      migrate.Cause  `json:"cause,omitempty"`
	By         string         `json:"by,omitempty"`
	Token      string         `json:"token,omitempty"`
	CPUs       int            `json:"cpus,omitempty"`
	MemMB      int64          `json:"mem_mb,omitempty"`
	OverheadMB int64          `json:"overhead_mb,omitempty"`
	Placement  *api.Placement `json:"placement,omitempty"`
}

// PlanResult says what a plan did, and what it skipped because the state
// no longer allowed it.
type PlanResult struct {
	Started  []uint64
	Rejected []uint64
	// Stopped, Resumed and Cancelled list the jobs preempted, resumed
	// and cancelled; Skipped the stops, resumes, cancels and migrations
	// that no longer applied.
	Stopped   []uint64
	Resumed   []uint64
	Cancelled []uint64
	Skipped   []uint64
	// Migrated lists the jobs whose migration the plan placed.
	Migrated []uint64
	// Lent is set when a stop lent CPUs to a preemptor: they are free
	// now, so another pass may start a job.
	Lent bool
}

// CheckStart says why a start cannot be applied to the current state, or ""
// when it can. used tracks CPUs and memory already taken by earlier starts
// of the same plan that are not applied yet (nil when they are).
func (s *State) CheckStart(st PlanStart, used map[string][2]int64) string {
	j, ok := s.Jobs[st.JobID]
	if !ok {
		return "no such job"
	}
	if j.State != api.StatePending || j.Spec.Hold {
		return fmt.Sprintf("job is %s", j.State)
	}
	if st.Array != j.IsArrayPending() {
		return "array task mismatch"
	}
	if st.Array {
		if !j.ArrayPending.Contains(st.Task) {
			return fmt.Sprintf("task %d of array %d is not pending", st.Task, j.ID)
		}
		if j.ArrayPending.Len() > 1 {
			if _, taken := s.Jobs[st.NewID]; taken || st.NewID == 0 {
				return fmt.Sprintf("id %d for task %d of array %d is taken", st.NewID, st.Task, j.ID)
			}
		}
	}
	parts := st.AllParts()
	if why := s.checkGang(j.Spec, parts); why != "" {
		return why
	}
	if Restoring(j) {
		// A restore starts from its file: on one node that can read it.
		if len(parts) != 1 {
			return "a restore runs on one node"
		}
		if w := j.Checkpoint.Want; w != "" && w != st.Node {
			return "not the node its restore asked for"
		}
		if why := s.CheckRestoreNode(j, st.Node); why != "" {
			return why
		}
	}
	for _, p := range parts {
		if why := s.checkPart(j.Spec, p, len(parts), used); why != "" {
			return why
		}
	}
	return ""
}

// checkPart says why one node's part of a start cannot be applied: the
// node is not up, lacks the resources or the placement, or the part is
// smaller than the job's share of k nodes (all of the node, for an
// exclusive job).
func (s *State) checkPart(sp *JobSpec, p PlanPart, k int, used map[string][2]int64) string {
	n, ok := s.Nodes[p.Node]
	if !ok {
		return "no such node"
	}
	if n.Down || n.Drain || n.Probing {
		return fmt.Sprintf("node %s is %s", n.Name, n.State())
	}
	u := used[p.Node]
	if p.OverheadMB < n.OverheadMB {
		return fmt.Sprintf("node %s charges %d MiB per job, the plan %d", n.Name, n.OverheadMB, p.OverheadMB)
	}
	held := p.CPUs
	if p.Placement != nil {
		held += len(p.Placement.Idle) // the idle threads of its cores
	}
	if int64(n.FreeCPUs())-u[0] < int64(held) || n.FreeMemMB()-u[1] < p.MemMB+p.OverheadMB {
		return fmt.Sprintf("node %s lacks resources", n.Name)
	}
	if p.TmpMB > 0 && n.TmpMB-n.AllocTmpMB < p.TmpMB {
		return fmt.Sprintf("node %s lacks %d MiB of scratch space (--tmp)", n.Name, p.TmpMB)
	}
	if p.CPUs < sp.CPUsPerNode(k) {
		return "fewer CPUs than the job asked for"
	}
	if sp.Exclusive && p.CPUs < n.CPUs {
		return fmt.Sprintf("the job asked for whole nodes (--exclusive); node %s has %d CPUs, the plan gives %d", n.Name, n.CPUs, p.CPUs)
	}
	if p.Placement != nil {
		return s.checkPlacement(n, p.Placement)
	}
	return ""
}

// checkGang says why the nodes of a start cannot be the job's: fewer or
// more than its node range, one twice, a -w node missing, a -x node
// present, or features that do not satisfy its constraint. Each node's
// own part is checkPart's.
func (s *State) checkGang(sp *JobSpec, parts []PlanPart) string {
	lo, hi := api.NodeRange(sp.Nodes, sp.NodesMax)
	if len(parts) < lo || len(parts) > hi {
		return fmt.Sprintf("the job asked for %d to %d nodes; the plan gives %d", lo, hi, len(parts))
	}
	if len(parts) == 1 && sp.NodeList == "" && sp.Exclude == "" && sp.Constraint == "" {
		return ""
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		if slices.Contains(names[:i], p.Node) {
			return fmt.Sprintf("node %s is given twice", p.Node)
		}
		names[i] = p.Node
	}
	for _, n := range submit.NodeNames(sp.NodeList) {
		if !slices.Contains(names, n) {
			return fmt.Sprintf("the job asked for node %s (--nodelist); the plan leaves it out", n)
		}
	}
	for _, n := range submit.NodeNames(sp.Exclude) {
		if slices.Contains(names, n) {
			return fmt.Sprintf("the job excluded node %s (--exclude)", n)
		}
	}
	if sp.Constraint == "" {
		return ""
	}
	c, err := submit.ParseConstraint(sp.Constraint)
	if err != nil {
		return err.Error()
	}
	has := make([]func(string) bool, len(names))
	for i, name := range names {
		if n := s.Nodes[name]; n != nil {
			has[i] = n.HasFeature
		} else {
			has[i] = func(string) bool { return false }
		}
	}
	if !c.SatisfiedBy(has) {
		return "the nodes' features do not satisfy the job's constraint " + sp.Constraint
	}
	return ""
}

// NodeUsed returns what the active allocations on node n hold inside it.
func (s *State) NodeUsed(n *Node) *Used {
	used := NewUsed()
	for _, id := range n.Allocs {
		if a := s.Allocs[id]; a != nil {
			used.AddAlloc(a)
		}
	}
	return used
}

// checkPlacement says why a placement cannot be applied on node n: a CPU,
// GPU, MIG instance or VF it names does not exist there or is already held
// by another allocation, or a NUMA node lacks the memory or hugepages. The
// plan's apply refuses a start that double-books anything.
func (s *State) checkPlacement(n *Node, p *api.Placement) string {
	inv := n.Inventory
	if inv == nil || inv.Topology == nil {
		return fmt.Sprintf("node %s reported no topology", n.Name)
	}
	used := s.NodeUsed(n)
	cpus, mem, huge := map[int]bool{}, map[int]int64{}, map[[2]int64]int64{}
	for _, node := range inv.Topology.Nodes {
		for _, c := range node.CPUs {
			cpus[c.ID] = true
		}
		mem[node.ID] = node.MemMB
		for size, h := range node.Hugepages {
			huge[[2]int64{int64(node.ID), size}] = h.Free
		}
	}
	for _, c := range slices.Concat(p.CPUs, p.Idle) {
		if !cpus[c] || used.CPUs[c] {
			return fmt.Sprintf("CPU %d of node %s is missing or held", c, n.Name)
		}
	}
	for _, m := range p.Mem {
		if used.Mem[m.Node]+m.MB > mem[m.Node] {
			return fmt.Sprintf("NUMA node %d of node %s lacks %d MiB", m.Node, n.Name, m.MB)
		}
	}
	for _, h := range p.Hugepages {
		k := [2]int64{int64(h.Node), h.SizeKB}
		if used.Hugepages[k]+h.Count > huge[k] {
			return fmt.Sprintf("NUMA node %d of node %s lacks %d hugepages of %d KiB", h.Node, n.Name, h.Count, h.SizeKB)
		}
	}
	devices := map[string]bool{}
	for _, g := range inv.GPUs {
		devices[g.UUID] = true
		for _, m := range g.MIG {
			devices[m.UUID] = true
		}
	}
	for _, pf := range inv.PFs {
		for _, vf := range pf.VFs {
			devices[vf.Addr] = true
		}
	}
	for _, d := range slices.Concat(p.GPUs, p.MIG, p.VFs) {
		if !devices[d] || used.Devices[d] {
			return fmt.Sprintf("device %s of node %s is missing or held", d, n.Name)
		}
	}
	return ""
}

// splitTask takes task out of the array's pending record arr (a private
// copy) and returns the record to start for it: a new one with id newID,
// or arr itself when task was the last one pending.
func (s *State) splitTask(arr *Job, task int, newID uint64) *Job {
	rest := arr.ArrayPending.Without(task)
	if rest.Empty() {
		arr.ArrayPending, arr.ArrayTaskID = nil, task
		return arr
	}
	arr.ArrayPending = rest
	s.putJob(arr)
	t := *arr
	t.ID, t.ArrayPending, t.ArrayTaskID, t.Allocs = newID, nil, task, nil
	if newID >= s.NextJobID {
		s.NextJobID = newID + 1
	}
	return &t
}

func (s *State) applyPlan(c *ApplyPlan, index uint64) *PlanResult {
	res := &PlanResult{}
	for _, pc := range c.Cancels {
		s.planJob(pc.JobID, res, &res.Cancelled, func(j *Job) string {
			if j.State != api.StatePending {
				return "not pending"
			}
			if pc.Deadline {
				s.stopJob(j, api.StateDeadline, c.Now, index)
				j.Reason, j.Message = api.ReasonDeadline, "cancelled by "+pc.Reason
				return ""
			}
			s.noteInvalidDep(j)
			return s.cancelJob(j, &CancelJobs{Now: c.Now, By: pc.Reason}, index)
		})
	}
	for _, op := range s.planByNode(c) {
		switch op.kind {
		case opStop:
			st := c.Stops[op.i]
			s.planJob(st.JobID, res, &res.Stopped, func(j *Job) string {
				if st.Mode == api.PreemptSuspend {
					res.Lent = res.Lent || j.State == api.StateRunning
					return s.suspendJob(j, &SuspendJobs{Now: c.Now, Suspend: true, Preempt: true, By: st.By}, index)
				}
				switch st.Mode {
				case api.PreemptCheckpoint:
					if j.State != api.StateRunning {
						return "not running"
					}
					return s.beginCheckpoint(j, fmt.Sprintf("job %d", st.By), true, c.Now, index)
				case api.PreemptMigrate:
					return "a preemption by migration is a plan's migration, not a stop"
				}
				return s.cancelJob(j, &CancelJobs{Now: c.Now, By: fmt.Sprintf("job %d", st.By), Preempt: st.Mode}, index)
			})
		case opResume:
			s.planJob(c.Resumes[op.i], res, &res.Resumed, func(j *Job) string {
				return s.suspendJob(j, &SuspendJobs{Now: c.Now, Suspend: false, Preempt: true}, index)
			})
		default:
			s.planStart(c.Starts[op.i], c.Now, index, res)
		}
	}
	for _, m := range c.Migrations {
		s.planMigration(m, c.Now, index, res)
	}
	for _, dn := range c.DrainNotes {
		if n := s.Nodes[dn.Node]; n != nil && n.Drain && n.DrainMigrate && n.DrainNote != dn.Note {
			n = s.editNode(dn.Node)
			n.DrainNote = dn.Note
			s.Nodes[dn.Node] = n
		}
	}
	for _, r := range c.Reasons {
		s.planReason(r)
	}
	return res
}

// planOp is one stop, resume or start of a plan: its kind, the index in
// the plan's list of that kind, and the node it applies on.
type planOp struct {
	node string
	kind int
	i    int
}

// The kinds of planOp, in the order they apply on a node.
const (
	opStop = iota
	opResume
	opStart
)

// planByNode orders a plan's stops, resumes and starts node by node (in
// name order), and on each node stops before resumes before starts, each
// kind in the plan's order: a stop or resume applies on the node of the
// job's active allocation when the plan applies (none: ""), a start on the
// node it names.
func (s *State) planByNode(c *ApplyPlan) []planOp {
	nodeOf := func(id uint64) string {
		if j := s.Jobs[id]; j != nil {
			if active := s.activeAllocs(j); len(active) > 0 {
				return active[0].Node
			}
		}
		return ""
	}
	ops := s.planOps[:0]
	for i, st := range c.Stops {
		ops = append(ops, planOp{node: nodeOf(st.JobID), kind: opStop, i: i})
	}
	for i, id := range c.Resumes {
		ops = append(ops, planOp{node: nodeOf(id), kind: opResume, i: i})
	}
	for i, st := range c.Starts {
		node := st.Node
		if len(st.Parts) > 0 {
			// A multi-node start applies after every node's stops and
			// resumes (a suspension may lend it CPUs on any of its
			// nodes), and after the single-node starts, which the pass
			// planned beside it.
			node = lastNodeKey + node
		}
		ops = append(ops, planOp{node: node, kind: opStart, i: i})
	}
	slices.SortStableFunc(ops, func(a, b planOp) int {
		if c := strings.Compare(a.node, b.node); c != 0 {
			return c
		}
		return a.kind - b.kind
	})
	s.planOps = ops
	return ops
}

// lastNodeKey sorts after every node name (names are letters, digits,
// '.', '-' and '_').
const lastNodeKey = "\xff"

// planJob changes job id as one part of a plan: the change says why it
// cannot be made, or "" after making it on the private copy it is given.
func (s *State) planJob(id uint64, res *PlanResult, done *[]uint64, change func(j *Job) string) {
	j := s.editJob(id)
	if j == nil || change(j) != "" {
		res.Skipped = append(res.Skipped, id)
		return
	}
	s.putJob(j)
	*done = append(*done, id)
}

// planStart applies one start of a plan, checked against the state with
// the plan's earlier parts applied.
func (s *State) planStart(st PlanStart, now time.Time, index uint64, res *PlanResult) {
	if why := s.CheckStart(st, nil); why != "" {
		res.Rejected = append(res.Rejected, st.JobID)
		return
	}
	if len(s.Reservations) > 0 {
		if why := s.resvStartProblem(s.Jobs[st.JobID], st.Node, now); why != "" {
			res.Rejected = append(res.Rejected, st.JobID)
			return
		}
	}
	j := s.editJob(st.JobID)
	if st.Array {
		j = s.splitTask(j, st.Task, st.NewID)
	}
	for rank, p := range st.AllParts() {
		s.newAlloc(j, p, rank, now, index)
	}
	if j.Spec.Reservation != "" {
		s.noteResvStart(j, st)
	}
	j.State, j.Reason = api.StateRunning, api.ReasonNone
	start := now
	if Restoring(j) {
		start = j.StartTime // the job goes on; it does not start again
	}
	j.StartTime, j.EstStart, j.EstNode, j.EndTime = start, time.Time{}, "", time.Time{}
	j.ExitCode, j.Signal, j.Message = 0, 0, ""
	s.putJob(j)
	res.Started = append(res.Started, j.ID)
}

// planReason sets a pending job's reason and reservation.
func (s *State) planReason(r PlanReason) {
	cur := s.Jobs[r.JobID]
	if cur == nil || cur.State != api.StatePending || (cur.Reason == r.Reason && cur.EstStart.Equal(r.Start) && cur.EstNode == r.Node) {
		return
	}
	j := s.editJob(r.JobID)
	j.Reason, j.EstStart, j.EstNode = r.Reason, r.Start, r.Node
	if r.Reason == api.ReasonDependencyNeverSatisfied {
		s.noteInvalidDep(j)
	}
	if r.Reason == api.ReasonInvalidJob {
		// The scheduler cannot handle the job: hold it, so no pass
		// tries again until someone releases it.
		j.editSpec().Hold = true
		j.Message = r.Message
	}
	s.putJob(j)
}

// Rerun reports whether the plan left work for another pass: a start it
// rejected, CPUs a stop lent, or a job it cancelled (a dependant may be
// able to run now).
func (r *PlanResult) Rerun() bool {
	return len(r.Rejected) > 0 || r.Lent || len(r.Cancelled) > 0 || len(r.Skipped) > 0
}
