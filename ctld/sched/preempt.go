package sched

import (
	"cmp"
	"slices"

	"corral/api"
	"corral/ctld/state"
	"corral/qos"
)

// qosLimit returns the reason a limit of j's QoS q holds j back, or ""
// (package qos says which).
func (pl *placer) qosLimit(j *state.Job, q *api.QOS, cpus int) api.Reason {
	if r := qos.WallLimit(q, jobLimit(j, pl.partition(pl.partitionOf(j)))); r != "" {
		return r
	}
	if q.MaxJobsPerUser <= 0 && q.GrpCPUs <= 0 {
		return ""
	}
	return pl.qosUsage().Limit(q, j.Spec.User, cpus)
}

// qosUsage returns the QoS usage counts, built from the running jobs on
// first use (a run being stopped counts no more).
func (pl *placer) qosUsage() *qos.Usage {
	if pl.usage == nil {
		pl.usage = qos.NewUsage()
		for _, r := range pl.s.Running {
			if r.Alloc.Desired != state.AllocStop {
				pl.usage.Add(r.Job.Spec.QOS, r.Job.Spec.User, r.Alloc.HeldCPUs())
			}
		}
	}
	return pl.usage
}

// countQOS records a start against its QoS's limits.
func (pl *placer) countQOS(j *state.Job, cpus int) {
	if pl.usage != nil {
		pl.usage.Add(j.Spec.QOS, j.Spec.User, cpus)
	}
}

// resume gives jobs suspended by preemption their CPUs back once the job
// that preempted them is gone (neither pending nor holding a node) and
// the CPUs are free, before any pending job is placed.
//
// The suspended jobs are taken in job id order, whatever order the
// snapshot lists them in, so two of them waiting for the same CPUs always
// resolve the same way.
func (pl *placer) resume(plan *Plan) {
	var lent []Run
	for _, r := range pl.s.Running {
		if r.Alloc.CPUsLent && r.Job.State == api.StateSuspended {
			lent = append(lent, r)
		}
	}
	slices.SortFunc(lent, func(a, b Run) int { return cmp.Compare(a.Job.ID, b.Job.ID) })
	var active map[uint64]bool
	for _, r := range lent {
		a := r.Alloc
		if active == nil {
			active = make(map[uint64]bool, len(pl.s.Running)+len(pl.s.Pending))
			for _, o := range pl.s.Running {
				active[o.Job.ID] = true
			}
			for _, p := range pl.s.Pending {
				active[p.ID] = true
			}
		}
		if active[a.PreemptedBy] {
			continue
		}
		for i := range pl.free.nodes {
			n := &pl.free.nodes[i]
			if n.name != a.Node || n.cpus < a.CPUs {
				continue
			}
			if p := a.Placement; p != nil {
				// Its own CPU ids must be free again, not just as many.
				u := pl.usedOf(i)
				if slices.ContainsFunc(p.CPUs, func(c int) bool { return u.CPUs[c] }) {
					break
				}
				u.Add(&api.Placement{CPUs: p.CPUs}, 1)
			}
			n.cpus -= a.CPUs
			plan.Resumes = append(plan.Resumes, r.Job.ID)
			break
		}
	}
}

// preempt looks for running jobs whose preemption lets j start: on each
// usable node of its partition, the victims its QoS may preempt (never one
// inside its QoS's exempt time), cheapest first — lowest priority, then
// least run time lost — until the node would have room. It picks the node
// whose victims cost least, records them in the plan and claims the node
// for j (nothing else starts there this pass). A preemption that would
// not free enough is never made. It reports whether it preempted.
//
// A victim preempted by migration needs a destination with room, which
// the pass takes when the victim's node is chosen; a victim that has none,
// or cannot migrate, is preempted by its QoS's fallback mode instead
// (qos.Fallback), and so is a victim of mode checkpoint that cannot be
// saved (cancelled when that fallback is checkpoint too).
//
// q is j's QoS, which names whom it may preempt; tmp is the scratch space
// j asks for (--tmp).
func (pl *placer) preempt(j *state.Job, q *api.QOS, part string, cpus int, mem, tmp int64, plan *Plan) bool {
	if pl.onNode == nil {
		pl.onNode, pl.victims = map[string][]Run{}, map[uint64]bool{}
		for _, r := range pl.s.Running {
			pl.onNode[r.Alloc.Node] = append(pl.onNode[r.Alloc.Node], r)
		}
	}
	var best *preemptChoice
	for i := range pl.free.nodes {
		n := &pl.free.nodes[i]
		if !n.usable || pl.claimed[i] || n.totalCPUs < cpus || n.totalMem < n.need(mem) || n.totalTmp < tmp || !slices.Contains(n.partitions, part) {
			continue
		}
		if pl.adv != nil && pl.adv.holdsDuring(i, pl.now, pl.now+int64(jobLimit(j, pl.partition(part)))) {
			continue // a reservation holds it: freeing it would not let j in
		}
		c, ok := pl.victimsOn(i, q, cpus, n.need(mem), tmp)
		if ok && (best == nil || c.prio < best.prio || c.prio == best.prio && c.lost < best.lost) {
			best = &c
		}
	}
	if best == nil {
		return false
	}
	pl.claimed[best.node] = true
	for _, v := range best.victims {
		pl.victims[v.Job.ID] = true
		mode := v.mode
		if mode == api.PreemptMigrate {
			mv := Move{Job: v.Job, Alloc: v.Alloc, Preemptor: j.ID}
			if pl.placeMove(mv, plan) {
				continue
			}
			// The room the dry run counted on went to an earlier victim
			// with a placement of its own: the fallback frees the node
			// all the same (a suspended one keeps its memory, and j may
			// wait for it one pass longer).
			mode = pl.fallback(v.Run)
		}
		plan.Preemptions = append(plan.Preemptions, Preemption{Victim: v.Job.ID, Preemptor: j.ID, Mode: mode})
	}
	return true
}

// preemptChoice is the victims whose preemption would make room on one
// node (by the pass's index), each with its mode, and what they cost: the
// sum of their priorities, and the run time lost.
type preemptChoice struct {
	node    int
	victims []preemptVictim
	prio    int64
	lost    float64
}

type preemptVictim struct {
	Run
	mode api.PreemptMode
}

// victimsOn returns the cheapest victims on node i whose preemption for a
// job of QoS q gives it cpus CPUs and mem MiB (its runner's overhead
// included), and whether any do.
func (pl *placer) victimsOn(i int, q *api.QOS, cpus int, mem, tmp int64) (preemptChoice, bool) {
	n := &pl.free.nodes[i]
	// Jobs already ending (an earlier preemption, a cancel) or leaving
	// (a migration, a checkpoint) count as gone: when they free enough,
	// the job only has to wait for them.
	freeCPUs, freeMem, freeTmp := n.cpus, n.mem, n.tmp
	for _, r := range pl.onNode[n.name] {
		if r.Alloc.Desired == state.AllocStop || pl.s.Going[r.Alloc.ID] {
			freeCPUs += r.Alloc.CPUs
			freeMem += r.Alloc.MemMB + r.Alloc.OverheadMB
			freeTmp += r.Alloc.TmpMB
		}
	}
	room := func() bool { return freeCPUs >= cpus && freeMem >= mem && freeTmp >= tmp }
	var cands []Run
	for _, r := range pl.onNode[n.name] {
		if r.Job.State != api.StateRunning || pl.victims[r.Job.ID] || pl.s.Going[r.Alloc.ID] || r.Alloc.Desired == state.AllocStop ||
			!qos.MayPreempt(q, pl.s.QOS[r.Job.Spec.QOS], r.Alloc.Elapsed(pl.s.Now)) {
			continue
		}
		cands = append(cands, r)
	}
	if len(cands) == 0 && !room() {
		return preemptChoice{}, false
	}
	total := totalCPUs(pl.s.Nodes)
	vprio := func(r Run) int64 { return Priority(r.Job, pl.s, total).Priority }
	order := func(r Run) qos.Victim {
		return qos.Victim{ID: r.Job.ID, Priority: vprio(r), Elapsed: r.Alloc.Elapsed(pl.s.Now)}
	}
	slices.SortFunc(cands, func(a, b Run) int { return qos.CompareVictims(order(a), order(b)) })
	c := preemptChoice{node: i}
	var held tentative // the destinations the node's victims would take
	for _, r := range cands {
		if room() {
			break
		}
		mode := pl.victimMode(r, &held)
		c.victims = append(c.victims, preemptVictim{r, mode})
		c.prio += vprio(r)
		if mode != api.PreemptMigrate && mode != api.PreemptCheckpoint {
			c.lost += r.Alloc.Elapsed(pl.s.Now).Seconds() // a moved or parked job goes on
		}
		freeCPUs += r.Alloc.CPUs
		if mode != api.PreemptSuspend {
			// A suspended job keeps its memory and its scratch files.
			freeMem += r.Alloc.MemMB + r.Alloc.OverheadMB
			freeTmp += r.Alloc.TmpMB
		}
	}
	// Not enough even with every candidate gone: no preemption.
	return c, room()
}

// victimMode is how running job r would be preempted now: its mode
// (preemptMode), unless that is migrate and it cannot migrate or no other
// node has room for it (held counts the rooms that earlier victims of the
// same node would take, and takes r's), or checkpoint and it cannot be
// saved; then its fallback (fallback).
func (pl *placer) victimMode(r Run, held *tentative) api.PreemptMode {
	mode := pl.preemptMode(r.Job)
	st := pl.s.Stuck[r.Job.ID]
	if mode == api.PreemptMigrate {
		if !st.NoMigrate {
			if i, _ := pl.findMove(Move{Job: r.Job, Alloc: r.Alloc}, held); i >= 0 {
				held.add(i, r.Alloc.CPUs, r.Alloc.MemMB+pl.free.nodes[i].overhead)
				return mode
			}
		}
		return pl.fallback(r)
	}
	if mode == api.PreemptCheckpoint && st.NoCheckpoint {
		return pl.fallback(r)
	}
	return mode
}

// fallback is how a victim that was to migrate, or to be checkpointed, is
// preempted instead: its QoS's fallback mode, or cancel when that is
// checkpoint and it cannot be saved.
func (pl *placer) fallback(r Run) api.PreemptMode {
	mode := qos.Fallback(pl.s.QOS[r.Job.Spec.QOS])
	if mode == api.PreemptCheckpoint && pl.s.Stuck[r.Job.ID].NoCheckpoint {
		return api.PreemptCancel
	}
	return mode
}

// tentative is what a dry run of migrations would take on each
// destination node (by the pass's node index).
type tentative map[int]struct {
	cpus int
	mem  int64
}

func (t *tentative) add(i, cpus int, mem int64) {
	if *t == nil {
		*t = tentative{}
	}
	h := (*t)[i]
	h.cpus += cpus
	h.mem += mem
	(*t)[i] = h
}

// preemptMode is how victim v is preempted: its QoS's mode, else its
// partition's, else cancel.
func (pl *placer) preemptMode(v *state.Job) api.PreemptMode {
	var part api.PreemptMode
	if p := pl.parts[pl.partitionOf(v)]; p != nil {
		part = p.PreemptMode
	}
	return qos.Mode(pl.s.QOS[v.Spec.QOS], part)
}
