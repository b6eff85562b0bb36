// Package cgroup puts a job's processes (its VM's QEMU and virtiofsd) in a
// control group of their own on the node, with the CPUs its placement gave
// it and a memory limit, and reads what the group used: CPU time and peak
// memory, which the node reports per job.
//
// It owns the cgroup file layout under /sys/fs/cgroup and nothing else: it
// never decides the limits (the vm runner does, from the job's allocation
// and QEMU's measured overhead) and never kills a group's processes.
//
// Both hierarchies are handled. Under cgroup v2 (one unified hierarchy) a
// job's group is corral/<name> below the cgroup2 root, with the cpuset,
// memory and cpu controllers enabled on the way (cpuset.cpus, cpuset.mems,
// memory.max; usage from cpu.stat and memory.peak). Under cgroup v1 (as on
// hosts that mount cpuset, memory and cpuacct separately, like the CI
// machines) it is corral/<name> below the daemon's own group in each of the
// three hierarchies (cpuset.cpus and cpuset.mems, which must be set before
// a task joins; memory.limit_in_bytes; usage from cpuacct.usage and
// memory.max_usage_in_bytes). Where neither can be written (no cgroup
// file system, no permission, the controllers missing or delegated
// elsewhere) Detect says why and the caller runs VMs without groups,
// logging that once.
//
// Entry points: Detect, then Manager.Create, Group.Add, Group.Usage and
// Group.Remove.
package cgroup
