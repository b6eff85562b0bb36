package state

import (
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/migrate"
)

// vmNode is a node whose daemon can take part in live migrations.
func vmNode(name, boot string) api.NodeInfo {
	return api.NodeInfo{Name: name, CPUs: 4, MemMB: 4096, Runner: "vm", BootID: boot, Accel: "tcg", Migrate: true,
		APIAddr: "http://" + name + ":7100", CheckpointDir: "/shared/checkpoints"}
}

// migScene is a cluster for migrations: vm nodes v1 and v2 (4 CPUs, 4 GiB,
// able to migrate), node p1 (a process runner), jobs 1 and 2 running on
// v1 and job 3 on p1, all at index 4. next applies an entry at the
// following index.
func migScene(t *testing.T) (r *replica, next func(CommandType, any) any) {
	t.Helper()
	r = newReplica()
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: vmNode("v1", "b1")}),
		entry(t, 2, CmdRegisterNode, &RegisterNode{Now: t0, Info: vmNode("v2", "b2")}),
		entry(t, 3, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "p1", CPUs: 2, MemMB: 4096, Runner: "process", BootID: "b3"}}),
		entry(t, 4, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b"), spec("c")}}),
		entry(t, 5, CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{
			{JobID: 1, Node: "v1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "v1", CPUs: 1, MemMB: 512}, {JobID: 3, Node: "p1", CPUs: 1, MemMB: 512}}}),
	})
	index := uint64(5)
	return r, func(ct CommandType, p any) any {
		index++
		return r.Apply(entry(t, index, ct, p))
	}
}

// migrateToV2 requests job id's migration and places it on v2; it returns
// the migration.
func migrateToV2(t *testing.T, r *replica, next func(CommandType, any) any, id uint64, at time.Time) *migrate.Migration {
	t.Helper()
	res := next(CmdMigrateJobs, &MigrateJobs{Now: at, Requests: []MigrateRequest{{Job: id, By: "alice", Token: "tok"}}}).(*IDsResult)
	if len(res.Changed) != 1 {
		t.Fatalf("migration of job %d refused: %v", id, res.Errors)
	}
	j := r.s.Jobs[id]
	m := r.s.LiveMigration(j)
	pr := next(CmdApplyPlan, &ApplyPlan{Now: at.Add(time.Second), Migrations: []PlanMigration{{JobID: id, From: m.From, To: "v2",
		Migration: m.ID, CPUs: 1, MemMB: 512}}}).(*PlanResult)
	if len(pr.Migrated) != 1 {
		t.Fatalf("the plan did not place the migration of job %d (skipped %v)", id, pr.Skipped)
	}
	return r.s.Migrations[m.ID]
}

func report(node string, m *migrate.Migration, role migrate.Role, ev migrate.Event, at time.Time) *MigrationReports {
	alloc := m.Source
	if role == migrate.Destination {
		alloc = m.Dest
	}
	return &MigrationReports{Now: at, Node: node, Reports: []api.MigrationReport{{Migration: m.ID, Alloc: alloc, Event: string(ev),
		TotalMS: 200, StopMS: 5, SwitchMS: 7, Bytes: 64 << 20, Message: "why"}}}
}

// switchTo reports a placed migration through to its switch.
func switchTo(t *testing.T, next func(CommandType, any) any, m *migrate.Migration, at time.Time) {
	t.Helper()
	for _, s := range []struct {
		node string
		role migrate.Role
		ev   migrate.Event
	}{{"v2", migrate.Destination, migrate.EvPrepared}, {"v1", migrate.Source, migrate.EvStreaming},
		{"v1", migrate.Source, migrate.EvSent}, {"v2", migrate.Destination, migrate.EvLoaded}} {
		res := next(CmdMigrationReports, report(s.node, m, s.role, s.ev, at)).(*IDsResult)
		if len(res.Changed) != 1 {
			t.Fatalf("report %s of the %s: %v", s.ev, s.role, res.Errors)
		}
	}
}

func init() {
	applyTests[CmdMigrateJobs] = func(t *testing.T) {
		r, next := migScene(t)
		res := next(CmdMigrateJobs, &MigrateJobs{Now: t0.Add(time.Minute), Requests: []MigrateRequest{
			{Job: 1, To: "v2", By: "alice", Token: "t1"}, {Job: 3, Token: "t3"}, {Job: 2, To: "v1", Token: "t2"},
			{Job: 2, To: "nowhere", Token: "t2"}, {Job: 2, Token: ""}, {Job: 9, Token: "t9"}, {Job: 1, Token: "again"}}}).(*IDsResult)
		s := r.s
		m := s.LiveMigration(s.Jobs[1])
		expect(t, map[string][2]any{
			"one changed":                 {len(res.Changed), 1},
			"migrating":                   {s.Jobs[1].State, api.StateMigrating},
			"requested":                   {m.Phase, migrate.Requested},
			"from its node":               {m.From + "/" + m.Want, "v1/v2"},
			"its source":                  {m.Source, run(s, 1).ID},
			"the configured downtime":     {m.Params.Downtime(), migrate.DefaultDowntime},
			"process runner refused":      {strings.Contains(res.Errors[3], "cannot migrate jobs"), true},
			"no token refused":            {strings.Contains(res.Errors[2], "no stream token"), true},
			"unknown job refused":         {res.Errors[9], "job 9: no such job"},
			"a migrating job refused":     {strings.Contains(res.Errors[1], "is migrating already"), true},
			"the job runs on its node":    {s.Nodes["v1"].AllocCPUs, 2},
			"no destination yet":          {s.Nodes["v2"].AllocCPUs, 0},
			"ids count up":                {s.NextMigrationID, uint64(2)},
			"the job lists its migration": {len(s.Jobs[1].Migrations), 1},
		})
	}
	applyTests[CmdMigrationReports] = func(t *testing.T) {
		r, next := migScene(t)
		m := migrateToV2(t, r, next, 1, t0.Add(time.Minute))
		s := r.s
		destIndex := s.Nodes["v2"].AllocIndex
		wrong := next(CmdMigrationReports, report("v1", m, migrate.Source, migrate.EvPrepared, t0.Add(2*time.Minute))).(*IDsResult)
		switchTo(t, next, m, t0.Add(2*time.Minute))
		m = s.Migrations[m.ID]
		expect(t, map[string][2]any{
			"the wrong side is refused":         {len(wrong.Changed), 0},
			"switched over":                     {m.Phase, migrate.SwitchOver},
			"the source's figures":              {m.Stats.TotalMS + m.Stats.StopMS, int64(205)},
			"still migrating":                   {s.Jobs[1].State, api.StateMigrating},
			"the source is given up":            {s.Allocs[m.Source].Leaving && s.Allocs[m.Source].Desired == AllocStop, true},
			"as migrated":                       {s.Allocs[m.Source].StopAs, api.StateMigrated},
			"the destination runs":              {s.Allocs[m.Dest].Desired, AllocRun},
			"the destination's node is woken":   {s.Nodes["v2"].AllocIndex > destIndex, true},
			"both nodes hold the job meanwhile": {s.Nodes["v1"].AllocCPUs + s.Nodes["v2"].AllocCPUs, 3},
		})
		next(CmdMigrationReports, report("v2", m, migrate.Destination, migrate.EvResumed, t0.Add(2*time.Minute)))
		// The source's run is quit and reported, as any kill is: CANCELLED.
		next(CmdJobReports, &JobReports{Now: t0.Add(3 * time.Minute), Node: "v1", BootID: "b1", Reports: []api.JobReport{
			{Alloc: m.Source, JobID: 1, StartIndex: 5, State: api.StateCancelled, Signal: 9}}})
		m = s.Migrations[m.ID]
		expect(t, map[string][2]any{
			"released":                       {m.Phase, migrate.Released},
			"the destination's wait":         {m.Stats.SwitchMS, int64(7)},
			"running on its new node":        {s.Jobs[1].State, api.StateRunning},
			"there":                          {run(s, 1).Node, "v2"},
			"the source ended as migrated":   {s.Allocs[m.Source].EndState, api.StateMigrated},
			"the job's outcome is untouched": {s.Jobs[1].Signal, 0},
			"the old node is free of it":     {s.Nodes["v1"].AllocCPUs, 1},
		})
	}
	applyTests[CmdExpireMigrations] = func(t *testing.T) {
		r, next := migScene(t)
		m := migrateToV2(t, r, next, 1, t0.Add(time.Minute))
		next(CmdMigrateJobs, &MigrateJobs{Now: t0.Add(time.Minute), Requests: []MigrateRequest{{Job: 2, Token: "t2"}}})
		s := r.s
		early := next(CmdExpireMigrations, &ExpireMigrations{Now: t0.Add(time.Minute + 30*time.Second)}).(*IDsResult)
		late := next(CmdExpireMigrations, &ExpireMigrations{Now: t0.Add(3 * time.Minute)}).(*IDsResult)
		m = s.Migrations[m.ID]
		expect(t, map[string][2]any{
			"nothing due early":            {len(early.Changed), 0},
			"both due later":               {len(late.Changed), 2},
			"aborted":                      {m.Phase, migrate.Aborted},
			"saying why":                   {strings.Contains(m.Error, "placed for longer than"), true},
			"the unplaced one says no fit": {strings.Contains(s.LastMigration(s.Jobs[2]).Error, "no node could take the job"), true},
			"the job runs on":              {s.Jobs[1].State, api.StateRunning},
			"the destination is given up":  {s.Allocs[m.Dest].Leaving && s.Allocs[m.Dest].Desired == AllocStop, true},
			"no deadline left":             {s.NextMigrationDeadline().IsZero(), true},
		})
	}
	applyTests[CmdCancelMigrations] = func(t *testing.T) {
		r, next := migScene(t)
		m := migrateToV2(t, r, next, 1, t0.Add(time.Minute))
		res := next(CmdCancelMigrations, &CancelMigrations{Now: t0.Add(2 * time.Minute), Jobs: []uint64{1, 2}, By: "alice"}).(*IDsResult)
		s := r.s
		m = s.Migrations[m.ID]
		// The destination's run, stopped, reports its end: not the job's.
		next(CmdJobReports, &JobReports{Now: t0.Add(3 * time.Minute), Node: "v2", BootID: "b2", Reports: []api.JobReport{
			{Alloc: m.Dest, JobID: 1, StartIndex: 7, State: api.StateCancelled, Message: "killed"}}})
		expect(t, map[string][2]any{
			"cancelled":                  {m.Phase, migrate.Aborted},
			"by whom":                    {m.Error, "cancelled by alice"},
			"a job not migrating":        {strings.Contains(res.Errors[2], "is not migrating"), true},
			"the job runs at its source": {s.Jobs[1].State, api.StateRunning},
			"with no message":            {s.Jobs[1].Message, ""},
			"the destination ended":      {s.Allocs[m.Dest].Active(), false},
			"the new node is free":       {s.Nodes["v2"].AllocCPUs, 0},
		})
	}
}

// TestMigrationFailures drives the failures of docs/migration.md through
// the applies: each ends with the job running exactly once.
func TestMigrationFailures(t *testing.T) {
	at := t0.Add(time.Minute)
	tests := map[string]struct {
		do func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration)
		// wantNode is where the job runs after; wantState its state.
		wantNode  string
		wantState api.JobState
		wantPhase migrate.Phase
	}{
		"the stream fails": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			next(CmdMigrationReports, report("v2", m, migrate.Destination, migrate.EvPrepared, at))
			next(CmdMigrationReports, report("v1", m, migrate.Source, migrate.EvFailed, at))
		}, wantNode: "v1", wantState: api.StateRunning, wantPhase: migrate.Aborted},
		"the destination's node goes down before the switch": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			next(CmdMigrationReports, report("v2", m, migrate.Destination, migrate.EvPrepared, at))
			next(CmdNodeDown, &NodeDown{Now: at, Nodes: []string{"v2"}, Reason: "Not responding"})
		}, wantNode: "v1", wantState: api.StateRunning, wantPhase: migrate.Aborted},
		"the destination's daemon restarts without it": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			next(CmdRegisterNode, &RegisterNode{Now: at, Info: vmNode("v2", "b2-new")})
		}, wantNode: "v1", wantState: api.StateRunning, wantPhase: migrate.Aborted},
		"the source's node goes down after the switch": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			switchTo(t, next, m, at)
			next(CmdNodeDown, &NodeDown{Now: at, Nodes: []string{"v1"}, Reason: "Not responding"})
		}, wantNode: "v2", wantState: api.StateRunning, wantPhase: migrate.Released},
		"the source's node goes down before the switch": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			next(CmdMigrationReports, report("v2", m, migrate.Destination, migrate.EvPrepared, at))
			next(CmdNodeDown, &NodeDown{Now: at, Nodes: []string{"v1"}, Reason: "Not responding"})
		}, wantState: api.StateNodeFail, wantPhase: migrate.Aborted},
		"the job ends at its source during the stream": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			next(CmdJobReports, &JobReports{Now: at, Node: "v1", BootID: "b1", Reports: []api.JobReport{
				{Alloc: m.Source, JobID: 1, StartIndex: 5, State: api.StateCompleted}}})
		}, wantState: api.StateCompleted, wantPhase: migrate.Aborted},
		"the job is cancelled during the stream": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			next(CmdCancelJobs, &CancelJobs{Now: at, IDs: []uint64{1}, By: "alice"})
			next(CmdJobReports, &JobReports{Now: at, Node: "v1", BootID: "b1", Reports: []api.JobReport{
				{Alloc: m.Source, JobID: 1, StartIndex: 5, State: api.StateCancelled, Signal: 9}}})
		}, wantState: api.StateCancelled, wantPhase: migrate.Aborted},
		"the job is cancelled after the switch": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			switchTo(t, next, m, at)
			next(CmdCancelJobs, &CancelJobs{Now: at, IDs: []uint64{1}, By: "alice"})
			next(CmdJobReports, &JobReports{Now: at, Node: "v2", BootID: "b2", Reports: []api.JobReport{
				{Alloc: m.Dest, JobID: 1, StartIndex: 7, State: api.StateCancelled, Signal: 9}}})
			next(CmdJobReports, &JobReports{Now: at, Node: "v1", BootID: "b1", Reports: []api.JobReport{
				{Alloc: m.Source, JobID: 1, StartIndex: 5, State: api.StateCancelled, Signal: 9}}})
		}, wantState: api.StateCancelled, wantPhase: migrate.Released},
		"the job ends at its destination before the source is released": {do: func(t *testing.T, r *replica, next func(CommandType, any) any, m *migrate.Migration) {
			switchTo(t, next, m, at)
			next(CmdJobReports, &JobReports{Now: at, Node: "v2", BootID: "b2", Reports: []api.JobReport{
				{Alloc: m.Dest, JobID: 1, StartIndex: 7, State: api.StateFailed, ExitCode: 4}}})
		}, wantState: api.StateFailed, wantPhase: migrate.SwitchOver},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, next := migScene(t)
			m := migrateToV2(t, r, next, 1, t0.Add(30*time.Second))
			tc.do(t, r, next, m)
			s := r.s
			j := s.Jobs[1]
			m = s.Migrations[m.ID]
			if j.State != tc.wantState || m.Phase != tc.wantPhase {
				t.Fatalf("job %s (%q), migration %s (%q); want %s, %s", j.State, j.Message, m.Phase, m.Error, tc.wantState, tc.wantPhase)
			}
			running := 0
			for _, a := range s.runningAllocs(j) {
				running++
				if a.Node != tc.wantNode {
					t.Errorf("the job runs on %s, want %s", a.Node, tc.wantNode)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantNode != ""]; running != want {
				t.Errorf("the job has %d running allocations, want %d", running, want)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMigrationSnapshotMidway restores a state taken in every phase of a
// migration and carries the migration on in both: they agree.
func TestMigrationSnapshotMidway(t *testing.T) {
	r, next := migScene(t)
	m := migrateToV2(t, r, next, 1, t0.Add(time.Minute))
	c := restoredCopy(t, r)
	if c.Hash() != r.Hash() || c.s.NextMigrationID != r.s.NextMigrationID {
		t.Fatal("the restored state differs")
	}
	if got := c.s.LiveMigration(c.s.Jobs[1]); got == nil || got.Phase != migrate.Placed {
		t.Fatalf("the restored state's migration is %+v", got)
	}
	switchTo(t, next, m, t0.Add(2*time.Minute))
	if c2 := restoredCopy(t, r); c2.Hash() != r.Hash() || c2.s.Jobs[1].State != api.StateMigrating {
		t.Fatal("the state restored at the switch differs")
	}
}
