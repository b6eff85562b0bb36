package state

import (
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// gangScene is three nodes (n1..n3, 4 CPUs and 8 GiB each; n1 and n2 have
// feature ib) and job 1, asking for 2 nodes of 2 tasks, pending. next
// applies an entry at the following index.
func gangScene(t *testing.T, edit func(sp *JobSpec)) (r *replica, next func(CommandType, any) any) {
	t.Helper()
	r = newReplica()
	index := uint64(0)
	next = func(ct CommandType, p any) any {
		index++
		return r.Apply(entry(t, index, ct, p))
	}
	for i, name := range []string{"n1", "n2", "n3"} {
		info := api.NodeInfo{Name: name, CPUs: 4, MemMB: 8192, BootID: "b" + name}
		if i < 2 {
			info.Features = []string{"ib"}
		}
		next(CmdRegisterNode, &RegisterNode{Now: t0, Info: info})
	}
	sp := spec("wide")
	sp.Nodes, sp.NTasks, sp.NTasksPerNode = 2, 4, 2
	if edit != nil {
		edit(&sp)
	}
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{sp}})
	return r, next
}

// gangStart is a plan starting job 1 on nodes (rank order) with cpus and
// 1 GiB on each.
func gangStart(cpus int, nodes ...string) *ApplyPlan {
	st := PlanStart{JobID: 1, Node: nodes[0], CPUs: cpus, MemMB: 1024}
	for _, n := range nodes[1:] {
		st.Parts = append(st.Parts, PlanPart{Node: n, CPUs: cpus, MemMB: 1024})
	}
	return &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{st}}
}

// TestGangStart starts a multi-node job whole, one allocation per node in
// rank order, or not at all.
func TestGangStart(t *testing.T) {
	r, next := gangScene(t, nil)
	res := next(CmdApplyPlan, gangStart(2, "n2", "n1")).(*PlanResult)
	s := r.s
	j := s.Jobs[1]
	run := s.RunAllocs(j)
	if len(res.Started) != 1 || j.State != api.StateRunning || len(run) != 2 {
		t.Fatalf("started %v, job %s with %d allocations", res.Started, j.State, len(run))
	}
	if run[0].Node != "n2" || run[0].Rank != 0 || run[1].Node != "n1" || run[1].Rank != 1 || run[0].StartIndex != run[1].StartIndex {
		t.Errorf("allocations %+v, %+v: want n2 rank 0 and n1 rank 1 of one start", *run[0], *run[1])
	}
	if s.Nodes["n1"].AllocCPUs != 2 || s.Nodes["n2"].AllocCPUs != 2 || s.Nodes["n3"].AllocCPUs != 0 {
		t.Errorf("CPUs held: n1 %d, n2 %d, n3 %d", s.Nodes["n1"].AllocCPUs, s.Nodes["n2"].AllocCPUs, s.Nodes["n3"].AllocCPUs)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// TestGangStartRejected checks every reason a multi-node start is
// rejected, and that a rejected one leaves nothing behind on any node.
func TestGangStartRejected(t *testing.T) {
	tests := map[string]struct {
		edit  func(sp *JobSpec)
		plan  *ApplyPlan
		setup func(next func(CommandType, any) any)
		want  string
	}{
		"too few nodes":       {plan: gangStart(2, "n1"), want: "asked for 2 to 2 nodes; the plan gives 1"},
		"too many nodes":      {plan: gangStart(2, "n1", "n2", "n3"), want: "the plan gives 3"},
		"a node twice":        {plan: gangStart(2, "n1", "n1"), want: "node n1 is given twice"},
		"a small part":        {plan: gangStart(1, "n1", "n2"), want: "fewer CPUs than the job asked for"},
		"a full second node":  {plan: gangStart(2, "n1", "n2"), setup: fillN2, want: "node n2 lacks resources"},
		"a down second node":  {plan: gangStart(2, "n1", "n2"), setup: downN2, want: "node n2 is DOWN"},
		"an excluded node":    {edit: func(sp *JobSpec) { sp.Exclude = "n2" }, plan: gangStart(2, "n1", "n2"), want: "excluded node n2"},
		"a required node out": {edit: func(sp *JobSpec) { sp.NodeList = "n3" }, plan: gangStart(2, "n1", "n2"), want: "asked for node n3 (--nodelist)"},
		"features": {edit: func(sp *JobSpec) { sp.Constraint = "ib" }, plan: gangStart(2, "n1", "n3"),
			want: "do not satisfy the job's constraint ib"},
		"not whole nodes": {edit: func(sp *JobSpec) { sp.Exclusive = true }, plan: gangStart(2, "n1", "n2"),
			want: "whole nodes (--exclusive); node n1 has 4 CPUs, the plan gives 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, next := gangScene(t, tc.edit)
			if tc.setup != nil {
				tc.setup(next)
			}
			var st PlanStart
			if len(tc.plan.Starts) > 0 {
				st = tc.plan.Starts[0]
			}
			why := r.s.CheckStart(st, nil)
			res := next(CmdApplyPlan, tc.plan).(*PlanResult)
			if !strings.Contains(why, tc.want) || len(res.Rejected) != 1 {
				t.Fatalf("CheckStart = %q, rejected %v; want it rejected saying %q", why, res.Rejected, tc.want)
			}
			if j := r.s.Jobs[1]; j.State != api.StatePending || len(j.Allocs) != 0 || r.s.Nodes["n1"].AllocCPUs != 0 {
				t.Errorf("a rejected start left job %s with allocations %v, n1 holding %d CPUs", j.State, j.Allocs, r.s.Nodes["n1"].AllocCPUs)
			}
		})
	}
	// The same start, every condition met, is taken.
	r, next := gangScene(t, func(sp *JobSpec) { sp.Exclusive, sp.Constraint, sp.NodeList, sp.Exclude = true, "ib", "n1", "n3" })
	if res := next(CmdApplyPlan, gangStart(4, "n1", "n2")).(*PlanResult); len(res.Started) != 1 {
		t.Fatalf("a start meeting every condition was rejected: %v", r.s.CheckStart(gangStart(4, "n1", "n2").Starts[0], nil))
	}
}

func fillN2(next func(CommandType, any) any) {
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 2, Jobs: []JobSpec{spec("filler")}})
	next(CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 2, Node: "n2", CPUs: 4, MemMB: 1024}}})
}

func downN2(next func(CommandType, any) any) {
	next(CmdNodeDown, &NodeDown{Now: t0, Nodes: []string{"n2"}, Reason: "Not responding"})
}

// TestGangEnd checks that a multi-node run ends on every node when it ends
// on one: the batch script's end, a node lost (NODE_FAIL, or requeued),
// a cancel; the job's outcome and exit code are the batch node's.
func TestGangEnd(t *testing.T) {
	report := func(next func(CommandType, any) any, node string, r api.JobReport) {
		next(CmdJobReports, &JobReports{Now: t0.Add(time.Minute), Node: node, BootID: "b" + node, Reports: []api.JobReport{r}})
	}
	t.Run("the batch script ends", func(t *testing.T) {
		r, next := gangScene(t, nil)
		next(CmdApplyPlan, gangStart(2, "n1", "n2"))
		run := r.s.RunAllocs(r.s.Jobs[1])
		report(next, "n1", api.JobReport{Alloc: run[0].ID, JobID: 1, State: api.StateFailed, ExitCode: 3, Message: "exit 3"})
		j, other := r.s.Jobs[1], r.s.Allocs[run[1].ID]
		if j.State != api.StateCompleting || other.Desired != AllocStop || other.StopAs != api.StateFailed {
			t.Fatalf("after rank 0 ended: job %s, rank 1 desired %s as %s; want COMPLETING, stop as FAILED", j.State, other.Desired, other.StopAs)
		}
		report(next, "n2", api.JobReport{Alloc: run[1].ID, JobID: 1, State: api.StateCancelled, Signal: 15, Message: "stopped"})
		j = r.s.Jobs[1]
		if j.State != api.StateFailed || j.ExitCode != 3 || j.Signal != 0 || j.Message != "exit 3" {
			t.Errorf("job %s exit %d:%d %q; want FAILED 3:0 \"exit 3\"", j.State, j.ExitCode, j.Signal, j.Message)
		}
		if r.s.Nodes["n1"].AllocCPUs+r.s.Nodes["n2"].AllocCPUs != 0 {
			t.Error("the nodes still hold the ended run")
		}
		if err := r.s.CheckInvariants(); err != nil {
			t.Error(err)
		}
	})
	for name, requeue := range map[string]bool{"a node is lost": false, "a node is lost, --requeue": true} {
		t.Run(name, func(t *testing.T) {
			r, next := gangScene(t, func(sp *JobSpec) { sp.Requeue = requeue })
			next(CmdApplyPlan, gangStart(2, "n1", "n2"))
			run := r.s.RunAllocs(r.s.Jobs[1])
			next(CmdNodeDown, &NodeDown{Now: t0.Add(time.Minute), Nodes: []string{"n2"}, Reason: "Not responding"})
			want := api.StateNodeFail
			if requeue {
				want = api.StatePending
			}
			if first := r.s.Allocs[run[0].ID]; r.s.Jobs[1].State != api.StateCompleting || first.Desired != AllocStop || first.StopAs != want {
				t.Fatalf("after n2 went down: job %s, rank 0 desired %s as %s", r.s.Jobs[1].State, first.Desired, first.StopAs)
			}
			report(next, "n1", api.JobReport{Alloc: run[0].ID, JobID: 1, State: api.StateCancelled, Signal: 15})
			if j := r.s.Jobs[1]; j.State != want || (requeue && j.Restarts != 1) || !strings.Contains(j.Message, "n2 stopped responding") {
				t.Errorf("job %s, %d restarts, %q; want %s after the other node stopped", j.State, j.Restarts, j.Message, want)
			}
			if err := r.s.CheckInvariants(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		r, next := gangScene(t, nil)
		next(CmdApplyPlan, gangStart(2, "n1", "n2"))
		next(CmdCancelJobs, &CancelJobs{Now: t0.Add(time.Minute), IDs: []uint64{1}, By: "alice"})
		for _, a := range r.s.RunAllocs(r.s.Jobs[1]) {
			if a.Desired != AllocStop || a.StopAs != api.StateCancelled {
				t.Errorf("rank %d on %s: desired %s as %s", a.Rank, a.Node, a.Desired, a.StopAs)
			}
		}
	})
	t.Run("suspended and resumed on every node", func(t *testing.T) {
		r, next := gangScene(t, nil)
		next(CmdApplyPlan, gangStart(2, "n1", "n2"))
		next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(time.Minute), IDs: []uint64{1}, Suspend: true})
		suspended := r.s.Jobs[1].State
		next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(2 * time.Minute), IDs: []uint64{1}, Suspend: false})
		if suspended != api.StateSuspended || r.s.Jobs[1].State != api.StateRunning {
			t.Errorf("suspended: %s, resumed: %s", suspended, r.s.Jobs[1].State)
		}
		for _, a := range r.s.RunAllocs(r.s.Jobs[1]) {
			if a.Desired != AllocRun || a.SuspendedFor != time.Minute {
				t.Errorf("rank %d: desired %s, suspended for %v", a.Rank, a.Desired, a.SuspendedFor)
			}
		}
	})
}

// TestGangStartAfterLentCPUs is a plan that suspends a job on n2 by
// preemption (lending its CPUs) and starts a two-node job on n1 and n2:
// the multi-node start applies after every node's stops, so it gets the
// lent CPUs whatever the nodes' names.
func TestGangStartAfterLentCPUs(t *testing.T) {
	r, next := gangScene(t, nil)
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 2, Jobs: []JobSpec{spec("victim")}})
	next(CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 2, Node: "n2", CPUs: 4, MemMB: 1024}}})
	plan := gangStart(2, "n1", "n2")
	plan.Stops = []PlanStop{{JobID: 2, Mode: api.PreemptSuspend, By: 1}}
	res := next(CmdApplyPlan, plan).(*PlanResult)
	if !slices.Equal(res.Started, []uint64{1}) || !slices.Equal(res.Stopped, []uint64{2}) {
		t.Fatalf("started %v, stopped %v, rejected %v", res.Started, res.Stopped, res.Rejected)
	}
	if err := r.s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// TestGoldenGang checks that the golden log's multi-node start is taken
// (one allocation on each of f1 and f2), that losing f2 stops f1's, and
// that its steps were taken: the golden hashes then pin those applies,
// not rejections.
func TestGoldenGang(t *testing.T) {
	r := newReplica()
	for i, c := range goldenCommands() {
		r.Apply(entry(t, uint64(i+1), c.t, c.p))
	}
	run := r.s.RunAllocs(r.s.Jobs[190])
	if len(run) != 2 || run[0].Node != "f1" || run[1].Node != "f2" || run[1].Placement == nil {
		t.Fatalf("job 190's run: %d allocations", len(run))
	}
	if j := r.s.Jobs[190]; j.State != api.StateCompleting || run[0].Desired != AllocStop || run[0].StopAs != api.StateNodeFail {
		t.Errorf("after f2 was lost: job %s, f1's allocation desired %s as %s", j.State, run[0].Desired, run[0].StopAs)
	}
	if j := r.s.Jobs[195]; j.Step(0) == nil || j.Step(0).State != api.StateFailed || j.Step(1) == nil || j.Step(1).State != api.StateCancelled {
		t.Errorf("job 195's steps: %+v", j.Steps)
	}
}

func init() {
	applyTests[CmdSteps] = func(t *testing.T) {
		r, next := gangScene(t, nil)
		next(CmdApplyPlan, gangStart(2, "n1", "n2"))
		s := r.s
		run := s.RunAllocs(s.Jobs[1])[0].StartIndex
		begin := func(b ...StepBegin) *StepsResult {
			return next(CmdSteps, &Steps{Now: t0.Add(time.Minute), Begin: b}).(*StepsResult)
		}
		first := begin(StepBegin{Job: 1, Run: run, Name: "hostname", Nodes: []string{"n1", "n2"}, NTasks: 4, CPUsPerTask: 1},
			StepBegin{Job: 1, Run: run, Name: "one", Nodes: []string{"n2"}, NTasks: 1})
		refused := begin(StepBegin{Job: 1, Run: run, Nodes: []string{"n3"}, NTasks: 1},
			StepBegin{Job: 1, Run: run + 1, Nodes: []string{"n1"}, NTasks: 1},
			StepBegin{Job: 1, Run: run, Nodes: []string{"n1", "n2"}, NTasks: 1},
			StepBegin{Job: 9, Run: run, Nodes: []string{"n1"}, NTasks: 1})
		end := next(CmdSteps, &Steps{Now: t0.Add(2 * time.Minute), End: []StepEnd{{Job: 1, Step: 0, State: api.StateFailed, ExitCode: 2}},
			Cancel: []StepEnd{{Job: 1, Step: 1}}, By: "alice"}).(*StepsResult)
		again := next(CmdSteps, &Steps{Now: t0.Add(2 * time.Minute), End: []StepEnd{{Job: 1, Step: 1, State: api.StateCompleted}}}).(*StepsResult)
		third := begin(StepBegin{Job: 1, Run: run, Name: "sleep", Nodes: []string{"n1"}, NTasks: 1})
		s0, s1 := *s.Jobs[1].Step(0), *s.Jobs[1].Step(1)
		// The job's run ends: its running step ends with it.
		next(CmdCancelJobs, &CancelJobs{Now: t0.Add(3 * time.Minute), IDs: []uint64{1}})
		for _, a := range s.RunAllocs(s.Jobs[1]) {
			next(CmdJobReports, &JobReports{Now: t0.Add(3 * time.Minute), Node: a.Node, BootID: "b" + a.Node,
				Reports: []api.JobReport{{Alloc: a.ID, JobID: 1, State: api.StateCancelled}}})
		}
		s2 := s.Jobs[1].Step(2)
		expect(t, map[string][2]any{
			"ids":                       {slices.Equal(first.IDs, []int{0, 1}) && len(first.Errors) == 0, true},
			"refusals":                  {slices.Equal(refused.IDs, []int{-1, -1, -1, -1}) && len(refused.Errors) == 4, true},
			"a foreign node":            {strings.Contains(refused.Errors[0], "node n3 is not one of the run's"), true},
			"another run":               {strings.Contains(refused.Errors[1], "the run the step was asked for is over"), true},
			"fewer tasks than nodes":    {strings.Contains(refused.Errors[2], "every node of a step runs a task"), true},
			"ended":                     {s0.State == api.StateFailed && s0.ExitCode == 2 && s0.Nodes[1] == "n2" && s0.NTasks == 4, true},
			"cancelled":                 {s1.State == api.StateCancelled && s1.Message == "cancelled by alice", true},
			"no end after a cancel":     {len(end.Errors) == 0 && len(again.Errors) == 1, true},
			"ids go on":                 {third.IDs[0], 2},
			"the run's end ends a step": {s2.State == api.StateCancelled && s2.Message == "the job's run ended", true},
		})
		// Only the newest MaxEndedSteps ended steps are kept.
		r2, next2 := gangScene(t, nil)
		next2(CmdApplyPlan, gangStart(2, "n1", "n2"))
		run2 := r2.s.RunAllocs(r2.s.Jobs[1])[0].StartIndex
		for i := range MaxEndedSteps + 5 {
			next2(CmdSteps, &Steps{Now: t0, Begin: []StepBegin{{Job: 1, Run: run2, Nodes: []string{"n1"}, NTasks: 1}}})
			next2(CmdSteps, &Steps{Now: t0, End: []StepEnd{{Job: 1, Step: i, State: api.StateCompleted}}})
		}
		steps := r2.s.Jobs[1].Steps
		if len(steps.List) != MaxEndedSteps || steps.Next != MaxEndedSteps+5 || steps.List[0].ID != 5 {
			t.Errorf("kept %d steps from %d, next %d", len(steps.List), steps.List[0].ID, steps.Next)
		}
	}
}
