// Package hardware is the node daemon's hardware edge: it discovers the
// host's NUMA topology (through github.com/jaypipes/ghw), its GPUs (through
// NVML) and its SR-IOV functions (from sysfs), and turns them into the
// wire types of api.Inventory that the daemon sends at registration.
//
// It reads files and libraries and nothing else; it never places jobs or
// scores anything. The pure functions the scheduler applies to what it
// returns live in packages topology and gpu (STYLE.md §1).
//
//	root/sys + root/proc ─► ghw.Topology (nodes, cores, distances, memory)
//	                     ─► ghw.CPU      (package and core of each CPU)
//	                     ─► nodeN/meminfo MemFree (ghw does not read it)
//	                     ─► validate ─► *api.Topology
//
// The topology entry point is Topology. WriteTopologyFixture writes a fake
// sys/ + proc/ tree for a host shape (FixtureHost), for tests and for
// `corral noded --topology-root` demos; Topology reads it exactly as it reads
// a real host, through ghw's chroot option.
//
// What it owns: the mapping from Linux sysfs/procfs, as read by
// github.com/jaypipes/ghw, to api.Topology, and the checks that make ghw's
// silent failures loud. ghw logs a warning and returns err == nil with fewer
// nodes (often zero) when a node's data is incomplete, for example when
// proc/meminfo has no Hugetlb: line (kernels before 4.16). Topology therefore
// returns ErrNoNUMANodes for zero nodes and ErrDistances when a node's
// distance row does not cover every node ghw returned, which is also how a
// node dropped half-way shows up. ghw's warnings are captured, not printed:
// Topology passes its own slog logger (ghw.WithLogger) instead of
// ghw.WithDisableWarnings, because the latter sets a process-wide log level
// inside ghw, and because the captured warnings make the returned error say
// what went wrong.
//
//	libnvidia-ml.so.1 ─► nvml.Init ─► FromNVML ─► []api.GPU   (GPUs)
//	                                  ▲ go-nvml mock in tests
//	root/sys/bus/pci/devices/* ─► sriov_totalvfs > 0 ─► virtfnN ─► []api.PF   (SRIOV)
//	                               ▲ WriteSRIOVFixture in tests and demos
//
// The GPU entry points are GPUs (GPUs of this host), FromNVML (GPUs
// through any nvml.Interface, the real library or go-nvml's mock) and SRIOV
// (physical and virtual functions under a root directory).
// WriteSRIOVFixture writes a fake sysfs tree that SRIOV reads exactly as it
// reads a host.
//
// What it owns: the mapping from NVML and from Linux sysfs to api.GPU,
// api.MIGInstance, api.PF and api.VF.
package hardware
