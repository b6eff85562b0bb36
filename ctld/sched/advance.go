package sched

import (
	"math"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// Advance reservations (Snapshot.Advance) in a pass.
//
// A reservation holds, on each of its nodes and during each of its
// windows, the whole node or its share of it (a capacity reservation's
// CPUs, their share of memory, and GPUs). The hold comes out of the node's
// profile (profile.go) before anything is placed, so a job that may not
// use the reservation starts on the node only if its run ends before the
// next window, and backfill plans around the windows as it plans around
// running jobs. What the reservation holds on a node is also kept as a
// profile of its own, the room its jobs have: a job that names the
// reservation starts only on its nodes, within a window (unless FLEX),
// and takes its room from that profile.
//
// A reusable reservation's room comes back when its jobs end; a
// consumable one's (PURGE_COMP on a capacity reservation) does not: what
// a job takes goes back to the node, for any job, when it ends.
//
// MAINT and OVERLAP reservations take precedence where they meet others:
// they are held first, and a later reservation holds only what is left
// of the node in the overlap.
//
// Windows are held up to resvLookahead ahead; a repeating reservation
// holds its node for good from there, so a job that would run that long
// never starts on it.

// resvLookahead is how far ahead a repeating reservation's windows are
// held one by one.
const resvLookahead = 14 * 24 * time.Hour

// advance is a pass's view of the advance reservations.
type advance struct {
	list   []*api.Reservation
	byName map[string]int
	held   []resvHeld
	// spans lists, by node index, the windows held on the node.
	spans [][]span
	// wake is the earliest window start or end after now; 0 when none.
	wake int64
	far  int64
	segs []seg
	// maint remembers maintBlocks' answers by request shape.
	maint map[maintKey]bool
	// cutoff is, by node index, when the node's profile first has no CPU
	// free (a window that holds it whole, say): no job that would still
	// run then fits. 0 when not known yet (past).
	cutoff []int64
}

// maintKey is a request's shape for maintBlocks' memory.
type maintKey struct {
	part     string
	cpus     int
	mem, dur int64
}

// resvHeld is one reservation in a pass: its window in force (or next)
// and its room on each node.
type resvHeld struct {
	ws, we int64
	nodes  map[int]*resvNode
}

// resvNode is a reservation's room on one node: CPUs and memory over
// time (none outside its windows), and GPUs now.
type resvNode struct {
	room profile
	gpus int
}

// span is one window of reservation k held on a node.
type span struct {
	start, end int64
	k          int
}

// seg is what a hold took from a profile during [start, end).
type seg struct {
	start, end int64
	cpus       int
	mem        int64
}

// takeUpTo takes up to cpus and mem from p during [start, end), never
// below zero, and appends what it took, step by step, to out.
func (p *profile) takeUpTo(start, end int64, cpus int, mem int64, out []seg) []seg {
	if end <= start {
		return out
	}
	p.split(start)
	p.split(end)
	q := *p
	for i := max(q.index(start), 0); i < len(q) && q[i].at < end; i++ {
		c, m := min(cpus, max(q[i].cpus, 0)), min(mem, max(q[i].mem, 0))
		if c == 0 && m == 0 {
			continue
		}
		stop := end
		if i+1 < len(q) {
			stop = min(end, q[i+1].at)
		}
		q[i].cpus -= c
		q[i].mem -= m
		out = append(out, seg{start: max(q[i].at, start), end: stop, cpus: c, mem: m})
	}
	return out
}

// nodeIndex returns the index of node name in the pass's node table, or
// -1.
func (pl *placer) nodeIndex(name string) int {
	nodes := pl.free.nodes
	i, ok := slices.BinarySearchFunc(nodes, name, func(n nodeFree, name string) int { return strings.Compare(n.name, name) })
	if !ok {
		return -1
	}
	return i
}

// buildAdvance holds the snapshot's reservations in the nodes' profiles
// and builds each one's room.
func (pl *placer) buildAdvance() *advance {
	list := pl.s.Advance
	a := &advance{list: list, byName: make(map[string]int, len(list)), held: make([]resvHeld, len(list)),
		spans: make([][]span, len(pl.free.nodes)), far: pl.now + int64(2*Horizon), cutoff: make([]int64, len(pl.free.nodes))}
	order := make([]int, len(list))
	for k, r := range list {
		a.byName[r.Name] = k
		order[k] = k
	}
	// Those that take precedence are held first.
	slices.SortStableFunc(order, func(x, y int) int {
		px, py := list[x].Precedes(), list[y].Precedes()
		switch {
		case px && !py:
			return -1
		case py && !px:
			return 1
		}
		return 0
	})
	left := map[int]profile{} // by node: what is left to hold
	var wins [][2]time.Time
	for _, k := range order {
		r := list[k]
		h := &a.held[k]
		h.nodes = map[int]*resvNode{}
		ws, we := r.Window(pl.s.Now)
		h.ws, h.we = ws.UnixNano(), a.end(we)
		a.noteWake(h.ws, pl.now)
		a.noteWake(h.we, pl.now)
		wins = a.windows(r, pl.s.Now, wins[:0])
		for _, name := range r.Nodes {
			i := pl.nodeIndex(name)
			if i < 0 {
				continue
			}
			n := &pl.free.nodes[i]
			cpus, mem, gpus := n.totalCPUs, n.totalMem, 0
			if r.Capacity() {
				cpus, mem, gpus = shareOf(r, name)
			}
			acc, ok := left[i]
			if !ok {
				acc = profile{{at: pl.now, cpus: n.totalCPUs, mem: n.totalMem}}
			}
			rn := &resvNode{room: profile{{at: pl.now}}, gpus: gpus}
			p := pl.profile(i)
			for _, w := range wins {
				s, e := max(w[0].UnixNano(), pl.now), a.end(w[1])
				a.segs = acc.takeUpTo(s, e, cpus, mem, a.segs[:0])
				for _, g := range a.segs {
					p.take(g.start, g.end, g.cpus, g.mem)
					rn.room.take(g.start, g.end, -g.cpus, -g.mem)
				}
				a.spans[i] = append(a.spans[i], span{start: s, end: e, k: k})
			}
			left[i] = acc
			pl.profiles[i] = p
			pl.reserved[i] = true
			h.nodes[i] = rn
		}
	}
	a.giveBackRunning(pl)
	return a
}

// end returns a window's end in the pass's time, far for none.
func (a *advance) end(t time.Time) int64 {
	if t.IsZero() || t.Equal(state.Forever) {
		return a.far
	}
	return min(t.UnixNano(), a.far)
}

func (a *advance) noteWake(t, now int64) {
	if t > now && t < a.far && (a.wake == 0 || t < a.wake) {
		a.wake = t
	}
}

// windows returns the windows of r to hold: those of the next
// resvLookahead one by one, then, for a repeating reservation, the rest of
// time as one.
func (a *advance) windows(r *api.Reservation, now time.Time, buf [][2]time.Time) [][2]time.Time {
	until := now.Add(resvLookahead)
	buf = state.ResvWindows(r, now, until, buf)
	if p := r.Period(); p > 0 {
		start, _ := r.Window(until)
		if start.Before(until) {
			start = start.Add(p) // held one by one already
		}
		buf = append(buf, [2]time.Time{start, time.Time{}})
	}
	return buf
}

// shareOf returns what capacity reservation r still holds on node name:
// its share, less what its jobs consumed when it is consumable.
func shareOf(r *api.Reservation, name string) (int, int64, int) {
	for _, p := range r.Parts {
		if p.Node != name {
			continue
		}
		if !r.Consumable() || p.CPUs == 0 {
			return p.CPUs, p.MemMB, p.GPUs
		}
		left := p.CPUs - p.UsedCPUs
		return left, p.MemMB * int64(left) / int64(p.CPUs), p.GPUs - p.UsedGPUs
	}
	return 0, 0, 0
}

// giveBackRunning counts the running jobs of reusable reservations in
// their room: while one runs, the room it holds is its own (its node's
// free figures already lack it), so the hold on the node is that much
// smaller until it is expected to end. A consumable reservation's parts
// already lack what its jobs took.
func (a *advance) giveBackRunning(pl *placer) {
	for _, run := range pl.s.Running {
		name := run.Job.Spec.Reservation
		if name == "" {
			continue
		}
		k, ok := a.byName[name]
		if !ok || a.list[k].Consumable() {
			continue
		}
		i := pl.nodeIndex(run.Alloc.Node)
		rn := a.held[k].nodes[i]
		if rn == nil {
			continue
		}
		part := pl.partitionOf(run.Job)
		end := expectedEnd(run, pl.parts[part], pl.s.Now).UnixNano()
		al := run.Alloc
		a.segs = rn.room.takeUpTo(pl.now, end, al.HeldCPUs(), al.HeldMemMB(), a.segs[:0])
		p := pl.profiles[i]
		for _, g := range a.segs {
			p.take(g.start, g.end, -g.cpus, -g.mem)
		}
		pl.profiles[i] = p
		if al.Placement != nil {
			rn.gpus = max(rn.gpus-len(al.Placement.GPUs), 0)
		}
	}
}

// past reports whether a run that ends at end would still run when node
// i has no CPU free: then it fits there whatever it asks for. The answer
// comes from the node's profile when first asked: the pass only takes
// from profiles, so the time found can only come earlier, and a later
// question that it lets through is checked in full (release forgets it
// when it gives room back).
func (a *advance) past(pl *placer, i int, end int64) bool {
	if len(a.spans[i]) == 0 {
		return false
	}
	if a.cutoff[i] == 0 {
		a.cutoff[i] = math.MaxInt64
		for _, st := range pl.profile(i) {
			if st.cpus <= 0 {
				a.cutoff[i] = max(st.at, pl.now)
				break
			}
		}
	}
	return end > a.cutoff[i]
}

// heldGPUs returns used with the GPUs that reservations other than own
// hold on node i during [now, end) marked as used too, or used itself when
// they hold none.
func (a *advance) heldGPUs(i int, inv *api.Inventory, used *state.Used, now, end int64, own int) *state.Used {
	held := 0
	for _, sp := range a.spans[i] {
		if sp.k != own && sp.start < end && now < sp.end {
			if rn := a.held[sp.k].nodes[i]; rn != nil {
				held += rn.gpus
			}
		}
	}
	if held == 0 || inv == nil {
		return used
	}
	c := state.NewUsed()
	for k, v := range used.CPUs {
		c.CPUs[k] = v
	}
	for k, v := range used.Mem {
		c.Mem[k] = v
	}
	for k, v := range used.Hugepages {
		c.Hugepages[k] = v
	}
	for k, v := range used.Devices {
		c.Devices[k] = v
	}
	// The last free GPUs are held: which ones does not matter, only how
	// many are left.
	for g := len(inv.GPUs) - 1; g >= 0 && held > 0; g-- {
		if id := inv.GPUs[g].UUID; !c.Devices[id] && !inv.GPUs[g].MIGEnabled {
			c.Devices[id] = true
			held--
		}
	}
	return c
}

// maintBlocks reports whether a job of partition part is kept off by
// maintenance: every usable node of the partition that could hold it is in
// a maintenance reservation during the run it would make now. It then
// waits "ReqNodeNotAvail, Reserved for maintenance". The answer is kept
// for the pass by the job's shape: the scan stops at the first node that
// is not in maintenance, which is soon unless the maintenance covers most
// of the partition.
func (a *advance) maintBlocks(pl *placer, part string, cpus int, mem, dur int64) bool {
	key := maintKey{part: part, cpus: cpus, mem: mem, dur: dur}
	if v, ok := a.maint[key]; ok {
		return v
	}
	blocked := false
	for i := range pl.free.nodes {
		n := &pl.free.nodes[i]
		if !n.usable || n.totalCPUs < cpus || n.totalMem < n.need(mem) || !slices.Contains(n.partitions, part) {
			continue
		}
		if !a.maintDuring(i, pl.now, pl.now+dur) {
			blocked = false
			break
		}
		blocked = true
	}
	if a.maint == nil {
		a.maint = map[maintKey]bool{}
	}
	a.maint[key] = blocked
	return blocked
}

// maintDuring reports whether a maintenance reservation holds node i
// during some of [start, end).
func (a *advance) maintDuring(i int, start, end int64) bool {
	for _, sp := range a.spans[i] {
		if a.list[sp.k].Has(api.ResvMaint) && sp.start < end && start < sp.end {
			return true
		}
	}
	return false
}

// holdsDuring reports whether a reservation holds node i during some of
// [start, end).
func (a *advance) holdsDuring(i int, start, end int64) bool {
	for _, sp := range a.spans[i] {
		if sp.start < end && start < sp.end {
			return true
		}
	}
	return false
}

// fitsWith reports whether p plus room q leaves cpus and mem free during
// all of [start, end): the node's free resources less every other hold.
func fitsWith(p, q profile, start, end int64, cpus int, mem int64) bool {
	i, j := p.index(start), q.index(start)
	for t := start; t < end; {
		if p[i].cpus+q[j].cpus < cpus || p[i].mem+q[j].mem < mem {
			return false
		}
		next := end
		if i+1 < len(p) && p[i+1].at < next {
			next = p[i+1].at
		}
		if j+1 < len(q) && q[j+1].at < next {
			next = q[j+1].at
		}
		t = next
		for i+1 < len(p) && p[i+1].at <= t {
			i++
		}
		for j+1 < len(q) && q[j+1].at <= t {
			j++
		}
	}
	return true
}

// placeMember places job j, which names a reservation: inside it, on its
// nodes and within its window, from the room it has there. It returns
// whether j started, and whether the caller should place it as any other
// job instead (FLEX, when it does not fit inside).
func (pl *placer) placeMember(j *state.Job, plan *Plan, task int, part string, req NodeRequest, dur int64) (started, outside bool) {
	a := pl.adv
	k, ok := -1, false
	if a != nil {
		k, ok = a.byName[j.Spec.Reservation]
	}
	if !ok {
		plan.Reasons[j.ID] = api.ReasonReservationDeleted
		return false, false
	}
	r, h := a.list[k], &a.held[k]
	flex := r.Has(api.ResvFlex)
	end := pl.now + dur
	if !r.Admits(j.Spec.User, j.Spec.Account) {
		plan.Reasons[j.ID] = api.ReasonReservation
		return false, flex
	}
	if pl.now < h.ws || end > h.we {
		plan.Reasons[j.ID] = api.ReasonReservation
		pl.estimateMember(j, r, h, req, dur)
		return false, flex
	}
	cpus, mem := req.CPUs, req.MemMB
	for _, name := range r.Nodes {
		i := pl.nodeIndex(name)
		if i < 0 || h.nodes[i] == nil || pl.claimed[i] {
			continue
		}
		rn := h.nodes[i]
		n := &pl.free.nodes[i]
		need := n.need(mem)
		if !n.usable || n.cpus < cpus || n.mem < need || n.tmp < req.TmpMB || !slices.Contains(n.partitions, part) ||
			!rn.room.fits(pl.now, end, cpus, need) || !fitsWith(pl.profiles[i], rn.room, pl.now, end, cpus, need) {
			continue
		}
		var placement *api.Placement
		if hasTopology(n.inv) || req.needsInventory() {
			if req.GPUs > rn.gpus {
				continue
			}
			used := a.heldGPUs(i, n.inv, pl.usedOf(i), pl.now, end, k)
			p, ok := PlaceInNode(n.inv, used, req)
			if !ok {
				continue
			}
			placement = &p
		}
		pl.startMember(j, plan, task, i, k, req, end, placement)
		return true, false
	}
	plan.Reasons[j.ID] = api.ReasonResources
	pl.estimateMember(j, r, h, req, dur)
	return false, flex
}

// estimateMember gives a job of reservation r that cannot start now its
// expected start (squeue --start, sbatch --test-only): the earliest time
// the reservation's room on one of its nodes holds it for its whole run
// within a window, as the room stands after this pass's starts. It is an
// estimate only: the room is the reservation's, so no other job can take
// it, and nothing is held for the job (conservative backfill keeps no
// hold for a job of a reservation either).
func (pl *placer) estimateMember(j *state.Job, r *api.Reservation, h *resvHeld, req NodeRequest, dur int64) {
	best, bestAt := -1, int64(0)
	for _, name := range r.Nodes {
		i := pl.nodeIndex(name)
		if i < 0 || h.nodes[i] == nil {
			continue
		}
		n := &pl.free.nodes[i]
		if !n.usable || n.totalCPUs < req.CPUs {
			continue
		}
		at, ok := h.nodes[i].room.earliest(pl.now, dur, req.CPUs, n.need(req.MemMB))
		if ok && at+dur <= pl.adv.far && (best < 0 || at < bestAt) {
			best, bestAt = i, at
		}
	}
	if best < 0 {
		return
	}
	if pl.estimates == nil {
		pl.estimates = map[uint64]time.Time{}
		pl.reservations = map[uint64]Reservation{}
	}
	at := time.Unix(0, bestAt).UTC()
	pl.estimates[j.ID] = at
	pl.reservations[j.ID] = Reservation{Start: at, Node: pl.free.nodes[best].name}
}

// startMember starts job j of reservation k on node i: the node's free
// figures lose what it takes, and the reservation's room there (not the
// node's profile, which held that room already) loses it for the job's run,
// or, consumable, for good. Scratch space is the node's, not the
// reservation's: the job holds it as it would outside one.
func (pl *placer) startMember(j *state.Job, plan *Plan, task, i, k int, req NodeRequest, end int64, placement *api.Placement) {
	a := pl.adv
	n := &pl.free.nodes[i]
	rn := a.held[k].nodes[i]
	cpus, mem := req.CPUs, req.MemMB
	pl.take(i, pl.now, end, cpus, n.need(mem))
	n.tmp -= req.TmpMB
	until := end
	if a.list[k].Consumable() {
		until = a.far
	}
	a.segs = rn.room.takeUpTo(pl.now, until, cpus, n.need(mem), a.segs[:0])
	p := pl.profiles[i]
	for _, g := range a.segs {
		p.take(g.start, g.end, -g.cpus, -g.mem)
	}
	pl.profiles[i] = p
	if placement != nil {
		rn.gpus = max(rn.gpus-len(placement.GPUs), 0)
		pl.usedOf(i).Add(placement, 1)
	}
	pl.countQOS(j, cpus)
	pl.lic.take(j.Spec.Licenses)
	plan.Starts = append(plan.Starts, Start{JobID: j.ID, Node: n.name, CPUs: cpus, MemMB: n.need(mem) - n.overhead, OverheadMB: n.overhead,
		TmpMB: req.TmpMB, Array: task >= 0, Task: max(task, 0), Placement: placement})
	delete(plan.Reasons, j.ID)
}
