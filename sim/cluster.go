package sim

import (
	"encoding/json"
	"fmt"
	"io"

	"corral/api"
)

// Cluster describes a heterogeneous machine for `corral sim --cluster`:
// groups of identical nodes with a NUMA shape and GPUs. Trace jobs then
// run on one node each (a job wider than every node is skipped), and the
// result reports how well placements fit (score, single NUMA node).
//
//	{"groups": [
//	  {"name": "gpu", "count": 64, "sockets": 2, "numa_per_socket": 2,
//	   "cores_per_numa": 8, "threads_per_core": 2, "mem_mb_per_numa": 65536,
//	   "distances": [[10,12,21,31],[12,10,31,21],[21,31,10,12],[31,21,12,10]],
//	   "gpus_per_numa": [0, 2, 0, 2], "gpu_model": "H100"},
//	  {"name": "cpu", "count": 128, "sockets": 2, "numa_per_socket": 1,
//	   "cores_per_numa": 16, "threads_per_core": 1, "mem_mb_per_numa": 131072}],
//	 "gpu_job_every": 5}
//
// gpu_job_every N makes every Nth job (by job number) ask for one GPU.
type Cluster struct {
	Groups      []NodeGroup `json:"groups"`
	GPUJobEvery int         `json:"gpu_job_every,omitempty"`
}

// NodeGroup is Count identical nodes named Name1..NameCount.
type NodeGroup struct {
	Name           string  `json:"name"`
	Count          int     `json:"count"`
	Sockets        int     `json:"sockets"`
	NUMAPerSocket  int     `json:"numa_per_socket"`
	CoresPerNUMA   int     `json:"cores_per_numa"`
	ThreadsPerCore int     `json:"threads_per_core"`
	MemMBPerNUMA   int64   `json:"mem_mb_per_numa"`
	Distances      [][]int `json:"distances,omitempty"`
	GPUsPerNUMA    []int   `json:"gpus_per_numa,omitempty"`
	GPUModel       string  `json:"gpu_model,omitempty"`
}

// Bounds of a cluster file: far above the clusters simulated (10,000 GPU
// nodes), low enough that building the nodes cannot exhaust memory.
const (
	maxClusterNodes = 200_000
	maxClusterCPUs  = 20_000_000
)

// ReadCluster reads a cluster file and checks every group.
func ReadCluster(r io.Reader) (*Cluster, error) {
	var c Cluster
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	if len(c.Groups) == 0 {
		return nil, fmt.Errorf("cluster file: no groups: give at least one {\"name\": ..., \"count\": ...}")
	}
	if c.GPUJobEvery < 0 {
		return nil, fmt.Errorf("cluster file: gpu_job_every %d is negative (0: no job asks for a GPU)", c.GPUJobEvery)
	}
	nodes, cpus := 0, 0
	for i, g := range c.Groups {
		switch {
		case g.Name == "" || g.Count < 1:
			return nil, fmt.Errorf("cluster file: group %d needs a name and a count ≥ 1", i+1)
		case g.Sockets < 1 || g.NUMAPerSocket < 1 || g.CoresPerNUMA < 1 || g.ThreadsPerCore < 1 || g.MemMBPerNUMA < 1:
			return nil, fmt.Errorf("cluster file: group %s: sockets, numa_per_socket, cores_per_numa, threads_per_core and mem_mb_per_numa must be ≥ 1", g.Name)
		case g.Count > maxClusterNodes || g.Sockets > 64 || g.NUMAPerSocket > 64 || g.CoresPerNUMA > 4096 || g.ThreadsPerCore > 8 || g.MemMBPerNUMA > 1<<30:
			return nil, fmt.Errorf("cluster file: group %s: at most %d nodes, 64 sockets, 64 NUMA nodes per socket, 4096 cores per NUMA node, 8 threads per core and 1 PiB per NUMA node", g.Name, maxClusterNodes)
		}
		numa := g.Sockets * g.NUMAPerSocket
		perNode := numa * g.CoresPerNUMA * g.ThreadsPerCore
		if numa > 64 || perNode > 4096 {
			return nil, fmt.Errorf("cluster file: group %s: a node of %d NUMA nodes and %d CPUs; at most 64 and 4096", g.Name, numa, perNode)
		}
		if nodes += g.Count; nodes > maxClusterNodes {
			return nil, fmt.Errorf("cluster file: more than %d nodes in all", maxClusterNodes)
		}
		if cpus += g.Count * perNode; cpus > maxClusterCPUs {
			return nil, fmt.Errorf("cluster file: more than %d CPUs in all", maxClusterCPUs)
		}
		switch {
		case g.Distances != nil && len(g.Distances) != numa:
			return nil, fmt.Errorf("cluster file: group %s: distances has %d rows for %d NUMA nodes", g.Name, len(g.Distances), numa)
		case g.GPUsPerNUMA != nil && len(g.GPUsPerNUMA) != numa:
			return nil, fmt.Errorf("cluster file: group %s: gpus_per_numa has %d entries for %d NUMA nodes", g.Name, len(g.GPUsPerNUMA), numa)
		}
		for _, row := range g.Distances {
			if len(row) != numa {
				return nil, fmt.Errorf("cluster file: group %s: a distances row has %d entries for %d NUMA nodes", g.Name, len(row), numa)
			}
			for _, d := range row {
				if d < 1 || d > 255 {
					return nil, fmt.Errorf("cluster file: group %s: distance %d is outside 1..255 (SLIT distances; 10 is local)", g.Name, d)
				}
			}
		}
		for _, n := range g.GPUsPerNUMA {
			if n < 0 || n > 64 {
				return nil, fmt.Errorf("cluster file: group %s: gpus_per_numa %d is outside 0..64", g.Name, n)
			}
		}
	}
	return &c, nil
}

// nodes builds the cluster's nodes with their inventories. CPU ids follow
// Linux's x86 numbering: thread t of core c is c + t × (all cores).
func (c *Cluster) nodes() []api.NodeInfo {
	var out []api.NodeInfo
	for _, g := range c.Groups {
		numa := g.Sockets * g.NUMAPerSocket
		cores := numa * g.CoresPerNUMA
		for k := 1; k <= g.Count; k++ {
			name := fmt.Sprintf("%s%d", g.Name, k)
			t := &api.Topology{Sockets: g.Sockets, Distances: g.Distances}
			if t.Distances == nil {
				t.Distances = make([][]int, numa)
				for i := range t.Distances {
					t.Distances[i] = make([]int, numa)
					for j := range t.Distances[i] {
						t.Distances[i][j] = 20
						if i == j {
							t.Distances[i][j] = 10
						}
					}
				}
			}
			inv := &api.Inventory{Topology: t}
			for n := 0; n < numa; n++ {
				node := api.NUMANode{ID: n, MemMB: g.MemMBPerNUMA, FreeMB: g.MemMBPerNUMA}
				for core := n * g.CoresPerNUMA; core < (n+1)*g.CoresPerNUMA; core++ {
					for th := 0; th < g.ThreadsPerCore; th++ {
						cpu := api.CPU{ID: core + th*cores, Core: core, Socket: n / g.NUMAPerSocket}
						for o := 0; o < g.ThreadsPerCore; o++ {
							if o != th {
								cpu.Siblings = append(cpu.Siblings, core+o*cores)
							}
						}
						node.CPUs = append(node.CPUs, cpu)
					}
				}
				t.Nodes = append(t.Nodes, node)
				if g.GPUsPerNUMA != nil {
					for i := 0; i < g.GPUsPerNUMA[n]; i++ {
						inv.GPUs = append(inv.GPUs, api.GPU{Index: len(inv.GPUs), UUID: fmt.Sprintf("GPU-%s-%d", name, len(inv.GPUs)),
							Model: g.GPUModel, NUMANode: n})
					}
				}
			}
			out = append(out, api.NodeInfo{Name: name, CPUs: cores * g.ThreadsPerCore,
				MemMB: g.MemMBPerNUMA * int64(numa), Partitions: []string{partition}, Inventory: inv})
		}
	}
	return out
}
