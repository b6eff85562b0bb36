package noded

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"corral/internal/procref"
)

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
	// stopped restricts the selection to processes that are stopped
	// (Paused).
	stopped bool
}

// member is one process of a job's session, as /proc showed it.
type member struct {
	pid int
	st  procref.Stat
}

// sessionMembers lists the live processes f selects.
func sessionMembers(f sessionFilter) []member {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var ms []member
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == f.except {
			continue
		}
		// getsid is one cheap syscall; only members get their stat read.
		if sid, err := unix.Getsid(pid); err != nil || sid != f.sid {
			continue
		}
		st, err := procref.ReadStat(pid)
		if err != nil || st.Session != f.sid || st.Start < f.minStart || st.Ended() {
			continue
		}
		if f.outsideGroup && st.PGID == f.sid {
			continue
		}
		if f.stopped && !st.Stopped() {
			continue
		}
		ms = append(ms, member{pid, st})
	}
	return ms
}

// signalSession sends sig to every live process f selects and returns how
// many it signalled; signal 0 only counts them.
func signalSession(f sessionFilter, sig syscall.Signal) int {
	n := 0
	for _, m := range sessionMembers(f) {
		if syscall.Kill(m.pid, sig) == nil {
			n++
		}
	}
	return n
}

// heldByStoppedVforkChild reports whether m cannot run before one of its
// children, stopped before its exec, runs again: the parent of a vfork
// sleeps uninterruptibly (state D) until its child execs or exits, so it
// takes no signal, SIGSTOP included, while that child is stopped. Shells
// run simple commands through vfork (dash does), so a SIGSTOP that lands
// between a vfork and its exec leaves the shell in D for as long as the
// job stays suspended; it cannot run either way.
func heldByStoppedVforkChild(m member, all []member) bool {
	if m.st.State != 'D' {
		return false
	}
	for _, c := range all {
		if c.st.PPID == m.pid && c.st.Stopped() && c.st.ForkedNotExeced() {
			return true
		}
	}
	return false
}
