//go:build linux

package guestinit

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"corral/internal/rlimit"
	"corral/vmimage"
)

// limitsArg is argv[1] of init run as the job's limit stub: init cannot
// set a child's resource limits between its fork and its exec, and must
// not lower its own, so a job with limits (sbatch --propagate) starts as
// init's own binary, handed over as a descriptor, which sets them and then
// executes the job: argv is
//
//	/dev/fd/BIN --corral-limits BIN NAME=VALUE,... -- PROGRAM ARGS...
//
// It runs already in the job's root, as the job's user, in its working
// directory, with the job's environment and descriptors.
const limitsArg = "--corral-limits"

// runLimitStub is main for the stub: it never returns.
func runLimitStub(args []string) {
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "corral: "+format+"\n", a...)
		os.Exit(126)
	}
	if len(args) < 4 || args[2] != "--" {
		fail("the limit stub's arguments are %q", args)
	}
	bin, err := strconv.Atoi(args[0])
	if err != nil {
		fail("the limit stub's descriptor %q", args[0])
	}
	unix.CloseOnExec(bin)
	ls, err := ParseRlimits(strings.ReplaceAll(args[1], ",", "\n"))
	if err != nil {
		fail("%v", err)
	}
	for _, l := range ls {
		lowered, hard, err := rlimit.Set(0, l.Name, l.Value)
		if err != nil {
			fail("--propagate: %v", err)
		}
		if lowered {
			fmt.Fprintf(os.Stderr, "corral: --propagate: %s lowered to %d, the node's hard limit\n", l.Name, hard)
		}
	}
	prog := args[3:]
	err = syscall.Exec(prog[0], prog, os.Environ())
	fmt.Fprintf(os.Stderr, "%s: %v\n", prog[0], err)
	os.Exit(StartFailureCode(err))
}

// withLimits returns the argv and descriptors that start argv under the
// limit stub with limits ls: init's binary joins files, and argv becomes
// the stub's. The caller closes the returned binary file after the fork.
func withLimits(argv []string, files []uintptr, ls []vmimage.Rlimit) ([]string, []uintptr, *os.File, error) {
	bin, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening init for the limit stub: %w", err)
	}
	fd := len(files)
	files = append(files, bin.Fd())
	n := strconv.Itoa(fd)
	stub := append([]string{"/dev/fd/" + n, limitsArg, n, FormatRlimits(ls), "--"}, argv...)
	return stub, files, bin, nil
}

// openAs opens path for reading as user u (nil: root) would: with u's
// file-system ids and groups on this thread only (the raw setfsuid,
// setfsgid and setgroups calls are per thread), so the job cannot read
// through init what its user may not.
func openAs(u *vmimage.User, path string) (*os.File, error) {
	if u == nil {
		return os.Open(path)
	}
	runtime.LockOSThread()
	groups := make([]int, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = int(g)
	}
	if err := unix.Setgroups(groups); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	unix.Setfsgid(int(u.GID))
	unix.Setfsuid(int(u.UID))
	f, err := os.Open(path)
	unix.Setfsuid(0)
	unix.Setfsgid(0)
	if unix.Setgroups(nil) == nil {
		runtime.UnlockOSThread()
	} // else the thread keeps the user's groups and ends with this goroutine
	return f, err
}
