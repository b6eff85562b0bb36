package ctld

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// TestClusterFigures applies a small cluster's history to a state machine
// and checks the figures a scrape publishes: CPUs idle, allocated and
// other (a drained node's, a down node's), GPUs, memory, nodes by state,
// an array's unstarted tasks counted one by one, and running CPUs by
// account.
func TestClusterFigures(t *testing.T) {
	f := NewFSM(quietLog())
	index := uint64(0)
	apply := func(ct state.CommandType, p any) {
		t.Helper()
		index++
		data, err := state.Encode(ct, p)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.Apply(rlog(index, data)); res != nil {
			if err, ok := res.(error); ok {
				t.Fatalf("%s: %v", ct, err)
			}
		}
	}
	now := t0
	numa := api.NUMANode{ID: 0, MemMB: 8192, FreeMB: 8192}
	for c := 0; c < 8; c++ {
		numa.CPUs = append(numa.CPUs, api.CPU{ID: c, Core: c})
	}
	gpus := &api.Inventory{Topology: &api.Topology{Sockets: 1, Nodes: []api.NUMANode{numa}, Distances: [][]int{{10}}},
		GPUs: []api.GPU{{Index: 0, UUID: "GPU-a", NUMANode: 0}, {Index: 1, UUID: "GPU-b", NUMANode: 0}}}
	for _, n := range []api.NodeInfo{
		{Name: "a1", CPUs: 4, MemMB: 4096, Runner: "test", BootID: "b", Partitions: []string{"batch"}},
		{Name: "g1", CPUs: 8, MemMB: 8192, Runner: "test", BootID: "b", Partitions: []string{"batch", "gpu"}, Inventory: gpus},
		{Name: "d1", CPUs: 2, MemMB: 1024, Runner: "test", BootID: "b", Partitions: []string{"batch"}},
	} {
		apply(state.CmdRegisterNode, &state.RegisterNode{Now: now, Info: n})
	}
	job := func(name, account string) state.JobSpec {
		s := state.JobSpec{Name: name, User: "alice", Account: account, NTasks: 1, CPUsPerTask: 1, Partition: "batch", WorkDir: "/tmp", SubmitDir: "/tmp"}
		return state.Inline(s, "#!/bin/sh\n", nil)
	}
	arr := job("arr", "phys")
	arr.Array = &api.ArraySpec{Raw: "0-9", Ranges: []api.ArrayRange{{First: 0, Last: 9, Step: 1}}}
	apply(state.CmdSubmitJobs, &state.SubmitJobs{Now: now, FirstID: 1, Jobs: []state.JobSpec{job("r1", "phys"), job("r2", "bio"), arr}})
	apply(state.CmdApplyPlan, &state.ApplyPlan{Now: now, Starts: []state.PlanStart{
		{JobID: 1, Node: "a1", CPUs: 3, MemMB: 1024},
		{JobID: 2, Node: "g1", CPUs: 2, MemMB: 2048, Placement: &api.Placement{CPUs: []int{0, 1}, NUMANodes: []int{0},
			Mem: []api.NodeAmount{{Node: 0, MB: 2048}}, GPUs: []string{"GPU-a"}}},
	}})
	apply(state.CmdNodeDrain, &state.NodeDrain{Now: now, Node: "g1", Drain: true, Reason: "test"})
	apply(state.CmdNodeDown, &state.NodeDown{Now: now, Nodes: []string{"d1"}, Reason: "no heartbeats"})

	var fig clusterFigures
	f.Read(func(s *state.State) { fig = figuresOf(s, now.Add(time.Minute), nil) })
	tests := map[string]struct{ got, want float64 }{
		"CPUs allocated (3 on a1, 2 on g1)":       {float64(fig.cpuAlloc), 5},
		"CPUs idle (a1's last one)":               {float64(fig.cpuIdle), 1},
		"CPUs other (g1 draining: 6; d1 down: 2)": {float64(fig.cpuOther), 8},
		"GPUs total":                            {float64(fig.gpuTotal), 2},
		"GPUs allocated":                        {float64(fig.gpuAlloc), 1},
		"memory allocated (MiB)":                {float64(fig.memAlloc), 3072},
		"memory idle, a1 only (MiB)":            {float64(fig.memIdle), 3072},
		"nodes mixed":                           {float64(fig.nodes[api.NodeMixed]), 1},
		"nodes draining":                        {float64(fig.nodes[api.NodeDraining]), 1},
		"nodes down":                            {float64(fig.nodes[api.NodeDown]), 1},
		"pending: the array's ten tasks":        {float64(fig.queue[api.StatePending]), 10},
		"running":                               {float64(fig.queue[api.StateRunning]), 2},
		"running CPUs of phys":                  {float64(fig.accountCPUs["phys"]), 3},
		"running CPUs of bio":                   {float64(fig.accountCPUs["bio"]), 2},
		"pending jobs of phys":                  {float64(fig.accountJobs[[2]string{"phys", "PENDING"}]), 10},
		"batch's CPUs (every node)":             {float64(fig.partCPUs["batch"][3]), 14},
		"gpu's CPUs allocated":                  {float64(fig.partCPUs["gpu"][0]), 2},
		"heartbeat age of a1 (last seen at t0)": {fig.perNode[0].age, 60},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", name, tc.got, tc.want)
		}
	}
}
