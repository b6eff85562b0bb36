package state

import (
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// mailSpec is a job that asks for notices of types.
func mailSpec(name string, types ...string) JobSpec {
	sp := spec(name)
	sp.MailType = types
	return sp
}

// notices lists the outbox's notices, oldest first, as "REF EVENT: SUBJECT".
func notices(s *State) []string {
	var out []string
	s.EachNotice(func(n *Notice) bool {
		out = append(out, n.Ref+" "+n.Event+": "+n.Subject)
		return true
	})
	return out
}

// mailScene is a node n1 with 8 CPUs and no jobs; next applies an entry.
func mailScene(t *testing.T) (r *replica, next func(CommandType, any) any) {
	t.Helper()
	r = newReplica()
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 8, MemMB: 8192, BootID: "b1"}}),
	})
	index := uint64(1)
	return r, func(ct CommandType, p any) any {
		index++
		return r.Apply(entry(t, index, ct, p))
	}
}

func start(id uint64, at time.Time) *ApplyPlan {
	return &ApplyPlan{Now: at, Starts: []PlanStart{{JobID: id, Node: "n1", CPUs: 1, MemMB: 64}}}
}

func jobReport(at time.Time, id, startIndex uint64, st api.JobState, exit int) *JobReports {
	return &JobReports{Now: at, Node: "n1", BootID: "b1", Reports: []api.JobReport{{JobID: id, StartIndex: startIndex, State: st, ExitCode: exit}}}
}

// TestNoticesOfEachEvent drives jobs through every event a notice is
// recorded for and checks the outbox holds exactly Slurm's subject lines,
// once each.
func TestNoticesOfEachEvent(t *testing.T) {
	r, next := mailScene(t)
	all := mailSpec("all", api.MailBegin, api.MailEnd, api.MailFail, api.MailRequeue, api.MailTimeLimit,
		api.MailTimeLimit90, api.MailTimeLimit80, api.MailTimeLimit50)
	all.TimeLimit = 100
	fail := mailSpec("failer", api.MailFail)
	endOnly := mailSpec("ender", api.MailEnd)
	quiet := spec("quiet")
	dep := mailSpec("dep", api.MailInvalidDepend)
	dep.Dependency = &Dependency{Raw: "afterok:2", Clauses: []DepClause{{Type: "afterok", JobIDs: []string{"2"}}}}
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{all, fail, endOnly, quiet, dep}})
	next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(5 * time.Second), Starts: []PlanStart{
		{JobID: 1, Node: "n1", CPUs: 1, MemMB: 64}, {JobID: 2, Node: "n1", CPUs: 1, MemMB: 64},
		{JobID: 3, Node: "n1", CPUs: 1, MemMB: 64}, {JobID: 4, Node: "n1", CPUs: 1, MemMB: 64}}})
	// 50 % of job 1's 100 s at 55 s; the entry for 80 % comes early and
	// records nothing; a second 50 % records nothing either.
	next(CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(55 * time.Second), Jobs: []uint64{1}})
	next(CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(60 * time.Second), Jobs: []uint64{1, 2, 99}})
	// Suspended for 10 s: 80 % is reached at 95 s, not 85 s.
	next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(60 * time.Second), IDs: []uint64{1}, Suspend: true})
	next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(70 * time.Second), IDs: []uint64{1}, Suspend: false})
	early := next(CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(90 * time.Second), Jobs: []uint64{1}})
	both := next(CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(106 * time.Second), Jobs: []uint64{1}})
	next(CmdJobReports, jobReport(t0.Add(115*time.Second), 1, 3, api.StateTimeout, 0))
	next(CmdJobReports, jobReport(t0.Add(6*time.Second), 2, 3, api.StateFailed, 3))
	next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(7 * time.Second), Reasons: []PlanReason{{JobID: 5, Reason: api.ReasonDependencyNeverSatisfied}}})
	// The pass cancels it later (--kill-on-invalid-dep): no second notice.
	next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(8 * time.Second), Cancels: []PlanCancel{{JobID: 5, Reason: "invalid dependency"}}})
	next(CmdRequeueJobs, &RequeueJobs{Now: t0.Add(65 * time.Second), IDs: []uint64{3}})
	next(CmdJobReports, jobReport(t0.Add(66*time.Second), 3, 3, api.StateCancelled, 0))
	next(CmdJobReports, jobReport(t0.Add(67*time.Second), 4, 3, api.StateCompleted, 0))
	next(CmdApplyPlan, start(3, t0.Add(70*time.Second)))
	next(CmdCancelJobs, &CancelJobs{Now: t0.Add(71 * time.Second), IDs: []uint64{3}})
	next(CmdJobReports, jobReport(t0.Add(72*time.Second), 3, 17, api.StateCancelled, 0))

	want := []string{
		"1 BEGIN: Slurm Job_id=1 Name=all Began, Queued time 00:00:05",
		"1 TIME_LIMIT_50: Slurm Job_id=1 Name=all Reached 50% of time limit, Run time 00:00:50",
		"1 TIME_LIMIT_80: Slurm Job_id=1 Name=all Reached 80% of time limit, Run time 00:01:31",
		"1 TIME_LIMIT_90: Slurm Job_id=1 Name=all Reached 90% of time limit, Run time 00:01:31",
		"1 TIME_LIMIT: Slurm Job_id=1 Name=all Reached time limit, Run time 00:01:40",
		"1 FAIL: Slurm Job_id=1 Name=all Failed, Run time 00:01:40, TIMEOUT, ExitCode 0",
		"2 FAIL: Slurm Job_id=2 Name=failer Failed, Run time 00:00:01, FAILED, ExitCode 3",
		"5 INVALID_DEPEND: Slurm Job_id=5 Name=dep Invalid dependency",
		"3 END: Slurm Job_id=3 Name=ender Ended, Run time 00:00:02, CANCELLED, ExitCode 0",
	}
	got := notices(r.s)
	if !slices.Equal(got, want) {
		t.Errorf("notices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	expect(t, map[string][2]any{
		"an early entry records nothing": {early, 0},
		"80 and 90 % at once":            {both, 2},
		"recipient is the user":          {r.s.Notices[1].To, "alice"},
		"sinks: the mail program":        {r.s.Notices[1].Sinks, SinkMailProg},
	})
}

// TestNoticesOfArrays checks that an array without ARRAY_TASKS says BEGIN
// once and ends with one summary, and that one with it speaks per task.
func TestNoticesOfArrays(t *testing.T) {
	r, next := mailScene(t)
	next(CmdSetConfig, &SetConfig{Settings: [][2]string{{"MailDomain", "example.org"}, {"MailWebhook", "http://hooks.example/x"}, {"MailProg", "none"}}})
	whole := mailSpec("whole", api.MailBegin, api.MailEnd, api.MailFail)
	whole.Array = &api.ArraySpec{Raw: "0-1", Ranges: []api.ArrayRange{{First: 0, Last: 1, Step: 1}}}
	each := mailSpec("each", api.MailBegin, api.MailEnd, api.MailArrayTasks)
	each.Array = &api.ArraySpec{Raw: "0-1", Ranges: []api.ArrayRange{{First: 0, Last: 1, Step: 1}}}
	each.MailUser = "bob@lab.example"
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{whole, each}})
	next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{
		{JobID: 1, Node: "n1", CPUs: 1, MemMB: 64, Array: true, Task: 0, NewID: 3},
		{JobID: 1, Node: "n1", CPUs: 1, MemMB: 64, Array: true, Task: 1},
		{JobID: 2, Node: "n1", CPUs: 1, MemMB: 64, Array: true, Task: 0, NewID: 4},
		{JobID: 2, Node: "n1", CPUs: 1, MemMB: 64, Array: true, Task: 1}}})
	next(CmdJobReports, jobReport(t0.Add(2*time.Second), 3, 4, api.StateCompleted, 0))
	next(CmdJobReports, jobReport(t0.Add(3*time.Second), 1, 4, api.StateFailed, 2))
	next(CmdJobReports, jobReport(t0.Add(4*time.Second), 4, 4, api.StateCompleted, 0))
	next(CmdJobReports, jobReport(t0.Add(4*time.Second), 2, 4, api.StateCompleted, 0))
	want := []string{
		"1_* BEGIN: Slurm Array Summary Job_id=1_* (1) Name=whole Began",
		"2_0 BEGIN: Slurm Array Task Job_id=2_0 (4) Name=each Began, Queued time 00:00:01",
		"2_1 BEGIN: Slurm Array Task Job_id=2_1 (2) Name=each Began, Queued time 00:00:01",
		"1_* FAIL: Slurm Array Summary Job_id=1_* (1) Name=whole Failed, Mixed, ExitCode [0-2]",
		"2_0 END: Slurm Array Task Job_id=2_0 (4) Name=each Ended, Run time 00:00:03, COMPLETED, ExitCode 0",
		"2_1 END: Slurm Array Task Job_id=2_1 (2) Name=each Ended, Run time 00:00:03, COMPLETED, ExitCode 0",
	}
	got := notices(r.s)
	if !slices.Equal(got, want) {
		t.Errorf("notices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var toWhole, toEach string
	r.s.EachNotice(func(n *Notice) bool {
		if n.ArrayJob == 1 {
			toWhole = n.To
		} else {
			toEach = n.To
		}
		return true
	})
	expect(t, map[string][2]any{
		"the user at MailDomain":  {toWhole, "alice@example.org"},
		"--mail-user as given":    {toEach, "bob@lab.example"},
		"webhook only":            {r.s.Notices[1].Sinks, SinkWebhook},
		"the summary names array": {r.s.Notices[4].Job, uint64(1)},
	})
}

// TestNoNoticeWithoutSinks checks that nothing is recorded when no mail
// program and no webhook is configured, and that a full outbox drops and
// counts.
func TestNoNoticeWithoutSinks(t *testing.T) {
	r, next := mailScene(t)
	next(CmdSetConfig, &SetConfig{Settings: [][2]string{{"MailProg", "none"}}})
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{mailSpec("a", api.MailBegin)}})
	next(CmdApplyPlan, start(1, t0.Add(time.Second)))
	if len(r.s.Notices) != 0 || r.s.NextNoticeID != 0 {
		t.Fatalf("with no sink the outbox holds %d notices", len(r.s.Notices))
	}
	next(CmdSetConfig, &SetConfig{Settings: [][2]string{{"MailProg", "default"}}})
	r.s.Notices = map[uint64]*Notice{}
	for i := range MaxNotices {
		r.s.Notices[uint64(i+1000)] = &Notice{ID: uint64(i + 1000)}
	}
	next(CmdJobReports, jobReport(t0.Add(2*time.Second), 1, 4, api.StateCompleted, 0))
	r.s.Notices = nil
	next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 2, Jobs: []JobSpec{mailSpec("b", api.MailBegin, api.MailEnd)}})
	next(CmdApplyPlan, start(2, t0.Add(3*time.Second)))
	expect(t, map[string][2]any{
		"nothing dropped yet":         {r.s.NoticesDropped, uint64(0)},
		"recorded once there is room": {len(r.s.Notices), 1},
	})
	full := map[uint64]*Notice{}
	for i := range MaxNotices {
		full[uint64(i+1000)] = &Notice{ID: uint64(i + 1000)}
	}
	r.s.Notices = full
	next(CmdJobReports, jobReport(t0.Add(4*time.Second), 2, 8, api.StateCompleted, 0))
	expect(t, map[string][2]any{"dropped when full": {r.s.NoticesDropped, uint64(1)}})
}

func init() {
	applyTests[CmdTopJobs] = func(t *testing.T) {
		r, next := scene(t)
		before := r.s.Jobs[3].Spec
		res := next(CmdTopJobs, &TopJobs{Now: t0, Nice: []JobNice{{ID: 3, Nice: -40}, {ID: 1, Nice: 5}, {ID: 4, Nice: 99999}, {ID: 9, Nice: 1}}, By: "alice"}).(*IDsResult)
		expect(t, map[string][2]any{
			"pending one set":     {r.s.Jobs[3].Spec.Nice, -40},
			"bounded":             {r.s.Jobs[4].Spec.Nice, 10000},
			"running one refused": {strings.Contains(res.Errors[1], "only pending jobs"), true},
			"unknown one refused": {strings.Contains(res.Errors[9], "no such job"), true},
			"spec copied":         {before.Nice, 0},
			"changed":             {len(res.Changed), 2},
		})
	}
	applyTests[CmdMailTimeEvents] = func(t *testing.T) {
		r, next := mailScene(t)
		sp := mailSpec("w", api.MailTimeLimit80)
		sp.TimeLimit = 10
		next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{sp}})
		next(CmdApplyPlan, start(1, t0))
		due, at := r.s.TimeWarningsDue(t0.Add(5 * time.Second))
		none := next(CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(7 * time.Second), Jobs: []uint64{1}})
		due2, _ := r.s.TimeWarningsDue(t0.Add(8 * time.Second))
		one := next(CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(8 * time.Second), Jobs: []uint64{1}})
		due3, after := r.s.TimeWarningsDue(t0.Add(9 * time.Second))
		expect(t, map[string][2]any{
			"nothing due at 5 s":        {len(due), 0},
			"80 % falls due at 8 s":     {at.Equal(t0.Add(8 * time.Second)), true},
			"7 s records nothing":       {none, 0},
			"due at 8 s":                {slices.Equal(due2, []uint64{1}), true},
			"8 s records it":            {one, 1},
			"then nothing more is due":  {len(due3) == 0 && after.IsZero(), true},
			"marked on the job":         {r.s.Jobs[1].Mailed, mailedTime80},
			"the run time":              {r.s.Notices[1].RunS, int64(8)},
			"a requeue clears the mark": {requeueClears(t, next, r), true},
		})
	}
	applyTests[CmdClaimNotices] = func(t *testing.T) {
		r, next := mailScene(t)
		next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{mailSpec("a", api.MailBegin)}})
		next(CmdApplyPlan, start(1, t0.Add(time.Second)))
		before := r.s.Notices[1]
		claimed := next(CmdClaimNotices, &ClaimNotices{Now: t0, IDs: []uint64{1, 7}, By: "c2"}).([]uint64)
		next(CmdClaimNotices, &ClaimNotices{Now: t0, IDs: []uint64{1}, By: "c3"})
		expect(t, map[string][2]any{
			"claimed the one there is": {slices.Equal(claimed, []uint64{1}), true},
			"attempts":                 {r.s.Notices[1].Attempts, 2},
			"by the last":              {r.s.Notices[1].ClaimedBy, "c3"},
			"copy on write":            {before.Attempts, 0},
			"the key stays":            {r.s.Notices[1].Key(), before.Key()},
		})
	}
	applyTests[CmdNoticesDone] = func(t *testing.T) {
		r, next := mailScene(t)
		next(CmdSetConfig, &SetConfig{Settings: [][2]string{{"MailWebhook", "https://hooks.example/a"}}})
		next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{mailSpec("a", api.MailBegin, api.MailEnd)}})
		next(CmdApplyPlan, start(1, t0.Add(time.Second)))
		next(CmdJobReports, jobReport(t0.Add(2*time.Second), 1, 4, api.StateCompleted, 0))
		gone := next(CmdNoticesDone, &NoticesDone{Now: t0, Marks: []NoticeMark{{ID: 1, Sinks: SinkMailProg}, {ID: 2, Sinks: SinkMailProg | SinkWebhook}, {ID: 9, Sinks: 1}}})
		half := r.s.Notices[1]
		again := next(CmdNoticesDone, &NoticesDone{Now: t0, Marks: []NoticeMark{{ID: 1, Sinks: SinkWebhook, Failed: true}}})
		expect(t, map[string][2]any{
			"one delivered whole":     {gone, 1},
			"half of the other":       {half != nil && half.Done == SinkMailProg, true},
			"the rest given up":       {again, 1},
			"outbox empty":            {len(r.s.Notices), 0},
			"ids are not given again": {r.s.NextNoticeID, uint64(2)},
		})
	}
}

// requeueClears requeues job 1 of the apply test's scene and reports
// whether its time-limit marks were cleared for its next run.
func requeueClears(t *testing.T, next func(CommandType, any) any, r *replica) bool {
	t.Helper()
	next(CmdRequeueJobs, &RequeueJobs{Now: t0.Add(9 * time.Second), IDs: []uint64{1}})
	next(CmdJobReports, jobReport(t0.Add(9*time.Second), 1, 3, api.StateCancelled, 0))
	return r.s.Jobs[1].State == api.StatePending && r.s.Jobs[1].Mailed == 0
}

func TestSlurmDuration(t *testing.T) {
	for secs, want := range map[int64]string{0: "00:00:00", 61: "00:01:01", 3600*25 + 5: "1-01:00:05", -1: "INVALID"} {
		if got := SlurmDuration(secs); got != want {
			t.Errorf("SlurmDuration(%d) = %q, want %q", secs, got, want)
		}
	}
}
