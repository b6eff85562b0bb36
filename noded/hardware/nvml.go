//go:build cgo

package hardware

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"corral/api"
)

// maxCPUs is how many CPUs the affinity bitmask asked of NVML covers. NVML
// fills only the words the host needs, so a generous size costs nothing;
// 4096 covers every x86 and Arm server Linux ships a default NR_CPUS for.
const maxCPUs = 4096

// GPUs returns the host's GPUs through NVML. A host without the NVIDIA
// library (nvml.Init returns ERROR_LIBRARY_NOT_FOUND) has no GPUs: nil, nil —
// the normal case, not an error. When the driver cannot tell a GPU's NUMA
// node (GetNumaNodeId is missing or unsupported), GPUs reads it from
// /sys/bus/pci/devices/<bus id>/numa_node instead.
func GPUs() ([]api.GPU, error) {
	lib := nvml.New()
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, nil
	default:
		return nil, fmt.Errorf("gpu: initialise NVML: %w (is the NVIDIA kernel driver loaded? check nvidia-smi)", ret)
	}
	defer lib.Shutdown()
	gpus, err := FromNVML(lib)
	if err != nil {
		return nil, err
	}
	for i := range gpus {
		if gpus[i].NUMANode < 0 && gpus[i].PCIBusID != "" {
			gpus[i].NUMANode = sysfsNUMANode("/", gpus[i].PCIBusID)
		}
	}
	return gpus, nil
}

// FromNVML reads GPUs through an nvml.Interface (the real library or a
// mock): index, UUID, name (Model), memory (MiB), PCI bus id, NUMA node (-1
// when unknown), CPU affinity (list of CPU ids from GetCpuAffinity's
// bitmask), MIG mode and, when enabled, the MIG instances (profile name like
// "1g.10gb", UUID, memory). lib must already be initialised, and its
// Extensions must answer LookupSymbol (the real library and go-nvml's mock
// servers do): GetNumaNodeId is only called when the loaded driver exports
// it, because calling a symbol an older driver lacks kills the process.
func FromNVML(lib nvml.Interface) ([]api.GPU, error) {
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("gpu: count devices: %w", ret)
	}
	hasNUMA := lib.Extensions().LookupSymbol("nvmlDeviceGetNumaNodeId") == nil
	gpus := make([]api.GPU, 0, count)
	for i := 0; i < count; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("gpu %d: get handle: %w", i, ret)
		}
		g, err := readGPU(dev, i, hasNUMA)
		if err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// readGPU reads one physical GPU. Identity (UUID, name, PCI address) must
// be readable; what a driver may decline to say (NUMA node, affinity, total
// memory of a MIG-mode GPU to an unprivileged caller) is left unknown.
func readGPU(dev nvml.Device, index int, hasNUMA bool) (api.GPU, error) {
	g := api.GPU{Index: index, NUMANode: -1}
	var ret nvml.Return
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("uuid: %w", ret)
	}
	if g.Model, ret = dev.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("name: %w", ret)
	}
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("pci info: %w", ret)
	}
	g.PCIBusID = pciBusID(pci)

	var memBytes uint64
	switch mem, ret := dev.GetMemoryInfo(); {
	case ret == nvml.SUCCESS:
		memBytes = mem.Total
		g.MemMB = int64(mem.Total >> 20)
	case !unknowable(ret):
		return g, fmt.Errorf("memory info: %w", ret)
	}
	if hasNUMA {
		switch node, ret := dev.GetNumaNodeId(); {
		case ret == nvml.SUCCESS:
			g.NUMANode = node
		case !unknowable(ret):
			return g, fmt.Errorf("numa node: %w", ret)
		}
	}
	switch mask, ret := dev.GetCpuAffinity(maxCPUs); {
	case ret == nvml.SUCCESS:
		g.CPUAffinity = cpusFromMask(mask)
	case !unknowable(ret):
		return g, fmt.Errorf("cpu affinity: %w", ret)
	}

	enabled, err := migEnabled(dev)
	if err != nil || !enabled {
		return g, err
	}
	g.MIGEnabled = true
	g.MIG, err = readMIG(dev, memBytes)
	return g, err
}

// unknowable reports whether ret means "the driver will not tell", which
// leaves a field unknown instead of failing discovery.
func unknowable(ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_NOT_FOUND:
		return true
	}
	return false
}

// pciBusID returns the GPU's PCI address in sysfs form (0000:1b:00.0), so
// that it compares equal to addresses read from /sys/bus/pci. NVML spells it
// with an 8-digit domain and upper-case hex (00000000:1B:00.0).
func pciBusID(pci nvml.PciInfo) string {
	id := cString(pci.BusId[:])
	if id == "" {
		id = cString(pci.BusIdLegacy[:])
	}
	return normalizeBusID(id)
}

// normalizeBusID lower-cases a PCI address and writes its domain with four
// hex digits when it fits in four.
func normalizeBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	domain, rest, ok := strings.Cut(id, ":")
	if !ok || strings.Count(rest, ":") != 1 {
		return id
	}
	d, err := strconv.ParseUint(domain, 16, 32)
	if err != nil {
		return id
	}
	return fmt.Sprintf("%04x:%s", d, rest)
}

// cString converts a NUL-terminated C char array to a Go string.
func cString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// cpuList expands NVML's CPU bitmask (CPU w*64+b is bit b of word w, words
// being C unsigned longs) into a sorted list of CPU ids.
func cpusFromMask(mask []uint) []int {
	var cpus []int
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros(word)
			cpus = append(cpus, w*bits.UintSize+b)
			word &^= 1 << b
		}
	}
	return cpus
}
