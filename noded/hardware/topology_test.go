package hardware

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jaypipes/ghw"

	"corral/api"
)

// cpu builds an expected logical CPU.
func cpu(id, core, socket int, siblings ...int) api.CPU {
	return api.CPU{ID: id, Core: core, Socket: socket, Siblings: siblings}
}

// hugepages builds a node's expected hugepages: every fixture node lists
// both page sizes, reserved or not.
func hugepages(total2M, free2M, total1G, free1G int64) map[int64]api.Hugepages {
	return map[int64]api.Hugepages{
		HugepageSize2M: {Total: total2M, Free: free2M},
		HugepageSize1G: {Total: total1G, Free: free1G},
	}
}

// discoverFixture writes h into a new directory and discovers it.
func discoverFixture(t testing.TB, h FixtureHost) (*api.Topology, string) {
	t.Helper()
	root := t.TempDir()
	if err := WriteTopologyFixture(root, h); err != nil {
		t.Fatalf("WriteTopologyFixture: %v", err)
	}
	topo, err := Topology(root)
	if err != nil {
		t.Fatalf("Topology(%q): %v", root, err)
	}
	return topo, root
}

func TestTopology(t *testing.T) {
	tests := map[string]struct {
		host FixtureHost
		want *api.Topology
	}{
		// The machine these tests were written on: lscpu says 1 socket,
		// 1 NUMA node, 2 cores of 1 thread (AMD EPYC under KVM); node0's
		// meminfo says MemTotal 5335244 kB (5210 MiB), MemFree about 4430820
		// kB (4326 MiB); its distance file says "10"; no hugepages.
		"this host's shape": {
			host: FixtureHost{
				Sockets: 1, NodesPerSocket: 1, CoresPerNode: 2, ThreadsPerCore: 1,
				MemMBPerNode: 5210, FreeMB: []int64{4326},
			},
			want: &api.Topology{
				Sockets: 1,
				Nodes: []api.NUMANode{{
					ID:        0,
					CPUs:      []api.CPU{cpu(0, 0, 0), cpu(1, 1, 0)},
					MemMB:     5210,
					FreeMB:    4326,
					Hugepages: hugepages(0, 0, 0, 0),
				}},
				Distances: [][]int{{10}},
			},
		},
		// Nodes 0 and 1 are on socket 0, nodes 2 and 3 on socket 1. Within a
		// socket the distance is 12; across sockets the near pair (0-2, 1-3)
		// is 21 and the far pair (0-3, 1-2) is 31:
		//
		//	      n0  n1  n2  n3
		//	n0    10  12  21  31
		//	n1    12  10  31  21
		//	n2    21  31  10  12
		//	n3    31  21  12  10
		//
		// 16 cores in all, so CPU c and CPU c+16 are the two threads of one
		// core; core ids restart at 0 on socket 1.
		"2 sockets, 4 NUMA nodes, distances 10/12/21/31": {
			host: FixtureHost{
				Sockets: 2, NodesPerSocket: 2, CoresPerNode: 4, ThreadsPerCore: 2,
				MemMBPerNode: 16384, FreeMB: []int64{1000, 2000, 3000, 4000},
				Distances: [][]int{
					{10, 12, 21, 31},
					{12, 10, 31, 21},
					{21, 31, 10, 12},
					{31, 21, 12, 10},
				},
			},
			want: &api.Topology{
				Sockets: 2,
				Nodes: []api.NUMANode{
					{ID: 0, MemMB: 16384, FreeMB: 1000, Hugepages: hugepages(0, 0, 0, 0), CPUs: []api.CPU{
						cpu(0, 0, 0, 16), cpu(1, 1, 0, 17), cpu(2, 2, 0, 18), cpu(3, 3, 0, 19),
						cpu(16, 0, 0, 0), cpu(17, 1, 0, 1), cpu(18, 2, 0, 2), cpu(19, 3, 0, 3),
					}},
					{ID: 1, MemMB: 16384, FreeMB: 2000, Hugepages: hugepages(0, 0, 0, 0), CPUs: []api.CPU{
						cpu(4, 4, 0, 20), cpu(5, 5, 0, 21), cpu(6, 6, 0, 22), cpu(7, 7, 0, 23),
						cpu(20, 4, 0, 4), cpu(21, 5, 0, 5), cpu(22, 6, 0, 6), cpu(23, 7, 0, 7),
					}},
					{ID: 2, MemMB: 16384, FreeMB: 3000, Hugepages: hugepages(0, 0, 0, 0), CPUs: []api.CPU{
						cpu(8, 0, 1, 24), cpu(9, 1, 1, 25), cpu(10, 2, 1, 26), cpu(11, 3, 1, 27),
						cpu(24, 0, 1, 8), cpu(25, 1, 1, 9), cpu(26, 2, 1, 10), cpu(27, 3, 1, 11),
					}},
					{ID: 3, MemMB: 16384, FreeMB: 4000, Hugepages: hugepages(0, 0, 0, 0), CPUs: []api.CPU{
						cpu(12, 4, 1, 28), cpu(13, 5, 1, 29), cpu(14, 6, 1, 30), cpu(15, 7, 1, 31),
						cpu(28, 4, 1, 12), cpu(29, 5, 1, 13), cpu(30, 6, 1, 14), cpu(31, 7, 1, 15),
					}},
				},
				Distances: [][]int{
					{10, 12, 21, 31},
					{12, 10, 31, 21},
					{21, 31, 10, 12},
					{31, 21, 12, 10},
				},
			},
		},
		// Node 1 holds 512 pages of 2 MiB (12 in use) and 2 pages of 1 GiB
		// (1 in use); node 0 holds none but still lists both sizes. No SLIT,
		// so the kernel's default 10/20 applies.
		"hugepages reserved on node 1 only": {
			host: FixtureHost{
				Sockets: 1, NodesPerSocket: 2, CoresPerNode: 2, ThreadsPerCore: 1,
				MemMBPerNode:    8192,
				Hugepages2M:     []int64{0, 512},
				FreeHugepages2M: []int64{0, 500},
				Hugepages1G:     []int64{0, 2},
				FreeHugepages1G: []int64{0, 1},
			},
			want: &api.Topology{
				Sockets: 1,
				Nodes: []api.NUMANode{
					{ID: 0, MemMB: 8192, FreeMB: 8192, Hugepages: hugepages(0, 0, 0, 0),
						CPUs: []api.CPU{cpu(0, 0, 0), cpu(1, 1, 0)}},
					{ID: 1, MemMB: 8192, FreeMB: 8192, Hugepages: hugepages(512, 500, 2, 1),
						CPUs: []api.CPU{cpu(2, 2, 0), cpu(3, 3, 0)}},
				},
				Distances: [][]int{{10, 20}, {20, 10}},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, _ := discoverFixture(t, tc.host)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Topology:\n got %s\nwant %s", asJSON(got), asJSON(tc.want))
			}
		})
	}
}

// TestTopologySortsNodesByID checks that Nodes and Distances line up when
// ghw lists node10 before node2. Each distance is 10 + |i-j| off the
// diagonal, so a row or column out of place shows.
func TestTopologySortsNodesByID(t *testing.T) {
	const n = 12
	dist := make([][]int, n)
	for i := range dist {
		dist[i] = make([]int, n)
		for j := range dist[i] {
			dist[i][j] = 10 + max(i-j, j-i)
		}
	}
	topo, _ := discoverFixture(t, FixtureHost{
		Sockets: 1, NodesPerSocket: n, CoresPerNode: 1, ThreadsPerCore: 1,
		MemMBPerNode: 1024, Distances: dist,
	})
	for i, node := range topo.Nodes {
		if node.ID != i || len(node.CPUs) != 1 || node.CPUs[0].ID != i {
			t.Errorf("Nodes[%d] = id %d, CPUs %v; want id %d with CPU %d", i, node.ID, node.CPUs, i, i)
		}
	}
	if !reflect.DeepEqual(topo.Distances, dist) {
		t.Errorf("Distances = %v, want %v", topo.Distances, dist)
	}
}

// TestGHWHidesIncompleteNodes pins the ghw behaviour Topology guards
// against: without a Hugetlb: line in proc/meminfo, ghw.Topology drops
// every node and still returns err == nil. If a later ghw returns an error
// instead, this test says so and the guard can be revisited.
func TestGHWHidesIncompleteNodes(t *testing.T) {
	root := t.TempDir()
	host := FixtureHost{Sockets: 1, NodesPerSocket: 2, CoresPerNode: 1, ThreadsPerCore: 1, MemMBPerNode: 1024, OmitHugetlb: true}
	if err := WriteTopologyFixture(root, host); err != nil {
		t.Fatal(err)
	}
	info, err := ghw.Topology(ghw.WithChroot(root), ghw.WithLogger((&warningLog{}).logger()))
	if err != nil || len(info.Nodes) != 0 {
		t.Fatalf("ghw.Topology = %d nodes, err %v; want 0 nodes and no error", len(info.Nodes), err)
	}
}

func TestTopologyErrors(t *testing.T) {
	twoNodes := FixtureHost{Sockets: 1, NodesPerSocket: 2, CoresPerNode: 2, ThreadsPerCore: 1, MemMBPerNode: 1024}
	noHugetlb := twoNodes
	noHugetlb.OmitHugetlb = true
	tests := map[string]struct {
		host *FixtureHost // nil: an empty root
		// damage edits the written tree, as a broken host would look.
		damage func(root string) error
		want   error
	}{
		"0 NUMA nodes is an error": {host: &noHugetlb, want: ErrNoNUMANodes},
		"an empty root":            {want: ErrNoNUMANodes},
		"a node without a distance file": {
			host:   &twoNodes,
			damage: removeFile("sys/devices/system/node/node1/distance"),
			want:   ErrDistances,
		},
		"a distance row shorter than the node count": {
			host:   &twoNodes,
			damage: writeFile("sys/devices/system/node/node0/distance", "10\n"),
			want:   ErrDistances,
		},
		"a node that is not local to itself": {
			host:   &twoNodes,
			damage: writeFile("sys/devices/system/node/node1/distance", "20 20\n"),
			want:   ErrDistances,
		},
		"CPUs missing from proc/cpuinfo": {
			host:   &twoNodes,
			damage: writeFile("proc/cpuinfo", ""),
			want:   ErrIncomplete,
		},
		"a node meminfo without MemFree": {
			host:   &twoNodes,
			damage: writeFile("sys/devices/system/node/node1/meminfo", "Node 1 MemTotal: 1048576 kB\n"),
			want:   ErrIncomplete,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if tc.host != nil {
				if err := WriteTopologyFixture(root, *tc.host); err != nil {
					t.Fatal(err)
				}
			}
			if tc.damage != nil {
				if err := tc.damage(root); err != nil {
					t.Fatal(err)
				}
			}
			topo, err := Topology(root)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Topology = %s, %v; want error %v", asJSON(topo), err, tc.want)
			}
			if !strings.Contains(err.Error(), root) {
				t.Errorf("error %q does not name the root %q", err, root)
			}
		})
	}
}

func removeFile(rel string) func(root string) error {
	return func(root string) error { return os.Remove(filepath.Join(root, rel)) }
}

func writeFile(rel, content string) func(root string) error {
	return func(root string) error { return os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644) }
}

// TestTopologyThisHost reads the real host, the way the node daemon does.
func TestTopologyThisHost(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node"); err != nil {
		t.Skipf("no NUMA information on this host (%v); only fixtures can be tested", err)
	}
	for name, root := range map[string]string{"empty root": "", "slash": "/"} {
		t.Run(name, func(t *testing.T) {
			topo, err := Topology(root)
			if err != nil {
				t.Fatalf("Topology(%q): %v", root, err)
			}
			if len(topo.Nodes) < 1 || topo.Sockets < 1 || len(topo.Distances) != len(topo.Nodes) {
				t.Fatalf("Topology(%q) = %s; want at least 1 node and socket, one distance row per node", root, asJSON(topo))
			}
			for _, node := range topo.Nodes {
				if node.MemMB <= 0 || node.FreeMB > node.MemMB {
					t.Errorf("node %d: MemMB %d, FreeMB %d; want 0 < FreeMB <= MemMB", node.ID, node.MemMB, node.FreeMB)
				}
			}
		})
	}
}

func TestWriteFixtureRejects(t *testing.T) {
	good := FixtureHost{Sockets: 1, NodesPerSocket: 2, CoresPerNode: 1, ThreadsPerCore: 1, MemMBPerNode: 4096}
	with := func(edit func(*FixtureHost)) FixtureHost { h := good; edit(&h); return h }
	tests := map[string]struct {
		host FixtureHost
		want string
	}{
		"no sockets":               {with(func(h *FixtureHost) { h.Sockets = 0 }), "Sockets is 0"},
		"no memory":                {with(func(h *FixtureHost) { h.MemMBPerNode = 0 }), "MemMBPerNode is 0"},
		"a 1x1 matrix for 2 nodes": {with(func(h *FixtureHost) { h.Distances = [][]int{{10}} }), "1 rows for 2 nodes"},
		"a short distance row":     {with(func(h *FixtureHost) { h.Distances = [][]int{{10, 20}, {20}} }), "row 1 has 1 columns"},
		"hugepages for one node":   {with(func(h *FixtureHost) { h.Hugepages2M = []int64{8} }), "Hugepages2M has 1 entries"},
		"more free than reserved":  {with(func(h *FixtureHost) { h.Hugepages1G, h.FreeHugepages1G = []int64{1, 1}, []int64{1, 2} }), "2 free of 1"},
		"more hugepages than RAM":  {with(func(h *FixtureHost) { h.Hugepages1G = []int64{5, 0} }), "above MemMBPerNode"},
		"more free than total":     {with(func(h *FixtureHost) { h.FreeMB = []int64{1, 5000} }), "FreeMB 5000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := WriteTopologyFixture(t.TempDir(), tc.host)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteTopologyFixture = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("a non-empty directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := WriteTopologyFixture(dir, good); err != nil {
			t.Fatal(err)
		}
		if err := WriteTopologyFixture(dir, good); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("second WriteTopologyFixture = %v, want a not-empty error", err)
		}
	})
}

func TestCPUList(t *testing.T) {
	tests := map[string]struct {
		ids  []int
		want string
	}{
		"one CPU":             {[]int{0}, "0"},
		"a range":             {[]int{0, 1, 2, 3}, "0-3"},
		"two ranges":          {[]int{16, 17, 0, 1}, "0-1,16-17"},
		"singles and a range": {[]int{0, 2, 3, 4, 7}, "0,2-4,7"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := cpuList(tc.ids); got != tc.want {
				t.Errorf("cpuList(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
}

// BenchmarkTopology measures one Topology over fixture trees: the 4-node
// host of TestDiscover, and a 2-socket, 8-node, 256-CPU host.
func BenchmarkTopology(b *testing.B) {
	shapes := []FixtureHost{
		{Sockets: 1, NodesPerSocket: 1, CoresPerNode: 2, ThreadsPerCore: 1, MemMBPerNode: 5210},
		{Sockets: 2, NodesPerSocket: 2, CoresPerNode: 4, ThreadsPerCore: 2, MemMBPerNode: 16384},
		{Sockets: 2, NodesPerSocket: 4, CoresPerNode: 16, ThreadsPerCore: 2, MemMBPerNode: 65536},
	}
	for _, h := range shapes {
		b.Run(fmt.Sprintf("nodes=%d/cpus=%d", h.Nodes(), h.CPUs()), func(b *testing.B) {
			root := b.TempDir()
			if err := WriteTopologyFixture(root, h); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := Topology(root); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func asJSON(v any) string {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(out)
}
