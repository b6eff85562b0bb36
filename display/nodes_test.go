package display

import (
	"errors"
	"strings"
	"testing"

	"corral/api"
)

func TestNodes(t *testing.T) {
	nodes, parts := clusterNodes()
	tests := map[string]struct {
		opts NodesOptions
		want string
	}{
		"partition oriented": {NodesOptions{}, "" +
			"PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n" +
			"batch*       up   infinite      1  drain n10\n" +
			"batch*       up   infinite      1    mix n3\n" +
			"batch*       up   infinite      2   idle n[1-2]\n" +
			"batch*       up   infinite      1   down n4\n" +
			"gpu          up 2-00:00:00      1    mix n3\n" +
			"gpu          up 2-00:00:00      1   idle n5\n" +
			"debug        up      30:00      0    n/a \n"},
		"no header": {NodesOptions{NoHeader: true, Now: t0}, "" +
			"batch*       up   infinite      1  drain n10\n" +
			"batch*       up   infinite      1    mix n3\n" +
			"batch*       up   infinite      2   idle n[1-2]\n" +
			"batch*       up   infinite      1   down n4\n" +
			"gpu          up 2-00:00:00      1    mix n3\n" +
			"gpu          up 2-00:00:00      1   idle n5\n" +
			"debug        up      30:00      0    n/a \n"},
		"long with date": {NodesOptions{Long: true, Now: t0}, "" +
			"Fri Mar  1 10:00:00 2024\n" +
			"PARTITION AVAIL  TIMELIMIT   JOB_SIZE ROOT OVERSUBS     GROUPS  NODES       STATE NODELIST\n" +
			"batch*       up   infinite          1   no       NO        all      1     drained n10\n" +
			"batch*       up   infinite          1   no       NO        all      1       mixed n3\n" +
			"batch*       up   infinite          1   no       NO        all      2        idle n[1-2]\n" +
			"batch*       up   infinite          1   no       NO        all      1        down n4\n" +
			"gpu          up 2-00:00:00          1   no       NO        all      1       mixed n3\n" +
			"gpu          up 2-00:00:00          1   no       NO        all      1        idle n5\n" +
			"debug        up      30:00          1   no       NO        all      0         n/a \n"},
		"node oriented": {NodesOptions{NodeOriented: true}, "" +
			"NODELIST   NODES PARTITION STATE \n" +
			"n1             1    batch* idle  \n" +
			"n2             1    batch* idle  \n" +
			"n3             1    batch* mix   \n" +
			"n3             1       gpu mix   \n" +
			"n4             1    batch* down  \n" +
			"n5             1       gpu idle  \n" +
			"n10            1    batch* drain \n"},
		"node oriented long": {NodesOptions{NodeOriented: true, Long: true}, "" +
			"NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON              \n" +
			"n1             1    batch*        idle    4    1:4:1   8000        0      1   (null) none                \n" +
			"n2             1    batch*        idle    4    1:4:1   8000        0      1   (null) none                \n" +
			"n3             1    batch*       mixed    4    1:4:1   8000        0      1   (null) none                \n" +
			"n3             1       gpu       mixed    4    1:4:1   8000        0      1   (null) none                \n" +
			"n4             1    batch*        down    4    1:4:1   8000        0      1   (null) none                \n" +
			"n5             1       gpu        idle    8    1:8:1   8000        0      1   (null) none                \n" +
			"n10            1    batch*     drained    4    1:4:1   8000        0      1   (null) disk swap           \n"},
		"corral's own columns by long name": {NodesOptions{NodeOriented: true, LongFormat: "nodelist:6,runner:8,accel:6,numa:.5,gpus:.5,vfs:.4,images:0"}, "" +
			"NODELIRUNNER  ACCEL  NUMA GPUS VFSIMAGES\n" +
			"n1    process -         -    -   --\n" +
			"n2    process -         -    -   --\n" +
			"n3    process -         -    -   --\n" +
			"n3    process -         -    -   --\n" +
			"n4    process -         -    -   --\n" +
			"n5    vm      tcg       -    -   -default,cuda\n" +
			"n10   process -         -    -   --\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := Nodes(&b, nodes, parts, tc.opts); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestNodesStates(t *testing.T) {
	tests := map[string]struct {
		node        api.Node
		short, long string
	}{
		"idle":             {api.Node{NodeInfo: api.NodeInfo{CPUs: 4}}, "idle", "idle"},
		"mixed":            {api.Node{NodeInfo: api.NodeInfo{CPUs: 4}, AllocCPUs: 1}, "mix", "mixed"},
		"allocated":        {api.Node{NodeInfo: api.NodeInfo{CPUs: 4}, AllocCPUs: 4}, "alloc", "allocated"},
		"down":             {api.Node{NodeInfo: api.NodeInfo{CPUs: 4}, Down: true, Drain: true}, "down", "down"},
		"drained":          {api.Node{NodeInfo: api.NodeInfo{CPUs: 4}, Drain: true}, "drain", "drained"},
		"draining":         {api.Node{NodeInfo: api.NodeInfo{CPUs: 4}, Drain: true, AllocCPUs: 4}, "drng", "draining"},
		"unknown to sinfo": {api.Node{}, "idle", "idle"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := tc.node.State()
			if got := stateShort(st); got != tc.short {
				t.Errorf("short state of %s = %q, want %q", st, got, tc.short)
			}
			if got := stateLong(st); got != tc.long {
				t.Errorf("long state of %s = %q, want %q", st, got, tc.long)
			}
		})
	}
	if stateShort(api.NodeUnknown) != "unk" || stateLong(api.NodeUnknown) != "unknown" {
		t.Error("UNKNOWN is not unk/unknown")
	}
}

// TestNodesGrouping covers sinfo's grouping: a state group per partition,
// a node under each of its partitions, membership from either side, and
// partitions that only nodes name.
func TestNodesGrouping(t *testing.T) {
	node := func(name string, alloc int, down bool, parts ...string) api.Node {
		return api.Node{NodeInfo: api.NodeInfo{Name: name, CPUs: 2, Partitions: parts}, AllocCPUs: alloc, Down: down}
	}
	tests := map[string]struct {
		nodes []api.Node
		parts []api.Partition
		want  string
	}{
		"idle mixed down in two partitions": {
			nodes: []api.Node{
				node("c01", 0, false, "a", "b"), node("c02", 0, false, "a"), node("c03", 1, false, "a", "b"),
				node("c04", 1, false, "b"), node("c05", 0, true, "a", "b"), node("c06", 0, true, "b"),
			},
			parts: []api.Partition{{Name: "a", Default: true}, {Name: "b", MaxTime: 3600}},
			want: "" +
				"a*           up   infinite      1    mix c03\n" +
				"a*           up   infinite      2   idle c[01-02]\n" +
				"a*           up   infinite      1   down c05\n" +
				"b            up    1:00:00      2    mix c[03-04]\n" +
				"b            up    1:00:00      1   idle c01\n" +
				"b            up    1:00:00      2   down c[05-06]\n",
		},
		"no partitions anywhere means the default one": {
			nodes: []api.Node{node("n2", 0, false), node("n1", 0, false)},
			want:  "batch*       up   infinite      2   idle n[1-2]\n",
		},
		"partitions only nodes name follow by name": {
			nodes: []api.Node{node("n1", 0, false, "zeta"), node("n2", 0, false, "alpha")},
			parts: []api.Partition{{Name: "main"}},
			want: "" +
				"main         up   infinite      0    n/a \n" +
				"alpha        up   infinite      1   idle n2\n" +
				"zeta         up   infinite      1   idle n1\n",
		},
		"listed by partition and by node counts once": {
			nodes: []api.Node{node("n1", 0, false, "p")},
			parts: []api.Partition{{Name: "p", Nodes: []string{"n1"}}},
			want:  "p            up   infinite      1   idle n1\n",
		},
		"explicit default wins over the batch name": {
			nodes: []api.Node{node("n1", 0, false)},
			parts: []api.Partition{{Name: "main", Default: true}},
			want: "" +
				"main*        up   infinite      0    n/a \n" +
				"batch        up   infinite      1   idle n1\n",
		},
		"no nodes no partitions": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			if err := Nodes(&b, tc.nodes, tc.parts, NodesOptions{NoHeader: true}); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestNodesSortsNamesLikeSinfo(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want int
	}{
		"numbers by value": {"n9", "n10", -1},
		"longer number":    {"n19", "n110", -1},
		"same":             {"n1", "n1", 0},
		"letters":          {"a1", "b1", -1},
		"prefix shorter":   {"n", "n1", -1},
		"padded equal num": {"n01", "n1", -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := compareNodeNames(tc.a, tc.b); sign(got) != tc.want {
				t.Errorf("compareNodeNames(%q, %q) = %d, want sign %d", tc.a, tc.b, got, tc.want)
			}
			if got := compareNodeNames(tc.b, tc.a); sign(got) != -tc.want {
				t.Errorf("compareNodeNames(%q, %q) = %d, want sign %d", tc.b, tc.a, got, -tc.want)
			}
		})
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestNodesWideNames(t *testing.T) {
	nodes := []api.Node{{NodeInfo: api.NodeInfo{Name: "very-long-node-name01", CPUs: 1, Partitions: []string{"a-very-long-partition"}}}}
	var b strings.Builder
	if err := Nodes(&b, nodes, nil, NodesOptions{NodeOriented: true}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NODELIST               NODES             PARTITION STATE \n" +
		"very-long-node-name01      1 a-very-long-partition idle  \n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestNodesWriteError(t *testing.T) {
	nodes, parts := clusterNodes()
	if err := Nodes(failingWriter{}, nodes, parts, NodesOptions{}); !errors.Is(err, errWrite) {
		t.Errorf("Nodes to a failing writer = %v, want %v", err, errWrite)
	}
}
