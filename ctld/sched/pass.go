package sched

import (
	"time"

	"corral/api"
	"corral/ctld/state"
)

// Pass runs passes one after another and keeps their buffers between them:
// the snapshot's lists, the placer's per-node tables, the ready order, the
// plan's starts and reason map. A short queue costs a pass more in making
// those than in deciding, which is what the simulator runs: hundreds of
// thousands of passes over a dozen pending jobs. A pass decides exactly as
// Schedule does (Schedule is a Pass used once).
//
// What a Pass returns is its own: the snapshot of Snapshot and the plan of
// Schedule (its Starts, Reasons, Estimates and Reservations) are valid
// until the Pass's next call of the same method. A Pass is not safe for
// concurrent use; its zero value is ready.
type Pass struct {
	snap     Snapshot
	placer   placer
	deps     deps
	priority passPriority
	keyed    []orderKey
	ready    []*state.Job
	starts   []Start
	reasons  map[uint64]api.Reason
	// reasonsPeak is the most reasons held since reasons was made.
	reasonsPeak int
}

// Snapshot builds the snapshot of one pass over s at now, as NewSnapshot
// does, into p's snapshot: valid until p's next Snapshot.
func (p *Pass) Snapshot(s *state.State, now time.Time) *Snapshot {
	fillSnapshot(&p.snap, s, now)
	return &p.snap
}

// newPlan returns the empty plan of a pass over pending jobs, over p's
// previous plan's buffers.
func (p *Pass) newPlan(pending int) Plan {
	// Clearing a map costs what it grew to: one that held far more than
	// this pass needs is made again at this pass's size.
	p.reasonsPeak = max(p.reasonsPeak, len(p.reasons))
	if p.reasons == nil || p.reasonsPeak > 2*pending+64 {
		p.reasons, p.reasonsPeak = make(map[uint64]api.Reason, pending), pending
	} else {
		clear(p.reasons)
	}
	return Plan{Reasons: p.reasons, Starts: p.starts[:0]}
}

// reset readies pl for a pass over s, keeping the buffers of its previous
// pass: every table is cleared, none carries anything over.
func (pl *placer) reset(s *Snapshot) {
	prev := *pl
	*pl = placer{s: s, policy: s.Policy, now: s.Now.UnixNano(), defPart: defaultPartition(s.Partitions)}
	if pl.policy == "" {
		pl.policy = PolicyEASY
	}
	pl.free = prev.free
	if pl.free == nil {
		pl.free = &capacity{}
	}
	pl.free.reset(s.Nodes)
	pl.lic = prev.lic
	pl.lic.reset(s)
	pl.parts, pl.partsOf = prev.parts, prev.partsOf
	if !samePartitions(pl.partsOf, s.Partitions) {
		if pl.parts == nil {
			pl.parts = make(map[string]*api.Partition, len(s.Partitions))
		} else {
			clear(pl.parts)
		}
		for i := range s.Partitions {
			pl.parts[s.Partitions[i].Name] = &s.Partitions[i]
		}
		pl.partsOf = s.Partitions
	}
	n := len(pl.free.nodes)
	// The last pass's profiles become this one's spare arrays.
	pl.spare = resized(prev.spare, n)
	for i, p := range prev.profiles[:min(len(prev.profiles), n)] {
		if p != nil {
			pl.spare[i] = p[:0]
		}
	}
	pl.profiles = cleared(prev.profiles, n)
	pl.reserved = cleared(prev.reserved, n)
	pl.claimed = cleared(prev.claimed, n)
	pl.started = resized(prev.started, n)
	for i := range pl.started {
		pl.started[i] = pl.started[i][:0]
	}
	// Each node's list of releases keeps its array (buildReleases).
	pl.releases, pl.relBuf = prev.releases, prev.relBuf[:0]
	pl.open, pl.failed = prev.open[:0], prev.failed[:0]
	for i := range pl.free.nodes {
		if n := &pl.free.nodes[i]; n.usable && n.cpus > 0 {
			pl.open = append(pl.open, i)
		}
	}
	if prev.estimates != nil {
		pl.estimates, pl.reservations = prev.estimates, prev.reservations
		if len(pl.estimates) > 0 || len(pl.reservations) > 0 {
			clear(pl.estimates)
			clear(pl.reservations)
		}
	}
	if len(s.Advance) > 0 {
		pl.adv = pl.buildAdvance()
	}
}

// samePartitions reports whether b is the very list a was (the same
// array, length and names): the state hands every pass the list it
// built after the last entry that changed the partitions, so the
// placer's index by name is kept until then.
func samePartitions(a, b []api.Partition) bool {
	if len(a) != len(b) || len(a) > 0 && &a[0] != &b[0] {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}

// resized returns buf with length n, reusing its array when it is large
// enough; the elements it keeps are not cleared.
func resized[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// cleared returns buf with length n and every element zero, reusing its
// array when it is large enough.
func cleared[T any](buf []T, n int) []T {
	buf = resized(buf, n)
	clear(buf)
	return buf
}

// lookups remembers the last partition and QoS a placer looked up by name:
// the jobs of a pass mostly share both, and a string-keyed map lookup is a
// good part of placing a job that waits.
type lookups struct {
	partName string
	part     *api.Partition
	partSet  bool
	qosName  string
	qos      *api.QOS
	qosSet   bool
}

// partition returns the pass's partition named name; nil when unknown.
func (pl *placer) partition(name string) *api.Partition {
	if m := &pl.memo; !m.partSet || m.partName != name {
		m.partName, m.part, m.partSet = name, pl.parts[name], true
	}
	return pl.memo.part
}

// qosOf returns job j's QoS; nil when it names none that exists.
func (pl *placer) qosOf(j *state.Job) *api.QOS {
	if m := &pl.memo; !m.qosSet || m.qosName != j.Spec.QOS {
		m.qosName, m.qos, m.qosSet = j.Spec.QOS, pl.s.QOS[j.Spec.QOS], true
	}
	return pl.memo.qos
}

// tier returns the priority tier of j's partition (Slurm's PriorityTier).
func (pl *placer) tier(j *state.Job) int {
	if p := pl.partition(pl.partitionOf(j)); p != nil {
		return p.PriorityTier
	}
	return 0
}
