package accounting

import (
	"slices"
	"strconv"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/hostlist"
)

// Record is one accounting record: a run (allocation) of a job, or a job's
// end without a run. It is the wire's type; this package builds, stores
// and selects them.
type Record = api.AcctRecord

// Key names a record: its job and allocation (0 for a job's end without a
// run). Writing a record with a key the store holds replaces it.
type Key struct {
	Job   uint64
	Alloc uint64
}

// KeyOf returns r's key.
func KeyOf(r *Record) Key { return Key{Job: r.JobID, Alloc: r.AllocID} }

// Written is what one apply gives the store: records that replace any
// with their key (a run or job that ended), and records written only
// where none with their key exists (a purged job's, which a member that
// joined from a snapshot may lack).
type Written struct {
	Replace  []Record
	IfAbsent []Record
	// Index is the Raft index of the entry they come from: once they are
	// written, the store holds every record up to it (Store.Applied).
	Index uint64
	// ExpireBefore, when set, deletes the records that ended before it
	// (the retention of records, applied with a purge entry), at most
	// ExpireMax of them; the rest go with the next.
	ExpireBefore time.Time
	// Nodes are node facts (nodes.go), written over any of their key;
	// NodesIfNone are written only for nodes the store has no fact of.
	Nodes, NodesIfNone []NodeFact
}

// ExpireMax bounds the records one write deletes for their age.
const ExpireMax = 50_000

// Empty reports whether w holds no record.
func (w Written) Empty() bool {
	return len(w.Replace) == 0 && len(w.IfAbsent) == 0 && w.Index == 0 && w.ExpireBefore.IsZero() &&
		len(w.Nodes) == 0 && len(w.NodesIfNone) == 0
}

// FromEnds builds the records of what an apply ended, from the state just
// after the apply: the record of every allocation that ended, and the
// final record of every job that finished (its last run's, or one without
// a run). Purged jobs' records go to IfAbsent; the nodes the apply changed
// give their facts. It is a pure function of the state and e, so every
// member builds the same records.
func FromEnds(s *state.State, e state.Ends) Written {
	w := Written{Nodes: nodeFacts(s, e.Nodes)}
	ended := make(map[uint64]bool, len(e.Allocs))
	for _, id := range e.Allocs {
		// A multi-node run's record is its rank 0's: it is written once
		// the run's last allocation ended.
		ended[runKey(s, id)] = true
	}
	done := map[uint64]bool{}
	add := func(j *state.Job) {
		if j == nil || done[j.ID] {
			return
		}
		done[j.ID] = true
		for _, r := range JobRecords(s, j, allocsOf(s, j)) {
			if ended[r.AllocID] || r.Final {
				w.Replace = append(w.Replace, r)
			}
		}
	}
	for _, id := range e.Allocs {
		if a := s.Allocs[id]; a != nil {
			add(s.Jobs[a.Job])
		}
	}
	for _, id := range e.Jobs {
		add(s.Jobs[id])
	}
	for _, p := range e.Purged {
		w.IfAbsent = append(w.IfAbsent, JobRecords(s, p.Job, p.Allocs)...)
	}
	return w
}

// FromState builds the records of every job the state holds, for a member
// that restored a snapshot: written where absent, they give it the records
// of every finished job still in the state.
func FromState(s *state.State) []Record {
	var out []Record
	ids := make([]uint64, 0, len(s.Jobs))
	for id := range s.Jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j := s.Jobs[id]
		out = append(out, JobRecords(s, j, allocsOf(s, j))...)
	}
	return out
}

func allocsOf(s *state.State, j *state.Job) []*state.Allocation {
	out := make([]*state.Allocation, 0, len(j.Allocs))
	for _, id := range j.Allocs {
		if a := s.Allocs[id]; a != nil {
			out = append(out, a)
		}
	}
	return out
}

// JobRecords returns the records job j has: one per ended run (allocs
// are j's, oldest first; a multi-node run's allocations, one per node,
// make one record, keyed by its rank 0's allocation, once all of them
// ended), and, when j finished without its last run ending with it
// (cancelled while pending), one without a run. The record of the run
// that ended with the job is Final and carries the job's state and exit
// code; an earlier run's carries how it ended.
func JobRecords(s *state.State, j *state.Job, allocs []*state.Allocation) []Record {
	var out []Record
	final := false
	runs := 0
	for i, a := range allocs {
		if a.Rank != 0 {
			continue
		}
		runs++
		gang := runOf(allocs, a)
		end, over := runEnd(gang)
		if !over {
			continue
		}
		later := slices.ContainsFunc(allocs[i+1:], func(o *state.Allocation) bool { return o.StartIndex != a.StartIndex })
		last := !later && j.State.Terminal() && end.Equal(j.EndTime)
		out = append(out, runRecord(s, j, gang, allocs[:i+1], runs-1, last))
		final = final || last
	}
	if j.State.Terminal() && !final {
		out = append(out, jobRecord(s, j, allocs))
	}
	return out
}

// runOf returns the allocations of a's run among allocs, in rank order:
// a alone, or one per node of a multi-node run (they share their start
// index).
func runOf(allocs []*state.Allocation, a *state.Allocation) []*state.Allocation {
	gang := []*state.Allocation{a}
	for _, o := range allocs {
		if o.StartIndex == a.StartIndex && o.Rank > 0 {
			gang = append(gang, o)
		}
	}
	if len(gang) > 2 {
		slices.SortFunc(gang[1:], func(x, y *state.Allocation) int { return x.Rank - y.Rank })
	}
	return gang
}

// runEnd returns when a run ended (its last allocation's end), and
// whether all of its allocations ended.
func runEnd(gang []*state.Allocation) (time.Time, bool) {
	var end time.Time
	for _, a := range gang {
		if a.Status != state.AllocEnded {
			return time.Time{}, false
		}
		if a.EndTime.After(end) {
			end = a.EndTime
		}
	}
	return end, true
}

// runKey returns the key of the record allocation id's run has: the
// allocation of rank 0 of its run.
func runKey(s *state.State, id uint64) uint64 {
	a := s.Allocs[id]
	if a == nil || a.Rank == 0 {
		return id
	}
	if j := s.Jobs[a.Job]; j != nil {
		for _, o := range j.Allocs {
			if r := s.Allocs[o]; r != nil && r.StartIndex == a.StartIndex && r.Rank == 0 {
				return o
			}
		}
	}
	return id
}

// jobRecord is the record of a job that finished without a run ending
// with it.
func jobRecord(s *state.State, j *state.Job, allocs []*state.Allocation) Record {
	r := baseRecord(s, j, allocs)
	r.Final = true
	r.End = j.EndTime
	r.State, r.ExitCode, r.Signal = j.State, j.ExitCode, j.Signal
	return r
}

// runRecord is the record of the run of job j whose allocations are gang
// (rank order; allocs are j's up to its rank 0, restarts the runs before
// it); final when it ended with the job. A multi-node run's figures are
// its nodes' together: their TRES and CPU time summed, the largest
// resident size, the longest elapsed time.
func runRecord(s *state.State, j *state.Job, gang, allocs []*state.Allocation, restarts int, final bool) Record {
	a := gang[0]
	r := baseRecord(s, j, allocs)
	r.AllocID, r.Final = a.ID, final
	r.Start, r.End = a.StartTime, a.EndTime
	r.Elapsed = int64(a.Elapsed(a.EndTime) / time.Second)
	r.NodeList = a.Node
	r.AllocTRES = allocTRES(j, a)
	r.TotalCPU, r.MaxRSSKB = a.CPUSeconds, a.PeakMemKB
	ended := runState(a)
	if len(gang) > 1 {
		nodes := make([]string, len(gang))
		for i, o := range gang {
			nodes[i] = o.Node
			if o.EndTime.After(r.End) {
				r.End = o.EndTime
			}
			r.Elapsed = max(r.Elapsed, int64(o.Elapsed(o.EndTime)/time.Second))
			if o.EndState == api.StateNodeFail {
				ended = api.StateNodeFail
			}
			if i == 0 {
				continue
			}
			addTRES(&r.AllocTRES, allocTRES(j, o))
			r.TotalCPU += o.CPUSeconds
			r.MaxRSSKB = max(r.MaxRSSKB, o.PeakMemKB)
		}
		r.NodeList = hostlist.Compress(nodes)
		r.BatchNode, r.BatchTRES = a.Node, allocTRES(j, a)
	}
	if final {
		r.State, r.ExitCode, r.Signal = j.State, j.ExitCode, j.Signal
	} else {
		r.State = ended
		r.Restarts = restarts
	}
	r.Steps = runSteps(j, a.StartIndex)
	secs := float64(r.Elapsed)
	r.CPUSeconds = float64(r.AllocTRES.CPU) * secs
	r.MemSeconds = float64(r.AllocTRES.MemMB) * secs
	r.GPUSeconds = float64(r.AllocTRES.GPUCount()) * secs
	c := s.Config
	r.BillingRate = float64(r.AllocTRES.CPU)*c.BillingCPU + float64(r.AllocTRES.MemMB)/1024*c.BillingMem +
		float64(r.AllocTRES.GPUCount())*c.BillingGPU
	r.Billing = r.BillingRate * secs
	return r
}

// runSteps returns the ended steps of job j's run that started at index
// run (those the state keeps: the newest ended ones).
func runSteps(j *state.Job, run uint64) []api.AcctStep {
	if j.Steps == nil {
		return nil
	}
	var out []api.AcctStep
	for _, st := range j.Steps.List {
		if st.Run != run || st.State == api.StateRunning {
			continue
		}
		out = append(out, api.AcctStep{
			ID: st.ID, Name: st.Name, NodeList: hostlist.Compress(st.Nodes), Nodes: len(st.Nodes), NTasks: st.NTasks,
			CPUs: st.NTasks * max(st.CPUsPerTask, 1), State: st.State, ExitCode: st.ExitCode, Signal: st.Signal,
			Start: st.Start, End: st.End,
		})
	}
	return out
}

// addTRES adds o to t.
func addTRES(t *api.TRES, o api.TRES) {
	t.CPU += o.CPU
	t.MemMB += o.MemMB
	t.Nodes += o.Nodes
	t.VFs += o.VFs
	for k, v := range o.GPUs {
		if t.GPUs == nil {
			t.GPUs = map[string]int{}
		}
		t.GPUs[k] += v
	}
	for k, v := range o.Hugepages {
		if t.Hugepages == nil {
			t.Hugepages = map[string]int64{}
		}
		t.Hugepages[k] += v
	}
}

// runState is how a run that did not end with its job ended: NODE_FAIL
// when its node failed, PREEMPTED when it was stopped for a preemptor,
// REQUEUED when it was stopped to go back to the queue, else as its end
// was reported. It reads the allocation alone, so a record rebuilt later
// (by a purge) says the same.
func runState(a *state.Allocation) api.JobState {
	switch {
	case a.EndState == api.StateNodeFail:
		return a.EndState
	case a.StopAs == api.StatePreempted:
		return api.StatePreempted
	case a.StopAs == api.StatePending:
		return api.StateRequeued
	case a.EndState == "":
		return api.StateCompleted
	}
	return a.EndState
}

// baseRecord fills what every record of job j shares; allocs are j's up
// to the record's run. Restarts is the job's (its final count; a run
// that did not end the job counts the runs before it instead).
func baseRecord(s *state.State, j *state.Job, allocs []*state.Allocation) Record {
	sp := j.Spec
	r := Record{
		JobID: j.ID, Ref: j.Ref(), ArrayJobID: j.ArrayJobID, ArrayTaskID: j.ArrayTaskID,
		Name: sp.Name, User: sp.User, Tenant: s.Tenant(sp.Account), Account: sp.Account,
		Partition: sp.Partition, QOS: sp.QOS, WorkDir: sp.WorkDir,
		Submit: j.SubmitTime, Eligible: eligibleOf(j), TimeLimit: timeLimit(s, sp),
		Reason: string(j.Reason), Message: j.Message, ReqTRES: reqTRES(s, sp),
		Restarts: j.Restarts, Preemptions: preemptions(allocs),
	}
	return r
}

// timeLimit is the job's time limit in seconds: its own, else its
// partition's default, else the partition's maximum (0: none).
func timeLimit(s *state.State, sp *state.JobSpec) int64 {
	if sp.TimeLimit > 0 {
		return sp.TimeLimit
	}
	if p := s.Partitions[sp.Partition]; p != nil {
		if p.DefaultTime > 0 {
			return p.DefaultTime
		}
		return p.MaxTime
	}
	return 0
}

func preemptions(allocs []*state.Allocation) int {
	n := 0
	for _, a := range allocs {
		if a.Rank == 0 && (a.StopAs == api.StatePreempted || a.PreemptedBy != 0) {
			n++
		}
	}
	return n
}

// reqTRES is what the job asked for, over all its nodes (the fewest of
// its range); memory it did not ask for is the default per CPU.
func reqTRES(s *state.State, sp *state.JobSpec) api.TRES {
	nodes, _ := api.NodeRange(sp.Nodes, sp.NodesMax)
	t := nodeTRES(s.Config.DefMemPerCPU, sp, nodes)
	t.CPU = max(api.TasksOn(sp.NTasks, sp.NTasksPerNode, nodes), 1) * max(sp.CPUsPerTask, 1)
	t.Nodes, t.MemMB = nodes, t.MemMB*int64(nodes)
	for k := range t.GPUs {
		t.GPUs[k] *= nodes
	}
	t.VFs *= nodes
	for k := range t.Hugepages {
		t.Hugepages[k] *= int64(nodes)
	}
	return t
}

// nodeTRES is what the job asks for on each of its nodes when it runs on
// k: its share of CPUs and memory, its generic resources and hugepages.
func nodeTRES(defMemPerCPU int64, sp *state.JobSpec, k int) api.TRES {
	cpus := sp.CPUsPerNode(k)
	t := api.TRES{CPU: cpus, Nodes: 1}
	switch {
	case sp.MemPerNode > 0:
		t.MemMB = sp.MemPerNode
	case sp.MemPerCPU > 0:
		t.MemMB = sp.MemPerCPU * int64(cpus)
	default:
		t.MemMB = defMemPerCPU * int64(cpus)
	}
	for _, g := range sp.Gres {
		switch g.Name {
		case "gpu":
			if t.GPUs == nil {
				t.GPUs = map[string]int{}
			}
			t.GPUs[g.Type] += g.Count
		case "vf":
			t.VFs += g.Count
		}
	}
	for _, h := range sp.Hugepages {
		if t.Hugepages == nil {
			t.Hugepages = map[string]int64{}
		}
		t.Hugepages[strconv.FormatInt(h.SizeKB, 10)] += h.Count
	}
	return t
}

// allocTRES is what run a holds on its node: its CPUs and memory, and the
// GPUs, hugepages and VFs of its placement (the request's where the node
// reported no placement). GPUs take the type the job asked for when it
// asked for one type.
func allocTRES(j *state.Job, a *state.Allocation) api.TRES {
	t := api.TRES{CPU: a.CPUs, MemMB: a.MemMB, Nodes: 1}
	lo, _ := api.NodeRange(j.Spec.Nodes, j.Spec.NodesMax)
	req := nodeTRES(0, j.Spec, lo)
	if a.Placement == nil {
		t.GPUs, t.VFs, t.Hugepages = req.GPUs, req.VFs, req.Hugepages
		return t
	}
	if n := len(a.Placement.GPUs) + len(a.Placement.MIG); n > 0 {
		typ := ""
		if len(req.GPUs) == 1 {
			for k := range req.GPUs {
				typ = k
			}
		}
		t.GPUs = map[string]int{typ: n}
	}
	t.VFs = len(a.Placement.VFs)
	for _, h := range a.Placement.Hugepages {
		if t.Hugepages == nil {
			t.Hugepages = map[string]int64{}
		}
		t.Hugepages[strconv.FormatInt(h.SizeKB, 10)] += h.Count
	}
	return t
}
