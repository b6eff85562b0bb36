package accounting

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// testState returns a state with account physics under tenant lab, the
// default billing weights and partition batch (default time 1 h).
func testState() *state.State {
	s := state.New()
	s.Config = api.DefaultSchedConfig()
	s.Accounts = map[string]*api.Account{
		"lab":     {Name: "lab", Parent: "root"},
		"physics": {Name: "physics", Parent: "lab"},
	}
	s.Partitions = map[string]*api.Partition{"batch": {Name: "batch", DefaultTime: 3600, MaxTime: 7200}}
	return s
}

func testSpec() *state.JobSpec {
	return &state.JobSpec{
		Name: "sim", User: "ada", Account: "physics", Partition: "batch", QOS: "normal",
		WorkDir: "/home/ada", NTasks: 2, CPUsPerTask: 2, MemPerNode: 4096,
		Gres: []api.Gres{{Name: "gpu", Type: "h100", Count: 1}},
	}
}

// ended is an allocation of job 7 that ran from start to end on n1.
func ended(id uint64, start, end time.Time, endState, stopAs api.JobState) *state.Allocation {
	return &state.Allocation{
		ID: id, Job: 7, Node: "n1", CPUs: 4, MemMB: 4096, Status: state.AllocEnded,
		Desired: state.AllocStop, StopAs: stopAs, EndState: endState, StartTime: start, EndTime: end,
		Placement:  &api.Placement{CPUs: []int{0, 1, 2, 3}, GPUs: []string{"GPU-1"}},
		CPUSeconds: 100.5, PeakMemKB: 2048,
	}
}

func TestJobRecords(t *testing.T) {
	type want struct {
		alloc    uint64
		final    bool
		st       api.JobState
		exit     int
		elapsed  int64
		restarts int
		nodes    string
	}
	cases := []struct {
		name   string
		job    state.Job
		allocs []*state.Allocation
		want   []want
	}{
		{
			name:   "a completed run is the job's final record",
			job:    state.Job{State: api.StateCompleted, EndTime: t0.Add(time.Hour)},
			allocs: []*state.Allocation{ended(1, t0, t0.Add(time.Hour), api.StateCompleted, "")},
			want:   []want{{alloc: 1, final: true, st: api.StateCompleted, elapsed: 3600, nodes: "n1"}},
		},
		{
			name:   "a failed run carries the job's exit code",
			job:    state.Job{State: api.StateFailed, ExitCode: 3, EndTime: t0.Add(time.Minute)},
			allocs: []*state.Allocation{ended(1, t0, t0.Add(time.Minute), api.StateFailed, "")},
			want:   []want{{alloc: 1, final: true, st: api.StateFailed, exit: 3, elapsed: 60, nodes: "n1"}},
		},
		{
			name: "a requeued run, then the final one",
			job:  state.Job{State: api.StateCompleted, Restarts: 1, EndTime: t0.Add(3 * time.Hour)},
			allocs: []*state.Allocation{
				ended(1, t0, t0.Add(time.Hour), api.StateCancelled, api.StatePending),
				ended(2, t0.Add(2*time.Hour), t0.Add(3*time.Hour), api.StateCompleted, ""),
			},
			want: []want{
				{alloc: 1, st: api.StateRequeued, elapsed: 3600, nodes: "n1"},
				{alloc: 2, final: true, st: api.StateCompleted, elapsed: 3600, restarts: 1, nodes: "n1"},
			},
		},
		{
			name: "cancelled while pending after a requeue: a record without a run",
			job:  state.Job{State: api.StateCancelled, Restarts: 1, EndTime: t0.Add(2 * time.Hour)},
			allocs: []*state.Allocation{
				ended(1, t0, t0.Add(time.Hour), api.StateNodeFail, ""),
			},
			want: []want{
				{alloc: 1, st: api.StateNodeFail, elapsed: 3600, nodes: "n1"},
				{alloc: 0, final: true, st: api.StateCancelled, restarts: 1},
			},
		},
		{
			name: "a running job has no record yet",
			job:  state.Job{State: api.StateRunning},
			allocs: []*state.Allocation{{ID: 1, Job: 7, Node: "n1", CPUs: 4, Status: state.AllocActive,
				Desired: state.AllocRun, StartTime: t0}},
		},
		{
			name: "a preempted run that was requeued says PREEMPTED",
			job:  state.Job{State: api.StatePending, Restarts: 1},
			allocs: []*state.Allocation{
				ended(1, t0, t0.Add(30*time.Minute), api.StateCancelled, api.StatePreempted),
			},
			want: []want{{alloc: 1, st: api.StatePreempted, elapsed: 1800, nodes: "n1"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testState()
			j := c.job
			j.ID, j.Spec, j.SubmitTime = 7, testSpec(), t0.Add(-time.Minute)
			got := JobRecords(s, &j, c.allocs)
			if len(got) != len(c.want) {
				t.Fatalf("got %d records %+v, want %d", len(got), got, len(c.want))
			}
			for i, w := range c.want {
				r := got[i]
				g := want{alloc: r.AllocID, final: r.Final, st: r.State, exit: r.ExitCode, elapsed: r.Elapsed,
					restarts: r.Restarts, nodes: r.NodeList}
				if g != w {
					t.Errorf("record %d = %+v, want %+v", i, g, w)
				}
				if r.User != "ada" || r.Account != "physics" || r.Tenant != "lab" || r.TimeLimit != 3600 || r.Ref != "7" {
					t.Errorf("record %d: user %q account %q tenant %q limit %d ref %q", i, r.User, r.Account, r.Tenant, r.TimeLimit, r.Ref)
				}
				if r.ReqTRES.CPU != 4 || r.ReqTRES.MemMB != 4096 || r.ReqTRES.GPUs["h100"] != 1 {
					t.Errorf("record %d: ReqTRES = %+v", i, r.ReqTRES)
				}
			}
		})
	}
}

// TestRunTRES checks a run's allocated TRES, TRES-seconds and billing
// (CPU 1, GiB 0.25, GPU 10 per second by default).
func TestRunTRES(t *testing.T) {
	s := testState()
	j := state.Job{ID: 7, Spec: testSpec(), State: api.StateCompleted, EndTime: t0.Add(100 * time.Second)}
	r := JobRecords(s, &j, []*state.Allocation{ended(1, t0, t0.Add(100*time.Second), api.StateCompleted, "")})[0]
	if r.AllocTRES.CPU != 4 || r.AllocTRES.MemMB != 4096 || r.AllocTRES.GPUs["h100"] != 1 || r.AllocTRES.Nodes != 1 {
		t.Errorf("AllocTRES = %+v", r.AllocTRES)
	}
	if r.CPUSeconds != 400 || r.GPUSeconds != 100 || r.MemSeconds != 409600 {
		t.Errorf("TRES-seconds cpu %v gpu %v mem %v, want 400, 100, 409600", r.CPUSeconds, r.GPUSeconds, r.MemSeconds)
	}
	if r.BillingRate != 4+1+10 || r.Billing != 1500 {
		t.Errorf("billing rate %v, billing %v; want 15 and 1500", r.BillingRate, r.Billing)
	}
	if r.TotalCPU != 100.5 || r.MaxRSSKB != 2048 {
		t.Errorf("measured TotalCPU %v MaxRSS %v", r.TotalCPU, r.MaxRSSKB)
	}
	s.Config.BillingGPU = 0
	if r := JobRecords(s, &j, []*state.Allocation{ended(1, t0, t0.Add(100*time.Second), api.StateCompleted, "")})[0]; r.Billing != 500 {
		t.Errorf("with no GPU weight billing = %v, want 500", r.Billing)
	}
}

// TestFromEnds checks what an apply's ends give the store: the ended
// run's record replaces, a purged job's records are written if absent.
func TestFromEnds(t *testing.T) {
	s := testState()
	a := ended(1, t0, t0.Add(time.Hour), api.StateCompleted, "")
	j := &state.Job{ID: 7, Spec: testSpec(), State: api.StateCompleted, EndTime: a.EndTime, Allocs: []uint64{1}}
	s.Jobs[7], s.Allocs[1] = j, a
	pend := &state.Job{ID: 8, Spec: testSpec(), State: api.StateCancelled, EndTime: t0}
	s.Jobs[8] = pend
	w := FromEnds(s, state.Ends{Allocs: []uint64{1}, Jobs: []uint64{7, 8},
		Purged: []state.PurgedJob{{Job: j, Allocs: []*state.Allocation{a}}}})
	if len(w.Replace) != 2 || KeyOf(&w.Replace[0]) != (Key{7, 1}) || KeyOf(&w.Replace[1]) != (Key{8, 0}) {
		t.Errorf("Replace = %+v, want job 7's run 1 and job 8 without a run", w.Replace)
	}
	if len(w.IfAbsent) != 1 || KeyOf(&w.IfAbsent[0]) != (Key{7, 1}) {
		t.Errorf("IfAbsent = %+v, want job 7's run 1", w.IfAbsent)
	}
	if all := FromState(s); len(all) != 2 {
		t.Errorf("FromState gave %d records, want 2", len(all))
	}
}

// TestMultiNodeRecord: a two-node run's allocations make one record,
// keyed by rank 0's allocation and written once both ended (FromEnds of
// rank 0's end alone writes nothing), with both nodes' TRES and CPU time,
// the batch script's node and what it held, and the run's steps; a node lost makes an earlier run NODE_FAIL.
func TestMultiNodeRecord(t *testing.T) {
	s := testState()
	sp := testSpec()
	sp.Nodes, sp.NTasks, sp.NTasksPerNode = 2, 0, 2
	a0 := ended(1, t0, t0.Add(time.Hour), api.StateCompleted, "")
	a1 := ended(2, t0, t0.Add(time.Hour+time.Minute), api.StateCompleted, api.StateCompleted)
	// Rank 0 runs on n2, the second of the run's node list, and holds
	// more CPUs than rank 1 (--exclusive on unlike nodes).
	a0.Node, a0.CPUs = "n2", 6
	a1.Node, a1.Rank, a1.PeakMemKB = "n1", 1, 9000
	a0.StartIndex, a1.StartIndex = 40, 40
	a1.Status = state.AllocActive
	j := &state.Job{ID: 7, Spec: sp, State: api.StateRunning, Allocs: []uint64{1, 2},
		Steps: &state.JobSteps{Next: 3, List: []state.Step{
			{ID: 0, Name: "hostname", Run: 40, Nodes: []string{"n1", "n2"}, NTasks: 4, CPUsPerTask: 2, State: api.StateCompleted,
				Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute)},
			{ID: 1, Name: "old", Run: 12, Nodes: []string{"n1"}, NTasks: 1, State: api.StateCancelled},
			{ID: 2, Name: "sleep", Run: 40, Nodes: []string{"n2"}, NTasks: 1, State: api.StateFailed, ExitCode: 3,
				Start: t0.Add(3 * time.Minute), End: t0.Add(4 * time.Minute)},
		}}}
	s.Jobs[7], s.Allocs[1], s.Allocs[2] = j, a0, a1
	if w := FromEnds(s, state.Ends{Allocs: []uint64{1}}); len(w.Replace) != 0 {
		t.Errorf("rank 0 ended, rank 1 runs: Replace = %+v, want none yet", w.Replace)
	}
	a1.Status = state.AllocEnded
	j.State, j.EndTime = api.StateCompleted, a1.EndTime
	w := FromEnds(s, state.Ends{Allocs: []uint64{2}, Jobs: []uint64{7}})
	if len(w.Replace) != 1 || KeyOf(&w.Replace[0]) != (Key{7, 1}) {
		t.Fatalf("Replace = %+v, want one record keyed by rank 0's allocation", w.Replace)
	}
	r := w.Replace[0]
	if !r.Final || r.State != api.StateCompleted || r.NodeList != "n[1-2]" || r.AllocTRES.Nodes != 2 || r.AllocTRES.CPU != 10 ||
		r.AllocTRES.GPUCount() != 2 || r.TotalCPU != 201 || r.MaxRSSKB != 9000 || r.Elapsed != 3660 || !r.End.Equal(a1.EndTime) ||
		r.BatchNode != "n2" || r.BatchTRES.CPU != 6 || r.BatchTRES.Nodes != 1 || r.BatchTRES.GPUCount() != 1 {
		t.Errorf("record: %+v", r)
	}
	if len(r.Steps) != 2 || r.Steps[0].NodeList != "n[1-2]" || r.Steps[0].CPUs != 8 || r.Steps[0].Nodes != 2 ||
		r.Steps[1].ID != 2 || r.Steps[1].ExitCode != 3 || r.Steps[1].State != api.StateFailed {
		t.Errorf("steps: %+v", r.Steps)
	}
	// The same run lost to n2's failure (the job requeued), and the job
	// run again.
	a1.EndState, a0.StopAs = api.StateNodeFail, api.StatePending
	j.State, j.EndTime = api.StatePending, time.Time{}
	if w := FromEnds(s, state.Ends{Allocs: []uint64{2}}); len(w.Replace) != 1 || KeyOf(&w.Replace[0]) != (Key{7, 1}) ||
		w.Replace[0].State != api.StateNodeFail {
		t.Errorf("n2 lost, the job requeued: Replace = %+v, want rank 0's record, NODE_FAIL", w.Replace)
	}
	j.State = api.StateCompleted
	a2 := ended(3, t0.Add(2*time.Hour), t0.Add(3*time.Hour), api.StateCompleted, "")
	a2.StartIndex = 50
	s.Allocs[3] = a2
	j.Allocs, j.EndTime = []uint64{1, 2, 3}, a2.EndTime
	recs := JobRecords(s, j, allocsOf(s, j))
	if len(recs) != 2 || recs[0].State != api.StateNodeFail || recs[0].Final || recs[1].AllocID != 3 || !recs[1].Final ||
		recs[1].Restarts != 0 || recs[0].Restarts != 0 {
		t.Errorf("records: %+v", recs)
	}
}
