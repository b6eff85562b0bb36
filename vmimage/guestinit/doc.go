// Package guestinit is PID 1 of every job VM: it mounts the usual
// filesystems, runs the job the host appended to the initramfs (/job),
// reports on the control port and powers the VM off. Booted for a warm
// start's snapshot (corral.warm=STAGE, warm_linux.go) it prepares what its
// copies' jobs need, says so and waits; each copy gets its job over the
// agent and goes on from there as a booted guest does (hostRoot's steps
// are each taken once, prepareRoot). The host side of the
// protocol is documented in package vmimage; keep the two in step.
//
// It replaces a shell script that did the same: under TCG each fork and exec
// of busybox costs milliseconds, and the script spent about 0.2 s of every
// boot before the job started. The parts that decide things (reading the
// payload, building the command line, parsing the kernel command line) are
// plain functions tested on the host; the parts that touch the guest's
// kernel are in init_linux.go and are exercised by vmimage's boot tests.
//
// A job's standard input file (sbatch -i, job/input) is opened by init with
// the job user's file-system ids on one thread (launch_linux.go). Its soft
// resource limits (--propagate, job/rlimits) cannot be set on a child
// between fork and exec, and init must not lower its own, so such a job
// starts as init's own binary in "limit stub" mode, already in the job's
// root and as its user, which sets them and executes the job.
package guestinit
