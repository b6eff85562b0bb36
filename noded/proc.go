package noded

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is the part of /proc/<pid>/stat the daemon needs.
type procStat struct {
	State   byte
	PGID    int
	Session int
	// Start is the process's start time in clock ticks since boot; with the
	// boot id it names a process for good, where a pid may be reused.
	Start uint64
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat parses a /proc/<pid>/stat line. The command name may contain
// spaces and parentheses, so fields are counted from its last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed /proc stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, errors.New("short /proc stat line")
	}
	var st procStat
	st.State = f[0][0]
	var err1, err2, err3 error
	st.PGID, err1 = strconv.Atoi(f[2])
	st.Session, err2 = strconv.Atoi(f[3])
	st.Start, err3 = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	return st, nil
}

var (
	bootIDOnce sync.Once
	bootIDVal  string
)

// hostBootID returns the kernel's boot id, which changes on every boot: a
// recorded (pid, start time) pair is only meaningful within one boot.
func hostBootID() string {
	bootIDOnce.Do(func() {
		b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err == nil {
			bootIDVal = strings.TrimSpace(string(b))
		}
	})
	return bootIDVal
}

// procRef watches one process, named by pid and start time. It uses a pidfd
// where the kernel has them (Linux 5.3+): waiting then goes through Go's
// poller and costs no thread, and signals cannot reach a process that reused
// the pid. Without pidfds it polls /proc. The pidfd is only used through
// RawConn.Control and Read, which keep it open while in use, so a close
// never races with a signal sent through it.
type procRef struct {
	pid   int
	start uint64
	f     *os.File        // the pidfd, or nil
	rc    syscall.RawConn // f's raw connection
}

// openProc returns a reference to the process pid, which must have started
// at start (clock ticks since boot). It fails with os.ErrProcessDone when that
// process is gone. An unreaped child of this process cannot be gone or
// replaced, and may well have exited already: child skips the check.
func openProc(pid int, start uint64, child bool) (*procRef, error) {
	r := &procRef{pid: pid, start: start}
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
	if !child && !r.matches() {
		r.close()
		return nil, os.ErrProcessDone
	}
	return r, nil
}

// matches reports whether pid still names the recorded, not yet exited
// process.
func (r *procRef) matches() bool {
	st, err := readStat(r.pid)
	return err == nil && st.Start == r.start && st.State != 'Z' && st.State != 'X'
}

// exited reports whether the process has ended (or the reference was
// closed, which happens only after it ended).
func (r *procRef) exited() bool {
	if r.f == nil {
		return !r.matches()
	}
	done := true
	if err := r.rc.Control(func(fd uintptr) { done = pidfdReadable(int(fd), 0) }); err != nil {
		return true
	}
	return done
}

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

// wait blocks until the process has ended.
func (r *procRef) wait() {
	if r.f == nil {
		for r.matches() {
			time.Sleep(20 * time.Millisecond)
		}
		return
	}
	err := r.rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd), 0) })
	if err != nil {
		// The poller did not take the pidfd; block in poll instead.
		r.rc.Control(func(fd uintptr) {
			for !pidfdReadable(int(fd), -1) {
			}
		})
	}
}

// signal sends sig to the process itself, never to a process that reused its
// pid.
func (r *procRef) signal(sig syscall.Signal) error {
	if r.f == nil {
		if !r.matches() {
			return os.ErrProcessDone
		}
		return syscall.Kill(r.pid, sig)
	}
	err := os.ErrProcessDone
	r.rc.Control(func(fd uintptr) { err = unix.PidfdSendSignal(int(fd), sig, nil, 0) })
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func (r *procRef) close() {
	if r.f != nil {
		r.f.Close()
	}
}

// sessionFilter selects the processes of one job: the members of the session
// its shim leads.
type sessionFilter struct {
	sid int
	// minStart skips processes older than the shim, which cannot be its
	// descendants.
	minStart uint64
	// except is a pid to leave alone (the shim, so that it can record the
	// script's exit status).
	except int
	// outsideGroup restricts the selection to processes that moved to a
	// process group of their own (the shim relays signals to its group).
	outsideGroup bool
	// running restricts the selection to processes that are not stopped
	// (Pause's later rounds), stopped to those that are (Paused).
	running, stopped bool
}

// signalSession sends sig to every live process f selects and returns how
// many it signalled; signal 0 only counts them.
func signalSession(f sessionFilter, sig syscall.Signal) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == f.except {
			continue
		}
		// getsid is one cheap syscall; only members get their stat read.
		if sid, err := unix.Getsid(pid); err != nil || sid != f.sid {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.Session != f.sid || st.Start < f.minStart || st.State == 'Z' || st.State == 'X' {
			continue
		}
		if f.outsideGroup && st.PGID == f.sid {
			continue
		}
		isStopped := st.State == 'T' || st.State == 't'
		if (f.running && isStopped) || (f.stopped && !isStopped) {
			continue
		}
		if syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}
