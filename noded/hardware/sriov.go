package hardware

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"corral/api"
)

// pciDevicesDir is where the kernel lists every PCI function, relative to
// the root of a host's file system.
const pciDevicesDir = "sys/bus/pci/devices"

// SRIOV reads the SR-IOV physical functions and their VFs under root ("" or
// "/" = this host): every /sys/bus/pci/devices/* with sriov_totalvfs > 0;
// for each: driver (basename of the driver symlink), numa_node,
// sriov_totalvfs, sriov_numvfs, and each virtfnN symlink → the VF's
// address, its driver, iommu_group (basename of the iommu_group link),
// numa_node. numa_node -1 stays -1.
//
// The PFs come out sorted by address and each PF's VFs in VF index order
// (virtfn0, virtfn1, ...). A missing numa_node reads as -1 (a kernel built
// without NUMA) and a missing iommu_group as -1 (no IOMMU). sriov_numvfs
// bounds the virtfnN links read; a link missing below it (VFs being
// destroyed while we read) is skipped. A host without sys/bus/pci has no
// PFs: nil, nil.
func SRIOV(root string) ([]api.PF, error) {
	if root == "" {
		root = "/"
	}
	dir := filepath.Join(root, pciDevicesDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: list PCI devices: %w", err)
	}
	var pfs []api.PF
	for _, e := range entries {
		pf, ok, err := readPF(dir, e.Name())
		if err != nil {
			return nil, fmt.Errorf("gpu: SR-IOV device %s: %w", e.Name(), err)
		}
		if ok {
			pfs = append(pfs, pf)
		}
	}
	slices.SortFunc(pfs, func(a, b api.PF) int { return strings.Compare(a.Addr, b.Addr) })
	return pfs, nil
}

// readPF reads the PCI function addr under dir; ok is false when it is not
// an SR-IOV physical function.
func readPF(dir, addr string) (pf api.PF, ok bool, err error) {
	dev := filepath.Join(dir, addr)
	total, err := readInt(filepath.Join(dev, "sriov_totalvfs"), 0)
	if err != nil || total <= 0 {
		return pf, false, err
	}
	pf = api.PF{Addr: addr, TotalVFs: total}
	if pf.Driver, err = linkBase(filepath.Join(dev, "driver")); err != nil {
		return pf, false, err
	}
	if pf.NUMANode, err = readInt(filepath.Join(dev, "numa_node"), -1); err != nil {
		return pf, false, err
	}
	numVFs, err := readInt(filepath.Join(dev, "sriov_numvfs"), 0)
	if err != nil {
		return pf, false, err
	}
	for i := 0; i < numVFs; i++ {
		vfAddr, err := linkBase(filepath.Join(dev, "virtfn"+strconv.Itoa(i)))
		if err != nil {
			return pf, false, err
		}
		if vfAddr == "" {
			continue
		}
		vf, err := readVF(dir, vfAddr)
		if err != nil {
			return pf, false, fmt.Errorf("VF %s: %w", vfAddr, err)
		}
		pf.VFs = append(pf.VFs, vf)
	}
	return pf, true, nil
}

func readVF(dir, addr string) (api.VF, error) {
	dev := filepath.Join(dir, addr)
	vf := api.VF{Addr: addr}
	var err error
	if vf.Driver, err = linkBase(filepath.Join(dev, "driver")); err != nil {
		return vf, err
	}
	if vf.NUMANode, err = readInt(filepath.Join(dev, "numa_node"), -1); err != nil {
		return vf, err
	}
	group, err := linkBase(filepath.Join(dev, "iommu_group"))
	if err != nil {
		return vf, err
	}
	vf.IOMMUGroup = -1
	if group != "" {
		if vf.IOMMUGroup, err = strconv.Atoi(group); err != nil {
			return vf, fmt.Errorf("iommu_group link %q: not a group number", group)
		}
	}
	return vf, nil
}

// sysfsNUMANode returns the NUMA node of the PCI function addr under root,
// -1 when unknown.
func sysfsNUMANode(root, addr string) int {
	node, err := readInt(filepath.Join(root, pciDevicesDir, addr, "numa_node"), -1)
	if err != nil {
		return -1
	}
	return node
}

// readInt reads a sysfs file holding one decimal integer; a missing file
// reads as missing.
func readInt(path string, missing int) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return missing, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// linkBase returns the last element of a symlink's target, "" when the link
// does not exist (a device without a driver, a host without an IOMMU).
func linkBase(path string) (string, error) {
	target, err := os.Readlink(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Base(target), nil
}
