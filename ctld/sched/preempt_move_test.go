package sched

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/migrate"
)

// Preemption by migration and by checkpoint, over a real state: each pass's
// plan is committed as the one ApplyPlan entry the leader would propose,
// and the nodes' reports are applied as their daemons would send them.

// moveScene is a state of migrating vm nodes (2 CPUs, 4 GiB each) with
// jobs 1..len(on) running, 1 CPU each, on the nodes on names, of QoS
// "low" where low[i] is set (else none); QoS "high" may preempt "low",
// whose preemption mode and fallback are mode and fallback. step applies
// an entry at the next index.
type moveScene struct {
	t     *testing.T
	s     *state.State
	index uint64
	now   time.Time
}

func newMoveScene(t *testing.T, nodes []api.NodeInfo, on []string, low []bool, mode, fallback api.PreemptMode,
	spec func(i int, sp *state.JobSpec)) *moveScene {
	t.Helper()
	s, index := moveCluster(t, nodes, on, func(i int, sp *state.JobSpec) {
		if low[i] {
			sp.QOS = "low"
		}
		if spec != nil {
			spec(i, sp)
		}
	})
	sc := &moveScene{t: t, s: s, index: index, now: t0}
	for _, q := range []api.QOS{{Name: "low", PreemptMode: mode, PreemptFallback: fallback}, {Name: "high", Priority: 100, Preempt: []string{"low"}}} {
		sc.step(state.CmdPutQOS, &state.PutQOS{QOS: q})
	}
	return sc
}

func (sc *moveScene) step(ct state.CommandType, p any) any {
	sc.index++
	return sc.s.Apply(sc.index, ct, p)
}

// submit queues job id, of QoS high, for cpus CPUs.
func (sc *moveScene) submit(id uint64, cpus int) {
	sc.t.Helper()
	res := sc.step(state.CmdSubmitJobs, &state.SubmitJobs{Now: sc.now, FirstID: id, Jobs: []state.JobSpec{
		{Name: "p", User: "bob", NTasks: 1, CPUsPerTask: cpus, MemPerNode: 512, QOS: "high"}}})
	if r := res.(*state.SubmitResult); len(r.Results) != 1 || r.Results[0].JobID != id {
		sc.t.Fatalf("submit of job %d: %+v", id, r)
	}
}

// pass runs a scheduling pass a second later and commits its plan, whole,
// as one ApplyPlan entry (the leader's part: stream tokens stamped); it
// returns the plan and what the apply did.
func (sc *moveScene) pass() (Plan, *state.PlanResult) {
	sc.t.Helper()
	sc.now = sc.now.Add(time.Second)
	snap := NewSnapshot(sc.s, sc.now)
	plan := Schedule(snap)
	checkPlan(sc.t, snap, plan)
	cmd := plan.Entry(sc.now, snap, 1000)
	for i := range cmd.Migrations {
		if cmd.Migrations[i].Migration == 0 {
			cmd.Migrations[i].Token = "stamped"
		}
	}
	res := sc.step(state.CmdApplyPlan, cmd).(*state.PlanResult)
	if len(res.Skipped) > 0 {
		sc.t.Fatalf("the apply skipped %v of the pass's plan %+v", res.Skipped, plan)
	}
	if err := sc.s.CheckInvariants(); err != nil {
		sc.t.Fatal(err)
	}
	return plan, res
}

// moved reports a placed migration of job id through to its end, as the
// two daemons would: prepared, streamed, switched, resumed, the source's
// run ended.
func (sc *moveScene) moved(id uint64) {
	sc.t.Helper()
	m := sc.s.LiveMigration(sc.s.Jobs[id])
	if m == nil || m.Phase != migrate.Placed {
		sc.t.Fatalf("job %d has no placed migration: %+v", id, m)
	}
	for _, r := range []struct {
		node  string
		alloc uint64
		ev    migrate.Event
	}{{m.To, m.Dest, migrate.EvPrepared}, {m.From, m.Source, migrate.EvStreaming}, {m.From, m.Source, migrate.EvSent},
		{m.To, m.Dest, migrate.EvLoaded}, {m.To, m.Dest, migrate.EvResumed}} {
		res := sc.step(state.CmdMigrationReports, &state.MigrationReports{Now: sc.now, Node: r.node, Reports: []api.MigrationReport{
			{Migration: m.ID, Alloc: r.alloc, Event: string(r.ev), TotalMS: 300, StopMS: 20, Bytes: 1 << 20}}}).(*state.IDsResult)
		if len(res.Changed) != 1 {
			sc.t.Fatalf("job %d: report %s refused: %v", id, r.ev, res.Errors)
		}
	}
	sc.ended(m.From, sc.s.Allocs[m.Source], api.StateMigrated)
	if m := sc.s.Migrations[m.ID]; m.Phase != migrate.Released {
		sc.t.Fatalf("job %d's migration is %s, want released", id, m.Phase)
	}
}

// ended reports allocation a's run ended as st on its node.
func (sc *moveScene) ended(node string, a *state.Allocation, st api.JobState) {
	sc.step(state.CmdJobReports, &state.JobReports{Now: sc.now, Node: node, BootID: node, Reports: []api.JobReport{
		{Alloc: a.ID, JobID: a.Job, StartIndex: a.StartIndex, State: st}}})
}

// nodeOf returns the node job id runs on ("" for none).
func (sc *moveScene) nodeOf(id uint64) string {
	for _, a := range sc.s.ActiveAllocs(sc.s.Jobs[id]) {
		if !a.Leaving {
			return a.Node
		}
	}
	return ""
}

func startedOn(p Plan, id uint64) string {
	for _, st := range p.Starts {
		if st.JobID == id {
			return st.Node
		}
	}
	return ""
}

// TestPreemptionByMigration: node a1 runs low jobs 1 and 2, a2 and a3
// one job each (of no QoS); job 10 of QoS high needs both of a1's CPUs.
// One pass moves job 1 to a2 and job 2 to a3 (the second counts the room
// the first takes), in one ApplyPlan entry, and preempts nothing; job 10
// waits, and no later pass preempts again or starts anything on a1 (not
// even job 11, which fits in the CPU job 1 left); once both moves are
// done, job 10 starts on a1, and the moved jobs run on.
func TestPreemptionByMigration(t *testing.T) {
	sc := newMoveScene(t, []api.NodeInfo{migNode("a1"), migNode("a2"), migNode("a3")}, []string{"a1", "a1", "a2", "a3"},
		[]bool{true, true, false, false}, api.PreemptMigrate, "", nil)
	sc.submit(10, 2)
	before := sc.index
	plan, res := sc.pass()
	if sc.index != before+1 {
		t.Fatalf("the pass took %d entries, want one", sc.index-before)
	}
	if len(plan.Preemptions) != 0 {
		t.Errorf("preempted %v, want every victim moved", victimsOf(plan))
	}
	if !slices.Equal(res.Migrated, []uint64{1, 2}) {
		t.Fatalf("migrated %v, want jobs 1 and 2", res.Migrated)
	}
	for id, want := range map[uint64]string{1: "a2", 2: "a3"} {
		j := sc.s.Jobs[id]
		m := sc.s.LiveMigration(j)
		if m.To != want || m.Cause != migrate.ByPreemption || m.By != "job 10" || j.State != api.StateMigrating {
			t.Errorf("job %d (%s): migration to %s for %s by %q, want to %s for the preemption by job 10", id, j.State, m.To, m.Cause, m.By, want)
		}
	}
	if st := sc.s.Jobs[10]; st.State != api.StatePending {
		t.Fatalf("job 10 is %s before its room is free", st.State)
	}
	plan, _ = sc.pass()
	if len(plan.Preemptions)+len(plan.Migrations)+len(plan.Starts) != 0 {
		t.Fatalf("a pass while the moves are under way preempts %v, moves %+v, starts %v", victimsOf(plan), plan.Migrations, startsOf(plan))
	}
	// Once job 1 moved, job 11 would fit in the CPU it left on a1: the
	// node is job 10's, which waits for job 2's move.
	sc.moved(1)
	sc.step(state.CmdSubmitJobs, &state.SubmitJobs{Now: sc.now, FirstID: 11, Jobs: []state.JobSpec{
		{Name: "s", User: "carol", NTasks: 1, CPUsPerTask: 1, MemPerNode: 512}}})
	plan, _ = sc.pass()
	if len(plan.Preemptions)+len(plan.Migrations)+len(plan.Starts) != 0 {
		t.Fatalf("a pass while job 2 moves preempts %v, moves %+v, starts %v", victimsOf(plan), plan.Migrations, startsOf(plan))
	}
	sc.moved(2)
	plan, _ = sc.pass()
	if got := startedOn(plan, 10); got != "a1" {
		t.Fatalf("job 10 starts on %q, want a1 (starts %v, reason %s)", got, startsOf(plan), plan.Reasons[10])
	}
	for id, want := range map[uint64]string{1: "a2", 2: "a3", 10: "a1"} {
		if got := sc.nodeOf(id); got != want || sc.s.Jobs[id].State != api.StateRunning {
			t.Errorf("job %d is %s on %q, want running on %s", id, sc.s.Jobs[id].State, got, want)
		}
	}
}

// TestPreemptionByMigrationFallsBack: where no node has room for a victim
// of mode migrate, or it cannot migrate (or a victim of mode checkpoint
// cannot be saved), the pass preempts it by its QoS's fallback mode
// instead (cancel when the QoS names none, or names checkpoint for a job
// that cannot be saved), in the same pass, and job 10 gets its node.
func TestPreemptionByMigrationFallsBack(t *testing.T) {
	tests := map[string]struct {
		// mode is low's preemption mode: migrate when unset.
		mode, fallback api.PreemptMode
		// room: a2 has room for one job, and a1 runs two low jobs, both
		// in job 10's way; else a2 is full and job 10 needs the CPU of
		// a1's low job 1 only. noMigrate makes job 1 a --no-migrate job.
		room, noMigrate bool
		// victims are the stops, moved the jobs migrated.
		victims []victim
		moved   []uint64
	}{
		"no room: cancel, by default": {victims: []victim{{1, api.PreemptCancel}}},
		"no room: requeue":            {fallback: api.PreemptRequeue, victims: []victim{{1, api.PreemptRequeue}}},
		"no room: suspend":            {fallback: api.PreemptSuspend, victims: []victim{{1, api.PreemptSuspend}}},
		"no room: checkpoint":         {fallback: api.PreemptCheckpoint, victims: []victim{{1, api.PreemptCheckpoint}}},
		"room for one: it moves, the other falls back": {fallback: api.PreemptRequeue, room: true,
			moved: []uint64{1}, victims: []victim{{2, api.PreemptRequeue}}},
		"room for one, but job 1 cannot migrate: job 2 moves": {fallback: api.PreemptRequeue, room: true, noMigrate: true,
			moved: []uint64{2}, victims: []victim{{1, api.PreemptRequeue}}},
		"checkpoint, but it cannot be saved: requeue": {mode: api.PreemptCheckpoint, fallback: api.PreemptRequeue, noMigrate: true,
			victims: []victim{{1, api.PreemptRequeue}}},
		"checkpoint, but it cannot be saved, nor fall back to one: cancel": {mode: api.PreemptCheckpoint, fallback: api.PreemptCheckpoint,
			noMigrate: true, victims: []victim{{1, api.PreemptCancel}}},
		"migrate, but it can neither move nor be saved: cancel": {fallback: api.PreemptCheckpoint, noMigrate: true,
			victims: []victim{{1, api.PreemptCancel}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			on, low, cpus := []string{"a1", "a1", "a2", "a2"}, []bool{true, false, false, false}, 1
			if tc.room {
				on, low, cpus = on[:3], []bool{true, true, false}, 2
			}
			mode := cmp.Or(tc.mode, api.PreemptMigrate)
			sc := newMoveScene(t, []api.NodeInfo{migNode("a1"), migNode("a2")}, on, low,
				mode, tc.fallback, func(i int, sp *state.JobSpec) { sp.NoMigrate = i == 0 && tc.noMigrate })
			sc.submit(10, cpus)
			plan, res := sc.pass()
			if got := victimsOf(plan); !slices.Equal(got, tc.victims) {
				t.Errorf("victims %v, want %v", got, tc.victims)
			}
			if !slices.Equal(res.Migrated, tc.moved) {
				t.Errorf("migrated %v, want %v", res.Migrated, tc.moved)
			}
			if len(res.Stopped) != len(tc.victims) {
				t.Errorf("the apply stopped %v, want %v", res.Stopped, tc.victims)
			}
			if st := sc.s.Jobs[10].State; st != api.StatePending {
				t.Errorf("job 10 is %s, want pending for its room", st)
			}
		})
	}
}

// TestAbortedPreemptionMigrationFallsBack: a preemption's migration that
// was aborted (here cancelled) is not tried again: the next pass preempts
// the victim by its fallback. Job 10 needs both of a1's CPUs: job 1 moves
// to a2, which has room for one, job 2 is requeued.
func TestAbortedPreemptionMigrationFallsBack(t *testing.T) {
	sc := newMoveScene(t, []api.NodeInfo{migNode("a1"), migNode("a2")}, []string{"a1", "a1", "a2"},
		[]bool{true, true, false}, api.PreemptMigrate, api.PreemptRequeue, nil)
	sc.submit(10, 2)
	if _, res := sc.pass(); !slices.Equal(res.Migrated, []uint64{1}) || !slices.Equal(res.Stopped, []uint64{2}) {
		t.Fatalf("migrated %v and stopped %v, want job 1 moved and job 2 requeued", res.Migrated, res.Stopped)
	}
	sc.step(state.CmdCancelMigrations, &state.CancelMigrations{Now: sc.now, Jobs: []uint64{1}, By: "alice"})
	dest := sc.s.Allocs[sc.s.LastMigration(sc.s.Jobs[1]).Dest]
	sc.ended("a2", dest, api.StateCancelled)
	if st := sc.s.Jobs[1].State; st != api.StateRunning {
		t.Fatalf("job 1 is %s after its migration was cancelled", st)
	}
	plan, res := sc.pass()
	if got := victimsOf(plan); !slices.Equal(got, []victim{{1, api.PreemptRequeue}}) || len(res.Migrated) != 0 {
		t.Errorf("victims %v, migrated %v, want job 1 requeued", got, res.Migrated)
	}
}

// TestPreemptionByCheckpoint: job 1 (QoS low, mode checkpoint) is parked
// for job 10: saved on a1 (job 10 waits meanwhile, and nothing is preempted
// again), back in the queue once saved, and job 10 starts on a1 once the
// saved run ended; job 1 is restored on a1, from its file, once job 10
// ends.
func TestPreemptionByCheckpoint(t *testing.T) {
	sc := newMoveScene(t, []api.NodeInfo{migNode("a1"), migNode("a2")}, []string{"a1", "a1", "a2", "a2"},
		[]bool{true, false, false, false}, api.PreemptCheckpoint, "", nil)
	sc.submit(10, 1)
	a := sc.s.ActiveAllocs(sc.s.Jobs[1])[0]
	plan, _ := sc.pass()
	if got := victimsOf(plan); !slices.Equal(got, []victim{{1, api.PreemptCheckpoint}}) {
		t.Fatalf("victims %v, want job 1 checkpointed", got)
	}
	if ck := sc.s.Jobs[1].Checkpoint; ck == nil || ck.Phase != state.CheckpointSaving || !ck.Preempted {
		t.Fatalf("job 1's checkpoint: %+v, want saving for a preemption", ck)
	}
	if plan, _ = sc.pass(); len(plan.Preemptions)+len(plan.Starts) != 0 {
		t.Fatalf("a pass while job 1 saves preempts %v, starts %v", victimsOf(plan), startsOf(plan))
	}
	sc.step(state.CmdCheckpointReports, &state.CheckpointReports{Now: sc.now, Node: "a1", Reports: []api.CheckpointReport{
		{Job: 1, Alloc: a.ID, Event: state.CheckpointSaved, Path: "/ck/1", Size: 1, SHA256: "ab"}}})
	if j := sc.s.Jobs[1]; j.State != api.StatePending || !state.Restoring(j) {
		t.Fatalf("job 1 is %s (%+v) once saved, want pending to be restored", j.State, j.Checkpoint)
	}
	if plan, _ = sc.pass(); len(plan.Starts) != 0 {
		t.Fatalf("starts %v before the saved run ended", startsOf(plan))
	}
	sc.ended("a1", a, api.StateCancelled)
	plan, _ = sc.pass()
	if got := startedOn(plan, 10); got != "a1" || startedOn(plan, 1) != "" {
		t.Fatalf("starts %v, want job 10 on a1 and job 1 waiting (reason %s)", startsOf(plan), plan.Reasons[1])
	}
	sc.ended("a1", sc.s.ActiveAllocs(sc.s.Jobs[10])[0], api.StateCompleted)
	plan, _ = sc.pass()
	if got := startedOn(plan, 1); got != "a1" {
		t.Fatalf("job 1 restored on %q, want a1, where its file is (starts %v, reason %s)", got, startsOf(plan), plan.Reasons[1])
	}
	b := sc.s.ActiveAllocs(sc.s.Jobs[1])[0]
	if r := sc.s.AllocCheckpoint(sc.s.Jobs[1], b); r == nil || r.Restore == nil || r.Restore.Path != "/ck/1" {
		t.Errorf("job 1's new run does not start from its file: %+v", r)
	}
}

// TestMovers: the snapshot looks at what a preemption cannot do only for
// the jobs it may move or park: those of a QoS of mode migrate or
// checkpoint, and, once a partition's mode is one of those, those of a
// QoS without a mode of its own.
func TestMovers(t *testing.T) {
	s := state.New()
	s.QOS = map[string]*api.QOS{"m": {Name: "m", PreemptMode: api.PreemptMigrate}, "c": {Name: "c", PreemptMode: api.PreemptCheckpoint},
		"r": {Name: "r", PreemptMode: api.PreemptRequeue}, "u": {Name: "u"}}
	s.Partitions = map[string]*api.Partition{"p": {Name: "p", PreemptMode: api.PreemptCancel}}
	may := func(m movers) (out []string) {
		for _, q := range []string{"m", "c", "r", "u", ""} {
			if m.may(&state.Job{Spec: &state.JobSpec{QOS: q}}) {
				out = append(out, q)
			}
		}
		return out
	}
	if got := may(moversOf(s)); !slices.Equal(got, []string{"m", "c"}) {
		t.Errorf("the jobs of QoS %v may be moved, want m and c", got)
	}
	s.Partitions["p"].PreemptMode = api.PreemptMigrate
	if got := may(moversOf(s)); !slices.Equal(got, []string{"m", "c", "u"}) {
		t.Errorf("with a partition of mode migrate, the jobs of QoS %v may be moved, want m, c and u", got)
	}
}

// TestEmptyEntry: a plan that only sets what a drained node says of the
// jobs that stay is not empty (the note is committed), but may wait for
// the next pass as reasons do; one with a migration may not.
func TestEmptyEntry(t *testing.T) {
	for _, c := range []struct {
		name               string
		p                  state.ApplyPlan
		empty, reasonsOnly bool
	}{
		{"nothing", state.ApplyPlan{}, true, true},
		{"a drain note", state.ApplyPlan{DrainNotes: []state.PlanDrainNote{{Node: "a1", Note: "job 2 fits on no other node"}}}, false, true},
		{"a reason", state.ApplyPlan{Reasons: []state.PlanReason{{JobID: 1, Reason: api.ReasonResources}}}, false, true},
		{"a migration", state.ApplyPlan{Migrations: []state.PlanMigration{{JobID: 1, From: "a1", To: "a2"}}}, false, false},
		{"a stop", state.ApplyPlan{Stops: []state.PlanStop{{JobID: 1, Mode: api.PreemptCheckpoint, By: 2}}}, false, false},
	} {
		if e, r := EmptyEntry(&c.p), ReasonsOnly(&c.p); e != c.empty || r != c.reasonsOnly {
			t.Errorf("%s: EmptyEntry %v, ReasonsOnly %v; want %v, %v", c.name, e, r, c.empty, c.reasonsOnly)
		}
	}
}
