package display

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// NodesOptions are sinfo's display options.
type NodesOptions struct {
	// NodeOriented is -N: one line per node and partition.
	NodeOriented bool
	// Long is -l: more columns and sinfo's long state names.
	Long bool
	// NoHeader is -h: no header line and no date line.
	NoHeader bool
	// Now, when set, is printed above the header of -l output, as sinfo -l
	// prints the date. Left zero, no date line is printed.
	Now time.Time
}

// minField is sinfo's MIN_NODE_FIELD_SIZE and MIN_PART_FIELD_SIZE: the
// narrowest a computed NODELIST or PARTITION column gets.
const minField = 9

// partView is a partition with the nodes that serve it.
type partView struct {
	name    string
	def     bool
	maxTime int64 // seconds; 0 is infinite
	nodes   []*api.Node
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
		v := &partView{name: p.Name, def: p.Default, maxTime: p.MaxTime}
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
	}
	return "unknown"
}

// Nodes renders nodes and partitions like sinfo: by default one line per
// partition and node state with the nodes in hostlist notation; with
// NodeOriented (-N) one line per node and partition. A node that serves
// several partitions appears under each.
func Nodes(w io.Writer, nodes []api.Node, parts []api.Partition, opts NodesOptions) error {
	views := buildPartitions(nodes, parts)
	var buf []byte
	if opts.Long && !opts.NoHeader && !opts.Now.IsZero() {
		buf = opts.Now.AppendFormat(buf, time.ANSIC)
		buf = append(buf, '\n')
	}
	if opts.NodeOriented {
		buf = appendNodeLines(buf, views, opts)
	} else {
		buf = appendPartitionLines(buf, views, opts)
	}
	_, err := w.Write(buf)
	return err
}

// cell is one column of a line: its text, width and justification. sinfo
// truncates every value to its width.
type cell struct {
	text  string
	width int
	right bool
}

// appendLine writes cells separated by single spaces, as sinfo's formats
// are.
func appendLine(dst []byte, cells ...cell) []byte {
	for i, c := range cells {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = appendPadded(dst, c.text, c.width, c.right, true)
	}
	return append(dst, '\n')
}

func partWidth(views []*partView) int {
	w := minField
	for _, v := range views {
		w = max(w, len(v.label()))
	}
	return w
}

// timeLimit is sinfo's TIMELIMIT.
func timeLimit(secs int64) string {
	if secs <= 0 {
		return "infinite"
	}
	return string(appendCompactSecs(nil, secs))
}

// stateGroup is one partition-oriented line: the partition's nodes in one
// state.
type stateGroup struct {
	state api.NodeState
	names []string
}

func groupByState(nodes []*api.Node) []stateGroup {
	var groups []stateGroup
	for _, n := range nodes {
		st := n.State()
		i := slices.IndexFunc(groups, func(g stateGroup) bool { return g.state == st })
		if i < 0 {
			groups = append(groups, stateGroup{state: st})
			i = len(groups) - 1
		}
		groups[i].names = append(groups[i].names, n.Name)
	}
	slices.SortFunc(groups, func(a, b stateGroup) int { return nodeStateRank(b.state) - nodeStateRank(a.state) })
	return groups
}

// appendPartitionLines renders sinfo's "%9P %.5a %.10l %.6D %.6t %N", or
// with Long "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N".
// Corral partitions are always up, run single-node jobs (JOB_SIZE 1), are
// open to all groups and to non-root users, and share nodes between jobs
// without oversubscribing CPUs (OVERSUBSCRIBE NO).
func appendPartitionLines(dst []byte, views []*partView, opts NodesOptions) []byte {
	pw := partWidth(views)
	line := func(part, avail, limit, count, state, nodes string) []byte {
		if opts.Long {
			return appendLine(dst, cell{part, pw, false}, cell{avail, 5, true}, cell{limit, 10, true},
				cell{"1", 10, true}, cell{"no", 4, true}, cell{"NO", 8, true}, cell{"all", 10, true},
				cell{count, 6, true}, cell{state, 11, true}, cell{nodes, 0, false})
		}
		return appendLine(dst, cell{part, pw, false}, cell{avail, 5, true}, cell{limit, 10, true},
			cell{count, 6, true}, cell{state, 6, true}, cell{nodes, 0, false})
	}
	if !opts.NoHeader {
		if opts.Long {
			dst = appendLine(dst, cell{"PARTITION", pw, false}, cell{"AVAIL", 5, true}, cell{"TIMELIMIT", 10, true},
				cell{"JOB_SIZE", 10, true}, cell{"ROOT", 4, true}, cell{"OVERSUBSCRIBE", 8, true},
				cell{"GROUPS", 10, true}, cell{"NODES", 6, true}, cell{"STATE", 11, true}, cell{"NODELIST", 0, false})
		} else {
			dst = line("PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST")
		}
	}
	for _, v := range views {
		limit := timeLimit(v.maxTime)
		groups := groupByState(v.nodes)
		if len(groups) == 0 {
			dst = line(v.label(), "up", limit, "0", "n/a", "")
			continue
		}
		for _, g := range groups {
			state := stateShort(g.state)
			if opts.Long {
				state = stateLong(g.state)
			}
			dst = line(v.label(), "up", limit, strconv.Itoa(len(g.names)), state, CompressHostlist(g.names))
		}
	}
	return dst
}

// nodeLine is one node-oriented line.
type nodeLine struct {
	node *api.Node
	part *partView
	rank int // the partition's position, to order a node's lines
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
	for i := 0; i < len(s) && isDigit(s[i]) && i < maxDigits; i++ {
		n = n*10 + uint64(s[i]-'0')
	}
	return n
}

// appendNodeLines renders sinfo -N's "%N %.6D %.9P %6t", or with Long
// "%N %.6D %.9P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E", sorted by node
// name. Corral nodes report no sockets, disk, weights or features, so S:C:T
// is 1:CPUS:1, TMP_DISK 0, WEIGHT 1 and AVAIL_FE (null). Long adds, after
// sinfo's columns, corral's RUNNER, ACCEL (kvm or tcg) and IMAGES.
func appendNodeLines(dst []byte, views []*partView, opts NodesOptions) []byte {
	var lines []nodeLine
	nw := minField
	for rank, v := range views {
		for _, n := range v.nodes {
			lines = append(lines, nodeLine{node: n, part: v, rank: rank})
			nw = max(nw, len(n.Name))
		}
	}
	slices.SortStableFunc(lines, func(a, b nodeLine) int {
		if c := compareNodeNames(a.node.Name, b.node.Name); c != 0 {
			return c
		}
		return a.rank - b.rank
	})
	pw := partWidth(views)
	if !opts.NoHeader {
		if opts.Long {
			dst = appendLine(dst, cell{"NODELIST", nw, false}, cell{"NODES", 6, true}, cell{"PARTITION", pw, true},
				cell{"STATE", 11, true}, cell{"CPUS", 4, true}, cell{"S:C:T", 8, true}, cell{"MEMORY", 6, true},
				cell{"TMP_DISK", 8, true}, cell{"WEIGHT", 6, true}, cell{"AVAIL_FE", 8, true}, cell{"REASON", 20, false},
				cell{"RUNNER", 7, false}, cell{"ACCEL", 5, false}, cell{"NUMA", 4, true}, cell{"GPUS", 4, true},
				cell{"VFS", 4, true}, cell{"IMAGES", 0, false})
		} else {
			dst = appendLine(dst, cell{"NODELIST", nw, false}, cell{"NODES", 6, true},
				cell{"PARTITION", pw, true}, cell{"STATE", 6, false})
		}
	}
	for _, l := range lines {
		n, st := l.node, l.node.State()
		if !opts.Long {
			dst = appendLine(dst, cell{n.Name, nw, false}, cell{"1", 6, true},
				cell{l.part.label(), pw, true}, cell{stateShort(st), 6, false})
			continue
		}
		cpus := string(appendUnits(nil, float64(n.CPUs), unitNone))
		reason := n.Reason
		if reason == "" {
			reason = "none"
		}
		numa, gpus, vfs := inventoryCounts(n.Inventory)
		dst = appendLine(dst, cell{n.Name, nw, false}, cell{"1", 6, true}, cell{l.part.label(), pw, true},
			cell{stateLong(st), 11, true}, cell{cpus, 4, true}, cell{socketsCoresThreads(n), 8, true},
			cell{strconv.FormatInt(n.MemMB, 10), 6, true}, cell{"0", 8, true}, cell{"1", 6, true},
			cell{nullStr, 8, true}, cell{reason, 20, false},
			cell{orNone(n.Runner), 7, false}, cell{orNone(n.Accel), 5, false}, cell{numa, 4, true}, cell{gpus, 4, true},
			cell{vfs, 4, true}, cell{orNone(strings.Join(n.Images, ",")), 0, false})
	}
	return dst
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

// socketsCoresThreads is sinfo's S:C:T: from the node's topology when it
// reported one, else 1:CPUS:1.
func socketsCoresThreads(n *api.Node) string {
	t := (*api.Topology)(nil)
	if n.Inventory != nil {
		t = n.Inventory.Topology
	}
	if t == nil || t.Sockets < 1 || len(t.Nodes) == 0 || len(t.Nodes[0].CPUs) == 0 {
		return "1:" + strconv.Itoa(n.CPUs) + ":1"
	}
	threads := len(t.Nodes[0].CPUs[0].Siblings) + 1
	cpus := 0
	for _, nd := range t.Nodes {
		cpus += len(nd.CPUs)
	}
	return strconv.Itoa(t.Sockets) + ":" + strconv.Itoa(cpus/(t.Sockets*threads)) + ":" + strconv.Itoa(threads)
}

// orNone prints "-" for an empty cell, so columns stay aligned.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
