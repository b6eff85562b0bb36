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
}

// RequestOf reads a job's in-node request from its spec: --gres=gpu[:type]:N
// (a type like 1g.10gb asks for MIG instances), --gres=vf:N, --hugepages and
// --numa.
func RequestOf(j *state.Job, defMemPerCPU int64) NodeRequest {
	return requestOf(j.Spec, j.Spec.CPUs(), MemRequest(j, defMemPerCPU))
}

// requestOf is RequestOf for a spec whose CPUs and memory are known.
func requestOf(sp *state.JobSpec, cpus int, mem int64) NodeRequest {
	r := NodeRequest{CPUs: cpus, MemMB: mem, Hugepages: sp.Hugepages, NUMA: sp.NUMA}
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
	return r.GPUs > 0 || r.MIG > 0 || r.VFs > 0 || len(r.Hugepages) > 0
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
	freeCPUs := make([][]int, k)
	freeMem := make([]int64, k)
	for i, n := range t.Nodes {
		// Whole cores first: siblings next to each other.
		cpus := topology.CPUsByCore(n)
		freeCPUs[i] = make([]int, 0, len(cpus))
		for _, c := range cpus {
			if !used.CPUs[c.ID] {
				freeCPUs[i] = append(freeCPUs[i], c.ID)
			}
		}
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
		if bestKey[0] == 100 && -bits.OnesCount(mask) < bestKey[1] {
			break
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

// fill takes the request's CPUs, memory and hugepages from the NUMA nodes
// of set, in order, and reports the free CPUs left on them.
func fill(t *api.Topology, set []int, freeCPUs [][]int, freeMem []int64, freeHuge func(int, int64) int64, r NodeRequest) (api.Placement, int, bool) {
	total := 0
	for _, i := range set {
		total += len(freeCPUs[i])
	}
	if total < r.CPUs {
		return api.Placement{}, 0, false
	}
	p := api.Placement{CPUs: make([]int, 0, r.CPUs), NUMANodes: make([]int, 0, len(set))}
	cpusLeft, memLeft := r.CPUs, r.MemMB
	for _, i := range set {
		id := t.Nodes[i].ID
		p.NUMANodes = append(p.NUMANodes, id)
		take := min(cpusLeft, len(freeCPUs[i]))
		p.CPUs = append(p.CPUs, freeCPUs[i][:take]...)
		cpusLeft -= take
		if m := min(memLeft, max(freeMem[i], 0)); m > 0 {
			p.Mem = append(p.Mem, api.NodeAmount{Node: id, MB: m})
			memLeft -= m
		}
	}
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
	return p, total - r.CPUs, true
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
