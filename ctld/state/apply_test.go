package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"corral/api"
)

func TestSubmitIsIdempotent(t *testing.T) {
	f := newReplica()
	f.Apply(entry(t, 1, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a")}}))
	res := f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 2, Jobs: []JobSpec{spec("a"), spec("b")}})).(*SubmitResult)
	if got := res.Results[0]; got.JobID != 1 || !got.Duplicate {
		t.Errorf("retried submit: got %+v, want job 1 duplicate", got)
	}
	if got := res.Results[1]; got.JobID != 3 || got.Duplicate {
		t.Errorf("new submit: got %+v, want job 3", got)
	}
	f.Read(func(s *State) {
		if len(s.Jobs) != 2 {
			t.Errorf("jobs stored: %d, want 2", len(s.Jobs))
		}
	})
}

func TestPlanRejectsDoubleBooking(t *testing.T) {
	f := newReplica()
	f.Apply(entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, BootID: "b"}}))
	f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b"), spec("c")}}))
	res := f.Apply(entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{
		{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 3, Node: "n1", CPUs: 1, MemMB: 512},
	}})).(*PlanResult)
	if len(res.Started) != 2 || len(res.Rejected) != 1 || res.Rejected[0] != 3 {
		t.Fatalf("plan result %+v: want jobs 1,2 started and 3 rejected", res)
	}
	res = f.Apply(entry(t, 4, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1}}})).(*PlanResult)
	if len(res.Rejected) != 1 {
		t.Errorf("starting a running job again was not rejected: %+v", res)
	}
}

func TestStaleReportIgnored(t *testing.T) {
	f := newReplica()
	applyAll(t, f, everyCommandLog(t)[:6])
	res := f.Apply(entry(t, 7, CmdJobReports, &JobReports{Now: t0, Node: "n1", Reports: []api.JobReport{{JobID: 1, StartIndex: 99, State: api.StateFailed}}})).(*IDsResult)
	if len(res.Changed) != 0 {
		t.Fatalf("a report for another run changed the job: %+v", res)
	}
}

func TestRegisterRestartLosesUnknownJobs(t *testing.T) {
	f := newReplica()
	applyAll(t, f, everyCommandLog(t)[:6])
	// n1 restarts knowing only job 4; job 1 was lost with the old daemon.
	f.Apply(entry(t, 7, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, BootID: "b2", Running: []uint64{4}}}))
	f.Read(func(s *State) {
		if s.Jobs[1].State != api.StateNodeFail {
			t.Errorf("lost job: %s, want NODE_FAIL", s.Jobs[1].State)
		}
		if s.Jobs[4].State != api.StateRunning || s.Nodes["n1"].AllocCPUs != 1 {
			t.Errorf("adopted job: %s with %d CPUs allocated, want RUNNING with 1", s.Jobs[4].State, s.Nodes["n1"].AllocCPUs)
		}
	})
}

func TestSnapshotFormatChecked(t *testing.T) {
	_, err := ReadSnapshot(bytes.NewBufferString(`{"format":99}` + "\n"))
	if err == nil {
		t.Fatal("a snapshot of an unknown format was accepted")
	}
}

func TestRunnerOverheadIsCharged(t *testing.T) {
	f := newReplica()
	f.Apply(entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "vm1", CPUs: 4, MemMB: 1000, BootID: "b", OverheadMB: 100}}))
	f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b"), spec("c")}}))
	// 2 × (400 + 100) fills the node's 1000 MiB: the third start must be
	// refused, and a plan that leaves the overhead out is refused too.
	res := f.Apply(entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{
		{JobID: 1, Node: "vm1", CPUs: 1, MemMB: 400, OverheadMB: 100},
		{JobID: 2, Node: "vm1", CPUs: 1, MemMB: 400, OverheadMB: 100},
		{JobID: 3, Node: "vm1", CPUs: 1, MemMB: 1, OverheadMB: 100},
	}})).(*PlanResult)
	if len(res.Started) != 2 || len(res.Rejected) != 1 {
		t.Fatalf("plan %+v: want 2 started, 1 rejected", res)
	}
	f.Apply(entry(t, 4, CmdJobReports, &JobReports{Now: t0, Node: "vm1", Reports: []api.JobReport{{JobID: 1, StartIndex: 3, State: api.StateCompleted}}}))
	res = f.Apply(entry(t, 5, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 3, Node: "vm1", CPUs: 1, MemMB: 400}}})).(*PlanResult)
	if len(res.Rejected) != 1 {
		t.Fatalf("a plan without the node's overhead was applied: %+v", res)
	}
	f.Read(func(s *State) {
		if got := s.Nodes["vm1"].AllocMemMB; got != 500 {
			t.Errorf("allocated memory %d MiB, want 500 (one job of 400 plus 100 overhead)", got)
		}
	})
}

// TestPlanSkipsProbingNode re-registers a node as probing (its restarted
// daemon's runner is testing the host) between a pass and its plan: the
// plan's start there is refused, while the job the node kept stays; once the
// node registers ready the same start applies.
func TestPlanSkipsProbingNode(t *testing.T) {
	f := newReplica()
	info := api.NodeInfo{Name: "vm1", CPUs: 4, MemMB: 4096, BootID: "b1"}
	f.Apply(entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: info}))
	f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b")}}))
	f.Apply(entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 1, Node: "vm1", CPUs: 1, MemMB: 512}}}))
	info.BootID, info.Running, info.Probing = "b2", []uint64{1}, true
	f.Apply(entry(t, 4, CmdRegisterNode, &RegisterNode{Now: t0, Info: info}))
	start := &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 2, Node: "vm1", CPUs: 1, MemMB: 512}}}
	if res := f.Apply(entry(t, 5, CmdApplyPlan, start)).(*PlanResult); len(res.Started) != 0 || len(res.Rejected) != 1 {
		t.Fatalf("plan %+v on a probing node: want its start rejected", res)
	}
	f.Read(func(s *State) {
		if n := s.Nodes["vm1"]; !n.Probing || n.State() != api.NodeUnknown || s.Jobs[1].State != api.StateRunning {
			t.Errorf("node probing=%v state %s, job 1 %s; want a probing UNKNOWN node that kept its RUNNING job",
				n.Probing, n.State(), s.Jobs[1].State)
		}
	})
	info.Probing = false
	f.Apply(entry(t, 6, CmdRegisterNode, &RegisterNode{Now: t0, Info: info}))
	if res := f.Apply(entry(t, 7, CmdApplyPlan, start)).(*PlanResult); len(res.Started) != 1 {
		t.Fatalf("plan %+v on the node once ready: want its start applied", res)
	}
}

// TestPlanStopsBeforeStarts applies one plan whose start on n1 needs the
// CPUs its suspend-mode stop lends: the apply takes stops before starts on
// each node, so the start fits; on n2 a cancel-mode stop frees nothing
// until the node confirms, so the start there is rejected. A migration is
// skipped, a resume of a job not suspended too, and a cancel ends a
// pending job.
func TestPlanStopsBeforeStarts(t *testing.T) {
	r, next := scene(t) // jobs 1 (n1) and 2 (n2) run, 3 and 4 pending
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 10, Jobs: []JobSpec{spec("big"), spec("other"), spec("doomed")}})
	// Fill n1 and n2: one CPU each is left.
	next(CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 3, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 11, Node: "n2", CPUs: 1, MemMB: 512}}})
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 20, Jobs: []JobSpec{spec("pre1"), spec("pre2")}})
	res := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Minute),
		Starts:     []PlanStart{{JobID: 20, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 21, Node: "n2", CPUs: 1, MemMB: 512}},
		Stops:      []PlanStop{{JobID: 1, Mode: api.PreemptSuspend, By: 20}, {JobID: 2, Mode: api.PreemptCancel, By: 21}},
		Resumes:    []uint64{3},
		Cancels:    []PlanCancel{{JobID: 12, Reason: "the scheduler"}},
		Migrations: []PlanMigration{{JobID: 11, From: "n2", To: "n1"}},
	}).(*PlanResult)
	s := r.s
	expect(t, map[string][2]any{
		"started on n1":          {fmt.Sprint(res.Started), "[20]"},
		"rejected on n2":         {fmt.Sprint(res.Rejected), "[21]"},
		"stopped":                {fmt.Sprint(res.Stopped), "[1 2]"},
		"skipped":                {fmt.Sprint(res.Skipped), "[3 11]"},
		"cancelled":              {fmt.Sprint(res.Cancelled), "[12]"},
		"lent":                   {res.Lent, true},
		"suspended victim":       {s.Jobs[1].State, api.StateSuspended},
		"lent to":                {run(s, 1).PreemptedBy, uint64(20)},
		"cancelled victim":       {s.Jobs[2].State, api.StateCompleting},
		"as preempted":           {run(s, 2).StopAs, api.StatePreempted},
		"by whom":                {s.Jobs[2].Message, "preempted by job 21"},
		"the doomed job":         {s.Jobs[12] != nil && s.Jobs[12].Message == "cancelled by the scheduler", true},
		"a rerun is worth it":    {res.Rerun(), true},
		"n1's CPUs all in use":   {s.Nodes["n1"].AllocCPUs, 2},
		"invariants":             {fmt.Sprint(s.CheckInvariants()), "<nil>"},
		"the preemptor runs":     {s.Jobs[20].State, api.StateRunning},
		"the other still queued": {s.Jobs[21].State, api.StatePending},
	})
}

// TestMaxSubmitPerUserCountsTheBatch commits one entry of five jobs of a
// user whose QoS allows two pending or running: the first two are created,
// the other three refused with the user's real count, and a job that ends
// makes room for one more. The count is derived from the jobs, so a
// snapshot round trip keeps it.
func TestMaxSubmitPerUserCountsTheBatch(t *testing.T) {
	r, next := scene(t)
	next(CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "two", MaxSubmitPerUser: 2}})
	var batch []JobSpec
	for i := range 5 {
		sp := spec(fmt.Sprint("q", i))
		sp.QOS = "two"
		batch = append(batch, sp)
	}
	res := next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 10, Jobs: batch}).(*SubmitResult)
	var created []uint64
	for i, rr := range res.Results {
		if rr.JobID != 0 {
			created = append(created, rr.JobID)
			continue
		}
		want := fmt.Sprintf("job %d of the batch: QOSMaxSubmitJobPerUserLimit: user alice already has 2 jobs pending or running in QoS two, its limit is 2", i+1)
		if rr.Error != want {
			t.Errorf("job %d of the batch: error %q, want %q", i+1, rr.Error, want)
		}
	}
	if fmt.Sprint(created) != "[10 11]" {
		t.Fatalf("created %v, want jobs 10 and 11 only", created)
	}
	g := restoredCopy(t, r)
	next(CmdCancelJobs, &CancelJobs{Now: t0, IDs: []uint64{10}})
	again := next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 20, Jobs: []JobSpec{batch[2], batch[3]}}).(*SubmitResult)
	if again.Results[0].JobID != 20 || again.Results[1].Error == "" {
		t.Errorf("after one ended: %+v, want one more taken and the next refused", again.Results)
	}
	if n := g.s.ActiveInQOS("alice", "two"); n != 2 {
		t.Errorf("after a snapshot round trip the count is %d, want 2", n)
	}
}

// TestReportKeepsUsageOnItsAllocation checks that the CPU time and peak
// memory a node measured for a run, and how its VM started, are kept on
// that run's allocation.
func TestReportKeepsUsageOnItsAllocation(t *testing.T) {
	f := newReplica()
	f.Apply(entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, BootID: "b",
		APIAddr: "http://127.0.0.1:7101"}}))
	f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a")}}))
	f.Apply(entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1, MemMB: 256}}}))
	f.Apply(entry(t, 4, CmdJobReports, &JobReports{Now: t0.Add(time.Minute), Node: "n1", BootID: "b", Reports: []api.JobReport{
		{JobID: 1, StartIndex: 3, State: api.StateCompleted, CPUSeconds: 12.5, PeakMemKB: 40960, VMStart: api.VMStartWarm}}}))
	f.Read(func(s *State) {
		j := s.Jobs[1]
		a := s.LastAlloc(j)
		if j.State != api.StateCompleted || a == nil || a.CPUSeconds != 12.5 || a.PeakMemKB != 40960 || a.VMStart != api.VMStartWarm {
			t.Fatalf("job %s, allocation %+v: want COMPLETED with cpu_s 12.5, peak_mem_kb 40960 and vm_start warm", j.State, a)
		}
		if s.Nodes["n1"].APIAddr != "http://127.0.0.1:7101" {
			t.Errorf("node api_addr = %q", s.Nodes["n1"].APIAddr)
		}
	})
}
