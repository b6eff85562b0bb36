package procref

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often Wait reads /proc where there are no pidfds.
const pollInterval = 20 * time.Millisecond

// Ref watches one process, named by pid and start time. It uses a pidfd
// where the kernel has them (Linux 5.3+): waiting then goes through Go's
// poller and costs no thread, and signals cannot reach a process that reused
// the pid. Without pidfds it polls /proc. The pidfd is only used through
// RawConn.Control and Read, which keep it open while in use, so a Close
// never races with a signal sent through it.
type Ref struct {
	pid   int
	start uint64
	f     *os.File        // the pidfd, or nil
	rc    syscall.RawConn // f's raw connection
}

// Open returns a reference to the process pid, which must have started at
// start (clock ticks since boot, as in Stat.Start). It fails with
// os.ErrProcessDone when that process is gone. An unreaped child of this
// process cannot be gone or replaced, and may well have exited already:
// child skips the check.
func Open(pid int, start uint64, child bool) (*Ref, error) {
	r := &Ref{pid: pid, start: start}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		// A non-blocking fd is taken into Go's poller by os.NewFile; a
		// pidfd turns readable when its process exits.
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return nil, err
		}
		r.f = os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
		if r.rc, err = r.f.SyscallConn(); err != nil {
			r.f.Close()
			return nil, err
		}
	case errors.Is(err, syscall.ESRCH):
		return nil, os.ErrProcessDone
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EPERM):
		// An old kernel or a sandbox without pidfd_open: poll /proc.
	default:
		return nil, err
	}
	// The pidfd was opened before this check, so if the process still has
	// the recorded start time the pidfd refers to it and not to a successor.
	if !child && !r.Alive() {
		r.Close()
		return nil, os.ErrProcessDone
	}
	return r, nil
}

// PID returns the process's pid.
func (r *Ref) PID() int { return r.pid }

// StartTicks returns the process's recorded start time, in clock ticks since
// boot.
func (r *Ref) StartTicks() uint64 { return r.start }

// Alive reports whether pid still names the recorded, not yet exited
// process. It reads /proc, so it holds for a child whether or not it was
// opened with child set.
func (r *Ref) Alive() bool {
	st, err := ReadStat(r.pid)
	return err == nil && st.Start == r.start && !st.Ended()
}

// Exited reports whether the process has ended (or the reference was
// closed, which its owner does only after it ended). With a pidfd it costs
// one poll and no /proc read.
func (r *Ref) Exited() bool {
	if r.f == nil {
		return !r.Alive()
	}
	done := true
	if err := r.rc.Control(func(fd uintptr) { done = pidfdReadable(int(fd), 0) }); err != nil {
		return true
	}
	return done
}

// pidfdReadable polls fd for timeoutMS milliseconds (-1: without limit) and
// reports whether it is readable, which for a pidfd means its process has
// exited. A poll error counts as readable, so no caller waits for ever.
func pidfdReadable(fd int, timeoutMS int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, timeoutMS)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err != nil || n > 0
	}
}

// Wait blocks until the process has ended; with a pidfd, Close ends it too.
// It takes no context: its callers watch for the process's end for as long
// as they hold the reference.
func (r *Ref) Wait() {
	if r.f == nil {
		for r.Alive() {
			time.Sleep(pollInterval)
		}
		return
	}
	// Read waits in the poller until the pidfd is readable: the process
	// exited. An error means the fd was closed, or the poller did not take
	// it; in the second case block in poll instead (Control fails at once
	// in the first).
	err := r.rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd), 0) })
	if err != nil {
		r.rc.Control(func(fd uintptr) {
			for !pidfdReadable(int(fd), -1) {
			}
		})
	}
}

// Signal sends sig to the process itself, never to a process that reused
// its pid. It returns os.ErrProcessDone when the process has ended or the
// reference was closed.
func (r *Ref) Signal(sig syscall.Signal) error {
	var err error
	if r.f == nil {
		if !r.Alive() {
			return os.ErrProcessDone
		}
		err = syscall.Kill(r.pid, sig)
	} else if cerr := r.rc.Control(func(fd uintptr) {
		err = unix.PidfdSendSignal(int(fd), sig, nil, 0)
	}); cerr != nil {
		return os.ErrProcessDone // closed: the process ended
	}
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Close releases the pidfd, if any, which ends a Wait in progress.
func (r *Ref) Close() {
	if r.f != nil {
		r.f.Close()
	}
}
