package topology

import (
	"math"
	"slices"

	"corral/api"
)

// Unknown is the distance assumed between NUMA nodes the matrix does not
// cover: far.
const Unknown = 100

// Distance returns the SLIT distance between NUMA nodes a and b (ids, not
// indexes); Unknown when the matrix does not cover them.
func Distance(t *api.Topology, a, b int) int {
	ia, ib := indexOf(t, a), indexOf(t, b)
	if ia < 0 || ib < 0 || ia >= len(t.Distances) || ib >= len(t.Distances[ia]) {
		return Unknown
	}
	return t.Distances[ia][ib]
}

func indexOf(t *api.Topology, id int) int {
	if id >= 0 && id < len(t.Nodes) && t.Nodes[id].ID == id {
		return id // the usual case: ids are 0..n-1 in order
	}
	return slices.IndexFunc(t.Nodes, func(n api.NUMANode) bool { return n.ID == id })
}

// Score rates how local a set of NUMA nodes is (the nodes a job's CPUs,
// memory and devices touch): 100 for one node, else round(100 × 10 / d),
// where d is the largest distance between two of them (10 is local): two
// nodes 12 apart score 83, 21 apart 48, 31 apart 32.
func Score(t *api.Topology, nodes []int) int {
	if len(nodes) <= 1 {
		return 100
	}
	d := 10
	for _, a := range nodes {
		for _, b := range nodes {
			d = max(d, Distance(t, a, b))
		}
	}
	return int(math.Round(100 * 10 / float64(d)))
}

// Nearest returns the smallest distance from NUMA node n to any of nodes;
// Unknown×10 for a device whose node is unknown (n < 0), so that it comes
// last.
func Nearest(t *api.Topology, n int, nodes []int) int {
	if n < 0 {
		return Unknown * 10
	}
	m := math.MaxInt
	for _, x := range nodes {
		m = min(m, Distance(t, n, x))
	}
	return m
}

// CPUsByCore returns a NUMA node's CPUs in the order to hand them out:
// whole cores first, so a job's CPUs are sibling pairs where possible.
func CPUsByCore(n api.NUMANode) []api.CPU {
	byCore := func(a, b api.CPU) int {
		if a.Socket != b.Socket {
			return a.Socket - b.Socket
		}
		if a.Core != b.Core {
			return a.Core - b.Core
		}
		return a.ID - b.ID
	}
	if slices.IsSortedFunc(n.CPUs, byCore) {
		return n.CPUs
	}
	cpus := slices.Clone(n.CPUs)
	slices.SortFunc(cpus, byCore)
	return cpus
}
