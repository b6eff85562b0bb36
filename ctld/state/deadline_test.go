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
