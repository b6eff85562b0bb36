package accounting

import (
	"slices"
	"strconv"
	"time"

	"corral/api"
	"corral/ctld/state"
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
		ended[id] = true
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

// JobRecords returns the records job j has: one per ended allocation
// (allocs are j's, oldest first), and, when j finished without its last
// run ending with it (cancelled while pending), one without a run. The
// record of the run that ended with the job is Final and carries the
// job's state and exit code; an earlier run's carries how it ended.
func JobRecords(s *state.State, j *state.Job, allocs []*state.Allocation) []Record {
	var out []Record
	final := false
	for i, a := range allocs {
		if a.Status != state.AllocEnded {
			continue
		}
		last := i == len(allocs)-1 && j.State.Terminal() && a.EndTime.Equal(j.EndTime)
		out = append(out, runRecord(s, j, a, allocs[:i+1], last))
		final = final || last
	}
	if j.State.Terminal() && !final {
		out = append(out, jobRecord(s, j, allocs))
	}
	return out
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

// runRecord is the record of run a of job j (allocs are j's up to a);
// final when it ended with the job.
func runRecord(s *state.State, j *state.Job, a *state.Allocation, allocs []*state.Allocation, final bool) Record {
	r := baseRecord(s, j, allocs)
	r.AllocID, r.Final = a.ID, final
	r.Start, r.End = a.StartTime, a.EndTime
	r.Elapsed = int64(a.Elapsed(a.EndTime) / time.Second)
	r.NodeList = a.Node
	r.AllocTRES = allocTRES(j, a)
	r.TotalCPU, r.MaxRSSKB = a.CPUSeconds, a.PeakMemKB
	if final {
		r.State, r.ExitCode, r.Signal = j.State, j.ExitCode, j.Signal
	} else {
		r.State = runState(a)
		r.Restarts = len(allocs) - 1
	}
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
		if a.StopAs == api.StatePreempted || a.PreemptedBy != 0 {
			n++
		}
	}
	return n
}

// reqTRES is what the job asked for, over all its nodes; memory it did
// not ask for is the default per CPU.
func reqTRES(s *state.State, sp *state.JobSpec) api.TRES {
	nodes := max(sp.Nodes, 1)
	t := api.TRES{CPU: sp.CPUs() * nodes, Nodes: nodes}
	mem := sp.MemMB()
	if mem == 0 {
		mem = s.Config.DefMemPerCPU * int64(sp.CPUs())
	}
	t.MemMB = mem * int64(nodes)
	for _, g := range sp.Gres {
		switch g.Name {
		case "gpu":
			if t.GPUs == nil {
				t.GPUs = map[string]int{}
			}
			t.GPUs[g.Type] += g.Count * nodes
		case "vf":
			t.VFs += g.Count * nodes
		}
	}
	for _, h := range sp.Hugepages {
		if t.Hugepages == nil {
			t.Hugepages = map[string]int64{}
		}
		t.Hugepages[strconv.FormatInt(h.SizeKB, 10)] += h.Count * int64(nodes)
	}
	return t
}

// allocTRES is what run a holds on its node: its CPUs and memory, and the
// GPUs, hugepages and VFs of its placement (the request's where the node
// reported no placement). GPUs take the type the job asked for when it
// asked for one type.
func allocTRES(j *state.Job, a *state.Allocation) api.TRES {
	t := api.TRES{CPU: a.CPUs, MemMB: a.MemMB, Nodes: 1}
	req := reqTRES(&state.State{}, j.Spec)
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
