package sim

import (
	"strings"
	"testing"
)

// clusterJSON: one GPU node (2 NUMA nodes of 4 CPUs, 2 GPUs on NUMA node
// 1) and one CPU node (1 NUMA node of 8 CPUs); every 2nd job asks for a GPU.
const clusterJSON = `{"groups": [
  {"name": "gpu", "count": 1, "sockets": 1, "numa_per_socket": 2, "cores_per_numa": 4, "threads_per_core": 1,
   "mem_mb_per_numa": 1024, "distances": [[10, 21], [21, 10]], "gpus_per_numa": [0, 2], "gpu_model": "H100"},
  {"name": "cpu", "count": 1, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 8, "threads_per_core": 1, "mem_mb_per_numa": 1024}],
 "gpu_job_every": 2}`

// clusterTrace, worked by hand on that cluster (EASY, all at t=0, 100 s):
//
//	job 1 (4 CPUs)          the first node by name that can give it one
//	                        NUMA node: cpu1 (8 CPUs on its one node), 100
//	job 2 (2 CPUs, a GPU)   only gpu1 has GPUs: NUMA node 1 with them, 100
//	job 3 (6 CPUs)          cpu1 has 4 left: no; gpu1 has 4 + 2 on two
//	                        nodes 21 apart: 6 fit, score round(1000/21) = 48
//	job 4 (1 CPU, a GPU)    gpu1 is full: waits until 100, then NUMA 1, 100
//	job 5 (9 CPUs)          wider than any node: skipped
//
// Placed: 4 jobs, mean score (100 + 100 + 48 + 100) / 4 = 87, 3 of 4 on one
// NUMA node.
const clusterTrace = `; MaxProcs: 16
1 0 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1
2 0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1
3 0 -1 100 6 -1 -1 6 100 -1 1 1 1 -1 -1 -1 -1 -1
4 0 -1 100 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1
5 0 -1 100 9 -1 -1 9 100 -1 1 1 1 -1 -1 -1 -1 -1
`

func TestRunOnCluster(t *testing.T) {
	c, err := ReadCluster(strings.NewReader(clusterJSON))
	if err != nil {
		t.Fatal(err)
	}
	res := runTrace(t, clusterTrace, Options{Cluster: c})
	if res.Skipped.TooLarge != 1 || res.Jobs != 4 {
		t.Errorf("jobs %d, skipped %+v; want 4 simulated and job 5 too large", res.Jobs, res.Skipped)
	}
	if got := starts(res); got[1] != 0 || got[2] != 0 || got[3] != 0 || got[4] != 100 {
		t.Errorf("starts = %v, want jobs 1-3 at 0 and job 4 at 100", got)
	}
	if res.Placed != 4 || res.MeanScore != 87 || res.SingleNUMAShare != 0.75 {
		t.Errorf("placed %d, mean score %.2f, single-NUMA share %.2f; want 4, 87, 0.75", res.Placed, res.MeanScore, res.SingleNUMAShare)
	}
	if res.Procs != 16 {
		t.Errorf("machine of %d processors, want the cluster's 16", res.Procs)
	}
}

func TestReadClusterRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no groups":         `{"groups": []}`,
		"zero count":        `{"groups": [{"name": "a", "count": 0, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1}]}`,
		"short distances":   `{"groups": [{"name": "a", "count": 1, "sockets": 1, "numa_per_socket": 2, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1, "distances": [[10]]}]}`,
		"unknown field":     `{"groups": [], "nodes": 3}`,
		"gpus per numa off": `{"groups": [{"name": "a", "count": 1, "sockets": 1, "numa_per_socket": 2, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1, "gpus_per_numa": [1]}]}`,
		// Found by FuzzReadCluster: building a billion nodes ran the
		// process out of memory.
		"a billion nodes":   `{"groups": [{"name": "a", "count": 1000000000, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1}]}`,
		"a huge node":       `{"groups": [{"name": "a", "count": 1, "sockets": 64, "numa_per_socket": 64, "cores_per_numa": 4096, "threads_per_core": 8, "mem_mb_per_numa": 1}]}`,
		"too many CPUs":     `{"groups": [{"name": "a", "count": 10000, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 4096, "threads_per_core": 1, "mem_mb_per_numa": 1}]}`,
		"zero distance":     `{"groups": [{"name": "a", "count": 1, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1, "distances": [[0]]}]}`,
		"negative gpus":     `{"groups": [{"name": "a", "count": 1, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1, "gpus_per_numa": [-1]}]}`,
		"negative gpu rate": `{"groups": [{"name": "a", "count": 1, "sockets": 1, "numa_per_socket": 1, "cores_per_numa": 1, "threads_per_core": 1, "mem_mb_per_numa": 1}], "gpu_job_every": -2}`,
	} {
		if _, err := ReadCluster(strings.NewReader(text)); err == nil {
			t.Errorf("%s: ReadCluster accepted %s", name, text)
		}
	}
}
