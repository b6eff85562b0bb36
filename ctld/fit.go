package ctld

import (
	"fmt"
	"slices"
	"strings"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// fitChecker refuses at submit, as Slurm does ("Requested node
// configuration is not available"), a job that no node of its partition
// could ever hold: more CPUs, memory, GPUs, hugepages or VFs than any node
// offers even when idle. It asks the scheduler's own functions
// (sched.CouldEverFit for CPUs and memory, sched.PlaceInNode on an empty
// node for devices and hugepages), so submit and the pass never disagree.
// A partition without registered nodes accepts everything (its nodes may
// not have joined yet), and so does one marked QueueUnfit.
//
// One checker serves one request: it remembers the answer for each shape
// of job, so a batch of thousands of alike jobs asks once.
type fitChecker struct {
	state *state.State
	snap  *sched.Snapshot // built on first use
	parts []api.Partition
	def   int64
	memo  map[fitKey]error
}

// fitKey is a job's shape as the fit depends on it.
type fitKey struct {
	part string
	cpus int
	mem  int64
	gres string
	huge string
	numa string
	tmp  int64
}

// newFitChecker returns a checker for one request; s must stay readable
// while it is used (inside one FSM.Read).
func newFitChecker(s *state.State, parts []api.Partition, defMemPerCPU int64) *fitChecker {
	return &fitChecker{state: s, parts: parts, def: defMemPerCPU, memo: map[fitKey]error{}}
}

func (f *fitChecker) snapshot() *sched.Snapshot {
	if f.snap == nil {
		f.snap = &sched.Snapshot{Partitions: f.parts, DefMemPerCPU: f.def, Nodes: make([]*state.Node, 0, len(f.state.Nodes))}
		for _, name := range sortedKeys(f.state.Nodes) {
			f.snap.Nodes = append(f.snap.Nodes, f.state.Nodes[name])
		}
	}
	return f.snap
}

// check refuses job i of the batch when no node of partition p could ever
// hold it.
func (f *fitChecker) check(i int, sp *api.JobSpec, p *api.Partition) error {
	if p.QueueUnfit {
		return nil
	}
	if len(f.state.Nodes) == 0 {
		return nil
	}
	spec := stateSpec(sp)
	j := &state.Job{Spec: &spec}
	req := sched.RequestOf(j, f.def)
	k := fitKey{part: p.Name, cpus: req.CPUs, mem: req.MemMB, gres: fmt.Sprint(sp.Gres), huge: fmt.Sprint(sp.Hugepages), numa: sp.NUMA, tmp: sp.TmpMB}
	why, seen := f.memo[k]
	if !seen {
		why = f.why(j, p.Name, req)
		f.memo[k] = why
	}
	if why == nil {
		return nil
	}
	ue := why.(*unfitError)
	return refuse(i, ue.field, "Requested node configuration is not available: %s", ue.msg)
}

// unfitError says what a job asks for that no node offers.
type unfitError struct {
	field, msg string
}

func (e *unfitError) Error() string { return e.msg }

// why returns nil when some node of the partition could hold the job, and
// otherwise what it asks for and what the largest node offers.
func (f *fitChecker) why(j *state.Job, part string, req sched.NodeRequest) error {
	var nodes []*state.Node
	snap := f.snapshot()
	for _, n := range snap.Nodes {
		if slices.Contains(partitionsOf(n), part) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	if req.TmpMB > 0 {
		most, at := int64(0), ""
		for _, n := range nodes {
			if n.TmpMB > most {
				most, at = n.TmpMB, n.Name
			}
		}
		if most < req.TmpMB {
			return &unfitError{field: "tmp_mb", msg: fmt.Sprintf("the job asks for %d MiB of scratch space (--tmp); the largest node of partition %s (%s) has %d MiB", req.TmpMB, part, orNone(at), most)}
		}
	}
	devices := req.GPUs > 0 || req.MIG > 0 || req.VFs > 0 || len(req.Hugepages) > 0
	if sched.CouldEverFit(snap, j) {
		if !devices {
			return nil
		}
		for _, n := range nodes {
			if n.Inventory != nil && n.Inventory.Topology != nil && n.TmpMB >= req.TmpMB {
				if _, ok := sched.PlaceInNode(n.Inventory, state.NewUsed(), req); ok {
					return nil
				}
			}
		}
	}
	return describeUnfit(req, part, nodes)
}

func partitionsOf(n *state.Node) []string {
	if len(n.Partitions) == 0 {
		return []string{api.DefaultPartition}
	}
	return n.Partitions
}

// describeUnfit compares the request with the most each kind of resource
// any node of the partition offers, and names the first one short.
func describeUnfit(req sched.NodeRequest, part string, nodes []*state.Node) error {
	var most struct {
		cpus             int
		mem              int64
		gpus, migs, vfs  int
		huge2M, huge1G   int64
		cpuNode, memNode string
	}
	for _, n := range nodes {
		if n.CPUs > most.cpus {
			most.cpus, most.cpuNode = n.CPUs, n.Name
		}
		if m := n.MemMB - n.OverheadMB; m > most.mem {
			most.mem, most.memNode = m, n.Name
		}
		g, m, v, h2, h1 := inventoryTotals(n.Inventory)
		most.gpus, most.migs, most.vfs = max(most.gpus, g), max(most.migs, m), max(most.vfs, v)
		most.huge2M, most.huge1G = max(most.huge2M, h2), max(most.huge1G, h1)
	}
	short := func(field, format string, args ...any) error {
		return &unfitError{field: field, msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case req.CPUs > most.cpus:
		return short("cpus_per_task", "the job asks for %d CPUs; the largest node of partition %s (%s) has %d", req.CPUs, part, most.cpuNode, most.cpus)
	case req.MemMB > most.mem:
		return short("mem_per_node_mb", "the job asks for %d MiB of memory; the largest node of partition %s (%s) offers %d MiB to a job", req.MemMB, part, most.memNode, most.mem)
	case req.GPUs > most.gpus:
		return short("gres", "the job asks for %d GPUs%s; the nodes of partition %s have at most %d", req.GPUs, typeText(req.GPUType), part, most.gpus)
	case req.MIG > most.migs:
		return short("gres", "the job asks for %d MIG instances %s; the nodes of partition %s have at most %d", req.MIG, req.MIGProfile, part, most.migs)
	case req.VFs > most.vfs:
		return short("gres", "the job asks for %d SR-IOV VFs; the nodes of partition %s have at most %d", req.VFs, part, most.vfs)
	}
	for _, h := range req.Hugepages {
		have := most.huge2M
		if h.SizeKB != 2048 {
			have = most.huge1G
		}
		if h.Count > have {
			return short("hugepages", "the job asks for %d hugepages of %d KiB; the nodes of partition %s have at most %d", h.Count, h.SizeKB, part, have)
		}
	}
	field := "gres"
	if req.GPUs == 0 && req.MIG == 0 && req.VFs == 0 && len(req.Hugepages) == 0 {
		field = "tmp_mb" // without devices, only scratch space can be what no node has with the rest
	}
	return short(field, "no node of partition %s can hold its CPUs, memory, devices, hugepages and scratch space together (%d CPUs, %d MiB%s); the largest has %d CPUs, %d MiB, %d GPUs, %d VFs",
		part, req.CPUs, req.MemMB, devicesText(req), most.cpus, most.mem, most.gpus, most.vfs)
}

func typeText(t string) string {
	if t == "" {
		return ""
	}
	return " of type " + t
}

func devicesText(r sched.NodeRequest) string {
	var parts []string
	if r.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs%s", r.GPUs, typeText(r.GPUType)))
	}
	if r.MIG > 0 {
		parts = append(parts, fmt.Sprintf("%d MIG %s", r.MIG, r.MIGProfile))
	}
	if r.VFs > 0 {
		parts = append(parts, fmt.Sprintf("%d VFs", r.VFs))
	}
	if len(r.Hugepages) > 0 {
		parts = append(parts, "hugepages")
	}
	if r.TmpMB > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB of scratch space", r.TmpMB))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", " + strings.Join(parts, ", ")
}

// inventoryTotals counts a node's GPUs (whole, when MIG is off), MIG
// instances, VFs and hugepages of each size.
func inventoryTotals(inv *api.Inventory) (gpus, migs, vfs int, huge2M, huge1G int64) {
	if inv == nil {
		return
	}
	for _, g := range inv.GPUs {
		if g.MIGEnabled {
			migs += len(g.MIG)
		} else {
			gpus++
		}
	}
	for _, pf := range inv.PFs {
		vfs += len(pf.VFs)
	}
	if inv.Topology != nil {
		for _, n := range inv.Topology.Nodes {
			huge2M += n.Hugepages[2048].Total
			huge1G += n.Hugepages[1<<20].Total
		}
	}
	return
}

func orNone(name string) string {
	if name == "" {
		return "none reports any"
	}
	return name
}
