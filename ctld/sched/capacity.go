package sched

import (
	"slices"
	"strings"

	"corral/api"
	"corral/ctld/state"
)

// capacity tracks free CPUs and memory per node during one pass.
type capacity struct {
	nodes []nodeFree
	// heldParts holds every partition that shares a node with one where an
	// earlier job waits for resources; heldMemo is the last answer of held
	// (a pass's jobs mostly share a partition).
	heldParts map[string]bool
	// lastIndex is index's last answer.
	lastIndex int
	// topology is set when a node reported its topology (placement
	// inside nodes then applies).
	topology bool
	heldMemo struct {
		part       string
		held, read bool
	}
}

// defaultPartitionOnly is the partitions of a node that names none (read
// only).
var defaultPartitionOnly = []string{api.DefaultPartition}

type nodeFree struct {
	name       string
	partitions []string
	cpus       int
	mem        int64
	totalCPUs  int
	totalMem   int64
	// overhead is the runner's own memory per job on this node.
	overhead int64
	// tmp is the node's free scratch space (--tmp), totalTmp all of it.
	tmp, totalTmp int64
	usable        bool
	inv           *api.Inventory
}

// MemAll is MemRequest's answer for a job that asks for all of a node's
// memory (sbatch --mem=0).
const MemAll = -1

// need is what a job asking for mem (MiB, or MemAll) takes of this node's
// memory, the runner's overhead included: with MemAll, all of it.
func (n *nodeFree) need(mem int64) int64 {
	if mem == MemAll {
		return n.totalMem
	}
	return mem + n.overhead
}

func newCapacity(nodes []*state.Node) *capacity {
	c := &capacity{}
	c.reset(nodes)
	return c
}

// reset makes c the free resources of nodes, reusing c's buffers.
func (c *capacity) reset(nodes []*state.Node) {
	c.nodes = c.nodes[:0]
	if cap(c.nodes) < len(nodes) {
		c.nodes = make([]nodeFree, 0, len(nodes))
	}
	clear(c.heldParts)
	c.heldMemo.read, c.lastIndex, c.topology = false, 0, false
	for _, n := range nodes {
		c.topology = c.topology || hasTopology(n.Inventory)
		parts := n.Partitions
		if len(parts) == 0 {
			parts = defaultPartitionOnly
		}
		c.nodes = append(c.nodes, nodeFree{
			name: n.Name, partitions: parts,
			cpus: n.FreeCPUs(), mem: n.FreeMemMB(),
			totalCPUs: n.CPUs, totalMem: n.MemMB, overhead: n.OverheadMB, tmp: n.TmpMB - n.AllocTmpMB, totalTmp: n.TmpMB,
			usable: !n.Down && !n.Drain && !n.Probing, inv: n.Inventory,
		})
	}
	slices.SortFunc(c.nodes, func(a, b nodeFree) int { return strings.Compare(a.name, b.name) })
}

// index returns the index of the node named name, or -1. The runs of a
// snapshot come node by node, so the last answer is tried first.
func (c *capacity) index(name string) int {
	if i := c.lastIndex; i < len(c.nodes) && c.nodes[i].name == name {
		return i
	}
	lo, hi := 0, len(c.nodes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.nodes[m].name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(c.nodes) || c.nodes[lo].name != name {
		return -1
	}
	c.lastIndex = lo
	return lo
}

// anyCouldFit reports whether some node of the partition could ever hold
// the request, were it empty: its CPUs, memory and scratch space (--tmp)
// together.
func (c *capacity) anyCouldFit(part string, cpus int, mem, tmp int64) bool {
	for i := range c.nodes {
		n := &c.nodes[i]
		if slices.Contains(n.partitions, part) && n.totalCPUs >= cpus && n.totalMem >= n.need(mem) && n.totalTmp >= tmp {
			return true
		}
	}
	return false
}

// CouldEverFit reports whether some node of the job's partition could hold
// it when idle (a down node counts): false means it waits for Resources
// until a larger node joins.
func CouldEverFit(s *Snapshot, j *state.Job) bool {
	part := j.Spec.Partition
	if part == "" {
		part = defaultPartition(s.Partitions)
	}
	return newCapacity(s.Nodes).anyCouldFit(part, j.Spec.CPUs(), MemRequest(j, s.DefMemPerCPU), j.Spec.TmpMB)
}

// firstFit returns the first usable node of the partition with room now
// (the job's memory plus the node runner's own overhead per job), and that
// overhead.
func (c *capacity) firstFit(part string, cpus int, mem int64) (string, int64) {
	for i := range c.nodes {
		n := &c.nodes[i]
		if n.usable && n.cpus >= cpus && n.mem >= n.need(mem) && slices.Contains(n.partitions, part) {
			return n.name, n.overhead
		}
	}
	return "", 0
}

// hold keeps every node of the partition for the job that waits there: first
// come, first served lets no later job of any partition take them.
func (c *capacity) hold(part string) {
	if c.heldParts == nil {
		c.heldParts = map[string]bool{}
	}
	c.markGroup(c.heldParts, part)
	c.heldMemo.read = false
}

// markGroup sets into[p] for every partition p that shares a node with
// part: the group a waiting job's partition blocks.
func (c *capacity) markGroup(into map[string]bool, part string) {
	for i := range c.nodes {
		if slices.Contains(c.nodes[i].partitions, part) {
			for _, p := range c.nodes[i].partitions {
				into[p] = true
			}
		}
	}
}

// held reports whether the partition shares a node with one where an earlier
// job waits. A partition that shares none cannot delay that job by starting
// its own, so it keeps scheduling (Slurm blocks partitions, not the cluster).
func (c *capacity) held(part string) bool {
	if m := &c.heldMemo; !m.read || m.part != part {
		m.part, m.held, m.read = part, c.heldParts[part], true
	}
	return c.heldMemo.held
}

func (c *capacity) take(name string, cpus int, mem int64) {
	for i := range c.nodes {
		if c.nodes[i].name == name {
			c.nodes[i].cpus -= cpus
			c.nodes[i].mem -= mem + c.nodes[i].overhead
			return
		}
	}
}
