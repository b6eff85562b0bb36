package display

import "corral/api"

// clusterNodes is a small cluster over two partitions: batch (default, no
// limit) holds n1 n2 (idle), n3 (mixed, also in gpu), n4 (down) and n10
// (drained); gpu (two-day limit) lists n5 itself and has n3; debug has no
// nodes. n5 runs jobs in VMs (tcg) from two images.
func clusterNodes() ([]api.Node, []api.Partition) {
	node := func(name string, cpus, alloc int, parts ...string) api.Node {
		return api.Node{
			NodeInfo:   api.NodeInfo{Name: name, CPUs: cpus, MemMB: 8000, Partitions: parts, Runner: "process"},
			Registered: t0.Add(-24 * 60 * 60e9), LastSeen: t0.Add(-3e9),
			AllocCPUs: alloc, AllocMemMB: int64(alloc) * 1000,
		}
	}
	n4 := node("n4", 4, 0, "batch")
	n4.Down = true
	n10 := node("n10", 4, 0, "batch")
	n10.Drain, n10.Reason = true, "disk swap"
	n5 := node("n5", 8, 0)
	n5.Runner, n5.Accel, n5.Images = "vm", "tcg", []string{"default", "cuda"}
	nodes := []api.Node{
		node("n2", 4, 0, "batch"), node("n1", 4, 0, "batch"), node("n3", 4, 2, "batch", "gpu"),
		n4, n5, n10,
	}
	parts := []api.Partition{
		{Name: "batch", Default: true},
		{Name: "gpu", MaxTime: 2 * 86400, Nodes: []string{"n5"}},
		{Name: "debug", MaxTime: 30 * 60},
	}
	return nodes, parts
}
