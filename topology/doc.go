// Package topology is the pure arithmetic of NUMA placement over an
// api.Topology: distances between NUMA nodes, the locality score of a set
// of them, and the order in which a node's CPUs are handed out. The
// scheduler (ctld/sched) calls it; it reads no files (the node daemon's
// discovery is package noded/hardware).
package topology
