package sched

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// quadHost is the fixture host of these tests: 2 sockets, 4 NUMA nodes
// (0 and 1 on socket 0, 2 and 3 on socket 1), each with 4 cores × 2
// threads and 64 GiB; SLIT distances
//
//	     0   1   2   3
//	0   10  12  21  31
//	1   12  10  31  21
//	2   21  31  10  12
//	3   31  21  12  10
//
// GPUs 0 and 1 (H100) on node 1, GPUs 2 and 3 (A100) on node 3, GPU 4 on
// node 2 in MIG mode with two 1g.10gb slices; SR-IOV PF 0000:3b:00.0 on
// node 0 with 4 VFs and PF 0000:af:00.0 on node 2 with 2; 512 free 2 MiB
// hugepages on node 1 only.
func quadHost() *api.Inventory {
	t := &api.Topology{Sockets: 2, Distances: [][]int{
		{10, 12, 21, 31}, {12, 10, 31, 21}, {21, 31, 10, 12}, {31, 21, 12, 10},
	}}
	cpu := 0
	for n := 0; n < 4; n++ {
		node := api.NUMANode{ID: n, MemMB: 64 << 10, FreeMB: 64 << 10}
		for core := 0; core < 4; core++ {
			a, b := cpu, cpu+1
			node.CPUs = append(node.CPUs,
				api.CPU{ID: a, Core: n*4 + core, Socket: n / 2, Siblings: []int{b}},
				api.CPU{ID: b, Core: n*4 + core, Socket: n / 2, Siblings: []int{a}})
			cpu += 2
		}
		if n == 1 {
			node.Hugepages = map[int64]api.Hugepages{2048: {Total: 512, Free: 512}}
		}
		t.Nodes = append(t.Nodes, node)
	}
	inv := &api.Inventory{Topology: t}
	for i, g := range []struct {
		model string
		numa  int
	}{{"NVIDIA H100 80GB HBM3", 1}, {"NVIDIA H100 80GB HBM3", 1}, {"NVIDIA A100-SXM4-40GB", 3}, {"NVIDIA A100-SXM4-40GB", 3}} {
		inv.GPUs = append(inv.GPUs, api.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Model: g.model, NUMANode: g.numa})
	}
	inv.GPUs = append(inv.GPUs, api.GPU{Index: 4, UUID: "GPU-4", Model: "NVIDIA A100-SXM4-40GB", NUMANode: 2, MIGEnabled: true,
		MIG: []api.MIGInstance{{UUID: "MIG-4a", Profile: "1g.10gb"}, {UUID: "MIG-4b", Profile: "1g.10gb"}}})
	pf := func(addr string, numa, vfs int) api.PF {
		p := api.PF{Addr: addr, NUMANode: numa, TotalVFs: vfs}
		for v := 0; v < vfs; v++ {
			p.VFs = append(p.VFs, api.VF{Addr: fmt.Sprintf("%s-vf%d", addr, v), NUMANode: numa})
		}
		return p
	}
	inv.PFs = []api.PF{pf("0000:3b:00.0", 0, 4), pf("0000:af:00.0", 2, 2)}
	return inv
}

// cpusOf lists node n's CPU ids in quadHost (8 per node, in order).
func cpusOf(n, count int) []int {
	var out []int
	for i := 0; i < count; i++ {
		out = append(out, n*8+i)
	}
	return out
}

func TestPlaceInNode(t *testing.T) {
	usedNode0 := state.NewUsed()
	for _, c := range cpusOf(0, 8) {
		usedNode0.CPUs[c] = true
	}
	tests := map[string]struct {
		req   NodeRequest
		used  *state.Used
		numa  []int
		cpus  []int
		gpus  []string
		mig   []string
		vfs   []string
		huge  []api.HugepageAmount
		score int
		fails bool
	}{
		// Node 1 holds both H100s: CPUs and memory go there too; score 100.
		"a 2-GPU job lands with its CPUs and memory on the GPUs' node": {
			req:  NodeRequest{CPUs: 4, MemMB: 8192, GPUs: 2, GPUType: "h100"},
			numa: []int{1}, cpus: cpusOf(1, 4), gpus: []string{"GPU-0", "GPU-1"}, score: 100,
		},
		// Any single node fits 8 CPUs; all are equal, so the lowest id.
		"a job that fits on one NUMA node is never split": {
			req:  NodeRequest{CPUs: 8, MemMB: 1024},
			numa: []int{0}, cpus: cpusOf(0, 8), score: 100,
		},
		// 12 CPUs need two nodes: {0,1} are 12 apart → round(100×10/12) =
		// 83; {0,2} 21 → 48; {0,3} 31 → 32. Node 0 gives 8, node 1 the rest.
		"a job needing two NUMA nodes gets the two closest": {
			req:  NodeRequest{CPUs: 12, MemMB: 1024},
			numa: []int{0, 1}, cpus: append(cpusOf(0, 8), cpusOf(1, 4)...), score: 83,
		},
		"hugepages go only where free hugepages exist": {
			req:  NodeRequest{CPUs: 2, Hugepages: []api.HugepageRequest{{SizeKB: 2048, Count: 256}}},
			numa: []int{1}, cpus: cpusOf(1, 2), huge: []api.HugepageAmount{{Node: 1, SizeKB: 2048, Count: 256}}, score: 100,
		},
		"more hugepages than any node has free: no fit": {
			req:   NodeRequest{CPUs: 2, Hugepages: []api.HugepageRequest{{SizeKB: 2048, Count: 600}}},
			fails: true,
		},
		"a VF job gets a VF of the PF on its CPUs' node": {
			req:  NodeRequest{CPUs: 2, VFs: 1},
			numa: []int{0}, cpus: cpusOf(0, 2), vfs: []string{"0000:3b:00.0-vf0"}, score: 100,
		},
		// Node 0's CPUs are taken: on node 1 its nearest VF (node 0, 12
		// away) would score 83; node 2 has CPUs and its own VFs: 100.
		"with node 0 full the VF job moves to node 2 and its PF": {
			req: NodeRequest{CPUs: 2, VFs: 1}, used: usedNode0,
			numa: []int{2}, cpus: cpusOf(2, 2), vfs: []string{"0000:af:00.0-vf0"}, score: 100,
		},
		"MIG slices come from the MIG GPU, CPUs from its node": {
			req:  NodeRequest{CPUs: 1, MIG: 2, MIGProfile: "1g.10gb"},
			numa: []int{2}, cpus: cpusOf(2, 1), mig: []string{"MIG-4a", "MIG-4b"}, score: 100,
		},
		// strict: with node 1's CPUs... the GPU must be on a chosen node:
		// the A100s are on node 3.
		"strict keeps devices on the chosen nodes": {
			req:  NodeRequest{CPUs: 2, GPUs: 1, GPUType: "a100", NUMA: api.NUMAStrict},
			numa: []int{3}, cpus: cpusOf(3, 2), gpus: []string{"GPU-2"}, score: 100,
		},
		"more GPUs of a type than exist: no fit": {
			req:   NodeRequest{CPUs: 1, GPUs: 3, GPUType: "h100"},
			fails: true,
		},
		"none ignores distances": {
			req:  NodeRequest{CPUs: 12, NUMA: api.NUMANone},
			numa: []int{0, 1}, cpus: append(cpusOf(0, 8), cpusOf(1, 4)...), score: 100,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			used := tc.used
			if used == nil {
				used = state.NewUsed()
			}
			p, ok := PlaceInNode(quadHost(), used, tc.req)
			if ok == tc.fails {
				t.Fatalf("ok = %v, want %v (placement %+v)", ok, !tc.fails, p)
			}
			if tc.fails {
				return
			}
			if !slices.Equal(p.NUMANodes, tc.numa) || !slices.Equal(p.CPUs, tc.cpus) || p.Score != tc.score {
				t.Errorf("numa %v cpus %v score %d, want numa %v cpus %v score %d", p.NUMANodes, p.CPUs, p.Score, tc.numa, tc.cpus, tc.score)
			}
			if !slices.Equal(p.GPUs, tc.gpus) || !slices.Equal(p.MIG, tc.mig) || !slices.Equal(p.VFs, tc.vfs) || !slices.Equal(p.Hugepages, tc.huge) {
				t.Errorf("gpus %v mig %v vfs %v huge %v, want %v %v %v %v", p.GPUs, p.MIG, p.VFs, p.Hugepages, tc.gpus, tc.mig, tc.vfs, tc.huge)
			}
		})
	}
}

// MIG slices are allocated and freed: with one slice held, a request for
// two fails; once it is released, it fits again.
func TestPlaceInNodeMIGAllocateAndFree(t *testing.T) {
	inv, used := quadHost(), state.NewUsed()
	req := NodeRequest{CPUs: 1, MIG: 1, MIGProfile: "1g.10gb"}
	first, ok := PlaceInNode(inv, used, req)
	if !ok || !slices.Equal(first.MIG, []string{"MIG-4a"}) {
		t.Fatalf("first slice: %v %+v", ok, first)
	}
	used.Add(&first, 1)
	if _, ok := PlaceInNode(inv, used, NodeRequest{CPUs: 1, MIG: 2, MIGProfile: "1g.10gb"}); ok {
		t.Error("two slices fit while one of the two is held")
	}
	second, ok := PlaceInNode(inv, used, req)
	if !ok || !slices.Equal(second.MIG, []string{"MIG-4b"}) {
		t.Fatalf("second slice: %v %+v", ok, second)
	}
	used.Add(&second, 1)
	used.Add(&first, -1)
	if _, ok := PlaceInNode(inv, used, NodeRequest{CPUs: 1, MIG: 2, MIGProfile: "1g.10gb"}); ok {
		t.Error("two slices fit while the second is held")
	}
	used.Add(&second, -1)
	if _, ok := PlaceInNode(inv, used, NodeRequest{CPUs: 1, MIG: 2, MIGProfile: "1g.10gb"}); !ok {
		t.Error("two slices do not fit once both are free")
	}
}

// TestPropertyNoDoubleBooking runs random workloads on the fixture host
// through whole passes: no CPU, GPU, MIG instance or VF is ever held twice,
// and no NUMA node's memory or hugepages go below zero (the jobs on it never
// hold more than it has).
func TestPropertyNoDoubleBooking(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		inv := quadHost()
		n := &state.Node{Name: "n1", CPUs: 32, MemMB: 256 << 10, Inventory: inv}
		held := map[string]uint64{} // resource → job
		var running []Run
		var pending []*state.Job
		next := uint64(1)
		for round := 0; round < 20; round++ {
			for range r.IntN(4) {
				j := job(next).cpus(1 + r.IntN(10)).mem(int64(r.IntN(64)) << 10).j
				switch r.IntN(5) {
				case 0:
					j.Spec.Gres = []api.Gres{{Name: "gpu", Count: 1 + r.IntN(2)}}
				case 1:
					j.Spec.Gres = []api.Gres{{Name: "gpu", Type: "1g.10gb", Count: 1}}
				case 2:
					j.Spec.Gres = []api.Gres{{Name: "vf", Count: 1 + r.IntN(3)}}
				case 3:
					j.Spec.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: int64(1 + r.IntN(300))}}
				}
				j.Spec.NUMA = pick(r, "", api.NUMAStrict, api.NUMANone)
				pending = append(pending, j)
				next++
			}
			// End some running jobs.
			for _, run := range slices.Clone(running) {
				if r.IntN(3) == 0 {
					for k, id := range held {
						if id == run.Job.ID {
							delete(held, k)
						}
					}
					n.AllocCPUs -= run.Alloc.CPUs
					n.AllocMemMB -= run.Alloc.MemMB
					running = slices.DeleteFunc(running, func(x Run) bool { return x.Job == run.Job })
					run.Job.State = api.StateCompleted
				}
			}
			s := &Snapshot{Now: t0, Nodes: []*state.Node{n}, Pending: pending, Running: running}
			p := Schedule(s)
			checkPlan(t, s, p)
			for _, st := range p.Starts {
				pl := st.Placement
				if pl == nil {
					t.Fatalf("round %d: job %d started without a placement on a node with topology", round, st.JobID)
				}
				var j *state.Job
				for _, pj := range pending {
					if pj.ID == st.JobID {
						j = pj
					}
				}
				keys := []string{}
				for _, c := range pl.CPUs {
					keys = append(keys, fmt.Sprintf("cpu%d", c))
				}
				// Hugepages are interchangeable, so no page can be held
				// twice: what matters is that a NUMA node never holds more
				// than it has free, checked below for every round.
				for _, d := range slices.Concat(pl.GPUs, pl.MIG, pl.VFs) {
					keys = append(keys, d)
				}
				for _, k := range keys {
					if other, taken := held[k]; taken {
						t.Fatalf("round %d: %s given to job %d, already held by job %d", round, k, st.JobID, other)
					}
					held[k] = st.JobID
				}
				j.State = api.StateRunning
				a := &state.Allocation{ID: j.ID, Job: j.ID, Node: st.Node, CPUs: st.CPUs, MemMB: st.MemMB, Placement: pl,
					Desired: state.AllocRun, Status: state.AllocActive, StartTime: t0}
				n.AllocCPUs += st.CPUs
				n.AllocMemMB += st.MemMB
				running = append(running, Run{Alloc: a, Job: j})
			}
			pending = slices.DeleteFunc(pending, func(j *state.Job) bool { return j.State != api.StatePending })
			// Free counts never go negative.
			used := state.NewUsed()
			for _, run := range running {
				used.Add(run.Alloc.Placement, 1)
			}
			for _, node := range inv.Topology.Nodes {
				if used.Mem[node.ID] > node.MemMB {
					t.Fatalf("round %d: NUMA node %d holds %d MiB of %d", round, node.ID, used.Mem[node.ID], node.MemMB)
				}
				if h := used.Hugepages[[2]int64{int64(node.ID), 2048}]; h > node.Hugepages[2048].Free {
					t.Fatalf("round %d: NUMA node %d holds %d hugepages of %d", round, node.ID, h, node.Hugepages[2048].Free)
				}
			}
		}
	})
}

// BenchmarkScheduleGPUNodes is one pass over 100,000 pending jobs on
// 10,000 GPU nodes shaped like quadHost (4 NUMA nodes, 32 CPUs, 4 GPUs and
// 2 MIG slices, 6 VFs): a fifth of the jobs ask for 1–2 GPUs, a tenth for a
// VF, the rest for 1–8 CPUs; a quarter of the nodes are half busy.
func BenchmarkScheduleGPUNodes(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	s := &Snapshot{Now: t0, Config: api.DefaultSchedConfig()}
	for i := range 10_000 {
		inv := quadHost()
		for g := range inv.GPUs {
			inv.GPUs[g].UUID = fmt.Sprintf("GPU-%d-%d", i, g)
			for m := range inv.GPUs[g].MIG {
				inv.GPUs[g].MIG[m].UUID = fmt.Sprintf("MIG-%d-%d-%d", i, g, m)
			}
		}
		n := &state.Node{Name: fmt.Sprintf("g%05d", i), CPUs: 32, MemMB: 256 << 10, Inventory: inv}
		if r.IntN(4) == 0 {
			j := job(uint64(1_000_000 + i)).cpus(16).mem(64 << 10).limit(time.Hour).j
			j.State, j.StartTime = api.StateRunning, t0
			p, _ := PlaceInNode(inv, state.NewUsed(), RequestOf(j, 0))
			a := &state.Allocation{ID: uint64(i + 1), Job: j.ID, Node: n.Name, CPUs: 16, MemMB: 64 << 10, Placement: &p,
				Desired: state.AllocRun, Status: state.AllocActive, StartTime: t0}
			n.AllocCPUs, n.AllocMemMB = 16, 64<<10
			s.Running = append(s.Running, Run{Alloc: a, Job: j})
		}
		s.Nodes = append(s.Nodes, n)
	}
	for i := range 100_000 {
		j := job(uint64(i + 1)).cpus(1 + r.IntN(8)).mem(int64(1+r.IntN(16)) << 10).limit(time.Duration(1+r.IntN(48)) * time.Hour).j
		switch r.IntN(10) {
		case 0, 1:
			j.Spec.Gres = []api.Gres{{Name: "gpu", Count: 1 + r.IntN(2)}}
		case 2:
			j.Spec.Gres = []api.Gres{{Name: "vf", Count: 1}}
		}
		s.Pending = append(s.Pending, j)
	}
	var p Plan
	for b.Loop() {
		p = Schedule(s)
	}
	b.ReportMetric(float64(len(p.Starts)), "starts")
}

// TestDeviceJobsQueueInOrder: a 2-GPU job waits because one of the two
// H100s is held; a later 1-GPU job must not take the free one (it would
// delay the first), while a CPU-only job still backfills.
func TestDeviceJobsQueueInOrder(t *testing.T) {
	inv := quadHost()
	n := &state.Node{Name: "n1", CPUs: 32, MemMB: 256 << 10, Inventory: inv}
	running := runOn("n1", job(9).cpus(1).limit(time.Hour).runningFor(time.Minute).j)
	running.Alloc.Placement = &api.Placement{CPUs: []int{8}, NUMANodes: []int{1}, GPUs: []string{"GPU-0"}}
	n.AllocCPUs = 1
	s := &Snapshot{Now: t0, Nodes: []*state.Node{n}, Running: []Run{running}}
	gpus := func(b jobB, count int, typ string) jobB {
		return b.with(func(j *state.Job) { j.Spec.Gres = []api.Gres{{Name: "gpu", Type: typ, Count: count}} })
	}
	s.Pending = []*state.Job{
		gpus(job(1).limit(time.Hour), 2, "h100").j,
		gpus(job(2).limit(time.Minute).submitted(t0.Add(time.Second)), 1, "h100").j,
		job(3).limit(time.Minute).submitted(t0.Add(2 * time.Second)).j,
	}
	p := Schedule(s)
	checkPlan(t, s, p)
	if got := startsOf(p); !slices.Equal(got, []string{"3@n1"}) {
		t.Errorf("starts = %v, want only the CPU job 3", got)
	}
	if p.Reasons[1] != api.ReasonResources || p.Reasons[2] != api.ReasonPriority {
		t.Errorf("reasons = %v, want 1 Resources and 2 Priority", p.Reasons)
	}
}

// TestInventoryReasons: requests no node could ever hold get their reason
// (the answer is remembered per request within a pass: both 8-GPU jobs).
func TestInventoryReasons(t *testing.T) {
	n := &state.Node{Name: "n1", CPUs: 32, MemMB: 256 << 10, Inventory: quadHost()}
	gres := func(id uint64, g api.Gres) *state.Job {
		return job(id).with(func(j *state.Job) { j.Spec.Gres = []api.Gres{g} }).j
	}
	huge := job(4).with(func(j *state.Job) { j.Spec.Hugepages = []api.HugepageRequest{{SizeKB: 1 << 20, Count: 1}} }).j
	s := &Snapshot{Now: t0, Nodes: []*state.Node{n}, Pending: []*state.Job{
		gres(1, api.Gres{Name: "gpu", Count: 8}), gres(2, api.Gres{Name: "gpu", Count: 8}),
		gres(3, api.Gres{Name: "vf", Count: 7}), huge, gres(5, api.Gres{Name: "gpu", Count: 1}),
	}}
	p := Schedule(s)
	want := map[uint64]api.Reason{1: api.ReasonGresUnavailable, 2: api.ReasonGresUnavailable,
		3: api.ReasonGresUnavailable, 4: api.ReasonHugepagesUnavailable}
	if !maps.Equal(p.Reasons, want) || !slices.Equal(startsOf(p), []string{"5@n1"}) {
		t.Errorf("reasons %v starts %v, want %v and [5@n1]", p.Reasons, startsOf(p), want)
	}
}

// TestPlaceWholeCoresSpreadAndMemNodes: one thread per core takes whole
// free cores and holds their siblings idle (a core with a busy thread is
// skipped); memory_bound deals cores and memory out evenly over NUMA
// nodes; map_mem keeps the job on the NUMA nodes named.
func TestPlaceWholeCoresSpreadAndMemNodes(t *testing.T) {
	inv := quadHost()
	used := state.NewUsed()
	used.CPUs[1] = true // core 0 of NUMA node 0 has a busy thread
	p, ok := PlaceInNode(inv, used, NodeRequest{CPUs: 3, MemMB: 1024, WholeCores: true})
	if !ok || !slices.Equal(p.CPUs, []int{2, 4, 6}) || !slices.Equal(p.Idle, []int{3, 5, 7}) || !slices.Equal(p.NUMANodes, []int{0}) {
		t.Errorf("whole cores: %+v, want CPUs 2 4 6 on node 0 with siblings 3 5 7 idle", p)
	}
	used.Add(&p, 1)
	if n := len(freeUnits(inv.Topology.Nodes[0], used, false)); n != 1 {
		t.Errorf("node 0 has %d free CPUs after it, want 1 (CPU 0)", n)
	}

	p, ok = PlaceInNode(inv, state.NewUsed(), NodeRequest{CPUs: 4, MemMB: 4096, WholeCores: true, Spread: true})
	if !ok || len(p.NUMANodes) != 4 || len(p.CPUs) != 4 || len(p.Idle) != 4 {
		t.Fatalf("memory-bound: %+v, want one core on each of the 4 NUMA nodes", p)
	}
	for _, m := range p.Mem {
		if m.MB != 1024 {
			t.Errorf("memory-bound: memory %+v, want 1024 MiB on each node", p.Mem)
		}
	}

	p, ok = PlaceInNode(inv, state.NewUsed(), NodeRequest{CPUs: 2, MemMB: 1024, MemNodes: []int{3}})
	if !ok || !slices.Equal(p.NUMANodes, []int{3}) || p.Mem[0].Node != 3 {
		t.Errorf("map_mem:3: %+v, want NUMA node 3 only", p)
	}
	if _, ok := PlaceInNode(inv, state.NewUsed(), NodeRequest{CPUs: 9, MemNodes: []int{3}}); ok {
		t.Error("map_mem:3 placed 9 CPUs; node 3 has 8")
	}
	if _, ok := PlaceInNode(inv, state.NewUsed(), NodeRequest{CPUs: 1, MemNodes: []int{7}}); ok {
		t.Error("map_mem:7 placed a job on a host without NUMA node 7")
	}
}

// TestWholeCoresThroughThePass: a pass gives a nomultithread job its
// cores and charges the node every thread of them.
func TestWholeCoresThroughThePass(t *testing.T) {
	ns := nodes(1).cpus(32).mem(1 << 18)
	ns[0].Inventory = quadHost()
	snap := at(t0).with(ns).queue(
		job(1).cpus(4).with(func(j *state.Job) { j.Spec.Hint = api.HintNoMultithread }),
		job(2).cpus(26),
	).snapshot()
	plan := Schedule(snap)
	if len(plan.Starts) != 1 || plan.Starts[0].JobID != 1 || plan.Starts[0].CPUs != 4 || len(plan.Starts[0].Placement.Idle) != 4 {
		t.Fatalf("starts %+v; want only job 1, 4 CPUs and 4 idle threads (job 2's 26 no longer fit in 32-8)", plan.Starts)
	}
}
