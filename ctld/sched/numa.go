package sched

import (
	"math/bits"
	"slices"

	"corral/api"
	"corral/ctld/state"
	"corral/gpu"
	"corral/topology"
)

// NodeRequest is what a job needs inside one node.
type NodeRequest struct {
	CPUs  int
	MemMB int64
	// GPUs whole GPUs, of GPUType when set (matched against the model,
	// case-insensitively); MIG instances of profile MIGProfile.
	GPUs       int
	GPUType    string
	MIG        int
	MIGProfile string
	VFs        int
	Hugepages  []api.HugepageRequest
	// NUMA is api.NUMAPrefer (""), api.NUMAStrict or api.NUMANone.
	NUMA string
	// WholeCores runs the job on one thread of each core it gets and
	// holds the cores' other threads idle (--hint=nomultithread,
	// --threads-per-core=1, --ntasks-per-core=1); Spread deals its cores
	// and memory out evenly over as many NUMA nodes as it has cores
	// (--hint=memory_bound), for memory bandwidth.
	WholeCores bool
	Spread     bool
	// MemNodes, when set, are the only NUMA nodes (by id) the job's
	// memory and CPUs may come from (--mem-bind=map_mem:LIST).
	MemNodes []int
	// TmpMB is the node's scratch space the job holds (--tmp).
	TmpMB int64
}

// RequestOf reads a job's in-node request from its spec: --gres=gpu[:type]:N
// (a type like 1g.10gb asks for MIG instances), --gres=vf:N, --hugepages and
// --numa.
func RequestOf(j *state.Job, defMemPerCPU int64) NodeRequest {
	return requestOf(j.Spec, j.Spec.CPUs(), MemRequest(j, defMemPerCPU))
}

// requestOf is RequestOf for a spec whose CPUs and memory are known.
func requestOf(sp *state.JobSpec, cpus int, mem int64) NodeRequest {
	r := NodeRequest{CPUs: cpus, MemMB: mem, Hugepages: sp.Hugepages, NUMA: sp.NUMA,
		WholeCores: sp.OneThreadPerCore(), Spread: sp.Hint == api.HintMemoryBound, MemNodes: sp.MemNodes, TmpMB: sp.TmpMB}
	for _, g := range sp.Gres {
		switch {
		case g.Name == "gpu" && gpu.IsMIGProfile(g.Type):
			r.MIG, r.MIGProfile = r.MIG+g.Count, g.Type
		case g.Name == "gpu":
			r.GPUs, r.GPUType = r.GPUs+g.Count, g.Type
		case g.Name == "vf":
			r.VFs += g.Count
		}
	}
	return r
}

// needsInventory reports whether the request asks for devices or
// hugepages, which only a node that reported its inventory can give.
func (r NodeRequest) needsInventory() bool {
	return r.GPUs > 0 || r.MIG > 0 || r.VFs > 0 || len(r.Hugepages) > 0 || len(r.MemNodes) > 0
}

// PlaceInNode chooses the exact CPUs, NUMA nodes, memory, hugepages, GPUs,
// MIG instances and VFs for a request on a node with inventory inv, given
// what is already used; false when it cannot fit.
//
// Every set of NUMA nodes that can hold the CPUs, memory and hugepages is a
// candidate; its devices are the free ones nearest to it (strict: only on
// it). A candidate's score is 100 when its CPUs, memory and devices are all
// on one NUMA node, else round(100 × 10 / d) where d is the largest SLIT
// distance between any two NUMA nodes it touches (local distance is 10):
// two nodes 12 apart score 83, 21 apart 48, 31 apart 32. The best score
// wins; then fewer NUMA nodes; then packing (fewest free CPUs left on the
// chosen nodes); then the lowest node ids.
func PlaceInNode(inv *api.Inventory, used *state.Used, r NodeRequest) (api.Placement, bool) {
	if inv == nil || inv.Topology == nil || len(inv.Topology.Nodes) == 0 {
		return api.Placement{}, false
	}
	t := inv.Topology
	k := len(t.Nodes)
	freeCPUs := make([][][]int, k)
	freeMem := make([]int64, k)
	for i, n := range t.Nodes {
		freeCPUs[i] = freeUnits(n, used, r.WholeCores)
		freeMem[i] = n.MemMB - used.Mem[n.ID]
	}
	freeHuge := func(i int, size int64) int64 {
		n := t.Nodes[i]
		return n.Hugepages[size].Free - used.Hugepages[[2]int64{int64(n.ID), size}]
	}
	gpus, migs, vfs := freeDevices(inv, used, r)

	var best api.Placement
	bestKey := [4]int{-1}
	// Sets by size: once a set scores 100 no larger set can win (fewer
	// NUMA nodes are preferred at equal score), so larger sizes are
	// skipped.
	// Hosts with more than twelve NUMA nodes: sets of the first twelve.
	var setBuf [12]int
	for _, mask := range masksBySize(min(k, 12)) {
		if !r.Spread && bestKey[0] == 100 && -bits.OnesCount(mask) < bestKey[1] {
			break
		}
		if !allowedSet(t, mask, r.MemNodes) || r.Spread && bits.OnesCount(mask) > max(r.CPUs, 1) {
			continue
		}
		set := setBuf[:0] // indexes into t.Nodes
		for i := 0; i < k; i++ {
			if mask&(1<<i) != 0 {
				set = append(set, i)
			}
		}
		p, leftover, ok := fill(t, set, freeCPUs, freeMem, freeHuge, r)
		if !ok {
			continue
		}
		numaIDs := p.NUMANodes
		touched := slices.Clone(numaIDs)
		pick := func(from []gpu.Device, n int) ([]string, bool) {
			if n == 0 {
				return nil, true
			}
			cands := slices.Clone(from)
			if r.NUMA == api.NUMAStrict {
				cands = slices.DeleteFunc(cands, func(d gpu.Device) bool { return !slices.Contains(numaIDs, d.NUMA) })
			}
			if len(cands) < n {
				return nil, false
			}
			slices.SortStableFunc(cands, func(a, b gpu.Device) int {
				return topology.Nearest(t, a.NUMA, numaIDs) - topology.Nearest(t, b.NUMA, numaIDs)
			})
			var ids []string
			for _, d := range cands[:n] {
				ids = append(ids, d.ID)
				if d.NUMA >= 0 && !slices.Contains(touched, d.NUMA) {
					touched = append(touched, d.NUMA)
				}
			}
			return ids, true
		}
		var okG, okM, okV bool
		p.GPUs, okG = pick(gpus, r.GPUs)
		p.MIG, okM = pick(migs, r.MIG)
		p.VFs, okV = pick(vfs, r.VFs)
		if !okG || !okM || !okV {
			continue
		}
		p.Score = topology.Score(t, touched)
		if r.NUMA == api.NUMANone {
			p.Score = 100 // the topology does not matter to this job
		}
		key := [4]int{p.Score, -bits.OnesCount(mask), -leftover, -int(mask)}
		if r.Spread {
			// Memory-bound: as many NUMA nodes as it can use first.
			key = [4]int{bits.OnesCount(mask), p.Score, -leftover, -int(mask)}
		}
		if bestKey[0] < 0 || cmpKey(key, bestKey) > 0 {
			best, bestKey = p, key
		}
	}
	return best, bestKey[0] >= 0
}

// subsetsBySize holds, for k = 0..8 NUMA nodes, every non-empty subset as
// a bit mask, smallest sets first; built once, read only.
var subsetsBySize = func() [9][]uint {
	var t [9][]uint
	for k := range t {
		t[k] = makeMasks(k)
	}
	return t
}()

func makeMasks(k int) []uint {
	masks := make([]uint, 0, 1<<k)
	for mask := uint(1); mask < 1<<k; mask++ {
		masks = append(masks, mask)
	}
	slices.SortStableFunc(masks, func(a, b uint) int { return bits.OnesCount(a) - bits.OnesCount(b) })
	return masks
}

// masksBySize returns the subsets of k NUMA nodes, smallest first.
func masksBySize(k int) []uint {
	if k < len(subsetsBySize) {
		return subsetsBySize[k]
	}
	return makeMasks(k)
}

func cmpKey(a, b [4]int) int {
	for i := range a {
		if a[i] != b[i] {
			return a[i] - b[i]
		}
	}
	return 0
}

// freeUnits lists NUMA node n's free CPUs as the units a job takes them
// in: single CPUs, whole cores first (siblings next to each other), or,
// with wholeCores, the cores whose threads are all free, each with the
// thread the job runs on first.
func freeUnits(n api.NUMANode, used *state.Used, wholeCores bool) [][]int {
	cpus := topology.CPUsByCore(n)
	units := make([][]int, 0, len(cpus))
	for i := 0; i < len(cpus); {
		j := i + 1
		for wholeCores && j < len(cpus) && cpus[j].Socket == cpus[i].Socket && cpus[j].Core == cpus[i].Core {
			j++
		}
		var unit []int
		free := true
		for _, c := range cpus[i:j] {
			unit = append(unit, c.ID)
			free = free && !used.CPUs[c.ID]
		}
		if free {
			units = append(units, unit)
		}
		i = j
	}
	return units
}

// allowedSet reports whether every NUMA node of mask is one of mem (any,
// when mem is empty).
func allowedSet(t *api.Topology, mask uint, mem []int) bool {
	if len(mem) == 0 {
		return true
	}
	for i, n := range t.Nodes {
		if mask&(1<<i) != 0 && !slices.Contains(mem, n.ID) {
			return false
		}
	}
	return true
}

// fill takes the request's CPUs (units: see freeUnits), memory and
// hugepages from the NUMA nodes of set, in order (Spread: in turns, and
// memory in even shares), and reports the free units left on them.
func fill(t *api.Topology, set []int, freeCPUs [][][]int, freeMem []int64, freeHuge func(int, int64) int64, r NodeRequest) (api.Placement, int, bool) {
	total := 0
	for _, i := range set {
		total += len(freeCPUs[i])
	}
	if total < r.CPUs {
		return api.Placement{}, 0, false
	}
	p := api.Placement{CPUs: make([]int, 0, r.CPUs), NUMANodes: make([]int, 0, len(set))}
	take := takeUnits(set, freeCPUs, r.CPUs, r.Spread)
	for k, i := range set {
		p.NUMANodes = append(p.NUMANodes, t.Nodes[i].ID)
		for _, u := range freeCPUs[i][:take[k]] {
			p.CPUs = append(p.CPUs, u[0])
			p.Idle = append(p.Idle, u[1:]...)
		}
	}
	// Memory in order, or, spread, in even shares first; then what is
	// left from the first nodes that have it.
	memLeft := r.MemMB
	taken := make([]int64, len(set))
	pass := func(share int64) {
		for k, i := range set {
			if m := min(memLeft, share, max(freeMem[i]-taken[k], 0)); m > 0 {
				p.Mem = addAmount(p.Mem, t.Nodes[i].ID, m)
				taken[k] += m
				memLeft -= m
			}
		}
	}
	if r.Spread && len(set) > 1 {
		pass((memLeft + int64(len(set)) - 1) / int64(len(set)))
	}
	pass(memLeft)
	if memLeft > 0 {
		return p, 0, false
	}
	for _, h := range r.Hugepages {
		left := h.Count
		for _, i := range set {
			if f := freeHuge(i, h.SizeKB); f > 0 && left > 0 {
				n := min(f, left)
				p.Hugepages = append(p.Hugepages, api.HugepageAmount{Node: t.Nodes[i].ID, SizeKB: h.SizeKB, Count: n})
				left -= n
			}
		}
		if left > 0 {
			return p, 0, false
		}
	}
	slices.Sort(p.CPUs)
	slices.Sort(p.Idle)
	if len(p.Idle) == 0 {
		p.Idle = nil
	}
	return p, total - r.CPUs, true
}

// takeUnits says how many units to take from each node of set: in order,
// as many as each has, or, spread, one from each in turn.
func takeUnits(set []int, free [][][]int, n int, spread bool) []int {
	take := make([]int, len(set))
	if !spread {
		for k, i := range set {
			take[k] = min(n, len(free[i]))
			n -= take[k]
		}
		return take
	}
	for n > 0 {
		progress := false
		for k, i := range set {
			if n > 0 && take[k] < len(free[i]) {
				take[k]++
				n--
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	return take
}

// addAmount adds mb of node to a placement's memory list.
func addAmount(mem []api.NodeAmount, node int, mb int64) []api.NodeAmount {
	for i := range mem {
		if mem[i].Node == node {
			mem[i].MB += mb
			return mem
		}
	}
	return append(mem, api.NodeAmount{Node: node, MB: mb})
}

// freeDevices lists the free GPUs (of the requested type), MIG slices (of
// the requested profile) and VFs.
func freeDevices(inv *api.Inventory, used *state.Used, r NodeRequest) (gpus, migs, vfs []gpu.Device) {
	profile := ""
	if r.MIG > 0 {
		profile = r.MIGProfile
	}
	return gpu.Free(inv, func(id string) bool { return used.Devices[id] }, r.GPUType, profile)
}

// mayFit is PlaceInNode's cheap first filter: whether the node has enough
// free CPUs, GPUs, MIG slices, VFs and hugepages at all, whatever their
// NUMA nodes.
func mayFit(inv *api.Inventory, used *state.Used, r NodeRequest) bool {
	if inv == nil || inv.Topology == nil {
		return false
	}
	cpus := 0
	var huge map[int64]int64
	for _, n := range inv.Topology.Nodes {
		for _, c := range n.CPUs {
			if !used.CPUs[c.ID] {
				cpus++
			}
		}
		for size, h := range n.Hugepages {
			if huge == nil {
				huge = map[int64]int64{}
			}
			huge[size] += h.Free - used.Hugepages[[2]int64{int64(n.ID), size}]
		}
	}
	if cpus < r.CPUs {
		return false
	}
	for _, h := range r.Hugepages {
		if huge[h.SizeKB] < h.Count {
			return false
		}
	}
	if r.GPUs == 0 && r.MIG == 0 && r.VFs == 0 {
		return true
	}
	gpus, migs, vfs := freeDevices(inv, used, r)
	return len(gpus) >= r.GPUs && len(migs) >= r.MIG && len(vfs) >= r.VFs
}
