package hardware

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"corral/api"
)

// fixturePFs are two NICs: an E810 port on NUMA node 0 with four VFs, two
// of them bound to vfio-pci for VMs, and a ConnectX port on node 1 whose
// driver is unbound, with two VFs and no driver on them either. The first
// comes second in the input and first in the output: SRIOV sorts by address.
var fixturePFs = []api.PF{
	{Addr: "0000:d8:00.0", NUMANode: 1, TotalVFs: 8, VFs: []api.VF{
		{Addr: "0000:d8:00.2", IOMMUGroup: 140, NUMANode: 1},
		{Addr: "0000:d8:00.3", IOMMUGroup: 141, NUMANode: 1},
	}},
	{Addr: "0000:3b:00.0", Driver: "ice", NUMANode: 0, TotalVFs: 64, VFs: []api.VF{
		{Addr: "0000:3b:01.0", Driver: "iavf", IOMMUGroup: 90, NUMANode: 0},
		{Addr: "0000:3b:01.1", Driver: "iavf", IOMMUGroup: 91, NUMANode: 0},
		{Addr: "0000:3b:01.2", Driver: "vfio-pci", IOMMUGroup: 92, NUMANode: 0},
		{Addr: "0000:3b:01.3", Driver: "vfio-pci", IOMMUGroup: 93, NUMANode: 0},
	}},
}

func TestSRIOV(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSRIOVFixture(dir, fixturePFs); err != nil {
		t.Fatal(err)
	}
	// A GPU: a PCI function without sriov_totalvfs, which SRIOV must skip.
	if _, err := writeFunction(dir, "0000:1b:00.0", "nvidia", 0); err != nil {
		t.Fatal(err)
	}
	// A function that could do SR-IOV but has no VFs possible is no PF.
	dev, err := writeFunction(dir, "0000:5e:00.0", "mlx5_core", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeInt(filepath.Join(dev, "sriov_totalvfs"), 0); err != nil {
		t.Fatal(err)
	}

	got, err := SRIOV(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.PF{fixturePFs[1], fixturePFs[0]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SRIOV:\n got %+v\nwant %+v", got, want)
	}
	// Spelled out, so that a fixture writer and reader that agree on a
	// mistake still fail.
	if got[0].Addr != "0000:3b:00.0" || got[0].Driver != "ice" || got[0].NUMANode != 0 || got[0].TotalVFs != 64 || len(got[0].VFs) != 4 {
		t.Errorf("first PF: %+v", got[0])
	}
	if vf := got[0].VFs[3]; vf.Addr != "0000:3b:01.3" || vf.Driver != "vfio-pci" || vf.IOMMUGroup != 93 {
		t.Errorf("fourth VF of the first PF: %+v", vf)
	}
	if got[1].Driver != "" || got[1].NUMANode != 1 || len(got[1].VFs) != 2 || got[1].VFs[1].IOMMUGroup != 141 {
		t.Errorf("second PF: %+v", got[1])
	}
}

// TestSRIOVKernelShape checks the fixture against what the kernel writes,
// so that SRIOV is not only tested against its own writer.
func TestSRIOVKernelShape(t *testing.T) {
	dir := t.TempDir()
	if err := WriteSRIOVFixture(dir, fixturePFs[1:]); err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(dir, "sys/bus/pci/devices/0000:3b:00.0")
	links := map[string]string{
		pf:                           "../../../devices/pci0000:00/0000:3b:00.0",
		filepath.Join(pf, "driver"):  "../../../bus/pci/drivers/ice",
		filepath.Join(pf, "virtfn2"): "../0000:3b:01.2",
		filepath.Join(pf, "../0000:3b:01.2/physfn"):      "../0000:3b:00.0",
		filepath.Join(pf, "../0000:3b:01.2/iommu_group"): "../../../kernel/iommu_groups/92",
	}
	for link, want := range links {
		got, err := os.Readlink(link)
		if err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(pf, "sriov_numvfs")); err != nil || string(b) != "4\n" {
		t.Errorf("sriov_numvfs = %q (%v), want 4", b, err)
	}
}

func TestSRIOVMissingFiles(t *testing.T) {
	dir := t.TempDir()
	pf := api.PF{Addr: "0000:af:00.0", Driver: "ice", NUMANode: -1, TotalVFs: 4, VFs: []api.VF{
		{Addr: "0000:af:01.0", IOMMUGroup: -1, NUMANode: -1},
		{Addr: "0000:af:01.1", IOMMUGroup: 7, NUMANode: -1},
	}}
	if err := WriteSRIOVFixture(dir, []api.PF{pf}); err != nil {
		t.Fatal(err)
	}
	// A kernel without CONFIG_NUMA has no numa_node files.
	if err := os.Remove(filepath.Join(dir, fixtureBridge, "0000:af:01.1/numa_node")); err != nil {
		t.Fatal(err)
	}
	got, err := SRIOV(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []api.PF{pf}) {
		t.Errorf("SRIOV:\n got %+v\nwant %+v", got, []api.PF{pf})
	}
}

func TestSRIOVNoPCIBus(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sys/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := SRIOV(dir)
	if err != nil || got != nil {
		t.Errorf("SRIOV without sys/bus/pci = %v, %v; want nil, nil", got, err)
	}
}

func TestSRIOVBadFixture(t *testing.T) {
	tests := map[string]api.PF{
		"more VFs than TotalVFs": {Addr: "0000:3b:00.0", TotalVFs: 1, VFs: make([]api.VF, 2)},
		"no SR-IOV":              {Addr: "0000:3b:00.0"},
		"address with a slash":   {Addr: "../3b", TotalVFs: 1},
	}
	for name, pf := range tests {
		t.Run(name, func(t *testing.T) {
			if err := WriteSRIOVFixture(t.TempDir(), []api.PF{pf}); err == nil {
				t.Error("WriteSRIOVFixture accepted it")
			}
		})
	}
}

// TestSRIOVHost reads this machine's sysfs; most test hosts have no PFs,
// and none must be an error.
func TestSRIOVHost(t *testing.T) {
	for _, root := range []string{"", "/"} {
		pfs, err := SRIOV(root)
		if err != nil {
			t.Fatalf("SRIOV(%q): %v", root, err)
		}
		t.Logf("SRIOV(%q): %d PFs", root, len(pfs))
		for _, pf := range pfs {
			if pf.TotalVFs <= 0 || len(pf.VFs) > pf.TotalVFs {
				t.Errorf("PF %+v", pf)
			}
		}
	}
}
