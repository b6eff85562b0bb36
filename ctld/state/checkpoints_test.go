package state

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// checkpointed saves job id (running on v1) to a checkpoint and reports
// its run's end; it returns the saved allocation.
func checkpointed(t *testing.T, r *replica, next func(CommandType, any) any, id uint64, at time.Time) *Allocation {
	t.Helper()
	a := run(r.s, id)
	if res := next(CmdCheckpointJobs, &CheckpointJobs{Now: at, IDs: []uint64{id}, By: "alice"}).(*IDsResult); len(res.Changed) != 1 {
		t.Fatalf("checkpoint refused: %v", res.Errors)
	}
	res := next(CmdCheckpointReports, &CheckpointReports{Now: at.Add(time.Second), Node: a.Node, Reports: []api.CheckpointReport{
		{Job: id, Alloc: a.ID, Event: CheckpointSaved, Path: "/shared/checkpoints/x.ckpt", Size: 100, SHA256: "ff", TookMS: 40}}}).(*IDsResult)
	if len(res.Changed) != 1 {
		t.Fatalf("saved report refused: %v", res.Errors)
	}
	next(CmdJobReports, &JobReports{Now: at.Add(2 * time.Second), Node: a.Node, BootID: "b1", Reports: []api.JobReport{
		{Alloc: a.ID, JobID: id, StartIndex: a.StartIndex, State: api.StateCancelled, Signal: 9}}})
	return r.s.Allocs[a.ID]
}

func init() {
	applyTests[CmdCheckpointJobs] = func(t *testing.T) {
		r, next := migScene(t)
		s := r.s
		before := s.Nodes["v1"].AllocIndex
		res := next(CmdCheckpointJobs, &CheckpointJobs{Now: t0.Add(time.Minute), IDs: []uint64{1, 3, 1}, By: "alice"}).(*IDsResult)
		ck := s.Jobs[1].Checkpoint
		expect(t, map[string][2]any{
			"saving":                     {ck.Phase, CheckpointSaving},
			"on its node":                {ck.Node + "/" + ck.Dir, "v1//shared/checkpoints"},
			"its allocation":             {ck.Alloc, run(s, 1).ID},
			"still running":              {s.Jobs[1].State, api.StateRunning},
			"the node is told":           {s.Nodes["v1"].AllocIndex > before, true},
			"the desired state asks":     {s.AllocCheckpoint(s.Jobs[1], run(s, 1)).Save, true},
			"a process runner's refused": {strings.Contains(res.Errors[3], "cannot migrate jobs"), true},
			"a second ask refused":       {strings.Contains(res.Errors[1], "being checkpointed already"), true},
		})
	}
	applyTests[CmdCheckpointReports] = func(t *testing.T) {
		r, next := migScene(t)
		s := r.s
		a := checkpointed(t, r, next, 1, t0.Add(time.Minute))
		next(CmdCheckpointJobs, &CheckpointJobs{Now: t0.Add(time.Minute), IDs: []uint64{2}})
		failed := next(CmdCheckpointReports, &CheckpointReports{Now: t0.Add(2 * time.Minute), Node: "v1", Reports: []api.CheckpointReport{
			{Job: 2, Alloc: run(s, 2).ID, Event: CheckpointFailed, Message: "disk full"}, {Job: 1, Alloc: a.ID, Event: CheckpointSaved}}}).(*IDsResult)
		j := s.Jobs[1]
		expect(t, map[string][2]any{
			"suspended":                    {j.State, api.StateSuspended},
			"checkpointed":                 {j.Reason, api.ReasonCheckpointed},
			"the file":                     {j.Checkpoint.Path + " " + j.Checkpoint.SHA256, "/shared/checkpoints/x.ckpt ff"},
			"its run ended as suspended":   {a.EndState, api.StateSuspended},
			"holding nothing":              {len(s.ActiveAllocs(j)), 0},
			"its node keeps the file":      {slices.Contains(s.Nodes["v1"].Checkpoints, 1), true},
			"the node's CPUs are back":     {s.Nodes["v1"].AllocCPUs, 1},
			"a failed save":                {s.Jobs[2].Checkpoint.Phase, CheckpointFailed},
			"says why":                     {strings.Contains(s.Jobs[2].Checkpoint.Error, "disk full"), true},
			"its job runs on":              {s.Jobs[2].State, api.StateRunning},
			"a late saved report is stale": {failed.Errors[1], "stale report"},
			"the node lists the file":      {len(s.NodeCheckpoints(s.Nodes["v1"])), 1},
		})
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	applyTests[CmdRestoreJobs] = func(t *testing.T) {
		r, next := migScene(t)
		s := r.s
		start := s.Jobs[1].StartTime
		checkpointed(t, r, next, 1, t0.Add(time.Minute))
		bad := next(CmdRestoreJobs, &RestoreJobs{Now: t0.Add(2 * time.Minute), IDs: []uint64{1, 2}, To: "p1"}).(*IDsResult)
		res := next(CmdRestoreJobs, &RestoreJobs{Now: t0.Add(2 * time.Minute), IDs: []uint64{1}, To: "v2", By: "alice"}).(*IDsResult)
		j := s.Jobs[1]
		pending, phase := j.State, j.Checkpoint.Phase
		wrong := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(3 * time.Minute), Starts: []PlanStart{{JobID: 1, Node: "v1", CPUs: 1, MemMB: 512}}}).(*PlanResult)
		next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(3 * time.Minute), Starts: []PlanStart{{JobID: 1, Node: "v2", CPUs: 1, MemMB: 512}}})
		j = s.Jobs[1]
		restore := s.AllocCheckpoint(j, run(s, 1))
		next(CmdCheckpointReports, &CheckpointReports{Now: t0.Add(4 * time.Minute), Node: "v2", Reports: []api.CheckpointReport{
			{Job: 1, Alloc: run(s, 1).ID, Event: CheckpointRestored, TookMS: 90}}})
		restored := s.Jobs[1].Checkpoint.Phase
		next(CmdJobReports, &JobReports{Now: t0.Add(5 * time.Minute), Node: "v2", BootID: "b2", Reports: []api.JobReport{
			{Alloc: run(s, 1).ID, JobID: 1, State: api.StateCompleted}}})
		expect(t, map[string][2]any{
			"restored to v2":                 {len(res.Changed), 1},
			"pending again":                  {pending, api.StatePending},
			"to restore":                     {phase, CheckpointRestoring},
			"not on another node than asked": {len(wrong.Rejected), 1},
			"running again":                  {j.State, api.StateRunning},
			"on v2":                          {run(s, 1).Node, "v2"},
			"from its start time":            {j.StartTime, start},
			"the node is told the file":      {restore.Restore.Path, "/shared/checkpoints/x.ckpt"},
			"and what it had run":            {restore.RanS > 0, true},
			"reported restored":              {restored, CheckpointRestored},
			"the job completed":              {s.Jobs[1].State, api.StateCompleted},
			"and its file went":              {len(s.Nodes["v1"].Checkpoints), 0},
			"a node without the directory":   {strings.Contains(bad.Errors[1], "does not share the checkpoint directory"), true},
			"a running job refused":          {strings.Contains(bad.Errors[2], "not checkpointed"), true},
		})
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointedJobEnds: scontrol resume of a checkpointed job restores
// it; a checkpointed (or restoring) job cancelled ends at once, a requeued
// one starts afresh; either way its file goes.
func TestCheckpointedJobEnds(t *testing.T) {
	r, next := migScene(t)
	s := r.s
	checkpointed(t, r, next, 1, t0.Add(time.Minute))
	checkpointed(t, r, next, 2, t0.Add(time.Minute))
	next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(2 * time.Minute), IDs: []uint64{1}})
	resumed := s.Jobs[1].State
	next(CmdCancelJobs, &CancelJobs{Now: t0.Add(2 * time.Minute), IDs: []uint64{1}, By: "alice"})
	next(CmdRequeueJobs, &RequeueJobs{Now: t0.Add(2 * time.Minute), IDs: []uint64{2}, By: "alice"})
	expect(t, map[string][2]any{
		"a resume restores":      {resumed, api.StatePending},
		"cancelled at once":      {s.Jobs[1].State, api.StateCancelled},
		"requeued":               {s.Jobs[2].State, api.StatePending},
		"to start afresh":        {s.Jobs[2].Checkpoint == nil, true},
		"no file is kept":        {len(s.Nodes["v1"].Checkpoints), 0},
		"the node lists nothing": {len(s.NodeCheckpoints(s.Nodes["v1"])), 0},
	})
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointPreemption applies a plan that preempts job 1 by
// checkpoint: it is saved on its node, goes back to the queue the moment
// the save is reported (to be restored where and when room appears), and
// its run's end frees the node without touching it. A stop that cannot be
// a checkpoint (a process runner's job) or that is a migration is skipped.
func TestCheckpointPreemption(t *testing.T) {
	r, next := migScene(t)
	s := r.s
	a := run(s, 1)
	pr := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Minute), Stops: []PlanStop{
		{JobID: 1, Mode: api.PreemptCheckpoint, By: 9}, {JobID: 3, Mode: api.PreemptCheckpoint, By: 9},
		{JobID: 2, Mode: api.PreemptMigrate, By: 9}}}).(*PlanResult)
	ck := s.Jobs[1].Checkpoint
	expect(t, map[string][2]any{
		"stopped":                   {slices.Equal(pr.Stopped, []uint64{1}), true},
		"the others skipped":        {len(pr.Skipped), 2},
		"saving":                    {ck.Phase, CheckpointSaving},
		"for the preemptor":         {ck.By + " " + strconv.FormatBool(ck.Preempted), "job 9 true"},
		"running while it saves":    {s.Jobs[1].State, api.StateRunning},
		"the node is asked":         {s.AllocCheckpoint(s.Jobs[1], a).Save, true},
		"the process job runs on":   {s.Jobs[3].State, api.StateRunning},
		"the migration stop is not": {s.Jobs[2].State, api.StateRunning},
	})
	next(CmdCheckpointReports, &CheckpointReports{Now: t0.Add(2 * time.Minute), Node: "v1", Reports: []api.CheckpointReport{
		{Job: 1, Alloc: a.ID, Event: CheckpointSaved, Path: "/shared/checkpoints/x.ckpt", Size: 100, SHA256: "ff"}}})
	j := s.Jobs[1]
	expect(t, map[string][2]any{
		"back in the queue":       {j.State, api.StatePending},
		"to be restored":          {j.Checkpoint.Phase, CheckpointRestoring},
		"anywhere that can":       {j.Checkpoint.Want, ""},
		"its run is stopped":      {s.Allocs[a.ID].Desired, AllocStop},
		"and given up":            {s.Allocs[a.ID].Leaving, true},
		"the file is kept":        {slices.Contains(s.Nodes["v1"].Checkpoints, 1), true},
		"not restored on its run": {s.AllocCheckpoint(j, s.Allocs[a.ID]) == nil, true},
	})
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	next(CmdJobReports, &JobReports{Now: t0.Add(3 * time.Minute), Node: "v1", BootID: "b1", Reports: []api.JobReport{
		{Alloc: a.ID, JobID: 1, StartIndex: a.StartIndex, State: api.StateCancelled, Signal: 9}}})
	expect(t, map[string][2]any{
		"still pending":          {s.Jobs[1].State, api.StatePending},
		"still to be restored":   {s.Jobs[1].Checkpoint.Phase, CheckpointRestoring},
		"its run ended as saved": {s.Allocs[a.ID].EndState, api.StateSuspended},
		"the node's CPU is back": {s.Nodes["v1"].AllocCPUs, 1},
	})
	next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(4 * time.Minute), Starts: []PlanStart{{JobID: 1, Node: "v2", CPUs: 1, MemMB: 512}}})
	if b := run(s, 1); b == nil || b.Node != "v2" || s.AllocCheckpoint(s.Jobs[1], b).Restore == nil {
		t.Fatalf("the restore on v2 does not start from the file: %+v", b)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
