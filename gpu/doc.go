// Package gpu discovers a host's accelerators and SR-IOV network functions
// and turns them into the wire types api.GPU and api.PF that the node daemon
// sends at registration, inside api.Inventory.
//
//	libnvidia-ml.so.1 ─► nvml.Init ─► FromNVML ─► []api.GPU   (Discover)
//	                                  ▲ go-nvml mock in tests
//	root/sys/bus/pci/devices/* ─► sriov_totalvfs > 0 ─► virtfnN ─► []api.PF   (SRIOV)
//	                               ▲ WriteSRIOVFixture in tests and demos
//
// The main entry points are Discover (GPUs of this host), FromNVML (GPUs
// through any nvml.Interface, the real library or go-nvml's mock) and SRIOV
// (physical and virtual functions under a root directory).
// WriteSRIOVFixture writes a fake sysfs tree that SRIOV reads exactly as it
// reads a host.
//
// What it owns: the mapping from NVML and from Linux sysfs to api.GPU,
// api.MIGInstance, api.PF and api.VF.
//
// What it must never do: place jobs, score nodes or keep state. STYLE.md
// lists gpu among the pure packages; this package is the hardware edge that
// produces the values those pure functions are given (the GPU-affinity and
// SR-IOV filters read api.Inventory, never this package). Discover and SRIOV
// read the host and nothing else: no clock, no goroutines, no writes. The
// scheduler and the FSM never call them.
//
// # NVML and cgo
//
// go-nvml reaches libnvidia-ml through cgo and dlopen. Its nvml package does
// not compile without cgo, so everything that names it (Discover's real
// body, FromNVML and its tests) sits behind //go:build cgo. A CGO_ENABLED=0
// build gets a Discover that returns nil, nil: such a binary cannot see
// GPUs, and says so by reporting none, as a host without the NVIDIA library
// does. Build the node daemon with cgo on GPU hosts. go-nvml's generated cgo
// code makes gcc warn about deprecated NVML calls; the warnings are harmless
// and CGO_CFLAGS=-Wno-deprecated-declarations silences them.
//
// Where the GPU fields come from:
//
//   - Index: the NVML device index (PCI bus order).
//   - PCIBusID: PciInfo.BusId, rewritten to sysfs form (0000:1b:00.0 rather
//     than NVML's 00000000:1B:00.0) so it matches /sys/bus/pci and PF
//     addresses.
//   - MemMB: GetMemoryInfo().Total in MiB; 0 when the driver declines (an
//     unprivileged caller asking about a GPU in MIG mode).
//   - NUMANode: GetNumaNodeId, called only when the loaded driver exports
//     it (older drivers do not, and calling a missing symbol kills the
//     process). When NVML cannot say, Discover reads the GPU's numa_node
//     from sysfs; -1 when that is unknown too. FromNVML itself reads no
//     files.
//   - CPUAffinity: GetCpuAffinity's bitmask (the CPUs of the GPU's NUMA
//     node), expanded to CPU ids; empty when unsupported.
//   - MIG: one api.MIGInstance per MIG device (compute instance). The
//     profile name is derived from the GPU and compute instance profiles as
//     go-nvlib derives it ("1g.10gb", "1c.2g.20gb", "1g.10gb+me"); that
//     lookup needs root, so an unprivileged daemon falls back to the MIG
//     device's name, which NVML ends with "MIG <profile>". MemMB is the MIG
//     device's own memory.
package gpu
