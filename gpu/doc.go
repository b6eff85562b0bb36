// Package gpu is the pure side of device placement: which of a node's GPUs,
// MIG slices and SR-IOV virtual functions a request may take, given what is
// held. The scheduler (ctld/sched) calls it; it reads nothing (the node
// daemon's discovery through NVML and sysfs is package noded/hardware).
package gpu
