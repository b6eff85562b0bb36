package state

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// This file holds the three tests every command type gets (STYLE.md 9):
// an apply test (applyTests), the snapshot round trip after each entry of a
// log that holds every type (everyCommandLog), and the replay of that log
// into three states whose hashes must match. TestCommandTable checks that
// no type of the table lacks any of them.

// everyCommandLog is one log with at least one entry of every command type.
// Its first six entries (members, two nodes, four jobs, a hold, a plan at
// index 6) are what the tests of apply_test.go build on.
func everyCommandLog(t testing.TB) []*logEntry {
	node := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "process", BootID: "b1", Partitions: []string{"batch"}}
	node2 := api.NodeInfo{Name: "n2", CPUs: 2, MemMB: 4096, Runner: "process", BootID: "c1", Partitions: []string{"batch"}}
	req := spec("b")
	req.Requeue = true
	req.InlineEnv = &InlineEnv{Env: []string{"HOME=/home/alice", "PATH=/usr/bin:/bin", "SAMPLE=1"}}
	cmds := []struct {
		t CommandType
		p any
	}{
		{CmdSetMember, &SetMember{ID: "c1", HTTPAddr: "127.0.0.1:7001"}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: node}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: node2}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), req, spec("c"), spec("d")}}},
		{CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{3}, Hold: true}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "n2", CPUs: 1, MemMB: 512}, {JobID: 4, Node: "n1", CPUs: 1, MemMB: 512}}, Reasons: []PlanReason{{JobID: 3, Reason: api.ReasonJobHeldUser}}}},
		{CmdNodeHeartbeats, &NodeHeartbeats{Seen: map[string]time.Time{"n1": t0.Add(2 * time.Second)}}},
		{CmdSuspendJobs, &SuspendJobs{Now: t0.Add(2 * time.Second), IDs: []uint64{4}, Suspend: true}},
		{CmdSuspendJobs, &SuspendJobs{Now: t0.Add(3 * time.Second), IDs: []uint64{4, 3}, Suspend: false}},
		{CmdJobReports, &JobReports{Now: t0.Add(3 * time.Second), Node: "n1", BootID: "b1", Reports: []api.JobReport{{JobID: 1, StartIndex: 6, State: api.StateCompleted}}}},
		{CmdCancelJobs, &CancelJobs{Now: t0.Add(4 * time.Second), IDs: []uint64{4}, By: "alice"}},
		{CmdNodeDown, &NodeDown{Now: t0.Add(5 * time.Second), Nodes: []string{"n2"}, Reason: "Not responding"}},
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(6 * time.Second), Node: "n1", Drain: true, Reason: "maintenance"}},
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"PriorityWeightAge", "500"}, {"MinJobAge", "60"}}}},
		{CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "high", Priority: 100, Preempt: []string{"besteffort"}, MaxWall: 3600}}},
		{CmdPutAccount, &PutAccount{Account: api.Account{Name: "phys", Shares: 2}}},
		{CmdPutUser, &PutUser{User: api.AccountUser{Account: "phys", Name: "alice", Shares: 1}}},
		{CmdUpdateJob, &UpdateJob{Now: t0.Add(7 * time.Second), ID: 3, Dependency: &Dependency{Raw: "afterany:1", Clauses: []DepClause{{Type: "afterany", JobIDs: []string{"1"}}}}}},
		{CmdPurgeJobs, &PurgeJobs{Now: t0.Add(time.Hour), Max: 10}},
		{CmdSeedConfig, &SeedConfig{Partitions: []api.Partition{{Name: "batch", Default: true}}, DefMemPerCPU: 1024, Policy: "conservative"}},
		{CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "debug", MaxTime: 1800, State: api.PartitionDrain}}},
		{CmdPutToken, &PutToken{Now: t0, Token: TokenRecord{Hash: HashSecret("s"), Token: api.Token{ID: "t1", User: "alice",
			Role: api.RoleUser, Ops: []api.Op{api.OpRead}, Created: t0, Expires: t0.Add(time.Hour)}}}},
		{CmdRevokeToken, &RevokeToken{Now: t0.Add(time.Minute), ID: "t1", By: "alice"}},
		{CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "alice", Role: api.RoleCoordinator, Accounts: []string{"phys"}}}},
		{CmdAuditRecords, auditEntry(map[string]AuditHead{}, t0, "phys", "", "phys")},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "k1", CPUs: 1, MemMB: 1024, Runner: "process", BootID: "k"}, Key: "k1key"}},
		{CmdForgetNodeKey, &ForgetNodeKey{Node: "k1", By: "oscar"}},
		{CmdPutToken, &PutToken{Now: t0, Token: TokenRecord{Hash: HashSecret("j"), Token: api.Token{ID: "j1", User: "root", Join: true, Expires: t0.Add(time.Hour)}}}},
		{CmdUseJoinToken, &UseJoinToken{Now: t0, ID: "j1", Node: "n7"}},
		{CmdNodeAttest, &NodeAttest{Now: t0, Node: "n1", OK: true, EK: "fp", AK: []byte{1}}},
		{CmdRequeueJobs, &RequeueJobs{Now: t0.Add(2 * time.Hour), IDs: []uint64{1, 2}, Hold: true, By: "alice"}},
		// Live migrations (migrations.go): job 10 moves from v1 to v2 and
		// its source is released, job 11's drain migration is cancelled,
		// job 12's request times out unplaced.
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: vmNode("v1", "bv1")}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: vmNode("v2", "bv2")}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(3 * time.Hour), FirstID: 10, Jobs: []JobSpec{spec("m10"), spec("m11"), spec("m12")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(3 * time.Hour), Starts: []PlanStart{{JobID: 10, Node: "v1", CPUs: 1, MemMB: 256},
			{JobID: 11, Node: "v1", CPUs: 1, MemMB: 256}, {JobID: 12, Node: "v2", CPUs: 1, MemMB: 256}}}},
		{CmdMigrateJobs, &MigrateJobs{Now: t0.Add(3 * time.Hour), Requests: []MigrateRequest{{Job: 10, To: "v2", By: "alice", Token: "ta"},
			{Job: 12, Token: "tc"}}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(3 * time.Hour), Migrations: []PlanMigration{{JobID: 10, From: "v1", To: "v2", Migration: 1, CPUs: 1, MemMB: 256},
			{JobID: 11, From: "v1", To: "v2", Cause: "drain", By: "v1", Token: "tb", CPUs: 1, MemMB: 256}}}},
		{CmdMigrationReports, &MigrationReports{Now: t0.Add(3 * time.Hour), Node: "v2", Reports: []api.MigrationReport{
			{Migration: 1, Alloc: 7, Event: "prepared"}, {Migration: 3, Alloc: 8, Event: "prepared"}}}},
		{CmdMigrationReports, &MigrationReports{Now: t0.Add(3 * time.Hour), Node: "v1", Reports: []api.MigrationReport{
			{Migration: 1, Alloc: 4, Event: "streaming"}, {Migration: 1, Alloc: 4, Event: "sent", TotalMS: 120, StopMS: 4, Bytes: 1 << 20}}}},
		{CmdMigrationReports, &MigrationReports{Now: t0.Add(3 * time.Hour), Node: "v2", Reports: []api.MigrationReport{
			{Migration: 1, Alloc: 7, Event: "loaded"}, {Migration: 1, Alloc: 7, Event: "resumed", SwitchMS: 9}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(3 * time.Hour), Node: "v1", BootID: "bv1", Reports: []api.JobReport{
			{Alloc: 4, JobID: 10, StartIndex: 35, State: api.StateCancelled, Signal: 9}}}},
		{CmdCancelMigrations, &CancelMigrations{Now: t0.Add(3 * time.Hour), Jobs: []uint64{11}, By: "alice"}},
		{CmdExpireMigrations, &ExpireMigrations{Now: t0.Add(3*time.Hour + 2*time.Minute)}},
		{CmdPutReservation, &PutReservation{Now: t0, Create: true, By: "root", Reservation: api.Reservation{Name: "gone",
			StartTime: t0.Add(time.Hour), EndTime: t0.Add(2 * time.Hour), Nodes: []string{"n1"}, Users: []string{"alice"},
			Flags: []api.ResvFlag{api.ResvIgnoreJobs, api.ResvMaint}}}},
		{CmdPutReservation, &PutReservation{Now: t0, Create: true, By: "root", Reservation: api.Reservation{Name: "cap",
			StartTime: t0.Add(time.Hour), EndTime: t0.Add(2 * time.Hour), Nodes: []string{"n2"}, Accounts: []string{"phys"},
			NotUsers: []string{"bob"}, Flags: []api.ResvFlag{api.ResvDaily, api.ResvPurgeComp, api.ResvIgnoreJobs},
			PurgeAfter: 60, CPUs: 1, Parts: []api.ResvPart{{Node: "n2", CPUs: 1, MemMB: 2048}}}}},
		{CmdExpireReservations, &ExpireReservations{Now: t0.Add(3 * time.Hour), Names: []string{"gone", "cap"}}},
		// Checkpoints (checkpoints.go): job 30 saved on v1 and restored on
		// v2 (a shared checkpoint directory), job 31's save failing.
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(4 * time.Hour), FirstID: 30, Jobs: []JobSpec{spec("c30"), spec("c31")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(4 * time.Hour), Starts: []PlanStart{{JobID: 30, Node: "v1", CPUs: 1, MemMB: 256}, {JobID: 31, Node: "v1", CPUs: 1, MemMB: 256}}}},
		{CmdCheckpointJobs, &CheckpointJobs{Now: t0.Add(4 * time.Hour), IDs: []uint64{30, 31}, By: "alice"}},
		{CmdCheckpointReports, &CheckpointReports{Now: t0.Add(4 * time.Hour), Node: "v1", Reports: []api.CheckpointReport{
			{Job: 30, Alloc: 9, Event: "saved", Path: "/shared/checkpoints/30-9.ckpt", Size: 1 << 20, SHA256: "ab01", TookMS: 300},
			{Job: 31, Alloc: 10, Event: "failed", Message: "no room"}}}},
		{CmdJobReports, &JobReports{Now: t0.Add(4 * time.Hour), Node: "v1", BootID: "bv1", Reports: []api.JobReport{
			{Alloc: 9, JobID: 30, StartIndex: 48, State: api.StateCancelled, Signal: 9}}}},
		{CmdRestoreJobs, &RestoreJobs{Now: t0.Add(5 * time.Hour), IDs: []uint64{30}, To: "v2", By: "alice"}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(5 * time.Hour), Starts: []PlanStart{{JobID: 30, Node: "v2", CPUs: 1, MemMB: 256}}}},
		{CmdCheckpointReports, &CheckpointReports{Now: t0.Add(5 * time.Hour), Node: "v2", Reports: []api.CheckpointReport{
			{Job: 30, Alloc: 11, Event: "restored", TookMS: 200}}}},
		{CmdSetNodeFeatures, &SetNodeFeatures{Node: "n1", Features: []string{"ib", "intel"}, By: "oscar"}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(3 * time.Hour), FirstID: 20, Jobs: []JobSpec{func() JobSpec {
			j := spec("wide")
			j.Nodes, j.NodesMax, j.NTasks, j.NTasksPerNode, j.Exclusive = 2, 4, 0, 2, true
			j.NodeList, j.Exclude, j.Constraint, j.Distribution, j.SpreadJob, j.Contiguous = "n1", "n2", "ib&intel", "cyclic", true, true
			return j
		}()}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(3 * time.Hour), FirstID: 21, Jobs: []JobSpec{spec("stepping")}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(3 * time.Hour), Starts: []PlanStart{{JobID: 21, Node: "k1", CPUs: 1, MemMB: 256}}}},
	}
	// A step of job 21's run, which the plan just above started.
	cmds = append(cmds, struct {
		t CommandType
		p any
	}{CmdSteps, &Steps{Now: t0.Add(3 * time.Hour), Begin: []StepBegin{{Job: 21, Run: uint64(len(cmds)), Name: "hostname", Nodes: []string{"k1"}, NTasks: 1}}}})
	// Job notifications (mail.go) and scontrol top, after the step.
	cmds = append(cmds, []struct {
		t CommandType
		p any
	}{
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "mk1", CPUs: 1, MemMB: 1024, Runner: "process", BootID: "mk"}}},
		{CmdSetConfig, &SetConfig{Settings: [][2]string{{"MailWebhook", "https://hooks.example/n"}}}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0.Add(3 * time.Hour), FirstID: 22, Jobs: []JobSpec{func() JobSpec {
			sp := mailSpec("mailed", api.MailBegin, api.MailTimeLimit50)
			sp.TimeLimit = 100
			return sp
		}()}}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(3 * time.Hour), Starts: []PlanStart{{JobID: 22, Node: "mk1", CPUs: 1, MemMB: 256}}}},
		{CmdMailTimeEvents, &MailTimeEvents{Now: t0.Add(3*time.Hour + time.Minute), Jobs: []uint64{22}}},
		{CmdClaimNotices, &ClaimNotices{Now: t0.Add(3*time.Hour + time.Minute), IDs: []uint64{1, 2}, By: "c1"}},
		{CmdNoticesDone, &NoticesDone{Now: t0.Add(3*time.Hour + time.Minute), Marks: []NoticeMark{{ID: 1, Sinks: SinkMailProg | SinkWebhook}, {ID: 2, Sinks: SinkMailProg}}}},
		{CmdTopJobs, &TopJobs{Now: t0.Add(4 * time.Hour), Nice: []JobNice{{ID: 3, Nice: -10}, {ID: 99, Nice: 2}}, By: "alice"}},
	}...)
	var logs []*logEntry
	for i, c := range cmds {
		logs = append(logs, entry(t, uint64(i+1), c.t, c.p))
	}
	return logs
}

// scene is a small cluster to apply one more entry to: nodes n1 and n2 (2
// CPUs, 4 GiB each), jobs 1 (running on n1), 2 (running on n2, --requeue),
// 3 (pending) and 4 (held), all at index 3. next applies an entry at the
// following index and returns its result.
func scene(t *testing.T) (r *replica, next func(CommandType, any) any) {
	t.Helper()
	req := spec("b")
	req.Requeue = true
	held := spec("d")
	held.Hold = true
	r = newReplica()
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, BootID: "b1"}}),
		entry(t, 2, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n2", CPUs: 2, MemMB: 4096, BootID: "b2"}}),
		entry(t, 3, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), req, spec("c"), held}}),
		entry(t, 4, CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "n2", CPUs: 1, MemMB: 512}}}),
	})
	index := uint64(4)
	return r, func(ct CommandType, p any) any {
		index++
		return r.Apply(entry(t, index, ct, p))
	}
}

// expect compares named values: got and want pairs.
func expect(t *testing.T, checks map[string][2]any) {
	t.Helper()
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: got %v, want %v", name, c[0], c[1])
		}
	}
}

// applyTests holds one apply test per command type.
var applyTests = map[CommandType]func(t *testing.T){
	CmdSubmitJobs: func(t *testing.T) {
		r, next := scene(t)
		arr := spec("arr")
		arr.Array = &api.ArraySpec{Raw: "0-3", Ranges: []api.ArrayRange{{First: 0, Last: 3, Step: 1}}}
		res := next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 10, Jobs: []JobSpec{spec("x"), arr}}).(*SubmitResult)
		s := r.s
		expect(t, map[string][2]any{
			"first id":          {res.Results[0].JobID, uint64(10)},
			"pending":           {s.Jobs[10].State, api.StatePending},
			"array record":      {s.Jobs[11].ArrayJobID, uint64(11)},
			"array tasks":       {s.Jobs[11].ArrayPending.Len(), 4},
			"next job id":       {s.NextJobID, uint64(12)},
			"request id kept":   {s.Requests.Len(), 6},
			"held job's reason": {s.Jobs[4].Reason, api.ReasonJobHeldUser},
		})
	},
	CmdCancelJobs: func(t *testing.T) {
		r, next := scene(t)
		res := next(CmdCancelJobs, &CancelJobs{Now: t0.Add(time.Minute), IDs: []uint64{1, 3, 99}, By: "bob"}).(*IDsResult)
		s := r.s
		expect(t, map[string][2]any{
			"changed":                {len(res.Changed), 2},
			"unknown job refused":    {res.Errors[99], "job 99: no such job"},
			"running job completing": {s.Jobs[1].State, api.StateCompleting},
			"its final state":        {run(s, 1).StopAs, api.StateCancelled},
			"pending job cancelled":  {s.Jobs[3].State, api.StateCancelled},
			"who cancelled":          {s.Jobs[3].Message, "cancelled by bob"},
			"node holds job 1":       {s.Nodes["n1"].AllocCPUs, 1},
		})
	},
	CmdHoldRelease: func(t *testing.T) {
		r, next := scene(t)
		next(CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{3}, Hold: true})
		res := next(CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{4, 1}, Hold: false}).(*IDsResult)
		s := r.s
		held := s.Jobs[3].Reason
		next(CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{4}, Hold: true, By: "root", Admin: true})
		byUser := next(CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{4}, Hold: false, By: "alice"}).(*IDsResult)
		adminHeld := s.Jobs[4].Reason
		byAdmin := next(CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{4}, Hold: false, By: "root", Admin: true}).(*IDsResult)
		expect(t, map[string][2]any{
			"admin hold":                 {adminHeld, api.ReasonJobHeldAdmin},
			"the user cannot release it": {strings.Contains(byUser.Errors[4], "only an administrator"), true},
			"an administrator can":       {len(byAdmin.Changed) == 1 && s.Jobs[4].Reason == api.ReasonNone, true},
			"held":                       {held, api.ReasonJobHeldUser},
			"released":                   {s.Jobs[4].Spec.Hold, false},
			"release's reason":           {s.Jobs[4].Reason, api.ReasonNone},
			"running refused":            {strings.Contains(res.Errors[1], "only pending jobs"), true},
			"jobs changed once":          {len(res.Changed), 1},
		})
	},
	CmdApplyPlan: func(t *testing.T) {
		r, next := scene(t)
		res := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Minute), Starts: []PlanStart{{JobID: 3, Node: "n1", CPUs: 1, MemMB: 512}},
			Reasons: []PlanReason{{JobID: 4, Reason: api.ReasonPriority, Start: t0.Add(time.Hour)}}}).(*PlanResult)
		s := r.s
		expect(t, map[string][2]any{
			"started":         {len(res.Started), 1},
			"running":         {s.Jobs[3].State, api.StateRunning},
			"on its node":     {run(s, 3).Node, "n1"},
			"start index":     {run(s, 3).StartIndex, uint64(5)},
			"node full":       {s.Nodes["n1"].AllocCPUs, 2},
			"reason set":      {s.Jobs[4].Reason, api.ReasonPriority},
			"estimated start": {s.Jobs[4].EstStart, t0.Add(time.Hour)},
		})
	},
	CmdRegisterNode: func(t *testing.T) {
		r, next := scene(t)
		next(CmdRegisterNode, &RegisterNode{Now: t0.Add(time.Minute), Info: api.NodeInfo{Name: "n3", CPUs: 8, MemMB: 1024, BootID: "x"}})
		next(CmdRegisterNode, &RegisterNode{Now: t0.Add(time.Minute), Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, BootID: "b1"}})
		next(CmdRegisterNode, &RegisterNode{Now: t0.Add(time.Minute), Info: api.NodeInfo{Name: "n2", CPUs: 2, MemMB: 4096, BootID: "b2-new"}})
		s := r.s
		expect(t, map[string][2]any{
			"new node":                         {s.Nodes["n3"].CPUs, 8},
			"same daemon keeps its job":        {s.Jobs[1].State, api.StateRunning},
			"restarted daemon lost its job":    {s.Jobs[2].State, api.StatePending},
			"which was requeued":               {s.Jobs[2].Restarts, 1},
			"restarted node holds nothing now": {s.Nodes["n2"].AllocCPUs, 0},
		})
	},
	CmdNodeHeartbeats: func(t *testing.T) {
		r, next := scene(t)
		next(CmdNodeHeartbeats, &NodeHeartbeats{Seen: map[string]time.Time{"n1": t0.Add(time.Minute), "n9": t0}})
		next(CmdNodeHeartbeats, &NodeHeartbeats{Seen: map[string]time.Time{"n1": t0.Add(time.Second)}})
		expect(t, map[string][2]any{
			"last seen moves forward only": {r.s.Nodes["n1"].LastSeen, t0.Add(time.Minute)},
			"unknown node not added":       {len(r.s.Nodes), 2},
		})
	},
	CmdJobReports: func(t *testing.T) {
		r, next := scene(t)
		res := next(CmdJobReports, &JobReports{Now: t0.Add(time.Minute), Node: "n1", BootID: "b1", Reports: []api.JobReport{
			{JobID: 1, StartIndex: 4, State: api.StateFailed, ExitCode: 3}, {JobID: 2, StartIndex: 4, State: api.StateCompleted}}}).(*IDsResult)
		s := r.s
		expect(t, map[string][2]any{
			"applied":                 {len(res.Changed), 1},
			"another node's job":      {res.Errors[2], "stale report"},
			"failed":                  {s.Jobs[1].State, api.StateFailed},
			"exit code":               {s.Jobs[1].ExitCode, 3},
			"end time":                {s.Jobs[1].EndTime, t0.Add(time.Minute)},
			"node freed":              {s.Nodes["n1"].AllocCPUs, 0},
			"other node's job runs":   {s.Jobs[2].State, api.StateRunning},
			"usage charged to alice":  {s.Usage[UserKey{User: "alice"}].Raw > 0, true},
			"usage stamped with time": {s.Usage[UserKey{User: "alice"}].At, t0.Add(time.Minute)},
		})
	},
	CmdNodeDown: func(t *testing.T) {
		r, next := scene(t)
		next(CmdNodeDown, &NodeDown{Now: t0.Add(time.Minute), Nodes: []string{"n1", "n2"}, Reason: "Not responding"})
		s := r.s
		expect(t, map[string][2]any{
			"down":                  {s.Nodes["n1"].State(), api.NodeDown},
			"reason":                {s.Nodes["n1"].Reason, "Not responding"},
			"set by the controller": {s.Nodes["n1"].ReasonUser, "root"},
			"at the time it went":   {s.Nodes["n1"].ReasonTime, t0.Add(time.Minute)},
			"plain job lost":        {s.Jobs[1].State, api.StateNodeFail},
			"--requeue job queued":  {s.Jobs[2].State, api.StatePending},
			"nothing allocated":     {s.Nodes["n2"].AllocCPUs, 0},
		})
	},
	CmdNodeDrain: func(t *testing.T) {
		r, next := scene(t)
		next(CmdNodeDrain, &NodeDrain{Now: t0, Node: "n1", Drain: true, Reason: "disk", By: "oscar"})
		next(CmdNodeDrain, &NodeDrain{Now: t0, Node: "n2", Drain: true, Reason: "fan"})
		next(CmdNodeDrain, &NodeDrain{Now: t0, Node: "n2", Drain: false})
		err, _ := next(CmdNodeDrain, &NodeDrain{Now: t0, Node: "n9", Drain: true, Reason: "x"}).(error)
		resumed := *r.s.Nodes["n2"]
		health := func(drain bool, reason string) {
			next(CmdNodeDrain, &NodeDrain{Now: t0, Node: "n2", Drain: drain, Reason: reason, By: api.HealthCheckUser, Health: true})
		}
		health(true, "health check failed: disk full")
		checkDrained, checkReason := r.s.Nodes["n2"].Drain, r.s.Nodes["n2"].Reason
		health(false, "")
		checkResumed := !r.s.Nodes["n2"].Drain
		next(CmdNodeDrain, &NodeDrain{Now: t0, Node: "n2", Drain: true, Reason: "fan", By: "oscar"})
		health(true, "health check failed: disk full")
		health(false, "")
		s := r.s
		expect(t, map[string][2]any{
			"the check drains":                     {checkDrained, true},
			"with its output":                      {checkReason, "health check failed: disk full"},
			"and resumes what it drained":          {checkResumed, true},
			"an operator's drain keeps its reason": {s.Nodes["n2"].Reason, "fan"},
			"and is not resumed by the check":      {s.Nodes["n2"].Drain && s.Nodes["n2"].ReasonUser == "oscar", true},
			"draining with a job":                  {s.Nodes["n1"].State(), api.NodeDraining},
			"its reason":                           {s.Nodes["n1"].Reason, "disk"},
			"who drained it":                       {s.Nodes["n1"].ReasonUser, "oscar"},
			"when":                                 {s.Nodes["n1"].ReasonTime, t0},
			"resumed":                              {resumed.Drain, false},
			"resumed's reason":                     {resumed.Reason, ""},
			"nobody's any more":                    {resumed.ReasonUser, ""},
			"unknown node":                         {err != nil && strings.Contains(err.Error(), "no such node"), true},
		})
	},
	CmdSetMember: func(t *testing.T) {
		r, next := scene(t)
		next(CmdSetMember, &SetMember{ID: "c1", HTTPAddr: "127.0.0.1:1"})
		next(CmdSetMember, &SetMember{ID: "c1", HTTPAddr: "127.0.0.1:2"})
		expect(t, map[string][2]any{"member's address": {r.s.Members["c1"], "127.0.0.1:2"}})
	},
	CmdSuspendJobs: func(t *testing.T) {
		r, next := scene(t)
		next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(10 * time.Second), IDs: []uint64{1}, Suspend: true})
		mid := r.s.Jobs[1].State
		res := next(CmdSuspendJobs, &SuspendJobs{Now: t0.Add(13 * time.Second), IDs: []uint64{1, 3}, Suspend: false}).(*IDsResult)
		s := r.s
		expect(t, map[string][2]any{
			"suspended":          {mid, api.StateSuspended},
			"resumed":            {s.Jobs[1].State, api.StateRunning},
			"paused time":        {run(s, 1).SuspendedFor, 3 * time.Second},
			"pending not resume": {strings.Contains(res.Errors[3], "only suspended jobs"), true},
		})
	},
	CmdRequeueJobs: func(t *testing.T) {
		r, next := scene(t)
		next(CmdJobReports, &JobReports{Now: t0.Add(5 * time.Second), Node: "n2", BootID: "b2",
			Reports: []api.JobReport{{JobID: 2, StartIndex: 4, State: api.StateFailed, ExitCode: 3}}})
		res := next(CmdRequeueJobs, &RequeueJobs{Now: t0.Add(10 * time.Second), IDs: []uint64{1, 2, 3}, Hold: true, By: "bob"}).(*IDsResult)
		s := r.s
		stopping, stopAs := s.Jobs[1].State, run(s, 1).StopAs
		next(CmdJobReports, &JobReports{Now: t0.Add(11 * time.Second), Node: "n1", BootID: "b1",
			Reports: []api.JobReport{{JobID: 1, StartIndex: 4, State: api.StateCancelled}}})
		again := next(CmdRequeueJobs, &RequeueJobs{Now: t0.Add(12 * time.Second), IDs: []uint64{2}, By: "root", Admin: true}).(*IDsResult)
		expect(t, map[string][2]any{
			"changed":                    {len(res.Changed), 2},
			"pending job refused":        {strings.Contains(res.Errors[3], "pending already"), true},
			"running job stops first":    {stopping, api.StateCompleting},
			"to be requeued":             {stopAs, api.StatePending},
			"then pending":               {s.Jobs[1].State, api.StatePending},
			"held as asked":              {s.Jobs[1].Spec.Hold && s.Jobs[1].Reason == api.ReasonJobHeldUser, true},
			"its node is free":           {s.Nodes["n1"].AllocCPUs, 0},
			"restarts":                   {s.Jobs[1].Restarts, 1},
			"who asked":                  {s.Jobs[1].Message, "requeued by bob"},
			"failed job pending at once": {s.Jobs[2].State, api.StatePending},
			"its exit code reset":        {s.Jobs[2].ExitCode, 0},
			"second requeue refused":     {strings.Contains(again.Errors[2], "pending already"), true},
		})
	},
	CmdSetConfig: func(t *testing.T) {
		r, next := scene(t)
		next(CmdSetConfig, &SetConfig{Settings: [][2]string{{"PriorityWeightAge", "7"}, {"FairshareAlgorithm", "classic"}}})
		err, _ := next(CmdSetConfig, &SetConfig{Settings: [][2]string{{"PriorityWeightQOS", "1"}, {"NoSuchSetting", "1"}}}).(error)
		s := r.s
		expect(t, map[string][2]any{
			"weight":                    {s.Config.Weights.Age, int64(7)},
			"algorithm":                 {s.Config.Fairshare, "classic"},
			"bad setting refused":       {err != nil, true},
			"nothing of it was applied": {s.Config.Weights.QOS, api.DefaultSchedConfig().Weights.QOS},
		})
	},
	CmdPutQOS: func(t *testing.T) {
		r, next := scene(t)
		next(CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "high", Priority: 10, PreemptMode: "Requeue"}})
		err, _ := next(CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "loop", Preempt: []string{"loop"}}}).(error)
		next(CmdPutQOS, &PutQOS{QOS: api.QOS{Name: "burstable"}, Delete: true})
		s := r.s
		expect(t, map[string][2]any{
			"added":                 {s.QOS["high"].Priority, int64(10)},
			"mode stored canonical": {s.QOS["high"].PreemptMode, api.PreemptRequeue},
			"self-preemption":       {err != nil, true},
			"deleted":               {s.QOS["burstable"] == nil, true},
		})
	},
	CmdPutAccount: func(t *testing.T) {
		r, next := scene(t)
		next(CmdPutAccount, &PutAccount{Account: api.Account{Name: "phys", Shares: 2}})
		next(CmdPutAccount, &PutAccount{Account: api.Account{Name: "hep", Parent: "phys", Shares: 1}})
		err, _ := next(CmdPutAccount, &PutAccount{Account: api.Account{Name: "bio", Parent: "nowhere"}}).(error)
		s := r.s
		expect(t, map[string][2]any{
			"tenant under root":  {s.Accounts["phys"].Parent, "root"},
			"account under it":   {s.Accounts["hep"].Parent, "phys"},
			"missing parent":     {err != nil, true},
			"refused not stored": {s.Accounts["bio"] == nil, true},
		})
	},
	CmdPutUser: func(t *testing.T) {
		r, next := scene(t)
		next(CmdPutAccount, &PutAccount{Account: api.Account{Name: "phys", Shares: 2}})
		next(CmdPutUser, &PutUser{User: api.AccountUser{Account: "phys", Name: "alice", Shares: 3}})
		err, _ := next(CmdPutUser, &PutUser{User: api.AccountUser{Account: "none", Name: "bob"}}).(error)
		s := r.s
		expect(t, map[string][2]any{
			"association":     {s.Users[UserKey{Account: "phys", User: "alice"}].Shares, 3.0},
			"default account": {s.DefaultAccount("alice"), "phys"},
			"unknown account": {err != nil, true},
		})
	},
	CmdUpdateJob: func(t *testing.T) {
		r, next := scene(t)
		dep := &Dependency{Raw: "afterok:1", Clauses: []DepClause{{Type: "afterok", JobIDs: []string{"1"}}}}
		next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 3, Dependency: dep})
		err, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 1, Dependency: dep}).(error)
		s := r.s
		name, limit, part, three, mem, throttle := "renamed", int64(7200), "debug", 3, int64(2048), 2
		begin := t0.Add(time.Hour)
		held := s.Jobs[4].Spec
		nodeIndex := s.Nodes["n1"].AllocIndex
		renamed, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 1, Changes: &JobEdits{TimeLimit: &limit, Name: &name}}).(error)
		pendingOnly, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 1, Changes: &JobEdits{Partition: &part}}).(error)
		moved, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 3, Changes: &JobEdits{Partition: &part, NTasks: &three, MemPerNode: &mem, Begin: &begin}}).(error)
		noArray, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 3, Changes: &JobEdits{Throttle: &throttle}}).(error)
		heldKept, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 4, Changes: &JobEdits{Name: &name}}).(error)
		next(CmdJobReports, &JobReports{Now: t0, Node: "n2", BootID: "b2", Reports: []api.JobReport{{JobID: 2, StartIndex: 4, State: api.StateCompleted}}})
		ended, _ := next(CmdUpdateJob, &UpdateJob{Now: t0, ID: 2, Changes: &JobEdits{Name: &name}}).(error)
		expect(t, map[string][2]any{
			"dependency set":                 {s.Jobs[3].Spec.Dependency.Raw, "afterok:1"},
			"running refused":                {err != nil && strings.Contains(err.Error(), "only pending jobs"), true},
			"a running job's limit and name": {renamed == nil && r.s.Jobs[1].Spec.TimeLimit == 7200 && r.s.Jobs[1].Spec.Name == "renamed", true},
			"its node told":                  {r.s.Nodes["n1"].AllocIndex > nodeIndex, true},
			"a pending-only change refused":  {pendingOnly != nil && strings.Contains(pendingOnly.Error(), "Partition can change only while it is pending"), true},
			"a pending job's changes":        {moved == nil && r.s.Jobs[3].Spec.Partition == "debug" && r.s.Jobs[3].Spec.NTasks == 3 && r.s.Jobs[3].Spec.MemPerNode == 2048, true},
			"its begin":                      {r.s.Jobs[3].Spec.Begin.Equal(begin), true},
			"its dependency kept":            {r.s.Jobs[3].Spec.Dependency.Raw, "afterok:1"},
			"a throttle needs an array":      {noArray != nil && strings.Contains(noArray.Error(), "no array"), true},
			"a held job keeps its reason":    {heldKept == nil && r.s.Jobs[4].Reason == api.ReasonJobHeldUser, true},
			"the old spec untouched":         {held.Name, "d"},
			"an ended job refused":           {ended != nil && strings.Contains(ended.Error(), "has ended"), true},
		})
	},
	CmdPurgeJobs: func(t *testing.T) {
		r, next := scene(t)
		next(CmdCancelJobs, &CancelJobs{Now: t0.Add(time.Second), IDs: []uint64{3}})
		early := next(CmdPurgeJobs, &PurgeJobs{Now: t0.Add(time.Minute)}).(*PurgeResult)
		late := next(CmdPurgeJobs, &PurgeJobs{Now: t0.Add(time.Hour)}).(*PurgeResult)
		expect(t, map[string][2]any{
			"within MinJobAge kept": {early.Jobs, 0},
			"past it purged":        {late.Jobs, 1},
			"gone":                  {r.s.Jobs[3] == nil, true},
			"others stay":           {len(r.s.Jobs), 3},
		})
	},
}

func init() {
	applyTests[CmdPutPartition] = func(t *testing.T) {
		r, next := scene(t)
		next(CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "batch", Default: true, State: "drain", MaxTime: 3600, PreemptMode: "Suspend"}})
		next(CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "debug", Default: true, PriorityTier: 2}})
		bad, _ := next(CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "x", MaxTime: 60, DefaultTime: 120}}).(error)
		s := r.s
		batch := *s.Partitions["batch"]
		dbg := spec("dbg")
		dbg.Partition = "debug"
		next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 10, Jobs: []JobSpec{dbg}})
		busy, _ := next(CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "debug"}, Delete: true}).(error)
		next(CmdPutPartition, &PutPartition{Partition: api.Partition{Name: "batch"}, Delete: true})
		expect(t, map[string][2]any{
			"stored in canonical form": {batch.State, api.PartitionDrain},
			"mode canonical":           {batch.PreemptMode, api.PreemptSuspend},
			"one default":              {batch.Default, false},
			"the new default":          {s.Partitions["debug"].Default, true},
			"DefaultTime over MaxTime": {bad != nil, true},
			"in use, not deleted":      {busy != nil && strings.Contains(busy.Error(), "job 10"), true},
			"unused, deleted":          {s.Partitions["batch"] == nil, true},
			"nodes name batch":         {fmt.Sprint(s.PartitionList()[1].Name, s.PartitionList()[1].Nodes), "batch[n1 n2]"},
		})
	}
	applyTests[CmdPutToken] = func(t *testing.T) {
		r, next := scene(t)
		tok := TokenRecord{Hash: HashSecret("secret"), Token: api.Token{ID: "t1", User: "alice", Role: api.RoleUser, Created: t0, Expires: t0.Add(time.Hour)}}
		next(CmdPutToken, &PutToken{Now: t0, Token: tok})
		dup, _ := next(CmdPutToken, &PutToken{Now: t0, Token: tok}).(error)
		renew := tok
		renew.Expires, renew.Hash, renew.User = t0.Add(48*time.Hour), "", "mallory"
		next(CmdPutToken, &PutToken{Now: t0.Add(time.Minute), Token: renew, Renew: true})
		late, _ := next(CmdPutToken, &PutToken{Now: t0.Add(49 * time.Hour), Token: renew, Renew: true}).(error)
		s := r.s
		good, goodErr := s.TokenFor("t1", "secret", t0.Add(47*time.Hour))
		_, wrongErr := s.TokenFor("t1", "guess", t0.Add(time.Minute))
		_, expiredErr := s.TokenFor("t1", "secret", t0.Add(48*time.Hour))
		expect(t, map[string][2]any{
			"a second create refused": {dup != nil && strings.Contains(dup.Error(), "exists"), true},
			"renewed":                 {s.Tokens["t1"].Expires, t0.Add(48 * time.Hour)},
			"renewal keeps the owner": {s.Tokens["t1"].User, "alice"},
			"renewal keeps the hash":  {s.Tokens["t1"].Hash, HashSecret("secret")},
			"the secret matches":      {goodErr == nil && good.User == "alice", true},
			"a wrong secret refused":  {wrongErr != nil, true},
			"expired refused":         {expiredErr != nil && strings.Contains(expiredErr.Error(), "expired"), true},
			"renewal after expiry":    {late != nil && strings.Contains(late.Error(), "expired"), true},
			"forgotten 30 days after": {func() bool {
				next(CmdRevokeToken, &RevokeToken{Now: t0.Add(800 * time.Hour), ID: "t1"})
				return s.Tokens["t1"] == nil
			}(), true},
		})
	}
	applyTests[CmdRevokeToken] = func(t *testing.T) {
		r, next := scene(t)
		next(CmdPutToken, &PutToken{Now: t0, Token: TokenRecord{Hash: HashSecret("s"), Token: api.Token{ID: "t1", User: "alice", Expires: t0.Add(time.Hour)}}})
		next(CmdRevokeToken, &RevokeToken{Now: t0.Add(time.Minute), ID: "t1", By: "root"})
		again := next(CmdRevokeToken, &RevokeToken{Now: t0.Add(2 * time.Minute), ID: "t1", By: "root"})
		unknown, _ := next(CmdRevokeToken, &RevokeToken{Now: t0, ID: "nope"}).(error)
		renew, _ := next(CmdPutToken, &PutToken{Now: t0.Add(3 * time.Minute), Renew: true, Token: TokenRecord{Token: api.Token{ID: "t1", User: "alice", Expires: t0.Add(9 * time.Hour)}}}).(error)
		_, err := r.s.TokenFor("t1", "s", t0.Add(2*time.Minute))
		expect(t, map[string][2]any{
			"revoked at":              {r.s.Tokens["t1"].Revoked, t0.Add(time.Minute)},
			"twice is once":           {again, nil},
			"unknown refused":         {unknown != nil, true},
			"no renewal once revoked": {renew != nil, true},
			"refused when used":       {err != nil && strings.Contains(err.Error(), "revoked"), true},
		})
	}
	applyTests[CmdSetRole] = func(t *testing.T) {
		r, next := scene(t)
		next(CmdPutAccount, &PutAccount{Account: api.Account{Name: "phys", Parent: "root"}})
		next(CmdPutAccount, &PutAccount{Account: api.Account{Name: "hep", Parent: "phys"}})
		next(CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "carol", Role: api.RoleCoordinator, Accounts: []string{"phys"}}})
		noAcct, _ := next(CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "x", Role: api.RoleCoordinator}}).(error)
		badAcct, _ := next(CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "x", Role: api.RoleCoordinator, Accounts: []string{"nope"}}}).(error)
		badRole, _ := next(CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "x", Role: "root"}}).(error)
		next(CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "dave", Role: api.RoleOperator}})
		next(CmdSetRole, &SetRole{Grant: api.RoleGrant{User: "dave"}, Delete: true})
		s := r.s
		expect(t, map[string][2]any{
			"coordinator":                  {s.Roles["carol"].Role, api.RoleCoordinator},
			"a coordinator needs accounts": {noAcct != nil, true},
			"unknown account":              {badAcct != nil && strings.Contains(badAcct.Error(), "nope"), true},
			"unknown role":                 {badRole != nil, true},
			"deleted":                      {s.Roles["dave"] == nil, true},
			"tenant of hep":                {s.Tenant("hep"), "phys"},
			"hep under phys":               {s.Under("hep", "phys"), true},
			"phys not under hep":           {s.Under("phys", "hep"), false},
		})
	}
	applyTests[CmdAuditRecords] = func(t *testing.T) {
		r, next := scene(t)
		s := r.s
		first := next(CmdAuditRecords, auditEntry(s.AuditHeads(), t0, "phys", "phys", ""))
		stale := auditEntry(map[string]AuditHead{}, t0.Add(time.Second), "phys") // chained from heads that moved
		staleErr, _ := next(CmdAuditRecords, stale).(error)
		altered := auditEntry(s.AuditHeads(), t0.Add(time.Second), "bio")
		altered.Records[0].Principal = "user mallory"
		alteredErr, _ := next(CmdAuditRecords, altered).(error)
		later := auditEntry(s.AuditHeads(), t0.Add(48*time.Hour), "bio", "bio")
		later.Retention = 24 * time.Hour
		next(CmdAuditRecords, later)
		kept := len(s.Audit)
		more := auditEntry(s.AuditHeads(), t0.Add(49*time.Hour), "phys")
		more.Keep = 2
		next(CmdAuditRecords, more)
		expect(t, map[string][2]any{
			"appended":               {first, nil},
			"a stale chain refused":  {staleErr != nil && strings.Contains(staleErr.Error(), "does not continue"), true},
			"an altered one refused": {alteredErr != nil && strings.Contains(alteredErr.Error(), "hash"), true},
			"older than retention":   {kept, 2},
			"beyond keep":            {len(s.Audit), 2},
			"phys's chain goes on":   {s.AuditHeads()["phys"].Seq, uint64(3)},
			"the heads survive":      {s.AuditHeads()[""].Seq, uint64(1)},
			"what is kept verifies":  {len(api.VerifyAudit(s.Audit, s.AuditHeads())), 0},
		})
	}
	applyTests[CmdForgetNodeKey] = func(t *testing.T) {
		r, next := scene(t)
		info := api.NodeInfo{Name: "k1", CPUs: 1, MemMB: 1024, Runner: "process", BootID: "k"}
		next(CmdRegisterNode, &RegisterNode{Now: t0, Info: info, Key: "first"})
		again := next(CmdRegisterNode, &RegisterNode{Now: t0, Info: info, Key: "first"})
		other, _ := next(CmdRegisterNode, &RegisterNode{Now: t0, Info: info, Key: "second"}).(error)
		keyless := next(CmdRegisterNode, &RegisterNode{Now: t0, Info: info})
		kept := r.s.Nodes["k1"].Key
		next(CmdForgetNodeKey, &ForgetNodeKey{Node: "k1", By: "oscar"})
		unknown, _ := next(CmdForgetNodeKey, &ForgetNodeKey{Node: "nope"}).(error)
		renewed := next(CmdRegisterNode, &RegisterNode{Now: t0, Info: info, Key: "second"})
		expect(t, map[string][2]any{
			"the same key again":          {again, nil},
			"another key refused":         {other != nil && strings.Contains(other.Error(), "forget-key"), true},
			"no key keeps the pinned one": {keyless == nil && kept == "first", true},
			"unknown node refused":        {unknown != nil, true},
			"a new key after forgetting":  {renewed == nil && r.s.Nodes["k1"].Key == "second", true},
		})
	}
	applyTests[CmdUseJoinToken] = func(t *testing.T) {
		r, next := scene(t)
		once := TokenRecord{Hash: HashSecret("a"), Token: api.Token{ID: "once", User: "root", Join: true, Expires: t0.Add(time.Hour), Uses: 3}}
		many := TokenRecord{Hash: HashSecret("b"), Token: api.Token{ID: "many", User: "root", Join: true, Reusable: true, Expires: t0.Add(time.Hour)}}
		api1 := TokenRecord{Hash: HashSecret("c"), Token: api.Token{ID: "api", User: "alice", Expires: t0.Add(time.Hour)}}
		for _, tok := range []TokenRecord{once, many, api1} {
			next(CmdPutToken, &PutToken{Now: t0, Token: tok})
		}
		s := r.s
		fresh := s.Tokens["once"].Uses
		checkBefore := s.CheckJoin("once", "a", t0)
		first := next(CmdUseJoinToken, &UseJoinToken{Now: t0, ID: "once", Node: "n7"})
		second, _ := next(CmdUseJoinToken, &UseJoinToken{Now: t0, ID: "once", Node: "n8"}).(error)
		next(CmdUseJoinToken, &UseJoinToken{Now: t0, ID: "many", Node: "n7"})
		reused := next(CmdUseJoinToken, &UseJoinToken{Now: t0, ID: "many", Node: "n8"})
		late, _ := next(CmdUseJoinToken, &UseJoinToken{Now: t0.Add(2 * time.Hour), ID: "many", Node: "n9"}).(error)
		notJoin, _ := next(CmdUseJoinToken, &UseJoinToken{Now: t0, ID: "api", Node: "n9"}).(error)
		expect(t, map[string][2]any{
			"a creation's uses are 0":    {fresh, 0},
			"usable before":              {checkBefore, nil},
			"first use":                  {first, nil},
			"second use of a single-use": {second != nil && strings.Contains(second.Error(), "used already"), true},
			"checked as used":            {s.CheckJoin("once", "a", t0) != nil, true},
			"reusable twice":             {reused == nil && s.Tokens["many"].Uses == 2, true},
			"expired refused":            {late != nil, true},
			"an API token is no join":    {notJoin != nil && s.CheckJoin("api", "c", t0) != nil, true},
			"a wrong secret is no join":  {s.CheckJoin("many", "x", t0) != nil, true},
		})
	}
	applyTests[CmdNodeAttest] = func(t *testing.T) {
		r, next := scene(t)
		s := r.s
		next(CmdNodeAttest, &NodeAttest{Now: t0, Node: "n1", OK: true, EK: "fp", AK: []byte{7}})
		passed := *s.Attestations["n1"]
		drainedAfterPass := s.Nodes["n1"].Drain
		next(CmdNodeAttest, &NodeAttest{Now: t0.Add(time.Hour), Node: "n1", Reason: "stale or replayed nonce"})
		early := next(CmdNodeAttest, &NodeAttest{Now: t0, Node: "n9", Reason: "unknown EK"})
		noName, _ := next(CmdNodeAttest, &NodeAttest{Now: t0}).(error)
		failed := s.Attestations["n1"]
		expect(t, map[string][2]any{
			"passed":                    {passed.OK && passed.EK == "fp", true},
			"a pass drains nothing":     {drainedAfterPass, false},
			"a failure drains the node": {s.Nodes["n1"].Drain, true},
			"with the reason":           {s.Nodes["n1"].Reason, "attestation failed: stale or replayed nonce"},
			"the trusted key stays":     {failed.OK == false && failed.EK == "fp" && len(failed.AK) == 1, true},
			"a node not registered yet": {early == nil && s.Attestations["n9"] != nil && s.Nodes["n9"] == nil, true},
			"a nameless attestation":    {noName != nil, true},
		})
	}
	applyTests[CmdSeedConfig] = func(t *testing.T) {
		r, next := scene(t)
		first := next(CmdSeedConfig, &SeedConfig{Partitions: []api.Partition{{Name: "batch", Default: true}, {Name: "debug", MaxTime: 60}}, DefMemPerCPU: 2048, Policy: "fcfs",
			QOS: []api.QOS{{Name: "normal"}, {Name: "guaranteed", Priority: 1}}})
		again := next(CmdSeedConfig, &SeedConfig{Partitions: []api.Partition{{Name: "other"}}, DefMemPerCPU: 1})
		s := r.s
		expect(t, map[string][2]any{
			"seeded":                  {first, true},
			"only once":               {again, false},
			"partitions":              {len(s.Partitions), 2},
			"memory per CPU":          {s.Config.DefMemPerCPU, int64(2048)},
			"policy":                  {s.Config.SchedulerPolicy, "fcfs"},
			"flag seen":               {s.Seeded, true},
			"the second seed did not": {s.Partitions["other"] == nil, true},
			"Slurm's normal QoS":      {s.QOS["normal"] != nil, true},
			"an existing QoS kept":    {s.QOS["guaranteed"].Priority, int64(1000)},
		})
	}
}

// auditEntry is an entry of one record per tenant named, chained from
// heads, at now.
func auditEntry(heads map[string]AuditHead, now time.Time, tenants ...string) *AuditRecords {
	var recs []AuditRecord
	for i, tn := range tenants {
		recs = append(recs, AuditRecord{Tenant: tn, Time: now, Principal: "user alice (token t1)", User: "alice",
			Op: "POST /v1/jobs", Target: fmt.Sprintf("jobs %d", i+1), Status: 200})
	}
	api.ChainAudit(heads, recs)
	return &AuditRecords{Now: now, Records: recs}
}

// TestCommandTable walks the command table: every type has a name, an apply
// test, and entries in the log the round-trip and replay tests use.
func TestCommandTable(t *testing.T) {
	inLog := map[CommandType]bool{}
	for _, e := range everyCommandLog(t) {
		ct, _, err := Decode(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		inLog[ct] = true
	}
	for _, ct := range CommandTypes() {
		if strings.HasPrefix(ct.String(), "CommandType(") || ct.String() == "" {
			t.Errorf("command type %d has no name", ct)
		}
		if applyTests[ct] == nil {
			t.Errorf("%s has no apply test in applyTests", ct)
		}
		if !inLog[ct] {
			t.Errorf("%s has no entry in everyCommandLog, so no snapshot round-trip or replay test", ct)
		}
	}
	for ct := range applyTests {
		if _, ok := commands[ct]; !ok {
			t.Errorf("applyTests has a test for %s, which is not in the command table", ct)
		}
	}
}

func TestApplyByCommand(t *testing.T) {
	for _, ct := range CommandTypes() {
		if test := applyTests[ct]; test != nil {
			t.Run(ct.String(), test)
		}
	}
}

// TestSnapshotRoundTripPerCommand restores a snapshot taken after each
// entry of everyCommandLog: the restored state has the same hash, and keeps
// applying the rest of the log identically.
func TestSnapshotRoundTripPerCommand(t *testing.T) {
	logs := everyCommandLog(t)
	for i := range logs {
		ct, _, _ := Decode(logs[i].Data)
		t.Run(ct.String(), func(t *testing.T) {
			restoreAfter(t, logs, i+1)
		})
	}
}

// TestReplayIntoThreeStates applies everyCommandLog to three states: after
// every entry their hashes agree, and every entry changes the hash or is
// one that may leave the state as it was.
func TestReplayIntoThreeStates(t *testing.T) {
	logs := everyCommandLog(t)
	rs := []*replica{newReplica(), newReplica(), newReplica()}
	prev := rs[0].Hash()
	for _, e := range logs {
		ct, _, _ := Decode(e.Data)
		var hashes []string
		for _, r := range rs {
			r.Apply(e)
			hashes = append(hashes, r.Hash())
		}
		if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
			t.Fatalf("after %s at index %d the replicas disagree: %v", ct, e.Index, hashes)
		}
		if hashes[0] == prev {
			t.Errorf("%s at index %d left the hash unchanged", ct, e.Index)
		}
		prev = hashes[0]
	}
}
