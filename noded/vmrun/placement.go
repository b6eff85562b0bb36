package vmrun

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"corral/api"
)

// memoryBackend returns the -object for the guest's RAM: for a placed job
// bound to its NUMA nodes (host-nodes, policy=bind) unless it asked for
// --numa=none, backed by hugepages (memfd with hugetlb) when it got some,
// and shared (memfd, share=on) when a vhost-user device such as virtiofs
// must reach it. "" when none of this applies (p may be nil).
func memoryBackend(p *api.Placement, numa string, memMB int64, shared bool) string {
	var hugeKB int64
	bind := false
	if p != nil {
		for _, h := range p.Hugepages {
			hugeKB = max(hugeKB, h.SizeKB)
		}
		bind = len(p.NUMANodes) > 0 && numa != api.NUMANone
	}
	if !bind && hugeKB == 0 && !shared {
		return ""
	}
	var b strings.Builder
	switch {
	case hugeKB > 0:
		// Guest RAM must be a whole number of pages.
		pageMB := hugeKB / 1024
		memMB = (memMB + pageMB - 1) / pageMB * pageMB
		fmt.Fprintf(&b, "memory-backend-memfd,id=ram,size=%dM,hugetlb=on,hugetlbsize=%dM", memMB, pageMB)
		if shared {
			b.WriteString(",share=on")
		}
	case shared:
		fmt.Fprintf(&b, "memory-backend-memfd,id=ram,size=%dM,share=on", memMB)
	default:
		fmt.Fprintf(&b, "memory-backend-ram,id=ram,size=%dM", memMB)
	}
	if bind {
		fmt.Fprintf(&b, ",host-nodes=%s,policy=bind", nodeList(p.NUMANodes))
	}
	return b.String()
}

// nodeList writes NUMA node ids as QEMU's host-nodes list property wants
// them: a run as a range ("0-1"), separate ids by repeating the key
// ("0,host-nodes=2").
func nodeList(ids []int) string {
	parts := make([]string, 0, len(ids))
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, strconv.Itoa(ids[i])+"-"+strconv.Itoa(ids[j]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",host-nodes=")
}

// passthrough returns -device vfio-pci for the job's GPUs (by their PCI
// address in the node's inventory) and VFs. MIG slices cannot be passed to
// a VM this way (they need vGPU mediated devices) and are left out.
func (r *Runner) passthrough(p *api.Placement) []string {
	var argv []string
	for _, addr := range r.passthroughAddrs(p) {
		argv = append(argv, "-device", "vfio-pci,host="+addr)
	}
	return argv
}

// passthroughAddrs are the PCI addresses of the job's GPUs and VFs.
func (r *Runner) passthroughAddrs(p *api.Placement) []string {
	if p == nil {
		return nil
	}
	var addrs []string
	for _, uuid := range p.GPUs {
		if addr := r.gpuAddr(uuid); addr != "" {
			addrs = append(addrs, addr)
		} else {
			r.log.Warn("GPU has no PCI address in the inventory; not passed to the VM", "gpu", uuid)
		}
	}
	return append(addrs, p.VFs...)
}

func (r *Runner) gpuAddr(uuid string) string {
	if r.cfg.Inventory == nil {
		return ""
	}
	for _, g := range r.cfg.Inventory.GPUs {
		if g.UUID == uuid {
			return g.PCIBusID
		}
	}
	return ""
}

// pin confines the VM to the job's CPUs: every QEMU thread to the set,
// then vCPU i's thread to CPU i of it (the set wraps when the VM has more
// vCPUs than CPUs, as under single-threaded TCG).
func (v *VM) pin(cpus []int) error {
	var all unix.CPUSet
	for _, c := range cpus {
		all.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", v.st.PID))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &all); err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	threads, err := v.VCPUThreads()
	if err != nil {
		return err
	}
	for i, tid := range threads {
		var one unix.CPUSet
		one.Set(cpus[i%len(cpus)])
		if err := unix.SchedSetaffinity(tid, &one); err != nil {
			return fmt.Errorf("vCPU %d (thread %d): %w", i, tid, err)
		}
	}
	return nil
}
