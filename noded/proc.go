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
		st, err := procref.ReadStat(pid)
		if err != nil || st.Session != f.sid || st.Start < f.minStart || st.Ended() {
			continue
		}
		if f.outsideGroup && st.PGID == f.sid {
			continue
		}
		isStopped := st.Stopped()
		if (f.running && isStopped) || (f.stopped && !isStopped) {
			continue
		}
		if syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}
