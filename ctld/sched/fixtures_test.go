package sched

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// This file is the package's fixtures vocabulary. Scenarios read like
// sentences:
//
//	at(t0).with(nodes(3).cpus(4).mem(8192)).
//		queue(job(1).cpus(2).mem(1024), job(2).afterok(3)).
//		known(job(3).completed())
//
// Builders share their *state.Job and *state.Node values with the snapshot; the
// pass only reads them, and the multi-round simulation mutates them between
// passes exactly as the plan applier would.

// t0 is the fixed "now" of every single-pass scenario.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// nodeSet is a group of identical nodes.
type nodeSet []*state.Node

// nodes returns n idle nodes named n1..nN (zero-padded so that name order is
// numeric order), 1 CPU and 1024 MiB each, in the default partition.
func nodes(n int) nodeSet {
	width := len(strconv.Itoa(n))
	ns := make(nodeSet, n)
	for i := range ns {
		ns[i] = &state.Node{
			Name: fmt.Sprintf("n%0*d", width, i+1), CPUs: 1, MemMB: 1024,
		}
	}
	return ns
}

// node returns one node with the given name.
func node(name string) nodeSet { return nodes(1).named(name) }

func (ns nodeSet) each(f func(*state.Node)) nodeSet {
	for _, n := range ns {
		f(n)
	}
	return ns
}

// named renames the set: one node takes the name itself, several take the
// name as a prefix (named("dbg") gives dbg1, dbg2, ...).
func (ns nodeSet) named(name string) nodeSet {
	if len(ns) == 1 {
		ns[0].Name = name
		return ns
	}
	for _, n := range ns {
		n.Name = name + strings.TrimLeft(n.Name, "n")
	}
	return ns
}

func (ns nodeSet) cpus(c int) nodeSet { return ns.each(func(n *state.Node) { n.CPUs = c }) }
func (ns nodeSet) mem(mb int64) nodeSet {
	return ns.each(func(n *state.Node) { n.MemMB = mb })
}
func (ns nodeSet) partition(p ...string) nodeSet {
	return ns.each(func(n *state.Node) { n.Partitions = p })
}
func (ns nodeSet) down() nodeSet    { return ns.each(func(n *state.Node) { n.Down = true }) }
func (ns nodeSet) drained() nodeSet { return ns.each(func(n *state.Node) { n.Drain = true }) }
func (ns nodeSet) probing() nodeSet { return ns.each(func(n *state.Node) { n.Probing = true }) }

// busy allocates CPUs and memory on every node of the set, as running jobs
// would.
func (ns nodeSet) busy(cpus int, mb int64) nodeSet {
	return ns.each(func(n *state.Node) { n.AllocCPUs, n.AllocMemMB = cpus, mb })
}

// jobB builds one job. A new job is PENDING, asks for 1 CPU and no memory,
// has priority 0 and was submitted at t0.
type jobB struct{ j *state.Job }

func job(id uint64) jobB {
	return jobB{&state.Job{
		ID: id, State: api.StatePending, SubmitTime: t0,
		Spec: &state.JobSpec{Name: "job" + strconv.FormatUint(id, 10), User: "alice", NTasks: 1, CPUsPerTask: 1},
	}}
}

func (b jobB) with(f func(*state.Job)) jobB { f(b.j); return b }

func (b jobB) cpus(c int) jobB { return b.with(func(j *state.Job) { j.Spec.CPUsPerTask = c }) }

// tasks sets --ntasks; the job's CPUs are tasks × cpus-per-task.
func (b jobB) tasks(n int) jobB { return b.with(func(j *state.Job) { j.Spec.NTasks = n }) }
func (b jobB) mem(mb int64) jobB {
	return b.with(func(j *state.Job) { j.Spec.MemPerNode = mb })
}
func (b jobB) memPerCPU(mb int64) jobB {
	return b.with(func(j *state.Job) { j.Spec.MemPerCPU = mb })
}
func (b jobB) submitted(t time.Time) jobB {
	return b.with(func(j *state.Job) { j.SubmitTime = t })
}

// limit sets --time.
func (b jobB) limit(d time.Duration) jobB {
	return b.with(func(j *state.Job) { j.Spec.TimeLimit = int64(d / time.Second) })
}
func (b jobB) priority(p int64) jobB { return b.with(func(j *state.Job) { j.Priority = p }) }
func (b jobB) held() jobB            { return b.with(func(j *state.Job) { j.Spec.Hold = true }) }
func (b jobB) begin(t time.Time) jobB {
	return b.with(func(j *state.Job) { j.Spec.Begin = t })
}
func (b jobB) partition(p string) jobB {
	return b.with(func(j *state.Job) { j.Spec.Partition = p })
}
func (b jobB) named(name, user string) jobB {
	return b.with(func(j *state.Job) { j.Spec.Name, j.Spec.User = name, user })
}

// Dependencies. Each call adds one clause; clauses are all-of unless anyOf
// is called (Slurm's "?").
func (b jobB) depends(typ string, minutes int, ids ...uint64) jobB {
	c := state.DepClause{Type: typ, Minutes: minutes}
	for _, id := range ids {
		c.JobIDs = append(c.JobIDs, strconv.FormatUint(id, 10))
	}
	return b.dependsRaw(c)
}
func (b jobB) dependsRaw(c state.DepClause) jobB {
	return b.with(func(j *state.Job) {
		if j.Spec.Dependency == nil {
			j.Spec.Dependency = &state.Dependency{}
		}
		j.Spec.Dependency.Clauses = append(j.Spec.Dependency.Clauses, c)
	})
}
func (b jobB) after(ids ...uint64) jobB { return b.depends("after", 0, ids...) }
func (b jobB) afterPlus(id uint64, minutes int) jobB {
	return b.depends("after", minutes, id)
}
func (b jobB) afterany(ids ...uint64) jobB   { return b.depends("afterany", 0, ids...) }
func (b jobB) aftercorr(ids ...uint64) jobB  { return b.depends("aftercorr", 0, ids...) }
func (b jobB) afterok(ids ...uint64) jobB    { return b.depends("afterok", 0, ids...) }
func (b jobB) afternotok(ids ...uint64) jobB { return b.depends("afternotok", 0, ids...) }
func (b jobB) singleton() jobB               { return b.dependsRaw(state.DepClause{Type: "singleton"}) }
func (b jobB) afterokRaw(ids ...string) jobB {
	return b.dependsRaw(state.DepClause{Type: "afterok", JobIDs: ids})
}

// anyOf joins the job's clauses with "any of" (Slurm's "?").
func (b jobB) anyOf() jobB {
	return b.with(func(j *state.Job) { j.Spec.Dependency.Any = true })
}

// States, for dependency targets and simulated jobs. A target that ended
// started an hour before t0.
func (b jobB) state(s api.JobState) jobB  { return b.with(func(j *state.Job) { j.State = s }) }
func (b jobB) startedAt(t time.Time) jobB { return b.with(func(j *state.Job) { j.StartTime = t }) }
func (b jobB) runningFor(d time.Duration) jobB {
	return b.state(api.StateRunning).startedAt(t0.Add(-d))
}
func (b jobB) terminal(s api.JobState) jobB { return b.state(s).startedAt(t0.Add(-time.Hour)) }
func (b jobB) completed() jobB              { return b.terminal(api.StateCompleted) }
func (b jobB) failed() jobB                 { return b.terminal(api.StateFailed) }

// cancelledWhilePending ends the job without it ever having started.
func (b jobB) cancelledWhilePending() jobB { return b.state(api.StateCancelled) }

// scene is a snapshot under construction.
type scene struct {
	s    Snapshot
	jobs map[uint64]*state.Job
}

// at starts a scene whose pass runs at now.
func at(now time.Time) *scene {
	return &scene{s: Snapshot{Now: now}, jobs: map[uint64]*state.Job{}}
}

// with adds nodes.
func (sc *scene) with(sets ...nodeSet) *scene {
	for _, ns := range sets {
		sc.s.Nodes = append(sc.s.Nodes, ns...)
	}
	return sc
}

// queue adds pending jobs (they are also known to Lookup).
func (sc *scene) queue(js ...jobB) *scene {
	for _, b := range js {
		sc.s.Pending = append(sc.s.Pending, b.j)
		sc.jobs[b.j.ID] = b.j
	}
	return sc
}

// known adds jobs that are not pending but may be named by dependencies.
func (sc *scene) known(js ...jobB) *scene {
	for _, b := range js {
		sc.jobs[b.j.ID] = b.j
	}
	return sc
}

// partitions declares the partitions; the one named by def is the default
// ("" marks none).
func (sc *scene) partitions(def string, names ...string) *scene {
	for _, n := range names {
		sc.s.Partitions = append(sc.s.Partitions, api.Partition{Name: n, Default: n == def})
	}
	return sc
}

func (sc *scene) defMemPerCPU(mb int64) *scene { sc.s.DefMemPerCPU = mb; return sc }

// policy sets the pass's policy (the zero value is EASY).
func (sc *scene) policy(p Policy) *scene { sc.s.Policy = p; return sc }

// running places a job on the named node (which must already be in the
// scene) as RUNNING since t0-elapsed, holding its CPUs and memory, for
// backfill to plan around.
func (sc *scene) running(node string, elapsed time.Duration, b jobB) *scene {
	return sc.runningWith(node, elapsed, b, nil)
}

// runningWith is running with a change to the job's allocation (a
// placement, a suspension, a stop) made before it is charged to its node.
func (sc *scene) runningWith(node string, elapsed time.Duration, b jobB, change func(a *state.Allocation)) *scene {
	j := b.runningFor(elapsed).j
	a := &state.Allocation{ID: uint64(len(sc.s.Running) + 1), Job: j.ID, Node: node, CPUs: j.Spec.CPUs(),
		MemMB: MemRequest(j, sc.s.DefMemPerCPU), TmpMB: j.Spec.TmpMB, Desired: state.AllocRun, Status: state.AllocActive,
		StartIndex: 1, StartTime: j.StartTime}
	if change != nil {
		change(a)
	}
	switch a.Desired {
	case state.AllocSuspend:
		j.State = api.StateSuspended
	case state.AllocStop:
		j.State = api.StateCompleting
	}
	j.Allocs = []uint64{a.ID}
	for _, n := range sc.s.Nodes {
		if n.Name == node {
			n.AllocCPUs += a.HeldCPUs()
			n.AllocMemMB += a.HeldMemMB()
			n.AllocTmpMB += a.HeldTmpMB()
			n.Allocs = append(n.Allocs, a.ID)
			sc.s.Running = append(sc.s.Running, Run{Alloc: a, Job: j})
			sc.jobs[j.ID] = j
			return sc
		}
	}
	panic("running: no node " + node + " in the scene")
}

// lentTo suspends a run by preemption for job by: its CPUs are lent (the
// node does not count them), its memory stays held.
func lentTo(by uint64) func(a *state.Allocation) {
	return func(a *state.Allocation) {
		a.Desired, a.CPUsLent, a.PreemptedBy, a.SuspendTime = state.AllocSuspend, true, by, t0
	}
}

// runOn returns a run of job j (started at its StartTime) on node, holding
// the CPUs and memory it asks for; the caller charges the node.
func runOn(node string, j *state.Job) Run {
	a := &state.Allocation{ID: j.ID, Job: j.ID, Node: node, CPUs: j.Spec.CPUs(), MemMB: j.Spec.MemMB(),
		Desired: state.AllocRun, Status: state.AllocActive, StartIndex: 1, StartTime: j.StartTime}
	j.Allocs = []uint64{a.ID}
	return Run{Alloc: a, Job: j}
}

// noLookup leaves Snapshot.Lookup nil, as a caller that forgot it would.
func (sc *scene) noLookup() *scene { sc.jobs = nil; return sc }

// snapshot returns the finished snapshot. Each call returns a fresh value
// sharing the same jobs and nodes.
func (sc *scene) snapshot() *Snapshot {
	// Dependencies are resolved as the controller resolves them at
	// submit: "12" names a whole array when job 12 is one.
	for _, j := range sc.jobs {
		j.Spec.Dependency = state.ResolveTargets(j.Spec.Dependency, func(id uint64) bool {
			t := sc.jobs[id]
			return t != nil && t.ArrayJobID == t.ID
		})
	}
	for _, j := range sc.s.Pending {
		j.Spec.Dependency = state.ResolveTargets(j.Spec.Dependency, func(id uint64) bool {
			t := sc.jobs[id]
			return t != nil && t.ArrayJobID == t.ID
		})
	}
	s := sc.s
	s.Pending = slices.Clone(sc.s.Pending)
	s.Nodes = slices.Clone(sc.s.Nodes)
	s.Running = slices.Clone(sc.s.Running)
	if sc.jobs != nil {
		known := sc.jobs
		s.Lookup = func(id uint64) *state.Job { return known[id] }
		s.Array = func(id uint64) []*state.Job {
			var recs []*state.Job
			for _, j := range known {
				if j.ArrayJobID == id {
					recs = append(recs, j)
				}
			}
			slices.SortFunc(recs, func(a, b *state.Job) int { return int(a.ID) - int(b.ID) })
			return recs
		}
		s.LookupTask = func(array uint64, task int) *state.Job {
			for _, j := range known {
				if j.ArrayJobID == array && (j.IsArrayTask() && j.ArrayTaskID == task || j.IsArrayPending() && j.ArrayPending.Contains(task)) {
					return j
				}
			}
			return nil
		}
	}
	return &s
}

// countTasks counts the plan's starts of array id's tasks.
func countTasks(p Plan, id uint64) int {
	n := 0
	for _, st := range p.Starts {
		if st.JobID == id {
			n++
		}
	}
	return n
}

// startsOf renders a plan's starts as "job@node", in plan order.
func startsOf(p Plan) []string {
	out := make([]string, 0, len(p.Starts))
	for _, st := range p.Starts {
		if st.Array {
			out = append(out, fmt.Sprintf("%d[%d]@%s", st.JobID, st.Task, st.Node))
			continue
		}
		out = append(out, fmt.Sprintf("%d@%s", st.JobID, st.Node))
	}
	return out
}

// checkPlan asserts the invariants every plan must keep, whatever the
// scenario: starts fit the free capacity of usable nodes of the job's
// partition with the job's own request, no job is both started and given a
// reason, every pending job is started or has exactly one reason, and no
// reason names a job that was not pending. An array's pending record may
// start several distinct tasks it holds and keep a reason for the rest.
func checkPlan(t testing.TB, s *Snapshot, p Plan) {
	t.Helper()
	pending := make(map[uint64]*state.Job, len(s.Pending))
	for _, j := range s.Pending {
		pending[j.ID] = j
	}
	byName := make(map[string]*state.Node, len(s.Nodes))
	for _, n := range s.Nodes {
		byName[n.Name] = n
	}
	defPart := defaultPartition(s.Partitions)
	usedCPU, usedMem, usedTmp := map[string]int{}, map[string]int64{}, map[string]int64{}
	started := map[uint64]bool{}
	tasks := map[[2]uint64]bool{}
	for _, st := range p.Starts {
		j := pending[st.JobID]
		switch {
		case j == nil:
			t.Errorf("plan starts job %d, which is not pending", st.JobID)
			continue
		case st.Array != j.IsArrayPending():
			t.Errorf("plan starts job %d with Array=%v; its record holds array tasks: %v", st.JobID, st.Array, j.IsArrayPending())
		case st.Array && (!j.ArrayPending.Contains(st.Task) || tasks[[2]uint64{st.JobID, uint64(st.Task)}]):
			t.Errorf("plan starts task %d of array %d, which is not pending or started twice", st.Task, st.JobID)
		case !st.Array && started[st.JobID]:
			t.Errorf("plan starts job %d twice", st.JobID)
		}
		started[st.JobID] = true
		tasks[[2]uint64{st.JobID, uint64(st.Task)}] = true
		if r, ok := p.Reasons[st.JobID]; ok && !(st.Array && j.ArrayPending.Len() > countTasks(p, st.JobID)) {
			t.Errorf("job %d is started and also given reason %s", st.JobID, r)
		}
		if want := j.Spec.CPUs(); st.CPUs != want {
			t.Errorf("job %d starts with %d CPUs, asked for %d", st.JobID, st.CPUs, want)
		}
		if st.TmpMB != j.Spec.TmpMB {
			t.Errorf("job %d starts holding %d MiB of scratch space, asked for %d", st.JobID, st.TmpMB, j.Spec.TmpMB)
		}
		if want := MemRequest(j, s.DefMemPerCPU); st.MemMB != want {
			t.Errorf("job %d starts with %d MiB, should get %d", st.JobID, st.MemMB, want)
		}
		n := byName[st.Node]
		if n == nil {
			t.Errorf("job %d starts on unknown node %q", st.JobID, st.Node)
			continue
		}
		if n.Down || n.Drain {
			t.Errorf("job %d starts on node %s, which is down or drained", st.JobID, n.Name)
		}
		part := j.Spec.Partition
		if part == "" {
			part = defPart
		}
		parts := n.Partitions
		if len(parts) == 0 {
			parts = []string{api.DefaultPartition}
		}
		if !slices.Contains(parts, part) {
			t.Errorf("job %d of partition %s starts on node %s of %v", st.JobID, part, n.Name, parts)
		}
		usedCPU[n.Name] += st.CPUs
		usedMem[n.Name] += st.MemMB
		usedTmp[n.Name] += st.TmpMB
	}
	for name, tmp := range usedTmp {
		if n := byName[name]; tmp > 0 && tmp > n.TmpMB-n.AllocTmpMB {
			t.Errorf("node %s's scratch space over-committed: starts take %d MiB, free %d", name, tmp, n.TmpMB-n.AllocTmpMB)
		}
	}
	for name, c := range usedCPU {
		n := byName[name]
		if c > n.FreeCPUs() || usedMem[name] > n.FreeMemMB() {
			t.Errorf("node %s over-committed: starts take %d CPUs / %d MiB, free %d / %d",
				name, c, usedMem[name], n.FreeCPUs(), n.FreeMemMB())
		}
	}
	for id := range pending {
		if _, ok := p.Reasons[id]; !ok && !started[id] {
			t.Errorf("pending job %d is neither started nor given a reason", id)
		}
	}
	for id := range p.Reasons {
		if pending[id] == nil {
			t.Errorf("plan gives a reason to job %d, which is not pending", id)
		}
	}
}

// gpus asks for n whole GPUs (--gres=gpu:N).
func (b jobB) gpus(n int) jobB {
	return b.with(func(j *state.Job) { j.Spec.Gres = []api.Gres{{Name: "gpu", Count: n}} })
}
