package vmrun

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// A VM with GPUs or SR-IOV functions passed through (vfio-pci) needs, as
// QEMU's unprivileged id, the VFIO container (/dev/vfio/vfio, open to
// everyone on a stock node) and its devices' IOMMU groups
// (/dev/vfio/GROUP, root's): the runner gives the groups to the VM's id
// while the VM runs (recorded in vm.json, given back to root when QEMU is
// gone, by Recover too) and lets QEMU lock memory (CAP_IPC_LOCK, the one
// capability such a QEMU keeps: VFIO pins the whole guest RAM, which the
// VM's cgroup still bounds).

// sysPCIDevices is where the IOMMU group of a PCI device is found.
var sysPCIDevices = "/sys/bus/pci/devices"

// vfioDir holds the VFIO device nodes.
var vfioDir = "/dev/vfio"

// vfioGroups returns the group devices (/dev/vfio/N) of the PCI devices
// addrs, each once.
func vfioGroups(addrs []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, addr := range addrs {
		link, err := os.Readlink(filepath.Join(sysPCIDevices, addr, "iommu_group"))
		if err != nil {
			return nil, fmt.Errorf("passing %s to the VM: its IOMMU group: %w (bind it to vfio-pci, with the IOMMU on)", addr, err)
		}
		dev := filepath.Join(vfioDir, filepath.Base(link))
		if !seen[dev] {
			seen[dev] = true
			out = append(out, dev)
		}
	}
	sort.Strings(out)
	return out, nil
}

// grantVFIO gives the VFIO groups to QEMU's id; on an error it gives back
// what it gave.
func grantVFIO(groups []string, as qemuIdentity) error {
	if len(groups) == 0 || os.Geteuid() != 0 {
		return nil
	}
	if fi, err := os.Stat(filepath.Join(vfioDir, "vfio")); err != nil || fi.Mode().Perm()&0o006 != 0o006 {
		return fmt.Errorf("passing devices to the VM needs %s open to everyone (it is the VFIO container; the VM's QEMU runs as an unprivileged uid): %v", filepath.Join(vfioDir, "vfio"), err)
	}
	for i, g := range groups {
		if err := os.Chown(g, int(as.UID), int(as.GID)); err != nil {
			revokeVFIO(groups[:i])
			return fmt.Errorf("giving %s to the VM's QEMU (uid %d): %w", g, as.UID, err)
		}
	}
	return nil
}

// revokeVFIO gives the VFIO groups back to root.
func revokeVFIO(groups []string) {
	for _, g := range groups {
		os.Chown(g, 0, 0)
	}
}
