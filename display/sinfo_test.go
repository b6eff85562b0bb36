package display

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"corral/api"
)

// stateNodes is a partition "cpu" (the default) with a node in every state
// sinfo counts: a1 allocated, a2 draining (drained while it runs a job),
// m1 mixed, i1 and i2 idle, d1 drained and x1 down; "big" holds i3, idle
// with more CPUs and memory than the rest; "debug" has no nodes.
func stateNodes() ([]api.Node, []api.Partition) {
	node := func(name string, alloc int, parts ...string) api.Node {
		return api.Node{NodeInfo: api.NodeInfo{Name: name, CPUs: 4, MemMB: 8000, Partitions: parts, Runner: "process"},
			AllocCPUs: alloc, AllocMemMB: int64(alloc) * 1000}
	}
	a2 := node("a2", 2, "cpu")
	a2.Drain, a2.Reason, a2.ReasonUser, a2.ReasonTime = true, "retire", "alice", t0
	d1 := node("d1", 0, "cpu")
	d1.Drain, d1.Reason, d1.ReasonUser, d1.ReasonTime = true, "disk swap", "alice", t0.Add(60e9)
	x1 := node("x1", 0, "cpu")
	x1.Down, x1.Reason, x1.ReasonUser, x1.ReasonTime = true, "Not responding", "root", t0.Add(120e9)
	i3 := node("i3", 0, "cpu", "big")
	i3.CPUs, i3.MemMB = 16, 64000
	nodes := []api.Node{node("a1", 4, "cpu"), a2, node("m1", 1, "cpu"), node("i1", 0, "cpu"), node("i2", 0, "cpu"), d1, x1, i3}
	parts := []api.Partition{{Name: "cpu", Default: true}, {Name: "big", MaxTime: 3600, State: api.PartitionDrain}, {Name: "debug", MaxTime: 1800}}
	return nodes, parts
}

// TestNodesLayouts compares each layout with the text sinfo prints for the
// same nodes: its headers, widths, justification and counts.
func TestNodesLayouts(t *testing.T) {
	nodes, parts := stateNodes()
	tests := map[string]struct {
		opts NodesOptions
		want string
	}{
		"default": {NodesOptions{}, "" +
			"PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n" +
			"cpu*         up   infinite      1   drng a2\n" +
			"cpu*         up   infinite      1  drain d1\n" +
			"cpu*         up   infinite      1    mix m1\n" +
			"cpu*         up   infinite      1  alloc a1\n" +
			"cpu*         up   infinite      3   idle i[1-3]\n" +
			"cpu*         up   infinite      1   down x1\n" +
			"big       drain    1:00:00      1   idle i3\n" +
			"debug        up      30:00      0    n/a \n"},
		// A/I/O/T: a draining node runs a job, so it is allocated; a
		// drained or down one is other.
		"summarize": {NodesOptions{Summarize: true}, "" +
			"PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T)  NODELIST\n" +
			"cpu*         up   infinite          3/3/2/8  a[1-2],d1,i[1-3],m1,x1\n" +
			"big       drain    1:00:00          0/1/0/1  i3\n" +
			"debug        up      30:00          0/0/0/0  \n"},
		"list reasons": {NodesOptions{ListReasons: true}, "" +
			"REASON               USER      TIMESTAMP           NODELIST\n" +
			"retire               alice     2024-03-01T10:00:00 a2\n" +
			"disk swap            alice     2024-03-01T10:01:00 d1\n" +
			"Not responding       root      2024-03-01T10:02:00 x1\n"},
		"list reasons long": {NodesOptions{ListReasons: true, Long: true}, "" +
			"REASON               USER         TIMESTAMP           STATE  NODELIST\n" +
			"retire               alice        2024-03-01T10:00:00 drng   a2\n" +
			"disk swap            alice        2024-03-01T10:01:00 drain  d1\n" +
			"Not responding       root         2024-03-01T10:02:00 down   x1\n"},
		"-O widths and justification": {NodesOptions{LongFormat: "partition:10,nodes:.6,statecompact"}, "" +
			"PARTITION  NODESSTATE               \n" +
			"cpu*           1drng                \n" +
			"cpu*           1drain               \n" +
			"cpu*           1mix                 \n" +
			"cpu*           1alloc               \n" +
			"cpu*           3idle                \n" +
			"cpu*           1down                \n" +
			"big            1idle                \n" +
			"debug          0n/a                 \n"},
		"-O suffix and width 0": {NodesOptions{LongFormat: "partitionname:| ,nodeaiot:.8,cpusstate: cpus"}, "" +
			"PARTITION| NODES(A/CPUS(A/I/O/T) cpus\n" +
			"cpu|  3/3/2/87/27/10/44 cpus\n" +
			"big|  0/1/0/10/16/0/16 cpus\n" +
			"debug|  0/0/0/00/0/0/0 cpus\n"},
		"sizes share a line without -e": {NodesOptions{Format: "%P %c %m %t %N"}, "" +
			"PARTITION CPUS MEMORY STATE NODELIST\n" +
			"cpu* 4 8000 drng a2\n" +
			"cpu* 4 8000 drain d1\n" +
			"cpu* 4 8000 mix m1\n" +
			"cpu* 4 8000 alloc a1\n" +
			"cpu* 4+ 8000+ idle i[1-3]\n" +
			"cpu* 4 8000 down x1\n" +
			"big 16 64000 idle i3\n" +
			"debug 0 0 n/a \n"},
		"-e splits sizes": {NodesOptions{Format: "%R %c %t %N", Exact: true, States: []string{"idle"}}, "" +
			"PARTITION CPUS STATE NODELIST\n" +
			"cpu 4 idle i[1-2]\n" +
			"cpu 16 idle i3\n" +
			"big 16 idle i3\n"},
		"no state field: one line per partition": {NodesOptions{Format: "%R %.5D %N"}, "" +
			"PARTITION NODES NODELIST\n" +
			"cpu     8 a[1-2],d1,i[1-3],m1,x1\n" +
			"big     1 i3\n" +
			"debug     0 \n"},
		"no partition field: a node once": {NodesOptions{Format: "%.6D %A %N"}, "" +
			" NODES NODES(A/I) NODELIST\n" +
			"     8 3/3 a[1-2],d1,i[1-3],m1,x1\n"},
		"states and names": {NodesOptions{States: []string{"IDLE", "drain"}, Names: []string{"i1", "d1", "a2"}}, "" +
			"PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n" +
			"cpu*         up   infinite      1   drng a2\n" +
			"cpu*         up   infinite      1  drain d1\n" +
			"cpu*         up   infinite      1   idle i1\n"},
		"node oriented with a filter": {NodesOptions{NodeOriented: true, States: []string{"mix", "alloc"}}, "" +
			"NODELIST   NODES PARTITION STATE \n" +
			"a1             1      cpu* alloc \n" +
			"m1             1      cpu* mix   \n"},
		"dead and a state": {NodesOptions{Dead: true, States: []string{"drain", "down"}, NoHeader: true}, "" +
			"cpu*         up   infinite      1   down x1\n"},
		"responding": {NodesOptions{Responding: true, Format: "%R %D", States: []string{"down", "idle"}}, "" +
			"PARTITION NODES\n" +
			"cpu 3\n" +
			"big 1\n"},
		"literal text and percent": {NodesOptions{Format: "[%R] %D%% %t", States: []string{"down"}, NoHeader: true}, "" +
			"[cpu] 1% down\n"},
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

func TestParseNodeFormat(t *testing.T) {
	tests := map[string]struct {
		format string
		cols   int
		err    string
	}{
		"default":           {DefaultNodesFormat, 11, ""},
		"every code":        {"%a%A%b%B%c%C%d%D%e%E%f%F%g%G%h%H%I%l%L%m%M%n%N%o%O%p%P%r%R%s%S%t%T%u%U%v%w%X%Y%z%Z", 41, ""},
		"percent literal":   {"%%%t", 2, ""},
		"flags in any form": {"%#.-12P", 1, ""},
		"unknown code":      {"%P %Q", 0, "Invalid node format specification: %Q"},
		"ends in a field":   {"%P %.10", 0, "ends inside a field"},
		"too wide":          {"%99999P", 0, "wider than 4096"},
		"not ascii":         {"%é", 0, "Invalid node format specification: %é"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseNodeFormat(tc.format)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseNodeFormat(%q) error %v, want one holding %q", tc.format, err, tc.err)
				}
				return
			}
			if err != nil || len(f.cols) != tc.cols {
				t.Fatalf("ParseNodeFormat(%q) = %d columns, %v; want %d", tc.format, colsOf(f), err, tc.cols)
			}
		})
	}
}

func colsOf(f *NodeFormat) int {
	if f == nil {
		return -1
	}
	return len(f.cols)
}

func TestParseNodeLongFormat(t *testing.T) {
	type col struct {
		header string
		width  int
		right  bool
	}
	tests := map[string]struct {
		spec string
		want []col
		err  string
	}{
		"widths":              {"partition:10,nodes:.6,statecompact", []col{{"PARTITION", 10, false}, {"NODES", 6, true}, {"STATE", 20, false}}, ""},
		"any case and spaces": {" NodeList , StateLong:.11", []col{{"NODELIST", 20, false}, {"STATE", 11, true}}, ""},
		"suffix":              {"reason:5|", []col{{"REASON", 5, false}, {"", 0, false}}, ""},
		"colon alone":         {"nodes:", []col{{"NODES", 0, false}}, ""},
		"unknown":             {"partition,bogus", nil, "Invalid node format specification: bogus"},
		"empty":               {" , ", nil, "names no field"},
		"too wide":            {"nodes:.99999", nil, "wider than 4096"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := ParseNodeLongFormat(tc.spec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseNodeLongFormat(%q) error %v, want one holding %q", tc.spec, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []col
			for _, c := range f.cols {
				h := ""
				if c.def != nil {
					h = c.def.header
				}
				got = append(got, col{h, c.width, c.right})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%q: columns %+v, want %+v", tc.spec, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%q: column %d is %+v, want %+v", tc.spec, i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseNodeStates(t *testing.T) {
	nodes, _ := stateNodes()
	tests := map[string]struct {
		names []string
		want  string // names of the nodes selected, "" for all
		err   string
	}{
		"none is all":          {nil, "", ""},
		"all":                  {[]string{"all"}, "", ""},
		"idle":                 {[]string{"idle"}, "i1 i2 i3", ""},
		"compact and long":     {[]string{"ALLOC", "mixed"}, "a1 m1", ""},
		"drain is the flag":    {[]string{"drain"}, "a2 d1", ""},
		"drained and draining": {[]string{"drained", "drng"}, "a2 d1", ""},
		"down and no_respond":  {[]string{"no_respond"}, "x1", ""},
		"slurm only":           {[]string{"maint", "future"}, "-", ""},
		"unknown":              {[]string{"idle", "sleepy"}, "", `Bad state string: "sleepy"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			keep, err := ParseNodeStates(tc.names)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if keep == nil {
				if tc.want != "" {
					t.Fatalf("selects every node, want %s", tc.want)
				}
				return
			}
			var got []string
			for i := range nodes {
				if keep(&nodes[i]) {
					got = append(got, nodes[i].Name)
				}
			}
			if s := strings.Join(got, " "); s != tc.want && !(tc.want == "-" && s == "") {
				t.Errorf("selects %q, want %q", s, tc.want)
			}
		})
	}
}

// TestNodesSafe checks that a hostile reason reaches the terminal escaped.
func TestNodesSafe(t *testing.T) {
	nodes := []api.Node{{NodeInfo: api.NodeInfo{Name: "n1", CPUs: 1}, Drain: true, Reason: "\x1b]0;owned\x07", ReasonUser: "eve\u202e"}}
	var b strings.Builder
	if err := Nodes(&b, nodes, nil, NodesOptions{ListReasons: true, NoHeader: true}); err != nil {
		t.Fatal(err)
	}
	if want := `\x1b]0;owned\x07     eve\u202e Unknown             n1` + "\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// FuzzNodeFormat checks sinfo's -o parser and that any accepted format
// renders the state fixture.
func FuzzNodeFormat(f *testing.F) {
	for _, s := range []string{DefaultNodesFormat, LongNodesFormat, NodeLongNodesFormat, SummarizeNodesFormat, "%#.-9N%%", "%", "%99999999N", "%Q"} {
		f.Add(s)
	}
	nodes, parts := stateNodes()
	f.Fuzz(func(t *testing.T, format string) {
		if _, err := ParseNodeFormat(format); err != nil {
			return
		}
		var b bytes.Buffer
		if err := Nodes(&b, nodes, parts, NodesOptions{Format: format}); err != nil {
			t.Fatalf("format %q parsed but does not render: %v", format, err)
		}
	})
}

// FuzzNodeLongFormat does the same for -O.
func FuzzNodeLongFormat(f *testing.F) {
	for _, s := range []string{"partition:10,nodes:.6,statecompact", "reason:5|,user", "nodes:", ",", "nodes:.99999999", "bogus"} {
		f.Add(s)
	}
	nodes, parts := stateNodes()
	f.Fuzz(func(t *testing.T, spec string) {
		if _, err := ParseNodeLongFormat(spec); err != nil {
			return
		}
		var b bytes.Buffer
		if err := Nodes(&b, nodes, parts, NodesOptions{LongFormat: spec, NodeOriented: true}); err != nil {
			t.Fatalf("-O %q parsed but does not render: %v", spec, err)
		}
	})
}

// TestNodesInventory checks the fields a node's inventory fills: S:C:T and
// its parts from the topology, GRES, free memory and corral's counts.
func TestNodesInventory(t *testing.T) {
	cpu := func(id, core, socket int, sibling int) api.CPU {
		return api.CPU{ID: id, Core: core, Socket: socket, Siblings: []int{sibling}}
	}
	inv := &api.Inventory{
		Topology: &api.Topology{Sockets: 2, Nodes: []api.NUMANode{
			{ID: 0, MemMB: 4096, FreeMB: 3000, CPUs: []api.CPU{cpu(0, 0, 0, 4), cpu(1, 1, 0, 5), cpu(4, 0, 0, 0), cpu(5, 1, 0, 1)}},
			{ID: 1, MemMB: 4096, FreeMB: 1000, CPUs: []api.CPU{cpu(2, 2, 1, 6), cpu(3, 3, 1, 7), cpu(6, 2, 1, 2), cpu(7, 3, 1, 3)}},
		}},
		GPUs: []api.GPU{{Index: 0}, {Index: 1, MIGEnabled: true, MIG: []api.MIGInstance{{}, {}}}},
		PFs:  []api.PF{{VFs: []api.VF{{}, {}, {}}}},
	}
	nodes := []api.Node{
		{NodeInfo: api.NodeInfo{Name: "g1", CPUs: 8, MemMB: 8192, Inventory: inv, Version: "1.2"}},
		{NodeInfo: api.NodeInfo{Name: "p1", CPUs: 4, MemMB: 2048}},
	}
	opts := NodesOptions{NodeOriented: true, LongFormat: "nodelist:3,socketcorethread:.6,sockets:.2,cores:.2,threads:.2,gres:.6,freemem:.5,version:.4,numa:.2,gpus:.2,vfs:.2"}
	want := "" +
		"NOD S:C:TSOCOTH  GRESFREE_VERSNUGPVF\n" +
		"g1  2:2:2 2 2 2 gpu:3 4000 1.2 2 3 3\n" +
		"p1  1:4:1 1 4 1(null)  N/A N/A - - -\n"
	var b strings.Builder
	if err := Nodes(&b, nodes, nil, opts); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// benchNodes is a cluster of n nodes over four partitions in mixed states.
func benchNodes(n int) ([]api.Node, []api.Partition) {
	nodes := make([]api.Node, n)
	for i := range nodes {
		nd := api.Node{NodeInfo: api.NodeInfo{Name: "node" + strconv.Itoa(i+1), CPUs: 64, MemMB: 256000,
			Partitions: []string{[]string{"batch", "gpu", "long", "debug"}[i%4]}}, AllocCPUs: (i % 3) * 32}
		if i%50 == 0 {
			nd.Drain, nd.Reason = true, "maintenance"
		}
		nodes[i] = nd
	}
	return nodes, []api.Partition{{Name: "batch", Default: true}, {Name: "gpu"}, {Name: "long"}, {Name: "debug"}}
}

// BenchmarkNodes1000 renders sinfo's default, -s and -N -l layouts of a
// thousand nodes.
func BenchmarkNodes1000(b *testing.B) {
	nodes, parts := benchNodes(1000)
	for name, opts := range map[string]NodesOptions{
		"default": {}, "summarize": {Summarize: true}, "node-long": {NodeOriented: true, Long: true},
	} {
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := Nodes(&buf, nodes, parts, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNodesFeatures checks %f and %b: a node's active features, and that
// nodes with other features never share a line.
func TestNodesFeatures(t *testing.T) {
	node := func(name string, features ...string) api.Node {
		return api.Node{NodeInfo: api.NodeInfo{Name: name, CPUs: 4, MemMB: 4096}, ActiveFeatures: features}
	}
	nodes := []api.Node{node("n1", "ib", "intel"), node("n2", "ib", "intel"), node("n3", "amd"), node("n4")}
	opts := NodesOptions{Format: "%10N %.3D %f %b"}
	want := "" +
		"NODELIST   NOD AVAIL_FEATURES ACTIVE_FEATURES\n" +
		"n[1-2]       2 ib,intel ib,intel\n" +
		"n3           1 amd amd\n" +
		"n4           1 (null) (null)\n"
	var b strings.Builder
	if err := Nodes(&b, nodes, nil, opts); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
