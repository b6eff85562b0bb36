package topology

import (
	"slices"
	"testing"

	"corral/api"
)

// quad: 4 NUMA nodes, distances 10/12/21/31 (see ctld/sched's quadHost).
var quad = &api.Topology{Nodes: []api.NUMANode{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 3}}, Distances: [][]int{
	{10, 12, 21, 31}, {12, 10, 31, 21}, {21, 31, 10, 12}, {31, 21, 12, 10},
}}

func TestScore(t *testing.T) {
	tests := map[string]struct {
		nodes []int
		want  int
	}{
		"one node":                     {[]int{2}, 100},
		"none":                         {nil, 100},
		"12 apart: round(100/1.2)=83":  {[]int{0, 1}, 83},
		"21 apart: round(100/2.1)=48":  {[]int{0, 2}, 48},
		"31 apart: round(100/3.1)=32":  {[]int{0, 3}, 32},
		"the farthest pair decides":    {[]int{0, 1, 2}, 32},
		"an unknown node is far (100)": {[]int{0, 7}, 10},
	}
	for name, tc := range tests {
		if got := Score(quad, tc.nodes); got != tc.want {
			t.Errorf("%s: Score(%v) = %d, want %d", name, tc.nodes, got, tc.want)
		}
	}
}

func TestDistanceWithSparseIDs(t *testing.T) {
	// Node ids need not be 0..n-1: ids 0 and 8 (a host with a gap).
	sparse := &api.Topology{Nodes: []api.NUMANode{{ID: 0}, {ID: 8}}, Distances: [][]int{{10, 20}, {20, 10}}}
	if d := Distance(sparse, 8, 0); d != 20 {
		t.Errorf("Distance(8, 0) = %d, want 20", d)
	}
	if d := Nearest(sparse, -1, []int{0}); d != Unknown*10 {
		t.Errorf("Nearest of an unknown node = %d, want %d", d, Unknown*10)
	}
}

func TestCPUsByCore(t *testing.T) {
	n := api.NUMANode{CPUs: []api.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}, {ID: 16, Core: 0}, {ID: 17, Core: 1}}}
	var ids []int
	for _, c := range CPUsByCore(n) {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []int{0, 16, 1, 17}) {
		t.Errorf("order %v, want siblings together: [0 16 1 17]", ids)
	}
}
