// Package topology discovers a host's NUMA topology — sockets, NUMA nodes,
// their logical CPUs, memory, hugepages and SLIT distances — and turns it into
// the wire type api.Topology that the node daemon sends at registration.
//
//	root/sys + root/proc ─► ghw.Topology (nodes, cores, distances, memory)
//	                     ─► ghw.CPU      (package and core of each CPU)
//	                     ─► nodeN/meminfo MemFree (ghw does not read it)
//	                     ─► validate ─► *api.Topology
//
// The main entry point is Discover. WriteFixture writes a fake sys/ + proc/
// tree for a host shape (FixtureHost), for tests and for
// `corral noded --topology-root` demos; Discover reads it exactly as it reads
// a real host, through ghw's chroot option.
//
// What it owns: the mapping from Linux sysfs/procfs, as read by
// github.com/jaypipes/ghw, to api.Topology, and the checks that make ghw's
// silent failures loud. ghw logs a warning and returns err == nil with fewer
// nodes (often zero) when a node's data is incomplete, for example when
// proc/meminfo has no Hugetlb: line (kernels before 4.16). Discover therefore
// returns ErrNoNUMANodes for zero nodes and ErrDistances when a node's
// distance row does not cover every node ghw returned, which is also how a
// node dropped half-way shows up. ghw's warnings are captured, not printed:
// Discover passes its own slog logger (ghw.WithLogger) instead of
// ghw.WithDisableWarnings, because the latter sets a process-wide log level
// inside ghw, and because the captured warnings make the returned error say
// what went wrong.
//
// What it must never do: place jobs or score nodes. STYLE.md lists topology
// among the pure packages; this package is the hardware edge that produces
// the value those pure functions are given. Discover reads files and nothing
// else (no clock, no goroutines); the scheduler and the FSM never call it —
// they see api.Topology values that a node daemon discovered once and
// reported.
//
// Where the data comes from:
//
//   - Nodes: ghw topology nodes, sorted by ID (ghw lists them in directory
//     order, node10 before node2).
//   - CPUs of a node: the logical processors of the node's ghw cores. Core,
//     Socket and Siblings come from ghw's CPU info, which groups threads by
//     (package, core id); the node's own core list groups by core id alone
//     and would merge cores of two packages when one NUMA node spans both
//     sockets (AMD NPS0).
//   - MemMB: ghw's TotalUsableBytes, which is the node's meminfo MemTotal.
//   - FreeMB: MemFree from root/sys/devices/system/node/nodeN/meminfo, read
//     here because ghw's memory.Area has no free-memory field.
//   - Hugepages: ghw's HugePageAmountsBySize for every page size the node's
//     hugepages/ directory lists (zero counts included), keyed in KiB.
//   - Distances: each node's ghw Distances row; the kernel orders a row's
//     columns by node ID, which is the order of Nodes.
//   - Sockets: the number of distinct physical package ids in ghw's CPU info.
package topology
