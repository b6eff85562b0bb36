package display

import (
	"strconv"
	"strings"

	"corral/api"
	"corral/internal/hostlist"
)

// This file is the table of sinfo's fields: for each -o letter and -O long
// name, its header, how it groups nodes into lines and how corral fills it.
// Values for what corral nodes do not have (temporary disk, weights, CPU
// load) are the ones sinfo prints for a node that never set
// them, so that scripts written for Slurm keep parsing.

// nodeFieldKind says how a field takes part in deciding lines.
type nodeFieldKind uint8

const (
	// kindAgg fields sum or list a line's nodes (NODES, NODELIST, the
	// A/I/O/T counts) and never split a line.
	kindAgg nodeFieldKind = iota
	// kindPart fields are the partition's; printing any puts each
	// partition on lines of its own.
	kindPart
	// kindNode fields split lines: nodes that print different values
	// (state, reason, GRES) never share one.
	kindNode
	// kindSize fields (CPUs, memory, sockets) split lines only with -e;
	// otherwise a line shows its smallest value, with "+" when its nodes
	// differ, as sinfo does.
	kindSize
)

// nodeGroup is one line: the nodes it covers and their partition (nil when
// the format shows no partition field and lines span partitions).
type nodeGroup struct {
	part  *partView
	nodes []*api.Node
}

type nodeFieldDef struct {
	header string
	kind   nodeFieldKind
	value  func(dst []byte, g *nodeGroup) []byte
}

// nodeFieldDefs is indexed by the -o letter.
var nodeFieldDefs [128]*nodeFieldDef

// nodeValidCodes lists the supported letters in the order errors show them.
const nodeValidCodes = "aAbBcCdDeEfFgGhHIlLmMnNoOpPrRsStTuUvwXYzZ"

// nodeLongFields maps -O names (lower case) to fields; nodeLongNames lists
// them in the order errors show them.
var (
	nodeLongFields = map[string]*nodeFieldDef{}
	nodeLongNames  []string
)

func partValue(get func(p *partView) string) func([]byte, *nodeGroup) []byte {
	return func(dst []byte, g *nodeGroup) []byte {
		if g.part == nil {
			return append(dst, "n/a"...)
		}
		return append(dst, get(g.part)...)
	}
}

func fixedNode(s string) func([]byte, *nodeGroup) []byte {
	return func(dst []byte, _ *nodeGroup) []byte { return append(dst, s...) }
}

// firstNode is a value of the line's first node: lines split on these
// fields, so every node of the line has it. An empty line prints none.
func firstNode(none string, get func(n *api.Node) string) func([]byte, *nodeGroup) []byte {
	return func(dst []byte, g *nodeGroup) []byte {
		if len(g.nodes) == 0 {
			return append(dst, none...)
		}
		return append(dst, get(g.nodes[0])...)
	}
}

// minPlus is sinfo's _build_min_max_*_string without a range: the
// smallest value, followed by "+" when the line's nodes differ. units
// prints the value as convert_num_unit does (CPUs); otherwise it is a
// plain number (memory).
func minPlus(units bool, get func(n *api.Node) int64) func([]byte, *nodeGroup) []byte {
	return func(dst []byte, g *nodeGroup) []byte {
		if len(g.nodes) == 0 {
			return append(dst, '0')
		}
		lo, hi := get(g.nodes[0]), get(g.nodes[0])
		for _, n := range g.nodes[1:] {
			v := get(n)
			lo, hi = min(lo, v), max(hi, v)
		}
		if units {
			dst = appendUnits(dst, float64(lo), unitNone)
		} else {
			dst = strconv.AppendInt(dst, lo, 10)
		}
		if hi != lo {
			dst = append(dst, '+')
		}
		return dst
	}
}

// nodeCounts are sinfo's A/I/O/T: a node running jobs (allocated, mixed,
// draining) is allocated; else a drained or down node is other; else idle.
// CPUs count the same way, a node's busy CPUs always allocated.
type nodeCounts struct {
	alloc, idle, other, total int
}

func countNodes(g *nodeGroup) (nodes, cpus nodeCounts) {
	for _, n := range g.nodes {
		st := n.State()
		switch {
		case n.AllocCPUs > 0 && !n.Down:
			nodes.alloc++
		case st == api.NodeDrained || st == api.NodeDown:
			nodes.other++
		default:
			nodes.idle++
		}
		nodes.total++
		busy := min(n.AllocCPUs, n.CPUs)
		if n.Down {
			busy = 0
		}
		cpus.alloc += busy
		cpus.total += n.CPUs
		if n.Drain || n.Down {
			cpus.other += n.CPUs - busy
		} else {
			cpus.idle += n.CPUs - busy
		}
	}
	return nodes, cpus
}

func appendCounts(dst []byte, c nodeCounts, all bool) []byte {
	dst = strconv.AppendInt(dst, int64(c.alloc), 10)
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(c.idle), 10)
	if !all {
		return dst
	}
	dst = append(dst, '/')
	dst = strconv.AppendInt(dst, int64(c.other), 10)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, int64(c.total), 10)
}

func nodeNames(g *nodeGroup) []string {
	names := make([]string, len(g.nodes))
	for i, n := range g.nodes {
		names[i] = n.Name
	}
	return names
}

func valueNodeList(dst []byte, g *nodeGroup) []byte {
	if len(g.nodes) == 1 {
		return append(dst, g.nodes[0].Name...)
	}
	return append(dst, hostlist.Compress(nodeNames(g))...)
}

// valueState is %t and %T: the line's state, "n/a" for a partition
// without nodes.
func valueState(long bool) func([]byte, *nodeGroup) []byte {
	return func(dst []byte, g *nodeGroup) []byte {
		if len(g.nodes) == 0 {
			return append(dst, "n/a"...)
		}
		if long {
			return append(dst, stateLong(g.nodes[0].State())...)
		}
		return append(dst, stateShort(g.nodes[0].State())...)
	}
}

// stateComplete is node_state_string_complete lower-cased: the base state
// and its flags, "idle+drain".
func stateComplete(n *api.Node) string {
	base := "idle"
	switch {
	case n.Down:
		base = "down"
	case n.Probing:
		base = "unknown"
	case n.AllocCPUs >= n.CPUs && n.AllocCPUs > 0:
		base = "allocated"
	case n.AllocCPUs > 0:
		base = "mixed"
	}
	if n.Drain {
		base += "+drain"
	}
	return base
}

func reasonOr(n *api.Node) string {
	if n.Reason == "" {
		return "none"
	}
	if n.DrainNote != "" {
		// A drain by migration that waits says for what.
		return n.Reason + " (waits: " + n.DrainNote + ")"
	}
	return n.Reason
}

func reasonUser(n *api.Node) string {
	if n.ReasonUser == "" || n.Reason == "" {
		return "Unknown"
	}
	return n.ReasonUser
}

func reasonTime(n *api.Node) string {
	if n.ReasonTime.IsZero() || n.Reason == "" {
		return "Unknown"
	}
	return n.ReasonTime.Format(slurmTime)
}

// nodeGres is a node's GRES as sinfo shows it: gpu:N from its inventory.
// nodeFeatures is %f and %b: the node's active features, (null) for none.
func nodeFeatures(n *api.Node) string {
	if len(n.ActiveFeatures) == 0 {
		return nullStr
	}
	return strings.Join(n.ActiveFeatures, ",")
}

func nodeGres(n *api.Node) string {
	_, gpus, _ := inventoryCounts(n.Inventory)
	if gpus == "-" || gpus == "0" {
		return nullStr
	}
	return "gpu:" + gpus
}

// freeMem is %e: the free memory the node last reported, N/A when it
// reported none.
func freeMem(n *api.Node) string {
	if n.Inventory == nil || n.Inventory.Topology == nil {
		return "N/A"
	}
	var free int64
	for _, nd := range n.Inventory.Topology.Nodes {
		free += nd.FreeMB
	}
	return strconv.FormatInt(free, 10)
}

// The values of %X, %Y and %Z, which S:C:T joins.
var (
	valueSockets = minPlus(true, func(n *api.Node) int64 { s, _, _ := topo(n); return s })
	valueCores   = minPlus(true, func(n *api.Node) int64 { _, c, _ := topo(n); return c })
	valueThreads = minPlus(true, func(n *api.Node) int64 { _, _, t := topo(n); return t })
)

func valueSCT(dst []byte, g *nodeGroup) []byte {
	dst = valueSockets(dst, g)
	dst = append(dst, ':')
	dst = valueCores(dst, g)
	dst = append(dst, ':')
	return valueThreads(dst, g)
}

func partAvail(p *partView) string {
	switch p.state {
	case api.PartitionDown:
		return "down"
	case api.PartitionDrain:
		return "drain"
	case api.PartitionInactive:
		return "inactive"
	}
	return "up"
}

// partJobSize is %s: corral jobs run on one node unless the partition
// bounds them otherwise.
func partJobSize(p *partView) string {
	lo := max(p.minNodes, 1)
	switch {
	case p.maxNodes == 0 && lo == 1:
		return "1"
	case p.maxNodes == 0:
		return itoa(lo) + "-infinite"
	case p.maxNodes == lo:
		return itoa(lo)
	}
	return itoa(lo) + "-" + itoa(p.maxNodes)
}

func partDefaultTime(p *partView) string {
	if p.defTime <= 0 {
		return "n/a"
	}
	return timeLimit(p.defTime)
}

func partPreempt(p *partView) string {
	if p.preempt == "" {
		return "OFF"
	}
	return strings.ToUpper(string(p.preempt))
}

func int64Of(f func(n *api.Node) int) func(n *api.Node) int64 {
	return func(n *api.Node) int64 { return int64(f(n)) }
}

func init() {
	nodeCount := func(dst []byte, g *nodeGroup) []byte { return strconv.AppendInt(dst, int64(len(g.nodes)), 10) }
	counts := func(all, cpu bool) func([]byte, *nodeGroup) []byte {
		return func(dst []byte, g *nodeGroup) []byte {
			n, c := countNodes(g)
			if cpu {
				return appendCounts(dst, c, all)
			}
			return appendCounts(dst, n, all)
		}
	}
	type entry struct {
		code  byte
		names string // -O names, comma-separated
		def   nodeFieldDef
	}
	table := []entry{
		{'a', "available", nodeFieldDef{"AVAIL", kindPart, partValue(partAvail)}},
		{'A', "nodeai", nodeFieldDef{"NODES(A/I)", kindAgg, counts(false, false)}},
		{0, "allocmem", nodeFieldDef{"ALLOCMEM", kindSize, minPlus(false, func(n *api.Node) int64 { return n.AllocMemMB })}},
		{'b', "features_act", nodeFieldDef{"ACTIVE_FEATURES", kindNode, firstNode(nullStr, nodeFeatures)}},
		{'B', "maxcpuspernode", nodeFieldDef{"MAX_CPUS_PER_NODE", kindPart, partValue(func(*partView) string { return "UNLIMITED" })}},
		{'c', "cpus", nodeFieldDef{"CPUS", kindSize, minPlus(true, int64Of(func(n *api.Node) int { return n.CPUs }))}},
		{'C', "cpusstate", nodeFieldDef{"CPUS(A/I/O/T)", kindAgg, counts(true, true)}},
		{'d', "disk", nodeFieldDef{"TMP_DISK", kindSize, minPlus(false, func(n *api.Node) int64 { return n.TmpMB })}},
		{'D', "nodes", nodeFieldDef{"NODES", kindAgg, nodeCount}},
		{'e', "freemem", nodeFieldDef{"FREE_MEM", kindSize, firstNode("N/A", freeMem)}},
		{'E', "reason", nodeFieldDef{"REASON", kindNode, firstNode("none", reasonOr)}},
		{'f', "features", nodeFieldDef{"AVAIL_FEATURES", kindNode, firstNode(nullStr, nodeFeatures)}},
		{'F', "nodeaiot", nodeFieldDef{"NODES(A/I/O/T)", kindAgg, counts(true, false)}},
		{'g', "groups", nodeFieldDef{"GROUPS", kindPart, partValue(func(*partView) string { return "all" })}},
		{'G', "gres", nodeFieldDef{"GRES", kindNode, firstNode(nullStr, nodeGres)}},
		{'h', "oversubscribe", nodeFieldDef{"OVERSUBSCRIBE", kindPart, partValue(func(*partView) string { return "NO" })}},
		{'H', "timestamp", nodeFieldDef{"TIMESTAMP", kindNode, firstNode("Unknown", reasonTime)}},
		{'I', "priorityjobfactor", nodeFieldDef{"PRIO_JOB_FACTOR", kindPart, partValue(func(p *partView) string { return itoa(p.tier) })}},
		{'l', "time", nodeFieldDef{"TIMELIMIT", kindPart, partValue(func(p *partView) string { return timeLimit(p.maxTime) })}},
		{'L', "defaulttime", nodeFieldDef{"DEFAULTTIME", kindPart, partValue(partDefaultTime)}},
		{'m', "memory", nodeFieldDef{"MEMORY", kindSize, minPlus(false, func(n *api.Node) int64 { return n.MemMB })}},
		{'M', "preemptmode", nodeFieldDef{"PREEMPT_MODE", kindPart, partValue(partPreempt)}},
		{'n', "nodehost", nodeFieldDef{"HOSTNAMES", kindAgg, valueNodeList}},
		{'N', "nodelist", nodeFieldDef{"NODELIST", kindAgg, valueNodeList}},
		{'o', "nodeaddr", nodeFieldDef{"NODE_ADDR", kindAgg, valueNodeList}},
		{'O', "cpusload", nodeFieldDef{"CPU_LOAD", kindSize, fixedNode("N/A")}},
		{'p', "prioritytier", nodeFieldDef{"PRIO_TIER", kindPart, partValue(func(p *partView) string { return itoa(p.tier) })}},
		{'P', "partition", nodeFieldDef{"PARTITION", kindPart, partValue(func(p *partView) string { return p.label() })}},
		{'r', "root", nodeFieldDef{"ROOT", kindPart, partValue(func(*partView) string { return "no" })}},
		{'R', "partitionname", nodeFieldDef{"PARTITION", kindPart, partValue(func(p *partView) string { return p.name })}},
		{'s', "size", nodeFieldDef{"JOB_SIZE", kindPart, partValue(partJobSize)}},
		{'S', "allocnodes", nodeFieldDef{"ALLOCNODES", kindPart, partValue(func(*partView) string { return "all" })}},
		{'t', "statecompact", nodeFieldDef{"STATE", kindNode, valueState(false)}},
		{'T', "statelong", nodeFieldDef{"STATE", kindNode, valueState(true)}},
		{0, "statecomplete", nodeFieldDef{"STATECOMPLETE", kindNode, firstNode("n/a", stateComplete)}},
		{'u', "user", nodeFieldDef{"USER", kindNode, firstNode("Unknown", reasonUser)}},
		// corral records who set a reason by name, not by uid: %U is %u.
		{'U', "userlong", nodeFieldDef{"USER", kindNode, firstNode("Unknown", reasonUser)}},
		{'v', "version", nodeFieldDef{"VERSION", kindNode, firstNode("N/A", func(n *api.Node) string { return orNA(n.Version) })}},
		{'w', "weight", nodeFieldDef{"WEIGHT", kindSize, fixedNode("1")}},
		{'X', "sockets", nodeFieldDef{"SOCKETS", kindSize, valueSockets}},
		{'Y', "cores", nodeFieldDef{"CORES", kindSize, valueCores}},
		{'z', "socketcorethread", nodeFieldDef{"S:C:T", kindSize, valueSCT}},
		{'Z', "threads", nodeFieldDef{"THREADS", kindSize, valueThreads}},
		// corral's own columns, by -O name only.
		{0, "runner", nodeFieldDef{"RUNNER", kindNode, firstNode("-", func(n *api.Node) string { return orNone(n.Runner) })}},
		{0, "accel", nodeFieldDef{"ACCEL", kindNode, firstNode("-", func(n *api.Node) string { return orNone(n.Accel) })}},
		{0, "numa", nodeFieldDef{"NUMA", kindNode, firstNode("-", func(n *api.Node) string { s, _, _ := inventoryCounts(n.Inventory); return s })}},
		{0, "gpus", nodeFieldDef{"GPUS", kindNode, firstNode("-", func(n *api.Node) string { _, s, _ := inventoryCounts(n.Inventory); return s })}},
		{0, "vfs", nodeFieldDef{"VFS", kindNode, firstNode("-", func(n *api.Node) string { _, _, s := inventoryCounts(n.Inventory); return s })}},
		{0, "images", nodeFieldDef{"IMAGES", kindNode, firstNode("-", func(n *api.Node) string { return orNone(strings.Join(n.Images, ",")) })}},
	}
	for i := range table {
		e := &table[i]
		if e.code != 0 {
			nodeFieldDefs[e.code] = &e.def
		}
		for _, name := range strings.Split(e.names, ",") {
			nodeLongFields[name] = &e.def
			nodeLongNames = append(nodeLongNames, name)
		}
	}
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}
