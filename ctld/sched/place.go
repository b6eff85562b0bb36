package sched

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/qos"
)

// placer places the ready jobs of one pass, in order, under the policy.
type placer struct {
	s       *Snapshot
	policy  Policy
	now     int64
	free    *capacity
	defPart string
	// parts indexes the snapshot's partitions by name; partsOf is the
	// list it was built from (kept from pass to pass while it is the
	// same list, see samePartitions).
	parts   map[string]*api.Partition
	partsOf []api.Partition
	// profiles holds the free-resource profile of the nodes that need one
	// (index as in free.nodes), built on first use; nil until then.
	profiles []profile
	// releases holds what each node's running jobs give back (index as
	// in free.nodes), built on first use (releasesBuilt).
	releases      [][]release
	releasesBuilt bool
	// relBuf is the scratch list a profile is built from; spare holds,
	// per node, an earlier pass's profile array to build the node's
	// profile in (see Pass).
	relBuf []release
	spare  []profile
	// reserved marks nodes holding a reservation made in this pass: a job
	// may start on one only if its profile allows it.
	reserved []bool
	// started holds, per node without a profile yet, what this pass's
	// starts there give back at their planned end.
	started [][]release
	// open lists the usable nodes that had free CPUs when last looked at:
	// the only ones a job can start on now. Starts only shrink it.
	open []int
	// failed remembers request shapes that found no node: a pass only
	// takes resources away, so a request at least as large fails too.
	failed    []shape
	estimates map[uint64]time.Time
	// activeTasks counts the running tasks of each array, built on
	// first use.
	activeTasks  map[uint64]int
	reservations map[uint64]Reservation
	// kept holds the previous pass's reservations that this pass holds
	// until their jobs are placed again (conservative only).
	kept map[uint64]kept
	// deps evaluates aftercorr task by task.
	deps *deps
	// memo remembers the last partition and QoS looked up.
	memo lookups
	// used is what each node's jobs hold inside it (placements), by node
	// index, built on first use.
	used map[int]*state.Used
	// never remembers, by request, inventoryReason's answer this pass.
	never map[requestKey]api.Reason
	// deviceHeld marks partitions where a job asking for devices waits:
	// later device jobs there wait behind it.
	deviceHeld map[string]bool
	// lic accounts the cluster's licenses (licenses.go).
	lic licenses
	// usage counts running jobs per QoS and user and CPUs per QoS, built
	// on first use and counted up as jobs start.
	usage *qos.Usage
	// onNode lists each node's running jobs (preemption candidates);
	// victims are the jobs already chosen; claimed nodes wait for a
	// preemptor and start nothing else this pass.
	onNode  map[string][]Run
	victims map[uint64]bool
	claimed []bool
	// adv holds the advance reservations (advance.go); nil when there
	// are none.
	adv *advance
	// nodeByName finds the snapshot's nodes by name, for the moves
	// (migrate.go) and restores; built on first use.
	nodeByName map[string]*state.Node
	// restoring is the job being placed when it starts from its
	// checkpoint (it may start only where the file can be read), nil
	// otherwise.
	restoring *state.Job
}

// kept is a previous reservation held in a node's profile.
type kept struct {
	node       int
	start, end int64
	cpus       int
	mem        int64
}

// shape is a request: partition, CPUs, memory (with overhead excluded),
// planned duration, and what it asks for inside a node.
type shape struct {
	part string
	cpus int
	mem  int64
	dur  int64
	in   NodeRequest
}

// covers reports whether a request as large as s in every way must fail
// wherever s failed.
func (s shape) covers(o shape) bool {
	a, b := s.in, o.in
	return (s.mem < 0) == (o.mem < 0) && o.in.TmpMB >= s.in.TmpMB && s.part == o.part && o.cpus >= s.cpus && o.mem >= s.mem && o.dur >= s.dur &&
		a.GPUType == b.GPUType && a.MIGProfile == b.MIGProfile && a.NUMA == b.NUMA &&
		a.WholeCores == b.WholeCores && a.Spread == b.Spread && slices.Equal(a.MemNodes, b.MemNodes) &&
		b.GPUs >= a.GPUs && b.MIG >= a.MIG && b.VFs >= a.VFs && hugeCovers(a.Hugepages, b.Hugepages)
}

// hugeCovers reports whether hugepage request b asks for at least a's
// pages of every size.
func hugeCovers(a, b []api.HugepageRequest) bool {
	for _, x := range a {
		n := int64(0)
		for _, y := range b {
			if y.SizeKB == x.SizeKB {
				n += y.Count
			}
		}
		if n < x.Count {
			return false
		}
	}
	return true
}

// lookAhead is how many more nodes the pass examines, after a first node
// that can hold a job with a placement scoring under 100, for a better one.
// It bounds the pass on large clusters where a request can score 100
// nowhere (a job wider than any NUMA node).
const lookAhead = 8

// keepReservations holds the previous reservations of the ready jobs in
// the profiles before anything is placed (conservative backfill).
func (pl *placer) keepReservations(ready []*state.Job) {
	if pl.policy != PolicyConservative || len(pl.s.Reservations) == 0 {
		return
	}
	index := make(map[string]int, len(pl.free.nodes))
	for i := range pl.free.nodes {
		index[pl.free.nodes[i].name] = i
	}
	for _, j := range ready {
		if j.Spec.Reservation != "" {
			continue // its advance reservation holds its room (advance.go)
		}
		r, ok := pl.s.Reservations[j.ID]
		i, known := index[r.Node]
		if !ok || !known || !pl.free.nodes[i].usable {
			continue
		}
		part := pl.partitionOf(j)
		n := &pl.free.nodes[i]
		k := kept{node: i, start: max(r.Start.UnixNano(), pl.now), cpus: j.Spec.CPUs(), mem: n.need(MemRequest(j, pl.s.DefMemPerCPU))}
		k.end = k.start + int64(jobLimit(j, pl.parts[part]))
		p := pl.profile(i)
		p.take(k.start, k.end, k.cpus, k.mem)
		pl.profiles[i] = p
		pl.reserved[i] = true
		if pl.kept == nil {
			pl.kept = map[uint64]kept{}
		}
		pl.kept[j.ID] = k
	}
}

// release gives back job id's previous reservation before it is placed
// again, so it can only move earlier.
func (pl *placer) release(id uint64) {
	if len(pl.kept) == 0 {
		return // no reservation is kept (always, but under conservative backfill)
	}
	k, ok := pl.kept[id]
	if !ok {
		return
	}
	delete(pl.kept, id)
	pl.failed = pl.failed[:0] // room came back: earlier failures may fit now
	if pl.adv != nil {
		pl.adv.cutoff[k.node] = 0
	}
	p := pl.profiles[k.node]
	p.take(k.start, k.end, -k.cpus, -k.mem)
	pl.profiles[k.node] = p
}

// partitionReason says why a job of partition p cannot start whatever the
// nodes hold: the partition is DOWN or INACTIVE, or the job asks for more
// or fewer nodes than it allows. "" when it may start.
func partitionReason(j *state.Job, p *api.Partition) api.Reason {
	if p == nil {
		return ""
	}
	switch p.State {
	case api.PartitionDown:
		return api.ReasonPartitionDown
	case api.PartitionInactive:
		return api.ReasonPartitionInactive
	}
	nodes := max(j.Spec.Nodes, 1)
	if p.MaxNodes > 0 && nodes > p.MaxNodes || p.MinNodes > 0 && nodes < p.MinNodes {
		return api.ReasonPartitionNodeLimit
	}
	return ""
}

func (pl *placer) partitionOf(j *state.Job) string {
	if j.Spec.Partition != "" {
		return j.Spec.Partition
	}
	return pl.defPart
}

// place starts j now, gives it a reservation, or records why it waits.
//
// FCFS: the first job of a partition group that cannot start holds the
// group (Resources); every later job of the group waits (Priority).
//
// EASY: that first job instead gets a reservation at its earliest start on
// the node where it is earliest; later jobs of the group start now wherever
// they fit without touching a reservation (Priority otherwise).
//
// Conservative: every job that cannot start gets a reservation, so a later
// job starts now only if it delays no earlier one.
func (pl *placer) place(j *state.Job, plan *Plan, task int) bool {
	pl.release(j.ID)
	part := pl.partitionOf(j)
	partition := pl.partition(part)
	if r := partitionReason(j, partition); r != "" {
		plan.Reasons[j.ID] = r
		return false
	}
	if pl.lic.wait(j.Spec.Licenses) {
		plan.Reasons[j.ID] = api.ReasonLicenses
		return false
	}
	cpus, mem := j.Spec.CPUs(), MemRequest(j, pl.s.DefMemPerCPU)
	// What the in-node request adds to the CPUs, memory and scratch space
	// is read only on nodes with a topology, and for jobs that ask for
	// devices, hugepages or NUMA nodes.
	req := NodeRequest{CPUs: cpus, MemMB: mem, TmpMB: j.Spec.TmpMB}
	if pl.free.topology || len(j.Spec.Gres) > 0 || len(j.Spec.Hugepages) > 0 || len(j.Spec.MemNodes) > 0 {
		req = requestOf(j.Spec, cpus, mem)
	}
	devices := req.needsInventory()
	if !pl.free.anyCouldFit(part, cpus, mem, req.TmpMB) {
		plan.Reasons[j.ID] = api.ReasonResources
		return false
	}
	if devices {
		if r := pl.inventoryReason(part, req); r != "" {
			plan.Reasons[j.ID] = r
			return false
		}
	}
	q := pl.qosOf(j)
	if q != nil {
		if r := pl.qosLimit(j, q, cpus); r != "" {
			plan.Reasons[j.ID] = r
			return false
		}
	}
	if j.Spec.Reservation != "" {
		started, outside := pl.placeMember(j, plan, task, part, req, int64(jobLimit(j, partition)))
		if !outside {
			return started
		}
	}
	held := pl.free.held(part)
	if held && pl.policy == PolicyFCFS {
		// First come, first served: nothing overtakes the first job
		// that is waiting for resources on the nodes it could use.
		plan.Reasons[j.ID] = api.ReasonPriority
		return false
	}
	if devices && pl.deviceHeld[part] {
		// Reservations plan CPUs and memory over time, not devices: a
		// later device job could take the GPUs or VFs an earlier one is
		// waiting for. So device jobs queue in priority order per
		// partition group; jobs without devices still backfill.
		plan.Reasons[j.ID] = api.ReasonPriority
		return false
	}
	dur := int64(jobLimit(j, partition))
	pl.restoring = nil
	if state.Restoring(j) {
		pl.restoring = j
	}
	i, placement := pl.fitNow(part, cpus, mem, dur, &req)
	pl.restoring = nil
	if i >= 0 {
		n := &pl.free.nodes[i]
		held := cpus
		if placement != nil {
			held += len(placement.Idle) // the idle threads of its cores
		}
		pl.take(i, pl.now, pl.now+dur, held, n.need(mem))
		n.tmp -= req.TmpMB
		pl.countQOS(j, cpus)
		pl.lic.take(j.Spec.Licenses)
		if placement != nil {
			pl.usedOf(i).Add(placement, 1)
		}
		plan.Starts = append(plan.Starts, Start{JobID: j.ID, Node: n.name, CPUs: cpus, MemMB: n.need(mem) - n.overhead, OverheadMB: n.overhead,
			TmpMB: req.TmpMB, Array: task >= 0, Task: max(task, 0), Placement: placement})
		delete(plan.Reasons, j.ID)
		return true
	}
	reason := api.ReasonResources
	switch {
	case held:
		reason = api.ReasonPriority
	case pl.adv != nil && pl.adv.maintBlocks(pl, part, cpus, mem, dur):
		reason = api.ReasonReservedForMaint
	}
	plan.Reasons[j.ID] = reason
	// Its licenses wait with it: a later job must not take what it will
	// need when its CPUs are free.
	pl.lic.hold(j.Spec.Licenses)
	if q != nil && len(q.Preempt) > 0 && pl.preempt(j, q, part, cpus, mem, req.TmpMB, plan) {
		return false
	}
	if devices {
		pl.holdDevices(part)
	}
	if pl.policy == PolicyEASY && held {
		return false
	}
	pl.free.hold(part)
	if pl.policy == PolicyFCFS {
		return false
	}
	if i, at := pl.earliest(part, cpus, mem, req.TmpMB, dur); i >= 0 {
		pl.take(i, at, at+dur, cpus, pl.free.nodes[i].need(mem))
		pl.reserved[i] = true
		if pl.estimates == nil {
			pl.estimates = map[uint64]time.Time{}
			pl.reservations = map[uint64]Reservation{}
		}
		pl.estimates[j.ID] = time.Unix(0, at).UTC()
		pl.reservations[j.ID] = Reservation{Start: pl.estimates[j.ID], Node: pl.free.nodes[i].name}
	}
	return false
}

// placeArray starts as many of an array's pending tasks as fit, in index
// order, up to its throttle (--array=...%N: at most N tasks at a time).
func (pl *placer) placeArray(j *state.Job, plan *Plan) {
	limit := j.ArrayPending.Len()
	if a := j.Spec.Array; a != nil && a.Throttle > 0 {
		if pl.activeTasks == nil {
			pl.activeTasks = map[uint64]int{}
			for _, r := range pl.s.Running {
				if r.Job.IsArrayTask() {
					pl.activeTasks[r.Job.ArrayJobID]++
				}
			}
		}
		limit = min(limit, a.Throttle-pl.activeTasks[j.ID])
	}
	if limit <= 0 {
		plan.Reasons[j.ID] = api.ReasonJobArrayTaskLimit
		return
	}
	n, waiting, never := 0, 0, 0
	placed := true
	j.ArrayPending.Each(func(task int) bool {
		// aftercorr: each task waits for the same task of its target.
		if wait, nv := pl.deps.corrReady(j, task); wait || nv {
			if nv {
				never++
			} else {
				waiting++
			}
			return true
		}
		if !pl.place(j, plan, task) {
			placed = false
			return false
		}
		n++
		return n < limit
	})
	switch {
	case placed && n == 0 && waiting > 0:
		plan.Reasons[j.ID] = api.ReasonDependency
	case placed && n == 0 && never > 0:
		plan.Reasons[j.ID] = api.ReasonDependencyNeverSatisfied
	case placed && n == limit && n < j.ArrayPending.Len():
		plan.Reasons[j.ID] = api.ReasonJobArrayTaskLimit
	}
}

// fitNow returns the first usable node of the partition where the job can
// start now and run dur without touching a reservation, or -1.
//
// On nodes that reported their inventory the job also gets its exact
// placement (PlaceInNode): the node with the best score wins, ties going
// to the first in name order.
func (pl *placer) fitNow(part string, cpus int, mem, dur int64, r *NodeRequest) (int, *api.Placement) {
	if len(pl.open) == 0 {
		return -1, nil // every node is full
	}
	// The failed shapes are worth it with several nodes open; with one,
	// looking at it costs less and gives the same answer. Open nodes
	// only go, so a pass that has one left never reads them again. A
	// restore, held to the nodes that can read its file, neither reads
	// nor adds one.
	shapes := len(pl.open) > 1 && pl.restoring == nil
	if shapes {
		req := shape{part, cpus, mem, dur, *r}
		for _, f := range pl.failed {
			if f.covers(req) {
				return -1, nil
			}
		}
	}
	extra := -1 // nodes left to examine once a placement was found
	keep := pl.open[:0]
	found := -1
	var best *api.Placement
	for k, i := range pl.open {
		n := &pl.free.nodes[i]
		if n.cpus <= 0 || pl.reserved[i] && pl.adv != nil && pl.adv.past(pl, i, pl.now+1) {
			continue // full, or held whole by a reservation now: drop it from the open list
		}
		keep = append(keep, i)
		if pl.claimed[i] {
			continue
		}
		if n.cpus < wholeCoreCPUs(n.inv, cpus, r.WholeCores) || n.mem < n.need(mem) || n.tmp < r.TmpMB || !slices.Contains(n.partitions, part) {
			continue
		}
		if pl.restoring != nil && !pl.canRestoreOn(n.name) {
			continue
		}
		// Without a reservation a node's free resources only grow, so
		// fitting now is fitting for the whole run.
		if pl.reserved[i] && (pl.adv != nil && pl.adv.past(pl, i, pl.now+dur) || !pl.profile(i).fits(pl.now, pl.now+dur, cpus, n.need(mem))) {
			continue
		}
		if hasTopology(n.inv) || r.needsInventory() {
			if extra == 0 {
				keep = append(keep, pl.open[k+1:]...)
				break
			}
			if extra > 0 {
				extra--
			}
			used := pl.usedOf(i)
			if pl.adv != nil && r.GPUs > 0 {
				used = pl.adv.heldGPUs(i, n.inv, used, pl.now, pl.now+dur, -1)
			}
			in := *r
			if mem < 0 {
				in.MemMB = n.need(mem) - n.overhead // --mem=0: all of this node's
			}
			if !mayFit(n.inv, used, in) {
				continue
			}
			p, ok := PlaceInNode(n.inv, used, in)
			if !ok || best != nil && p.Score <= best.Score || pl.restoring != nil && !sameMemory(pl.restoring.Checkpoint.Placement, &p, r.NUMA) {
				continue
			}
			found, best = i, &p
			if p.Score < 100 {
				if extra < 0 {
					extra = lookAhead
				}
				continue // a better node may follow
			}
		} else if best != nil || pl.restoring != nil && !sameMemory(pl.restoring.Checkpoint.Placement, nil, r.NUMA) {
			continue // a node with a placement was found first, or a restore needs one
		} else {
			found = i
		}
		keep = append(keep, pl.open[k+1:]...)
		break
	}
	pl.open = keep
	if found < 0 && shapes {
		if len(pl.failed) == 8 {
			copy(pl.failed, pl.failed[1:])
			pl.failed = pl.failed[:7]
		}
		pl.failed = append(pl.failed, shape{part, cpus, mem, dur, *r})
	}
	return found, best
}

func hasTopology(inv *api.Inventory) bool { return inv != nil && inv.Topology != nil }

// inventoryReason says why no node of the partition could ever hold the
// request's devices or hugepages, even empty; "" when one could.
//
// The answer depends only on the request and the nodes' inventories, so it
// is remembered for the pass: every task of an array, and every job of the
// same shape, asks once.
func (pl *placer) inventoryReason(part string, r NodeRequest) api.Reason {
	if !r.needsInventory() {
		return ""
	}
	k := requestKey{part, r.CPUs, r.MemMB, r.GPUs, r.GPUType, r.MIG, r.MIGProfile, r.VFs, r.NUMA, fmt.Sprint(r.Hugepages, r.WholeCores, r.MemNodes)}
	if reason, ok := pl.never[k]; ok {
		return reason
	}
	reason := api.ReasonHugepagesUnavailable
	switch {
	case r.GPUs > 0 || r.MIG > 0 || r.VFs > 0:
		reason = api.ReasonGresUnavailable
	case len(r.Hugepages) == 0:
		reason = api.ReasonBadConstraints // --mem-bind names NUMA nodes no node has
	}
	for i := range pl.free.nodes {
		n := &pl.free.nodes[i]
		if slices.Contains(n.partitions, part) && hasTopology(n.inv) {
			if _, ok := PlaceInNode(n.inv, state.NewUsed(), r); ok {
				reason = ""
				break
			}
		}
	}
	if pl.never == nil {
		pl.never = map[requestKey]api.Reason{}
	}
	pl.never[k] = reason
	return reason
}

// requestKey is a NodeRequest in a partition, comparable (the hugepage
// list as text), for inventoryReason's memory.
type requestKey struct {
	part            string
	cpus            int
	mem             int64
	gpus            int
	gpuType         string
	mig             int
	migProfile      string
	vfs             int
	numa, hugepages string
}

// holdDevices stops later device jobs in every partition that shares a node
// with part (see place).
func (pl *placer) holdDevices(part string) {
	if pl.deviceHeld == nil {
		pl.deviceHeld = map[string]bool{}
	}
	pl.free.markGroup(pl.deviceHeld, part)
}

// usedOf returns what node i's jobs hold inside it, built on first use
// from the running jobs' placements.
func (pl *placer) usedOf(i int) *state.Used {
	if pl.used == nil {
		pl.used = map[int]*state.Used{}
	}
	if u := pl.used[i]; u != nil {
		return u
	}
	u := state.NewUsed()
	name := pl.free.nodes[i].name
	for _, r := range pl.s.Running {
		if r.Alloc.Node == name {
			u.AddAlloc(r.Alloc)
		}
	}
	pl.used[i] = u
	return u
}

// earliest returns the usable node of the partition where the job can start
// soonest, and when; -1 when no node will ever have room (a running job
// without a time limit, planned to run for Horizon, still counts as ending).
// Profiles plan CPUs and memory over time, not scratch space, but a node
// with less scratch space (tmp) than the job asks for in all is never a
// candidate.
func (pl *placer) earliest(part string, cpus int, mem, tmp, dur int64) (int, int64) {
	best, bestAt := -1, int64(0)
	for i := range pl.free.nodes {
		n := &pl.free.nodes[i]
		if !n.usable || n.totalCPUs < cpus || n.totalMem < n.need(mem) || n.totalTmp < tmp || !slices.Contains(n.partitions, part) {
			continue
		}
		at, ok := pl.profile(i).earliest(pl.now, dur, cpus, n.need(mem))
		if ok && (best < 0 || at < bestAt) {
			best, bestAt = i, at
		}
	}
	return best, bestAt
}

// take charges a start or a reservation to node i.
func (pl *placer) take(i int, start, end int64, cpus int, mem int64) {
	if start == pl.now {
		pl.free.nodes[i].cpus -= cpus
		pl.free.nodes[i].mem -= mem
		if pl.profiles[i] == nil {
			pl.started[i] = append(pl.started[i], release{at: end, cpus: cpus, mem: mem})
			return
		}
	}
	p := pl.profile(i)
	p.take(start, end, cpus, mem)
	pl.profiles[i] = p
}

// profile returns node i's profile, building it on first use from what is
// free now (which includes this pass's starts so far) and the expected ends
// of the node's running jobs.
func (pl *placer) profile(i int) profile {
	if pl.profiles[i] != nil {
		return pl.profiles[i]
	}
	if !pl.releasesBuilt {
		pl.buildReleases()
	}
	n := &pl.free.nodes[i]
	rel := append(pl.relBuf[:0], pl.releases[i]...)
	// This pass's starts on the node end too: their resources are already
	// gone from n.cpus and n.mem, and come back at their planned end.
	rel = append(rel, pl.started[i]...)
	pl.relBuf = rel
	pl.profiles[i] = buildProfile(pl.spare[i], pl.now, n.cpus, n.mem, rel)
	pl.spare[i] = nil
	return pl.profiles[i]
}

// wholeCoreCPUs is how many of a node's CPUs a request for cpus takes: with
// wholeCores (one thread per core), every thread of the cores it gets, on
// a node whose topology says how many a core has; else cpus.
func wholeCoreCPUs(inv *api.Inventory, cpus int, wholeCores bool) int {
	if !wholeCores || !hasTopology(inv) {
		return cpus
	}
	for _, n := range inv.Topology.Nodes {
		if len(n.CPUs) > 0 {
			return cpus * (1 + len(n.CPUs[0].Siblings))
		}
	}
	return cpus
}

// buildReleases lists, per node, what its running jobs give back and
// when they are expected to end, reusing the lists' arrays.
func (pl *placer) buildReleases() {
	pl.releasesBuilt = true
	pl.releases = resized(pl.releases, len(pl.free.nodes))
	for i := range pl.releases {
		pl.releases[i] = pl.releases[i][:0]
	}
	now := pl.s.Now
	for _, r := range pl.s.Running {
		i := pl.free.index(r.Alloc.Node)
		if i < 0 {
			continue
		}
		part := r.Job.Spec.Partition
		if part == "" {
			part = pl.defPart
		}
		a := r.Alloc
		end := expectedEndNanos(r, pl.partition(part), now, pl.now)
		pl.releases[i] = append(pl.releases[i], release{at: end, cpus: a.CPUs, mem: a.MemMB + a.OverheadMB})
	}
}
