package hardware

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FixtureHost is the shape of a fake host for WriteTopologyFixture: Sockets ×
// NodesPerSocket NUMA nodes, each with CoresPerNode cores of ThreadsPerCore
// hardware threads.
//
// Numbering follows what Linux does on x86 servers: nodes are numbered
// socket by socket; logical CPUs give the first thread of every core first,
// then the second thread of every core, so with T cores in all, CPU c and
// CPU c+T are siblings; core ids restart at 0 in each package.
type FixtureHost struct {
	Sockets        int
	NodesPerSocket int
	CoresPerNode   int
	ThreadsPerCore int
	// MemMBPerNode is each node's MemTotal in MiB.
	MemMBPerNode int64
	// FreeMB is each node's MemFree in MiB; nil means all of it is free.
	FreeMB []int64
	// Distances is the SLIT matrix, one row per node; nil means 10 local
	// and 20 remote, the kernel's defaults when firmware has no SLIT.
	Distances [][]int
	// Hugepages2M and Hugepages1G are each node's reserved page counts (nil
	// means none). Free counts equal them unless FreeHugepages2M or
	// FreeHugepages1G is set.
	Hugepages2M, Hugepages1G         []int64
	FreeHugepages2M, FreeHugepages1G []int64
	// OmitHugetlb leaves the Hugetlb: line out of proc/meminfo, as kernels
	// before 4.16 do; ghw then finds no NUMA node.
	OmitHugetlb bool
}

// Nodes is the number of NUMA nodes of the host.
func (h FixtureHost) Nodes() int { return h.Sockets * h.NodesPerSocket }

// CPUs is the number of logical CPUs of the host.
func (h FixtureHost) CPUs() int { return h.Nodes() * h.CoresPerNode * h.ThreadsPerCore }

// fixtureCPU is one logical CPU of a FixtureHost.
type fixtureCPU struct {
	id, node, socket, core int
	siblings               []int // all threads of the core, this one included
}

// cpus lists the host's logical CPUs by id.
func (h FixtureHost) cpus() []fixtureCPU {
	totalCores := h.Nodes() * h.CoresPerNode
	cpus := make([]fixtureCPU, h.CPUs())
	for node := range h.Nodes() {
		for c := range h.CoresPerNode {
			global := node*h.CoresPerNode + c
			threads := make([]int, h.ThreadsPerCore)
			for t := range threads {
				threads[t] = t*totalCores + global
			}
			for _, id := range threads {
				cpus[id] = fixtureCPU{
					id:       id,
					node:     node,
					socket:   node / h.NodesPerSocket,
					core:     (node%h.NodesPerSocket)*h.CoresPerNode + c,
					siblings: threads,
				}
			}
		}
	}
	return cpus
}

// distances returns h.Distances or the kernel's default matrix.
func (h FixtureHost) distances() [][]int {
	if h.Distances != nil {
		return h.Distances
	}
	n := h.Nodes()
	m := make([][]int, n)
	for i := range m {
		m[i] = make([]int, n)
		for j := range m[i] {
			m[i][j] = 20
			if i == j {
				m[i][j] = localDistance
			}
		}
	}
	return m
}

// validate reports the first field that does not describe a host.
func (h FixtureHost) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Sockets", h.Sockets}, {"NodesPerSocket", h.NodesPerSocket},
		{"CoresPerNode", h.CoresPerNode}, {"ThreadsPerCore", h.ThreadsPerCore},
	} {
		if f.v < 1 {
			return fmt.Errorf("fixture host: %s is %d (use 1 or more)", f.name, f.v)
		}
	}
	if h.MemMBPerNode < 1 {
		return fmt.Errorf("fixture host: MemMBPerNode is %d (use 1 or more)", h.MemMBPerNode)
	}
	n := h.Nodes()
	if h.Distances != nil {
		if len(h.Distances) != n {
			return fmt.Errorf("fixture host: Distances has %d rows for %d nodes", len(h.Distances), n)
		}
		for i, row := range h.Distances {
			if len(row) != n {
				return fmt.Errorf("fixture host: Distances row %d has %d columns for %d nodes", i, len(row), n)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    []int64
	}{
		{"FreeMB", h.FreeMB}, {"Hugepages2M", h.Hugepages2M}, {"Hugepages1G", h.Hugepages1G},
		{"FreeHugepages2M", h.FreeHugepages2M}, {"FreeHugepages1G", h.FreeHugepages1G},
	} {
		if f.v != nil && len(f.v) != n {
			return fmt.Errorf("fixture host: %s has %d entries for %d nodes (give one per node, or nil)", f.name, len(f.v), n)
		}
	}
	for node := range n {
		if free := perNode(h.FreeMB, node, h.MemMBPerNode); free > h.MemMBPerNode {
			return fmt.Errorf("fixture host: node %d has FreeMB %d above MemMBPerNode %d", node, free, h.MemMBPerNode)
		}
		for _, p := range h.pageSizes() {
			if total, free := p.counts(node); total < 0 || free < 0 || free > total {
				return fmt.Errorf("fixture host: node %d has %d free of %d %d KiB hugepages (use 0 <= free <= total)", node, free, total, p.kib)
			}
		}
		hugeMiB := perNode(h.Hugepages2M, node, 0)*2 + perNode(h.Hugepages1G, node, 0)*1024
		if hugeMiB > h.MemMBPerNode {
			return fmt.Errorf("fixture host: node %d reserves %d MiB of hugepages, above MemMBPerNode %d", node, hugeMiB, h.MemMBPerNode)
		}
	}
	return nil
}

// perNode returns v[node], or def when v is nil.
func perNode(v []int64, node int, def int64) int64 {
	if v == nil {
		return def
	}
	return v[node]
}

// fixturePageSize is one hugepage size of a FixtureHost.
type fixturePageSize struct {
	kib         int64
	total, free []int64
}

func (h FixtureHost) pageSizes() []fixturePageSize {
	return []fixturePageSize{
		{HugepageSize2M, h.Hugepages2M, h.FreeHugepages2M},
		{HugepageSize1G, h.Hugepages1G, h.FreeHugepages1G},
	}
}

func (p fixturePageSize) counts(node int) (total, free int64) {
	total = perNode(p.total, node, 0)
	return total, perNode(p.free, node, total)
}

// WriteTopologyFixture writes a fake sys/ + proc/ tree for host h into dir, which
// must be absent or empty; Topology(dir) then reads h back.
//
// What ghw reads, and so what Topology depends on:
//
//	sys/devices/system/node/nodeN/                   one directory per node
//	  cpuK -> ../../cpu/cpuK                        the node's CPUs (symlinks, as on a host)
//	  distance                                       the node's SLIT row
//	  meminfo                                        MemTotal (ghw), MemFree (Topology)
//	  hugepages/hugepages-SkB/{nr,free,surplus}_hugepages
//	sys/devices/system/cpu/cpuK/online               1
//	sys/devices/system/cpu/cpuK/topology/{physical_package_id,core_id}
//	proc/cpuinfo                                     a "processor" block per CPU
//	proc/meminfo                                     Hugepagesize:, Hugetlb:
//
// It also writes what a host has and other readers (ghw.Memory, lscpu-like
// tools) use: node/{online,possible,has_cpu,has_memory}, nodeN/cpulist,
// cpu/{online,possible,present}, topology/{thread_siblings_list,
// core_cpus_list}, sys/kernel/mm/hugepages and the totals of proc/meminfo.
func WriteTopologyFixture(dir string, h FixtureHost) error {
	if err := h.validate(); err != nil {
		return err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("fixture dir %q is not empty (use a new directory)", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fixture dir %q: %w", dir, err)
	}
	w := &treeWriter{root: dir}
	cpus := h.cpus()
	writeCPUs(w, h, cpus)
	writeNodes(w, h, cpus)
	writeProc(w, h, cpus)
	if w.err != nil {
		return fmt.Errorf("fixture dir %q: %w", dir, w.err)
	}
	return nil
}

// writeCPUs writes sys/devices/system/cpu.
func writeCPUs(w *treeWriter, h FixtureHost, cpus []fixtureCPU) {
	all := cpuList(cpuIDs(cpus))
	for _, name := range []string{"online", "possible", "present"} {
		w.file(all, "sys/devices/system/cpu", name)
	}
	for _, c := range cpus {
		dir := filepath.Join("sys/devices/system/cpu", "cpu"+strconv.Itoa(c.id))
		w.file("1", dir, "online")
		w.file(strconv.Itoa(c.socket), dir, "topology/physical_package_id")
		w.file(strconv.Itoa(c.core), dir, "topology/core_id")
		w.file(cpuList(c.siblings), dir, "topology/thread_siblings_list")
		w.file(cpuList(c.siblings), dir, "topology/core_cpus_list")
	}
}

// writeNodes writes sys/devices/system/node and sys/kernel/mm/hugepages.
func writeNodes(w *treeWriter, h FixtureHost, cpus []fixtureCPU) {
	const base = "sys/devices/system/node"
	nodeIDs := make([]int, h.Nodes())
	for i := range nodeIDs {
		nodeIDs[i] = i
	}
	for _, name := range []string{"online", "possible", "has_cpu", "has_memory", "has_normal_memory"} {
		w.file(cpuList(nodeIDs), base, name)
	}
	distances := h.distances()
	for node := range h.Nodes() {
		dir := filepath.Join(base, "node"+strconv.Itoa(node))
		var ids []int
		for _, c := range cpus {
			if c.node == node {
				ids = append(ids, c.id)
				name := "cpu" + strconv.Itoa(c.id)
				w.symlink(filepath.Join("../../cpu", name), dir, name)
			}
		}
		w.file(cpuList(ids), dir, "cpulist")
		w.file(intsLine(distances[node]), dir, "distance")
		w.file(nodeMeminfo(h, node), dir, "meminfo")
		for _, p := range h.pageSizes() {
			total, free := p.counts(node)
			hp := filepath.Join(dir, "hugepages", fmt.Sprintf("hugepages-%dkB", p.kib))
			w.file(strconv.FormatInt(total, 10), hp, "nr_hugepages")
			w.file(strconv.FormatInt(free, 10), hp, "free_hugepages")
			w.file("0", hp, "surplus_hugepages")
		}
	}
	for _, p := range h.pageSizes() {
		var total, free int64
		for node := range h.Nodes() {
			t, f := p.counts(node)
			total, free = total+t, free+f
		}
		hp := filepath.Join("sys/kernel/mm/hugepages", fmt.Sprintf("hugepages-%dkB", p.kib))
		w.file(strconv.FormatInt(total, 10), hp, "nr_hugepages")
		w.file(strconv.FormatInt(total, 10), hp, "nr_hugepages_mempolicy")
		w.file(strconv.FormatInt(free, 10), hp, "free_hugepages")
		for _, name := range []string{"resv_hugepages", "surplus_hugepages", "nr_overcommit_hugepages"} {
			w.file("0", hp, name)
		}
	}
}

// nodeMeminfo renders nodeN/meminfo; HugePages_* count the default (2 MiB)
// size, as the kernel does.
func nodeMeminfo(h FixtureHost, node int) string {
	totalKiB := h.MemMBPerNode * 1024
	freeKiB := perNode(h.FreeMB, node, h.MemMBPerNode) * 1024
	hpTotal, hpFree := h.pageSizes()[0].counts(node)
	var b strings.Builder
	fmt.Fprintf(&b, "Node %d MemTotal:       %8d kB\n", node, totalKiB)
	fmt.Fprintf(&b, "Node %d MemFree:        %8d kB\n", node, freeKiB)
	fmt.Fprintf(&b, "Node %d MemUsed:        %8d kB\n", node, totalKiB-freeKiB)
	fmt.Fprintf(&b, "Node %d HugePages_Total: %5d\n", node, hpTotal)
	fmt.Fprintf(&b, "Node %d HugePages_Free:  %5d\n", node, hpFree)
	fmt.Fprintf(&b, "Node %d HugePages_Surp:  %5d\n", node, 0)
	return b.String()
}

// writeProc writes proc/cpuinfo and proc/meminfo.
func writeProc(w *treeWriter, h FixtureHost, cpus []fixtureCPU) {
	var info strings.Builder
	for _, c := range cpus {
		// ghw stores a block when it reaches the blank line after it, so
		// the last block needs one too.
		fmt.Fprintf(&info, "processor\t: %d\nvendor_id\t: CorralFixture\nmodel name\t: corral fixture CPU\n"+
			"physical id\t: %d\nsiblings\t: %d\ncore id\t\t: %d\ncpu cores\t: %d\nflags\t\t: fpu pse ht pdpe1gb\n\n",
			c.id, c.socket, h.NodesPerSocket*h.CoresPerNode*h.ThreadsPerCore, c.core, h.NodesPerSocket*h.CoresPerNode)
	}
	w.file(info.String(), "proc", "cpuinfo")

	var totalKiB, freeKiB, hugetlbKiB int64
	for node := range h.Nodes() {
		totalKiB += h.MemMBPerNode * 1024
		freeKiB += perNode(h.FreeMB, node, h.MemMBPerNode) * 1024
		for _, p := range h.pageSizes() {
			total, _ := p.counts(node)
			hugetlbKiB += total * p.kib
		}
	}
	var hp2MTotal, hp2MFree int64
	for node := range h.Nodes() {
		t, f := h.pageSizes()[0].counts(node)
		hp2MTotal, hp2MFree = hp2MTotal+t, hp2MFree+f
	}
	var mem strings.Builder
	fmt.Fprintf(&mem, "MemTotal:       %8d kB\nMemFree:        %8d kB\nMemAvailable:   %8d kB\n", totalKiB, freeKiB, freeKiB)
	fmt.Fprintf(&mem, "HugePages_Total: %5d\nHugePages_Free:  %5d\nHugePages_Rsvd:  %5d\nHugePages_Surp:  %5d\n", hp2MTotal, hp2MFree, 0, 0)
	fmt.Fprintf(&mem, "Hugepagesize:   %8d kB\n", HugepageSize2M)
	if !h.OmitHugetlb {
		fmt.Fprintf(&mem, "Hugetlb:        %8d kB\n", hugetlbKiB)
	}
	w.file(mem.String(), "proc", "meminfo")
}

// treeWriter writes files and symlinks under root and keeps the first
// error, so that the layout code reads as a list.
type treeWriter struct {
	root string
	err  error
}

// file writes content plus a newline at root/dir/name, making directories.
func (w *treeWriter) file(content, dir, name string) {
	if w.err != nil {
		return
	}
	path := filepath.Join(w.root, dir, name)
	if w.err = os.MkdirAll(filepath.Dir(path), 0o755); w.err != nil {
		return
	}
	w.err = os.WriteFile(path, []byte(content+"\n"), 0o644)
}

// symlink makes root/dir/name point at target (relative, as in sysfs, so
// the tree can be moved or packed).
func (w *treeWriter) symlink(target, dir, name string) {
	if w.err != nil {
		return
	}
	if w.err = os.MkdirAll(filepath.Join(w.root, dir), 0o755); w.err != nil {
		return
	}
	w.err = os.Symlink(target, filepath.Join(w.root, dir, name))
}

func cpuIDs(cpus []fixtureCPU) []int {
	ids := make([]int, len(cpus))
	for i, c := range cpus {
		ids[i] = c.id
	}
	return ids
}

// cpuList renders ids in the kernel's list format, e.g. "0-3,16-19".
func cpuList(ids []int) string {
	ids = slices.Sorted(slices.Values(ids))
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(ids[i]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i])+"-"+strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// intsLine renders a distance row as the kernel does: "10 21 31".
func intsLine(v []int) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, " ")
}
