package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/noded/hardware"
)

// fixtureNode writes a fixture host for `corral noded --topology-root`:
// its sys/ and proc/ trees, SR-IOV functions, and a GPU list.
func fixtureNode(t *testing.T, h hardware.FixtureHost, pfs []api.PF, gpus []api.GPU) (root, gpusFile string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "host")
	if err := hardware.WriteTopologyFixture(root, h); err != nil {
		t.Fatal(err)
	}
	if len(pfs) > 0 {
		if err := hardware.WriteSRIOVFixture(root, pfs); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(gpus)
	gpusFile = filepath.Join(t.TempDir(), "gpus.json")
	writeFile(t, gpusFile, string(data))
	return root, gpusFile
}

// TestPlacementOnFixtureHosts runs two node daemons on fixture topologies:
// "big" has 2 sockets × 2 NUMA nodes (4 cores × 2 threads each, distances
// 10/12/21/31), two GPUs on NUMA node 1, 2 MiB hugepages on node 1 only,
// and an SR-IOV PF with 4 VFs on node 2; "small" has one NUMA node with 2
// CPUs and nothing else. Jobs land where the placement rules say, with the
// exact CPUs, devices and hugepages in their records and environment.
func TestPlacementOnFixtureHosts(t *testing.T) {
	bigRoot, bigGPUs := fixtureNode(t, hardware.FixtureHost{
		Sockets: 2, NodesPerSocket: 2, CoresPerNode: 4, ThreadsPerCore: 2, MemMBPerNode: 16 << 10,
		Distances:   [][]int{{10, 12, 21, 31}, {12, 10, 31, 21}, {21, 31, 10, 12}, {31, 21, 12, 10}},
		Hugepages2M: []int64{0, 512, 0, 0},
	}, []api.PF{{Addr: "0000:af:00.0", Driver: "mlx5_core", NUMANode: 2, TotalVFs: 4, VFs: []api.VF{
		{Addr: "0000:af:00.2", Driver: "vfio-pci", IOMMUGroup: 40, NUMANode: 2}, {Addr: "0000:af:00.3", Driver: "vfio-pci", IOMMUGroup: 41, NUMANode: 2},
		{Addr: "0000:af:00.4", Driver: "vfio-pci", IOMMUGroup: 42, NUMANode: 2}, {Addr: "0000:af:00.5", Driver: "vfio-pci", IOMMUGroup: 43, NUMANode: 2},
	}}}, []api.GPU{
		{Index: 0, UUID: "GPU-aaaa", Model: "NVIDIA H100 80GB HBM3", MemMB: 81559, PCIBusID: "0000:1b:00.0", NUMANode: 1},
		{Index: 1, UUID: "GPU-bbbb", Model: "NVIDIA H100 80GB HBM3", MemMB: 81559, PCIBusID: "0000:43:00.0", NUMANode: 1},
	})
	smallRoot, smallGPUs := fixtureNode(t, hardware.FixtureHost{
		Sockets: 1, NodesPerSocket: 1, CoresPerNode: 2, ThreadsPerCore: 1, MemMBPerNode: 4096,
	}, nil, nil)

	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "big", "--topology-root", bigRoot, "--gpus-file", bigGPUs)
	c.startNode(t, "small", "--topology-root", smallRoot, "--gpus-file", smallGPUs)
	c.waitNodes(t, 2)
	cl := c.client(t)
	work := t.TempDir()

	// CPU ids on big: node n holds CPUs n*4..n*4+3 and their siblings
	// 16+n*4..; see topology.WriteFixture.
	nodeCPUs := func(n int) []int {
		var out []int
		for i := 0; i < 4; i++ {
			out = append(out, n*4+i, 16+n*4+i)
		}
		return out
	}
	run := func(args ...string) *api.Job {
		t.Helper()
		id := c.submit(t, work, append([]string{"--mem", "100M", "-o", filepath.Join(work, "%j.out"), "--wrap", "echo $CORRAL_CPUS $CUDA_VISIBLE_DEVICES $CORRAL_VFS; sleep 2"}, args...)...)
		return waitJob(t, cl, mustID(t, id), api.StateRunning, 15*time.Second)
	}
	tests := []struct {
		name  string
		args  []string
		node  string
		numa  []int
		gpus  []string
		vfs   int
		huge  bool
		score int
	}{
		{name: "two GPUs: CPUs and memory on the GPUs' NUMA node", args: []string{"-c", "4", "--gres=gpu:2"}, node: "big", numa: []int{1}, gpus: []string{"GPU-aaaa", "GPU-bbbb"}, score: 100},
		{name: "hugepages only where they are free", args: []string{"-c", "2", "--hugepages=2M:100"}, node: "big", numa: []int{1}, huge: true, score: 100},
		{name: "a VF with CPUs on its PF's node", args: []string{"-c", "2", "--sriov=1"}, node: "big", numa: []int{2}, vfs: 1, score: 100},
	}
	for _, tc := range tests {
		j := run(tc.args...)
		p := j.Placement
		if j.Node != tc.node || p == nil {
			t.Errorf("%s: job %d on %s with placement %+v, want node %s", tc.name, j.ID, j.Node, p, tc.node)
			continue
		}
		if !slices.Equal(p.NUMANodes, tc.numa) || !slices.Equal(p.GPUs, tc.gpus) || len(p.VFs) != tc.vfs || (len(p.Hugepages) > 0) != tc.huge || p.Score != tc.score {
			t.Errorf("%s: placement %+v, want NUMA %v, GPUs %v, %d VFs, hugepages %v, score %d", tc.name, p, tc.numa, tc.gpus, tc.vfs, tc.huge, tc.score)
		}
		for _, cpu := range p.CPUs {
			if !slices.Contains(nodeCPUs(tc.numa[0]), cpu) {
				t.Errorf("%s: CPU %d is not on NUMA node %d", tc.name, cpu, tc.numa[0])
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			out := readFileOr(filepath.Join(work, fmt.Sprintf("%d.out", j.ID)))
			if strings.TrimSpace(out) != "" {
				if len(p.GPUs) > 0 && !strings.Contains(out, strings.Join(p.GPUs, ",")) {
					t.Errorf("%s: job printed %q, want its GPUs %v", tc.name, out, p.GPUs)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no output", tc.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// More GPUs than any node has: refused at submit, as Slurm does, with
	// what the nodes offer.
	if out, err := cli(t, c.addr, work, "submit", "--gres=gpu:4", "--wrap", "true"); err == nil ||
		!strings.Contains(err.Error(), "Requested node configuration is not available: the job asks for 4 GPUs; the nodes of partition batch have at most 2") {
		t.Fatalf("4-GPU job: %q, %v; want it refused", out, err)
	}
	out, err := cli(t, c.addr, work, "show", "node", "big")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NUMANodes=4", "Distances=10,12,21,31;12,10,31,21", "GPU=0 UUID=GPU-aaaa", "PF=0000:af:00.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("show node big lacks %q:\n%s", want, out)
		}
	}
}
