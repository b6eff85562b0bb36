package vmrun

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"corral/api"
	"corral/vmimage"
)

// TestPlacementArgv: a placed job's RAM is bound to its NUMA nodes (and
// hugepage-backed when it got hugepages), its GPUs and VFs are passed with
// vfio-pci. This host has no GPUs or VFs: the argv is what is checked here;
// on real hardware the same argv hands the devices to the guest (see
// docs/placement.md).
func TestPlacementArgv(t *testing.T) {
	inv := &api.Inventory{GPUs: []api.GPU{{UUID: "GPU-a", PCIBusID: "0000:1b:00.0"}, {UUID: "GPU-b", PCIBusID: "0000:43:00.0"}}}
	r := &Runner{cfg: Config{QEMU: "qemu-system-x86_64", Inventory: inv}, tscKHz: 2600000, log: discardLog()}
	img := &vmimage.Image{Name: "default", Kernel: "/img/vmlinux", Initrd: "/img/initramfs.cpio"}
	tests := map[string]struct {
		p       *api.Placement
		numa    string
		machine string
		object  string
		devices []string
	}{
		"one NUMA node": {
			p: &api.Placement{CPUs: []int{8, 9}, NUMANodes: []int{1}}, machine: "microvm,memory-backend=ram",
			object: "memory-backend-ram,id=ram,size=300M,host-nodes=1,policy=bind",
		},
		"two adjacent nodes are a range, others repeat the key": {
			p: &api.Placement{NUMANodes: []int{0, 1, 3}}, machine: "microvm,memory-backend=ram",
			object: "memory-backend-ram,id=ram,size=300M,host-nodes=0-1,host-nodes=3,policy=bind",
		},
		// 300 MiB of 2 MiB pages is 150 pages exactly; 1 GiB pages round it
		// up to 1024 MiB.
		"2 MiB hugepages": {
			p:       &api.Placement{NUMANodes: []int{1}, Hugepages: []api.HugepageAmount{{Node: 1, SizeKB: 2048, Count: 150}}},
			machine: "microvm,memory-backend=ram",
			object:  "memory-backend-memfd,id=ram,size=300M,hugetlb=on,hugetlbsize=2M,host-nodes=1,policy=bind",
		},
		"1 GiB hugepages round the RAM up": {
			p:       &api.Placement{NUMANodes: []int{0}, Hugepages: []api.HugepageAmount{{Node: 0, SizeKB: 1 << 20, Count: 1}}},
			machine: "microvm,memory-backend=ram",
			object:  "memory-backend-memfd,id=ram,size=1024M,hugetlb=on,hugetlbsize=1024M,host-nodes=0,policy=bind",
		},
		"--numa=none binds nothing": {
			p: &api.Placement{NUMANodes: []int{0}}, numa: api.NUMANone, machine: "microvm",
		},
		"GPUs by their PCI address, VFs by theirs": {
			p:       &api.Placement{NUMANodes: []int{1}, GPUs: []string{"GPU-b", "GPU-a"}, VFs: []string{"0000:af:00.2"}},
			machine: "microvm,memory-backend=ram", object: "memory-backend-ram,id=ram,size=300M,host-nodes=1,policy=bind",
			devices: []string{"vfio-pci,host=0000:43:00.0", "vfio-pci,host=0000:1b:00.0", "vfio-pci,host=0000:af:00.2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			argv := r.argv(vmArgs{img: img, accel: "tcg", cpus: 2, memMB: 300, f: filesIn("/state/j"), placement: tc.p, numa: tc.numa})
			got := map[string][]string{}
			for i := 0; i+1 < len(argv); i++ {
				got[argv[i]] = append(got[argv[i]], argv[i+1])
			}
			if m := got["-M"]; !slices.Equal(m, []string{tc.machine}) {
				t.Errorf("-M %v, want %s", m, tc.machine)
			}
			if tc.object == "" && len(got["-object"]) > 0 || tc.object != "" && !slices.Equal(got["-object"], []string{tc.object}) {
				t.Errorf("-object %v, want %q", got["-object"], tc.object)
			}
			var devices []string
			for _, d := range got["-device"] {
				if strings.HasPrefix(d, "vfio-pci") {
					devices = append(devices, d)
				}
			}
			if !slices.Equal(devices, tc.devices) {
				t.Errorf("vfio devices %v, want %v", devices, tc.devices)
			}
		})
	}
}

// TestVCPUThreadsPinned boots a real VM for a job placed on CPU 0 of NUMA
// node 0 (this host's): every vCPU thread's Cpus_allowed_list must be
// exactly 0, and its RAM is bound to node 0 by the memory backend.
func TestVCPUThreadsPinned(t *testing.T) {
	r := testRunner(t)
	if _, err := os.Stat("/sys/devices/system/node/node0"); err != nil {
		t.Skip("this host has no NUMA node 0 in sysfs")
	}
	spec := jobSpec(t, "sleep 5\n", 2, 256)
	spec.Job.Placement = &api.Placement{CPUs: []int{0}, NUMANodes: []int{0}}
	v := start(t, r, spec)
	threads, err := v.VCPUThreads()
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) != 2 {
		t.Fatalf("%d vCPU threads, want 2", len(threads))
	}
	for _, tid := range threads {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", v.PID(), tid))
		if err != nil {
			t.Fatal(err)
		}
		var allowed string
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				allowed = strings.TrimSpace(v)
			}
		}
		if allowed != "0" {
			t.Errorf("vCPU thread %d: Cpus_allowed_list %q, want \"0\"", tid, allowed)
		}
	}
	// The backend is memfd when a virtiofs daemon shares the RAM, plain
	// RAM over the NFS share; either way it is bound to node 0.
	bound := slices.ContainsFunc(v.st.Argv, func(a string) bool {
		return strings.HasPrefix(a, "memory-backend-") && strings.Contains(a, ",id=ram,size=256M,") && strings.HasSuffix(a, ",host-nodes=0,policy=bind")
	})
	if !bound {
		t.Errorf("QEMU argv does not bind the RAM to node 0: %v", v.st.Argv)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
