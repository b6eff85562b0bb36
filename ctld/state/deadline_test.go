package state

import (
	"testing"
	"time"

	"corral/api"
)

// TestDeadlineCancel applies a plan's deadline cancel: the pending job ends
// DEADLINE with reason DeadLine and its END/FAIL notice; a running job is
// not cancelled by it.
func TestDeadlineCancel(t *testing.T) {
	r, next := mailScene(t)
	late := mailSpec("late", api.MailFail)
	late.Deadline = t0.Add(time.Hour)
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{late, spec("runs")}})
	next(CmdApplyPlan, start(2, t0))
	res := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Minute), Cancels: []PlanCancel{
		{JobID: 1, Reason: "the scheduler: it could no longer end by its --deadline", Deadline: true},
		{JobID: 2, Reason: "x", Deadline: true}}}).(*PlanResult)
	j := r.s.Jobs[1]
	expect(t, map[string][2]any{
		"state":               {j.State, api.StateDeadline},
		"reason":              {j.Reason, api.ReasonDeadline},
		"ended":               {j.EndTime.Equal(t0.Add(time.Minute)), true},
		"running one skipped": {len(res.Skipped) == 1 && res.Skipped[0] == 2 && r.s.Jobs[2].State == api.StateRunning, true},
		"terminal":            {api.StateDeadline.Terminal(), true},
		"its FAIL notice":     {len(notices(r.s)) == 1 && notices(r.s)[0] == "1 FAIL: Slurm Job_id=1 Name=late Failed, DEADLINE, ExitCode 0", true},
	})
}

// TestScratchSpaceHeld: a start's --tmp is held on its node while the run
// is active, a start that would exceed the node's scratch space is
// rejected, and the space comes back when the run ends.
func TestScratchSpaceHeld(t *testing.T) {
	r := newReplica()
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 8, MemMB: 8192, BootID: "b1", TmpMB: 10000}}),
		entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b")}}),
		entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{
			{JobID: 1, Node: "n1", CPUs: 1, MemMB: 64, TmpMB: 6000}, {JobID: 2, Node: "n1", CPUs: 1, MemMB: 64, TmpMB: 6000}}}),
	})
	n := r.s.Nodes["n1"]
	if n.AllocTmpMB != 6000 || r.s.Jobs[2].State != api.StatePending || run(r.s, 1).TmpMB != 6000 {
		t.Fatalf("after the plan: node holds %d MiB, job 2 is %s; want 6000 held and job 2 rejected", n.AllocTmpMB, r.s.Jobs[2].State)
	}
	r.Apply(entry(t, 4, CmdJobReports, jobReport(t0.Add(time.Second), 1, 3, api.StateCompleted, 0)))
	if got := r.s.Nodes["n1"].AllocTmpMB; got != 0 {
		t.Errorf("after the run ended the node holds %d MiB, want 0", got)
	}
}
