// Package rlimit maps Slurm's resource limit names (AS, CORE, CPU, DATA,
// FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK) to Linux's and reads and sets
// soft limits by them: the CLI reads the submitting shell's with Submitter for
// sbatch --propagate, the process runner sets a job's first process's with
// Set, and the guest's init its job's. It never decides which limits a job
// gets, and imports nothing of corral's so the guest's init stays small.
package rlimit

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Unlimited is a limit's value for none (RLIM_INFINITY).
const Unlimited = ^uint64(0)

// resources maps Slurm's limit names to Linux's.
var resources = map[string]int{
	"AS": unix.RLIMIT_AS, "CORE": unix.RLIMIT_CORE, "CPU": unix.RLIMIT_CPU, "DATA": unix.RLIMIT_DATA,
	"FSIZE": unix.RLIMIT_FSIZE, "MEMLOCK": unix.RLIMIT_MEMLOCK, "NOFILE": unix.RLIMIT_NOFILE,
	"NPROC": unix.RLIMIT_NPROC, "RSS": unix.RLIMIT_RSS, "STACK": unix.RLIMIT_STACK,
}

// Submitter returns the soft limit name of the process that ran this one:
// for the CLI, the submitting shell's. It reads the parent's rather than
// its own because the Go runtime raises its own NOFILE soft limit at start
// (and gives its children the original back): the parent still has what
// the user set. It falls back to this process's own limit when the
// parent's cannot be read. False when name is unknown.
func Submitter(name string) (uint64, bool) {
	res, ok := resources[name]
	if !ok {
		return 0, false
	}
	var l unix.Rlimit
	if unix.Prlimit(os.Getppid(), res, nil, &l) == nil {
		return l.Cur, true
	}
	if unix.Getrlimit(res, &l) != nil {
		return 0, false
	}
	return l.Cur, true
}

// Set sets process pid's (0: this process's) soft limit name to value. A
// value above the hard limit is lowered to it, as a shell's ulimit -S would
// have to be: lowered then says so and gives the hard limit.
func Set(pid int, name string, value uint64) (lowered bool, hard uint64, err error) {
	res, ok := resources[name]
	if !ok {
		return false, 0, fmt.Errorf("unknown resource limit %q", name)
	}
	var cur unix.Rlimit
	if err := unix.Prlimit(pid, res, nil, &cur); err != nil {
		return false, 0, fmt.Errorf("reading the %s limit: %w", name, err)
	}
	if value > cur.Max {
		lowered, value = true, cur.Max
	}
	next := unix.Rlimit{Cur: value, Max: cur.Max}
	if err := unix.Prlimit(pid, res, &next, nil); err != nil {
		return lowered, cur.Max, fmt.Errorf("setting the %s limit to %d: %w", name, value, err)
	}
	return lowered, cur.Max, nil
}
