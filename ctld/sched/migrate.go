package sched

import (
	"fmt"
	"slices"

	"corral/api"
	"corral/ctld/state"
	"corral/migrate"
)

// Live migrations in the pass. A running job moves by getting a second
// allocation on another node, placed by the same rules as a start (the
// job's partition, free CPUs and memory with the node's runner overhead,
// the exact NUMA and device placement on a node with inventory), plus what
// the destination needs to take the job's VM: a daemon that can migrate,
// the source's accelerator (a guest cannot move between KVM and TCG), and
// the same kind of guest memory (bound to NUMA nodes or not, the same
// hugepage size), which QEMU checks against the stream.
//
// The pass places the moves before any pending job: a move frees a node
// (a drain) or answers a request a user is waiting on, and it holds the
// same resources it gives back. Requested migrations that find no node
// wait (their request times out, migrate.PlaceTimeout); a drained node's
// jobs that find none stay where they are, and the node says why
// (Plan.DrainNotes).

// Move is a running job the pass may move to another node: a requested
// migration waiting for its destination (Migration set), or a job of a
// node drained with --migrate (Migration nil: the pass begins one).
type Move struct {
	Job *state.Job
	// Alloc is the job's run, the migration's source.
	Alloc     *state.Allocation
	Migration *migrate.Migration
	// Blocked says why a drained node's job cannot migrate at all (it
	// stays, and the node says why).
	Blocked string
	// Preemptor is the job a preemption by migration makes room for (0:
	// none).
	Preemptor uint64
}

// Migration is a move the pass placed.
type Migration struct {
	JobID uint64
	// Migration is the requested migration placed; 0 for a drain's.
	Migration uint64
	From, To  string
	Cause     migrate.Cause
	By        string
	CPUs      int
	MemMB     int64
	// OverheadMB is the destination runner's own memory per job.
	OverheadMB int64
	Placement  *api.Placement
}

// fillMoves lists the moves of state s: its requested migrations, by id,
// then the jobs of its drained-with-migrate nodes, by node then allocation.
func fillMoves(snap *Snapshot, s *state.State) {
	snap.Moves = snap.Moves[:0]
	var ids []uint64
	for id, m := range s.Migrations {
		if m.Phase == migrate.Requested {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := s.Migrations[id]
		j, a := s.Jobs[m.Job], s.Allocs[m.Source]
		if j != nil && a != nil && a.Active() {
			snap.Moves = append(snap.Moves, Move{Job: j, Alloc: a, Migration: m})
		}
	}
	for _, name := range s.NodeNames() {
		n := s.Nodes[name]
		if !n.Drain || !n.DrainMigrate {
			continue
		}
		for _, id := range n.Allocs {
			a := s.Allocs[id]
			j := s.Jobs[a.Job]
			if j == nil || !a.Active() || a.Leaving || s.LiveMigration(j) != nil || a.Desired == state.AllocStop {
				continue // moving already, or ending
			}
			snap.Moves = append(snap.Moves, Move{Job: j, Alloc: a, Blocked: s.CheckMigrate(j, "")})
		}
	}
}

// placeMoves places the snapshot's moves (see the file's comment).
func (pl *placer) placeMoves(plan *Plan) {
	if len(pl.s.Moves) == 0 {
		return
	}
	for _, mv := range pl.s.Moves {
		if mv.Blocked != "" {
			pl.noteDrain(plan, mv, fmt.Sprintf("job %d cannot migrate: it %s", mv.Job.ID, mv.Blocked))
			continue
		}
		if err := contained(func() { pl.placeMove(mv, plan) }); err != nil {
			pl.noteDrain(plan, mv, fmt.Sprintf("job %d could not be placed: %v", mv.Job.ID, err))
		}
	}
}

// placeMove finds the best destination for one move and takes its room;
// it reports whether it found one.
func (pl *placer) placeMove(mv Move, plan *Plan) bool {
	j, a := mv.Job, mv.Alloc
	found, best := pl.findMove(mv, nil)
	if found < 0 {
		pl.noteDrain(plan, mv, fmt.Sprintf("job %d fits on no other node", j.ID))
		return false
	}
	n := &pl.free.nodes[found]
	pl.take(found, pl.now, pl.now+int64(jobLimit(j, pl.partition(pl.partitionOf(j)))), a.CPUs, a.MemMB+n.overhead)
	if best != nil {
		pl.usedOf(found).Add(best, 1)
	}
	m := Migration{JobID: j.ID, From: a.Node, To: n.name, CPUs: a.CPUs, MemMB: a.MemMB, OverheadMB: n.overhead, Placement: best}
	switch {
	case mv.Migration != nil:
		m.Migration, m.Cause, m.By = mv.Migration.ID, mv.Migration.Cause, mv.Migration.By
	case mv.Preemptor != 0:
		m.Cause, m.By = migrate.ByPreemption, fmt.Sprintf("job %d", mv.Preemptor)
	default:
		m.Cause, m.By = migrate.ByDrain, a.Node
	}
	plan.Migrations = append(plan.Migrations, m)
	return true
}

// findMove returns the pass's index of the best destination for a move,
// and the job's placement there (nil on a node without inventory); -1
// when none has room. A dry run passes what it would take already (held):
// a node some of it is on counts that as used, and, when it has
// inventory, is not used again (its placement is not known).
func (pl *placer) findMove(mv Move, held *tentative) (int, *api.Placement) {
	j, a := mv.Job, mv.Alloc
	part := pl.partitionOf(j)
	want := ""
	if mv.Migration != nil {
		want = mv.Migration.Want
	}
	req := RequestOf(j, pl.s.DefMemPerCPU)
	req.CPUs, req.MemMB = a.CPUs, a.MemMB
	dur := int64(jobLimit(j, pl.partition(part)))
	src := pl.stateNode(a.Node)
	found, best := -1, (*api.Placement)(nil)
	for i := range pl.free.nodes {
		n := &pl.free.nodes[i]
		var h struct {
			cpus int
			mem  int64
		}
		if held != nil {
			h = (*held)[i]
		}
		sn := pl.stateNode(n.name)
		switch {
		case !n.usable || n.name == a.Node || want != "" && n.name != want || pl.claimed[i]:
			continue
		case !slices.Contains(n.partitions, part) || n.cpus-h.cpus < a.CPUs || n.mem-h.mem < a.MemMB+n.overhead:
			continue
		case sn == nil || !sn.Migrate || sn.APIAddr == "" || src == nil || sn.Accel != src.Accel:
			continue
		case pl.reserved[i] && !pl.profile(i).fits(pl.now, pl.now+dur, a.CPUs+h.cpus, a.MemMB+n.overhead+h.mem):
			continue
		}
		if !hasTopology(n.inv) {
			if sameMemory(a.Placement, nil, j.Spec.NUMA) && found < 0 {
				found = i
			}
			continue
		}
		if h.cpus > 0 {
			continue
		}
		p, ok := PlaceInNode(n.inv, pl.usedOf(i), req)
		if !ok || !sameMemory(a.Placement, &p, j.Spec.NUMA) || best != nil && p.Score <= best.Score {
			continue
		}
		found, best = i, &p
	}
	return found, best
}

// sameMemory reports whether a guest placed at src could load on a node
// where it would be placed at dst (nil: a node without inventory): QEMU's
// guest memory must be the same kind on both, bound to NUMA nodes or not,
// with the same hugepage size.
func sameMemory(src, dst *api.Placement, numa string) bool {
	kind := func(p *api.Placement) (bool, int64) {
		if p == nil {
			return false, 0
		}
		var huge int64
		for _, h := range p.Hugepages {
			huge = max(huge, h.SizeKB)
		}
		return len(p.NUMANodes) > 0 && numa != api.NUMANone, huge
	}
	b1, h1 := kind(src)
	b2, h2 := kind(dst)
	return b1 == b2 && h1 == h2
}

// noteDrain records, for a drained node's job that stays, why: the node
// shows it (Plan.DrainNotes).
func (pl *placer) noteDrain(plan *Plan, mv Move, why string) {
	if mv.Migration != nil || mv.Preemptor != 0 {
		return // a request waits, and times out saying so
	}
	if plan.DrainNotes == nil {
		plan.DrainNotes = map[string]string{}
	}
	node := mv.Alloc.Node
	if prev := plan.DrainNotes[node]; prev != "" {
		why = prev + "; " + why
	}
	plan.DrainNotes[node] = why
}

// stateNode returns the snapshot's node called name (nil when none),
// building the index on first use.
func (pl *placer) stateNode(name string) *state.Node {
	if pl.nodeByName == nil {
		pl.nodeByName = make(map[string]*state.Node, len(pl.s.Nodes))
		for _, n := range pl.s.Nodes {
			pl.nodeByName[n.Name] = n
		}
	}
	return pl.nodeByName[name]
}

// canRestoreOn reports whether the job being restored may start on node
// name: the node asked for, one that can read its checkpoint file (the node
// that wrote it, or one with the same shared checkpoint directory), with
// the accelerator it was saved under.
func (pl *placer) canRestoreOn(name string) bool {
	ck, n := pl.restoring.Checkpoint, pl.stateNode(name)
	switch {
	case n == nil || ck.Want != "" && name != ck.Want:
		return false
	case name != ck.Node && (ck.Dir == "" || n.CheckpointDir != ck.Dir):
		return false
	}
	return n.Accel == ck.Accel
}

// movers says which running jobs a preemption may move or park, so that
// the snapshot says which of them it cannot (Snapshot.Stuck): the jobs of
// a QoS whose mode is migrate or checkpoint, and, when some partition's
// mode is, those of a QoS that names no mode. A job without a QoS is
// never preempted.
type movers struct {
	qos map[string]bool
	// unset: some partition moves, so a QoS without a mode may.
	unset bool
}

func moversOf(s *state.State) movers {
	moving := func(m api.PreemptMode) bool { return m == api.PreemptMigrate || m == api.PreemptCheckpoint }
	var m movers
	for _, p := range s.Partitions {
		m.unset = m.unset || moving(p.PreemptMode)
	}
	for name, q := range s.QOS {
		if moving(q.PreemptMode) || m.unset && q.PreemptMode == "" {
			if m.qos == nil {
				m.qos = map[string]bool{}
			}
			m.qos[name] = true
		}
	}
	return m
}

// may reports whether job j may be.
func (m movers) may(j *state.Job) bool { return m.qos[j.Spec.QOS] }

// noteGoing records in snap what the pass must know of job j's active
// allocation a beyond the allocation itself: that it is being given up
// (Snapshot.Going), and, when a preemption may move or park j (movers),
// what it cannot do to the job (Snapshot.Stuck).
func noteGoing(snap *Snapshot, s *state.State, j *state.Job, a *state.Allocation, m movers) {
	going := false
	if m := s.LiveMigration(j); m != nil && m.Phase != migrate.Requested && m.Source == a.ID {
		going = true
	}
	if ck := j.Checkpoint; ck != nil && ck.Phase == state.CheckpointSaving && ck.Alloc == a.ID {
		going = true
	}
	if going {
		if snap.Going == nil {
			snap.Going = map[uint64]bool{}
		}
		snap.Going[a.ID] = true
	}
	if !m.may(j) || j.State != api.StateRunning || going {
		return
	}
	var st Stuck
	if s.CheckMigrate(j, "") != "" {
		st = Stuck{NoMigrate: true, NoCheckpoint: true}
	}
	if m := s.LastMigration(j); m != nil && m.Cause == migrate.ByPreemption && m.Phase == migrate.Aborted {
		st.NoMigrate = true
	}
	if j.Checkpoint != nil && j.Checkpoint.Phase == state.CheckpointFailed {
		st.NoCheckpoint = true
	}
	if st != (Stuck{}) {
		if snap.Stuck == nil {
			snap.Stuck = map[uint64]Stuck{}
		}
		snap.Stuck[j.ID] = st
	}
}
