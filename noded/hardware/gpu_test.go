//go:build cgo

package hardware

import (
	"errors"
	"math/bits"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"corral/api"
)

const mib = 1 << 20

// dgxBusIDs are a DGX H100's GPU addresses as NVML spells them (8-digit
// domain, upper case); FromNVML must report them in sysfs form.
var dgxBusIDs = []string{
	"00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0",
	"00000000:9D:00.0", "00000000:C3:00.0", "00000000:D1:00.0", "00000000:DF:00.0",
}

// newDGXH100 returns go-nvml's DGX H100 mock with what it leaves out filled
// in: GetNumaNodeId and GetCpuAffinity (unset, calling them panics) and
// PciInfo.BusId (empty). GPUs 0-3 sit on NUMA node 0 with CPUs 0-55, GPUs
// 4-7 on node 1 with CPUs 56-111, as on a two-socket DGX.
func newDGXH100(t *testing.T) *server.Server {
	t.Helper()
	s := dgxh100.New()
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		node, busID := i/4, dgxBusIDs[i]
		dev.GetNumaNodeIdFunc = func() (int, nvml.Return) { return node, nvml.SUCCESS }
		dev.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) {
			if n < 112 {
				t.Errorf("GetCpuAffinity(%d) cannot hold CPU 111", n)
			}
			return cpuMask(n, node*56, node*56+55), nvml.SUCCESS
		}
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			p := nvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId}
			copy(p.BusId[:], cChars(busID))
			return p, nvml.SUCCESS
		}
	}
	return s
}

// cpuMask builds NVML's affinity bitmask for numCPUs CPUs with lo..hi set.
func cpuMask(numCPUs, lo, hi int) []uint {
	mask := make([]uint, (numCPUs-1)/bits.UintSize+1)
	for c := lo; c <= hi; c++ {
		mask[c/bits.UintSize] |= 1 << (c % bits.UintSize)
	}
	return mask
}

func cChars(s string) []int8 {
	out := make([]int8, len(s))
	for i := range s {
		out[i] = int8(s[i])
	}
	return out
}

func cpuRange(lo, hi int) []int {
	var cpus []int
	for c := lo; c <= hi; c++ {
		cpus = append(cpus, c)
	}
	return cpus
}

func TestFromNVMLDGXH100(t *testing.T) {
	s := newDGXH100(t)
	gpus, err := FromNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(gpus))
	}
	wantBus := []string{
		"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
		"0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0",
	}
	for i, got := range gpus {
		node := i / 4
		want := api.GPU{
			Index:       i,
			UUID:        s.Devices[i].(*server.Device).UUID,
			Model:       "NVIDIA H100 80GB HBM3",
			MemMB:       81920,
			PCIBusID:    wantBus[i],
			NUMANode:    node,
			CPUAffinity: cpuRange(node*56, node*56+55),
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GPU %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	// Spot checks that do not lean on the expectation table above.
	if gpus[0].CPUAffinity[55] != 55 || gpus[7].CPUAffinity[0] != 56 || gpus[7].CPUAffinity[55] != 111 {
		t.Errorf("affinity edges: GPU 0 %v, GPU 7 %v", gpus[0].CPUAffinity, gpus[7].CPUAffinity)
	}
	if !strings.HasPrefix(gpus[3].UUID, "GPU-") || gpus[3].UUID == gpus[4].UUID {
		t.Errorf("UUIDs %q and %q are not distinct GPU UUIDs", gpus[3].UUID, gpus[4].UUID)
	}
}

func TestFromNVMLUnknownNUMA(t *testing.T) {
	tests := map[string]struct {
		setup      func(*server.Server)
		noAffinity bool
	}{
		// An old driver: calling the missing symbol would kill the
		// process, so FromNVML must not call it at all.
		"driver without nvmlDeviceGetNumaNodeId": {setup: func(s *server.Server) {
			s.LookupSymbolFunc = func(name string) error {
				if name == "nvmlDeviceGetNumaNodeId" {
					return errors.New("undefined symbol")
				}
				return nil
			}
			for _, d := range s.Devices {
				d.(*server.Device).GetNumaNodeIdFunc = nil // panics if called
			}
		}},
		"platform without NUMA information": {setup: func(s *server.Server) {
			for _, d := range s.Devices {
				d.(*server.Device).GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
				d.(*server.Device).GetCpuAffinityFunc = func(int) ([]uint, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
			}
		}, noAffinity: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newDGXH100(t)
			tc.setup(s)
			gpus, err := FromNVML(s)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gpus {
				if g.NUMANode != -1 {
					t.Errorf("GPU %d: NUMANode = %d, want -1", g.Index, g.NUMANode)
				}
				if tc.noAffinity != (g.CPUAffinity == nil) || g.UUID == "" {
					t.Errorf("GPU %d: CPUAffinity %v (want none: %v), UUID %q", g.Index, g.CPUAffinity, tc.noAffinity, g.UUID)
				}
			}
		})
	}
}

func TestFromNVMLError(t *testing.T) {
	s := newDGXH100(t)
	s.Devices[5].(*server.Device).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	_, err := FromNVML(s)
	if !errors.Is(err, nvml.ERROR_GPU_IS_LOST) {
		t.Fatalf("err = %v, want ERROR_GPU_IS_LOST", err)
	}
	if !strings.Contains(err.Error(), "gpu 5") {
		t.Errorf("err %q does not name the GPU", err)
	}
}

// migSetup partitions one mock GPU: n GPU instances of GPU instance profile
// gi, each holding one compute instance of profile ci, with a MIG device
// handle per compute instance of memMB MiB.
type migSetup struct {
	gi, ci, n int
	memMB     uint64
}

// enableMIG turns MIG on for dev and creates the instances of m through the
// mock's own CreateGpuInstance and CreateComputeInstance. The mock has no
// MIG device handles and leaves their lookups unset, so this fills in
// GetMaxMigDeviceCount, GetMigDeviceHandleByIndex and GetGpuInstanceById on
// dev, GetComputeInstanceById on each GPU instance, and builds each MIG
// device as a mock.Device answering GetUUID, GetMemoryInfo,
// GetGpuInstanceId, GetComputeInstanceId and GetName. It returns the MIG
// device UUIDs in index order.
func enableMIG(t *testing.T, dev *server.Device, m migSetup) []string {
	t.Helper()
	if ret, activation := dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS || activation != nvml.SUCCESS {
		t.Fatal(ret, activation)
	}
	giProfile, ret := dev.GetGpuInstanceProfileInfo(m.gi)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU instance profile %d: %v", m.gi, ret)
	}
	var handles []nvml.Device
	var uuids []string
	for i := 0; i < m.n; i++ {
		gi, ret := dev.CreateGpuInstance(&giProfile)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		sgi := gi.(*server.GpuInstance)
		sgi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
			for ci := range sgi.ComputeInstances {
				if int(ci.Info.Id) == id {
					return ci, nvml.SUCCESS
				}
			}
			return nil, nvml.ERROR_NOT_FOUND
		}
		ciProfile, ret := gi.GetComputeInstanceProfileInfo(m.ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			t.Fatalf("compute instance profile %d: %v", m.ci, ret)
		}
		ci, ret := gi.CreateComputeInstance(&ciProfile)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		giID, ciID := int(sgi.Info.Id), int(ci.(*server.ComputeInstance).Info.Id)
		uuid := "MIG-" + strings.TrimPrefix(dev.UUID, "GPU-")[:8] + "-" + string(rune('a'+i))
		uuids = append(uuids, uuid)
		handles = append(handles, &mock.Device{
			GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: m.memMB * mib}, nvml.SUCCESS },
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return giID, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ciID, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG from-name", nvml.SUCCESS },
		})
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(handles) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return handles[i], nvml.SUCCESS
	}
	dev.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		for gi := range dev.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return uuids
}

func TestFromNVMLMIG(t *testing.T) {
	tests := map[string]struct {
		mig     migSetup
		noPriv  bool // GetGpuInstanceById answers NO_PERMISSION, as to a non-root caller
		profile string
	}{
		// The mock's 1-slice profile has 10240 MiB of the GPU's 81920: an
		// eighth of 80 GiB, so "10gb". MemMB comes from the MIG device
		// (9856 MiB, what a real H100 1g.10gb slice has), not the profile.
		"two 1g.10gb":                   {mig: migSetup{gi: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ci: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, n: 2, memMB: 9856}, profile: "1g.10gb"},
		"1g.10gb with media extensions": {mig: migSetup{gi: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, ci: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, n: 1, memMB: 9856}, profile: "1g.10gb+me"},
		// A 1-slice compute instance inside a 2-slice GPU instance.
		"1c.2g.20gb": {mig: migSetup{gi: nvml.GPU_INSTANCE_PROFILE_2_SLICE, ci: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, n: 2, memMB: 19968}, profile: "1c.2g.20gb"},
		// Without privileges the name the mock MIG device gives is used.
		"unprivileged falls back to the name": {mig: migSetup{gi: nvml.GPU_INSTANCE_PROFILE_1_SLICE, ci: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, n: 2, memMB: 9856}, noPriv: true, profile: "from-name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newDGXH100(t)
			dev := s.Devices[2].(*server.Device)
			uuids := enableMIG(t, dev, tc.mig)
			if tc.noPriv {
				dev.GetGpuInstanceByIdFunc = func(int) (nvml.GpuInstance, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
			}
			gpus, err := FromNVML(s)
			if err != nil {
				t.Fatal(err)
			}
			var want []api.MIGInstance
			for _, u := range uuids {
				want = append(want, api.MIGInstance{UUID: u, Profile: tc.profile, MemMB: int64(tc.mig.memMB)})
			}
			g := gpus[2]
			if !g.MIGEnabled || !reflect.DeepEqual(g.MIG, want) {
				t.Errorf("GPU 2: MIGEnabled %v, MIG\n got %+v\nwant %+v", g.MIGEnabled, g.MIG, want)
			}
			if g.UUID != dev.UUID || g.MemMB != 81920 || g.PCIBusID != "0000:52:00.0" || g.NUMANode != 0 {
				t.Errorf("GPU 2 in MIG mode lost its identity: %+v", g)
			}
			for _, other := range []api.GPU{gpus[1], gpus[3]} {
				if other.MIGEnabled || other.MIG != nil {
					t.Errorf("GPU %d: MIG %v %v, want off", other.Index, other.MIGEnabled, other.MIG)
				}
			}
		})
	}
}

func TestMIGMemoryGB(t *testing.T) {
	tests := map[string]struct {
		profileMB, gpuMB uint64
		want             uint64
	}{
		// Sizes as real GPUs report them: the profile's memory is not a
		// round number, its name is.
		"H100 1g.10gb":      {profileMB: 9856, gpuMB: 81559, want: 10},
		"H100 3g.40gb":      {profileMB: 40192, gpuMB: 81559, want: 40},
		"H200 1g.18gb":      {profileMB: 16384, gpuMB: 143771, want: 18},
		"A100-40GB 1g.5gb":  {profileMB: 4864, gpuMB: 40536, want: 5},
		"A100-40GB 7g.40gb": {profileMB: 40192, gpuMB: 40536, want: 40},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := migMemoryGB(tc.profileMB, tc.gpuMB*mib); got != tc.want {
				t.Errorf("migMemoryGB(%d, %d MiB) = %d, want %d", tc.profileMB, tc.gpuMB, got, tc.want)
			}
		})
	}
}

func TestNormalizeBusID(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"NVML 8-digit domain": {"00000000:1B:00.0", "0000:1b:00.0"},
		"sysfs form":          {"0000:3b:00.0", "0000:3b:00.0"},
		"non-zero domain":     {"00010000:C3:00.0", "10000:c3:00.0"},
		"not an address":      {"GPU", "gpu"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := normalizeBusID(tc.in); got != tc.want {
				t.Errorf("normalizeBusID(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestGPUs runs against this host: without the NVIDIA library it must
// report no GPUs and no error; with it, whatever it finds must be sane.
func TestGPUs(t *testing.T) {
	gpus, err := GPUs()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d GPUs", len(gpus))
	for _, g := range gpus {
		if g.UUID == "" || g.PCIBusID == "" {
			t.Errorf("GPU %d without identity: %+v", g.Index, g)
		}
	}
}
