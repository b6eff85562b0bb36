package hardware

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"corral/api"
)

// fixtureBridge is the PCI root the fixture hangs every function under, as
// the kernel does in sys/devices/pci0000:00.
const fixtureBridge = "sys/devices/pci0000:00"

// WriteSRIOVFixture writes such a tree (PFs with VFs) under dir for tests
// and demos.
//
// The tree has the kernel's shape, with relative links, so that SRIOV(dir)
// reads it exactly as it reads a host: each function is a directory under
// sys/devices/pci0000:00 linked from sys/bus/pci/devices; a PF has
// sriov_totalvfs (TotalVFs), sriov_numvfs (len(VFs)), numa_node and
// virtfnN links; a VF has numa_node and a physfn link. A driver link points
// into sys/bus/pci/drivers and is left out when Driver is ""; a VF's
// iommu_group link points into sys/kernel/iommu_groups and is left out when
// IOMMUGroup is negative. dir may already hold other fixtures (a topology
// tree).
func WriteSRIOVFixture(dir string, pfs []api.PF) error {
	for _, pf := range pfs {
		if pf.TotalVFs <= 0 || len(pf.VFs) > pf.TotalVFs {
			return fmt.Errorf("gpu: SR-IOV fixture PF %s: TotalVFs %d must be positive and at least its %d VFs", pf.Addr, pf.TotalVFs, len(pf.VFs))
		}
		if err := writePF(dir, pf); err != nil {
			return fmt.Errorf("gpu: SR-IOV fixture PF %s: %w", pf.Addr, err)
		}
	}
	return nil
}

func writePF(dir string, pf api.PF) error {
	dev, err := writeFunction(dir, pf.Addr, pf.Driver, pf.NUMANode)
	if err != nil {
		return err
	}
	files := map[string]int{"sriov_totalvfs": pf.TotalVFs, "sriov_numvfs": len(pf.VFs)}
	for name, v := range files {
		if err := writeInt(filepath.Join(dev, name), v); err != nil {
			return err
		}
	}
	for i, vf := range pf.VFs {
		vfDev, err := writeFunction(dir, vf.Addr, vf.Driver, vf.NUMANode)
		if err != nil {
			return fmt.Errorf("VF %s: %w", vf.Addr, err)
		}
		if err := os.Symlink("../"+pf.Addr, filepath.Join(vfDev, "physfn")); err != nil {
			return err
		}
		if err := os.Symlink("../"+vf.Addr, filepath.Join(dev, "virtfn"+strconv.Itoa(i))); err != nil {
			return err
		}
		if vf.IOMMUGroup >= 0 {
			group := strconv.Itoa(vf.IOMMUGroup)
			if err := os.MkdirAll(filepath.Join(dir, "sys/kernel/iommu_groups", group), 0o755); err != nil {
				return err
			}
			if err := os.Symlink("../../../kernel/iommu_groups/"+group, filepath.Join(vfDev, "iommu_group")); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFunction creates one PCI function's directory, its numa_node, its
// driver link and its sys/bus/pci/devices link, and returns the directory.
func writeFunction(dir, addr, driver string, numaNode int) (string, error) {
	if addr == "" || filepath.Base(addr) != addr {
		return "", fmt.Errorf("PCI address %q is not a plain name like 0000:3b:00.0", addr)
	}
	dev := filepath.Join(dir, fixtureBridge, addr)
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return "", err
	}
	if err := writeInt(filepath.Join(dev, "numa_node"), numaNode); err != nil {
		return "", err
	}
	if driver != "" {
		if err := os.MkdirAll(filepath.Join(dir, "sys/bus/pci/drivers", driver), 0o755); err != nil {
			return "", err
		}
		if err := os.Symlink("../../../bus/pci/drivers/"+driver, filepath.Join(dev, "driver")); err != nil {
			return "", err
		}
	}
	bus := filepath.Join(dir, pciDevicesDir)
	if err := os.MkdirAll(bus, 0o755); err != nil {
		return "", err
	}
	return dev, os.Symlink("../../../devices/pci0000:00/"+addr, filepath.Join(bus, addr))
}

func writeInt(path string, v int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(v)+"\n"), 0o644)
}
