package display

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/internal/hostlist"
)

// NodesOptions are sinfo's display options.
type NodesOptions struct {
	// NodeOriented is -N: one line per node and partition.
	NodeOriented bool
	// Long is -l: more columns and sinfo's long state names.
	Long bool
	// NoHeader is -h: no header line and no date line.
	NoHeader bool
	// Now, when set, is printed above the header of -l output (and of
	// each listing of -i, with Dated), as sinfo prints the date. Left
	// zero, no date line is printed.
	Now   time.Time
	Dated bool
	// Format is -o, in sinfo's % codes; LongFormat is -O, in its long
	// names. Either replaces the layout the other options choose.
	Format, LongFormat string
	// Summarize is -s: one line per partition with NODES(A/I/O/T).
	Summarize bool
	// ListReasons is -R: the reasons of down, drained and draining nodes,
	// with who set them and when.
	ListReasons bool
	// Exact is -e: nodes share a line only when their CPUs, memory and
	// other sizes are equal too.
	Exact bool
	// States is -t: only nodes in these states (sinfo's names, see
	// ParseNodeStates).
	States []string
	// Names is -n, expanded: only these nodes.
	Names []string
	// Dead is -d, only nodes that stopped responding (DOWN); Responding
	// is -r, only the others.
	Dead, Responding bool
}

// Layout returns the format the options select, so that a caller can
// refuse a bad -o or -O before it fetches anything.
func (o NodesOptions) Layout() (*NodeFormat, error) {
	switch {
	case o.LongFormat != "":
		return ParseNodeLongFormat(o.LongFormat)
	case o.Format != "":
		return ParseNodeFormat(o.Format)
	case o.ListReasons && o.Long:
		return ParseNodeFormat(LongListReasonsFormat)
	case o.ListReasons:
		return ParseNodeFormat(ListReasonsNodesFormat)
	case o.Summarize:
		return ParseNodeFormat(SummarizeNodesFormat)
	case o.NodeOriented && o.Long:
		return ParseNodeFormat(NodeLongNodesFormat)
	case o.NodeOriented:
		return ParseNodeFormat(NodeNodesFormat)
	case o.Long:
		return ParseNodeFormat(LongNodesFormat)
	}
	return ParseNodeFormat(DefaultNodesFormat)
}

// partView is a partition with the nodes that serve it.
type partView struct {
	name               string
	def                bool
	state              api.PartitionState
	maxTime, defTime   int64 // seconds; 0 is infinite (unset for defTime)
	tier               int
	preempt            api.PreemptMode
	minNodes, maxNodes int
	nodes              []*api.Node
}

func newPartView(p *api.Partition) *partView {
	return &partView{name: p.Name, def: p.Default, state: p.State, maxTime: p.MaxTime, defTime: p.DefaultTime,
		tier: p.PriorityTier, preempt: p.PreemptMode, minNodes: p.MinNodes, maxNodes: p.MaxNodes}
}

// label is the partition's name as sinfo prints it: the default partition
// carries a "*".
func (p *partView) label() string {
	if p.def {
		return p.name + "*"
	}
	return p.name
}

// buildPartitions joins nodes to partitions. A node serves the partitions it
// lists and those that list it; a node in none serves api.DefaultPartition.
// Partitions keep the order of parts (sinfo's "#P": as configured); ones that
// only nodes name follow in name order.
func buildPartitions(nodes []api.Node, parts []api.Partition) []*partView {
	var views []*partView
	byName := map[string]*partView{}
	listed := map[string][]string{} // node name -> partitions listing it
	hasDefault := false
	for _, p := range parts {
		if byName[p.Name] != nil {
			continue
		}
		v := newPartView(&p)
		hasDefault = hasDefault || p.Default
		byName[p.Name] = v
		views = append(views, v)
		for _, n := range p.Nodes {
			listed[n] = append(listed[n], p.Name)
		}
	}
	explicit := len(views)
	for i := range nodes {
		n := &nodes[i]
		for _, name := range nodePartitions(n, listed[n.Name]) {
			v := byName[name]
			if v == nil {
				v = &partView{name: name}
				byName[name] = v
				views = append(views, v)
			}
			v.nodes = append(v.nodes, n)
		}
	}
	implicit := views[explicit:]
	slices.SortFunc(implicit, func(a, b *partView) int { return strings.Compare(a.name, b.name) })
	for _, v := range implicit {
		v.def = !hasDefault && v.name == api.DefaultPartition
	}
	return views
}

// nodePartitions returns the partitions a node serves, each once: those it
// lists, then those listing it, else the default partition.
func nodePartitions(n *api.Node, listedBy []string) []string {
	var names []string
	for _, list := range [][]string{n.Partitions, listedBy} {
		for _, name := range list {
			if name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		names = []string{api.DefaultPartition}
	}
	return names
}

// nodeStateRank orders sinfo's state groups the way its default "-t" sort
// does: by Slurm's node state value, highest first, so drain flags come
// before mixed, allocated, idle and down.
func nodeStateRank(s api.NodeState) int {
	switch s {
	case api.NodeDraining:
		return 6
	case api.NodeDrained:
		return 5
	case api.NodeMixed:
		return 4
	case api.NodeAllocated:
		return 3
	case api.NodeIdle:
		return 2
	case api.NodeDown:
		return 1
	}
	return 0
}

// stateShort is node_state_string_compact, lower-cased as sinfo prints it.
func stateShort(s api.NodeState) string {
	switch s {
	case api.NodeIdle:
		return "idle"
	case api.NodeMixed:
		return "mix"
	case api.NodeAllocated:
		return "alloc"
	case api.NodeDown:
		return "down"
	case api.NodeDrained:
		return "drain"
	case api.NodeDraining:
		return "drng"
	case api.NodeMaint:
		return "maint"
	case api.NodeReserved:
		return "resv"
	}
	return "unk"
}

// stateLong is node_state_string, lower-cased as sinfo -l prints it.
func stateLong(s api.NodeState) string {
	switch s {
	case api.NodeIdle:
		return "idle"
	case api.NodeMixed:
		return "mixed"
	case api.NodeAllocated:
		return "allocated"
	case api.NodeDown:
		return "down"
	case api.NodeDrained:
		return "drained"
	case api.NodeDraining:
		return "draining"
	case api.NodeMaint:
		return "maint"
	case api.NodeReserved:
		return "reserved"
	}
	return "unknown"
}

// Nodes renders nodes and partitions like sinfo, in the layout opts
// select: by default one line per partition and group of nodes that print
// the same, with the nodes in hostlist notation; with NodeOriented (-N) one
// line per node and partition. A node that serves several partitions
// appears under each.
func Nodes(w io.Writer, nodes []api.Node, parts []api.Partition, opts NodesOptions) error {
	f, err := opts.Layout()
	if err != nil {
		return err
	}
	keep, err := nodeFilter(opts)
	if err != nil {
		return err
	}
	lines := nodeLines(f, buildPartitions(nodes, parts), keep, opts)
	widths := f.widths(lines)
	var buf []byte
	if (opts.Long || opts.Dated) && !opts.NoHeader && !opts.Now.IsZero() {
		buf = opts.Now.AppendFormat(buf, time.ANSIC)
		buf = append(buf, '\n')
	}
	if !opts.NoHeader {
		buf = f.appendHeader(buf, widths)
	}
	for _, g := range lines {
		buf = f.appendLine(buf, g, widths)
	}
	_, err = w.Write(buf)
	return err
}

// nodeLines decides sinfo's lines. With -N every node and partition pair
// is a line, in node-name order. Otherwise the nodes of each partition
// that print the same value in every field that tells nodes apart share a
// line (NodeFormat.groupKey); partitions come in their order, a
// partition's lines in sinfo's state order (nodeStateRank), and a
// partition with no nodes gets one empty line
// unless a filter is in force. A format with no partition field puts each
// node on one line across partitions.
func nodeLines(f *NodeFormat, views []*partView, keep func(*api.Node) bool, opts NodesOptions) []*nodeGroup {
	var lines []*nodeGroup
	if opts.NodeOriented {
		return nodePairs(views, keep)
	}
	if !f.hasPartitionField() {
		seen := map[string]bool{}
		var all []*api.Node
		for _, v := range views {
			for _, n := range v.nodes {
				if !seen[n.Name] {
					seen[n.Name] = true
					all = append(all, n)
				}
			}
		}
		return groupNodes(f, nil, all, keep, opts.Exact)
	}
	filtered := len(opts.States) > 0 || len(opts.Names) > 0 || opts.ListReasons || opts.Dead || opts.Responding
	for _, v := range views {
		groups := groupNodes(f, v, v.nodes, keep, opts.Exact)
		if len(groups) == 0 && !filtered {
			groups = []*nodeGroup{{part: v}}
		}
		lines = append(lines, groups...)
	}
	return lines
}

// FilterNodes returns the nodes opts' -t, -n and -R select, for a listing
// that is not text (sinfo --json).
func FilterNodes(nodes []api.Node, opts NodesOptions) ([]api.Node, error) {
	keep, err := nodeFilter(opts)
	if err != nil {
		return nil, err
	}
	out := make([]api.Node, 0, len(nodes))
	for i := range nodes {
		if keep(&nodes[i]) {
			out = append(out, nodes[i])
		}
	}
	return out, nil
}

// nodePairs is -N's lines: one per node and partition, by node name, a
// node's partitions in their order.
func nodePairs(views []*partView, keep func(*api.Node) bool) []*nodeGroup {
	type pair struct {
		n    *api.Node
		part *partView
		rank int
	}
	var pairs []pair
	for rank, v := range views {
		for _, n := range v.nodes {
			if keep(n) {
				pairs = append(pairs, pair{n, v, rank})
			}
		}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int {
		if c := compareNodeNames(a.n.Name, b.n.Name); c != 0 {
			return c
		}
		return a.rank - b.rank
	})
	groups := make([]nodeGroup, len(pairs))
	members := make([]*api.Node, len(pairs))
	lines := make([]*nodeGroup, len(pairs))
	for i, p := range pairs {
		members[i] = p.n
		groups[i] = nodeGroup{part: p.part, nodes: members[i : i+1 : i+1]}
		lines[i] = &groups[i]
	}
	return lines
}

// groupNodes puts the nodes keep selects on lines by their group key, in
// sinfo's state order (nodeStateRank), then in the order their first node
// came.
func groupNodes(f *NodeFormat, part *partView, nodes []*api.Node, keep func(*api.Node) bool, exact bool) []*nodeGroup {
	var groups []*nodeGroup
	byKey := map[string]*nodeGroup{}
	var key []byte
	one := nodeGroup{part: part, nodes: make([]*api.Node, 1)}
	for _, n := range nodes {
		if !keep(n) {
			continue
		}
		one.nodes[0] = n
		key = f.groupKey(key[:0], &one, exact)
		g := byKey[string(key)]
		if g == nil {
			g = &nodeGroup{part: part}
			byKey[string(key)] = g
			groups = append(groups, g)
		}
		g.nodes = append(g.nodes, n)
	}
	slices.SortStableFunc(groups, func(a, b *nodeGroup) int {
		return nodeStateRank(b.nodes[0].State()) - nodeStateRank(a.nodes[0].State())
	})
	return groups
}

// timeLimit is sinfo's TIMELIMIT.
func timeLimit(secs int64) string {
	if secs <= 0 {
		return "infinite"
	}
	return string(appendCompactSecs(nil, secs))
}

// compareNodeNames is sinfo's node-list order: at the first differing byte,
// numbers compare by value ("n9" before "n10"), anything else as strings.
func compareNodeNames(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i < len(a) && i < len(b) && isDigit(a[i]) && isDigit(b[i]) {
		na, nb := leadingNumber(a[i:]), leadingNumber(b[i:])
		if na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func leadingNumber(s string) uint64 {
	var n uint64
	for i := 0; i < len(s) && isDigit(s[i]) && i < hostlist.MaxDigits; i++ {
		n = n*10 + uint64(s[i]-'0')
	}
	return n
}

// inventoryCounts gives a node's NUMA nodes, GPUs (MIG slices counted as
// GPUs) and VFs for sinfo -l, "-" when it reported no inventory.
func inventoryCounts(inv *api.Inventory) (numa, gpus, vfs string) {
	if inv == nil {
		return "-", "-", "-"
	}
	g, v := 0, 0
	for _, gpu := range inv.GPUs {
		if gpu.MIGEnabled {
			g += len(gpu.MIG)
		} else {
			g++
		}
	}
	for _, pf := range inv.PFs {
		v += len(pf.VFs)
	}
	numa = "-"
	if inv.Topology != nil {
		numa = strconv.Itoa(len(inv.Topology.Nodes))
	}
	return numa, strconv.Itoa(g), strconv.Itoa(v)
}

// topo returns a node's sockets, cores per socket and threads per core
// (sinfo's %X, %Y, %Z and S:C:T): from its topology when it reported one,
// else 1 socket of CPUS cores of 1 thread.
func topo(n *api.Node) (sockets, cores, threads int64) {
	t := (*api.Topology)(nil)
	if n.Inventory != nil {
		t = n.Inventory.Topology
	}
	if t == nil || t.Sockets < 1 || len(t.Nodes) == 0 || len(t.Nodes[0].CPUs) == 0 {
		return 1, int64(n.CPUs), 1
	}
	th := len(t.Nodes[0].CPUs[0].Siblings) + 1
	cpus := 0
	for _, nd := range t.Nodes {
		cpus += len(nd.CPUs)
	}
	return int64(t.Sockets), int64(cpus / (t.Sockets * th)), int64(th)
}

// orNone prints "-" for an empty cell, so columns stay aligned.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
