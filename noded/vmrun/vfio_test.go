package vmrun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestVFIOGroupsAreGivenToTheVMAndBack: with a fixture sysfs and /dev/vfio,
// two functions of one IOMMU group and one of another give two group
// devices, which grantVFIO hands to the VM's id and revokeVFIO back to
// root; a container that is not open to everyone is refused, saying so.
func TestVFIOGroupsAreGivenToTheVMAndBack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	root := t.TempDir()
	oldSys, oldDev := sysPCIDevices, vfioDir
	sysPCIDevices, vfioDir = filepath.Join(root, "sys"), filepath.Join(root, "dev")
	t.Cleanup(func() { sysPCIDevices, vfioDir = oldSys, oldDev })
	os.MkdirAll(vfioDir, 0o755)
	for addr, group := range map[string]string{"0000:3b:00.0": "17", "0000:3b:00.1": "17", "0000:5e:00.0": "42"} {
		os.MkdirAll(filepath.Join(sysPCIDevices, addr), 0o755)
		os.Symlink("../../../kernel/iommu_groups/"+group, filepath.Join(sysPCIDevices, addr, "iommu_group"))
		os.WriteFile(filepath.Join(vfioDir, group), nil, 0o600)
	}
	os.WriteFile(filepath.Join(vfioDir, "vfio"), nil, 0o666)
	os.Chmod(filepath.Join(vfioDir, "vfio"), 0o666)
	groups, err := vfioGroups([]string{"0000:3b:00.1", "0000:5e:00.0", "0000:3b:00.0"})
	want := []string{filepath.Join(vfioDir, "17"), filepath.Join(vfioDir, "42")}
	if err != nil || !slices.Equal(groups, want) {
		t.Fatalf("vfioGroups = %v, %v; want %v", groups, err, want)
	}
	if _, err := vfioGroups([]string{"0000:99:00.0"}); err == nil || !strings.Contains(err.Error(), "vfio-pci") {
		t.Errorf("a device without a group: %v, want an error naming vfio-pci", err)
	}
	as := qemuIdentity{UID: 0x7fff1000, GID: 0x7fff1000}
	owner := func(p string) uint32 {
		fi, _ := os.Stat(p)
		return fi.Sys().(*syscall.Stat_t).Uid
	}
	if err := grantVFIO(groups, as); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if owner(g) != as.UID {
			t.Errorf("%s belongs to %d, want the VM's %d", g, owner(g), as.UID)
		}
	}
	revokeVFIO(groups)
	for _, g := range groups {
		if owner(g) != 0 {
			t.Errorf("%s belongs to %d after revokeVFIO, want root", g, owner(g))
		}
	}
	os.Chmod(filepath.Join(vfioDir, "vfio"), 0o600)
	if err := grantVFIO(groups, as); err == nil || !strings.Contains(err.Error(), "open to everyone") {
		t.Errorf("a root-only container: %v, want an error saying it must be open to everyone", err)
	}
}
