package noded

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"corral/internal/procref"
)

// Files of the lease keeper.
const (
	// keeperFile (in DataDir) names the running keeper, so that the next
	// daemon stops it before it starts its own.
	keeperFile = "keeper.json"
	// sessionFile (in a run's directory) names the process group that
	// holds the run, "PID STARTTICKS": the keeper signals that group.
	sessionFile = "session"
	// fencedFile (in a run's directory) is the keeper's mark on a run it
	// stopped; the daemon reports such a run as stopped for its lease.
	fencedFile = "fenced"
)

// ProcessGroup is implemented by a Handle whose job runs as one process
// group led by a process of its own (both runners start it with setsid):
// the lease keeper can then stop the job when the daemon cannot.
type ProcessGroup interface {
	// ProcessGroup returns the group leader's pid and start time (clock
	// ticks since boot, as procref.Stat.Start).
	ProcessGroup() (pid int, startTicks uint64)
}

// keeperScript is the lease keeper: one small shell process per node,
// started by the daemon in a session of its own, that stops the jobs when
// the lease runs out and the daemon did not (it is frozen, dead, or stuck).
// Every PERIOD it reads DataDir/lease (see leaseFile) and /proc/uptime. Once
// the TERM time has passed, every run (DataDir/jobs/*/session) whose group
// leader still runs is marked fenced and its process group gets SIGTERM, and
// after the KILL time SIGKILL, until the lease is renewed. A run whose leader
// ended (gone, or a zombie its frozen daemon did not reap) is not marked: it
// ended by itself, and what it left in its group gets SIGKILL, as the
// daemon's sweep would do. A leader's pid that names another process now (it
// started at another time) is left alone. The keeper exits when it finds no
// live run 20 times in a row (a node timeout at the default period, so a
// node that runs short jobs one after another does not start a keeper per
// job), or when DataDir/jobs is gone; the daemon starts it
// again with its next run. It uses shell builtins only, but for sleep: one
// fork per period.
const keeperScript = `exec </dev/null >/dev/null 2>&1
_dir=$1
_idle=0
_check() {
	_is=dead
	[ -r "/proc/$1/stat" ] && read -r _st <"/proc/$1/stat" || return 0
	_st=${_st##*) }
	set -- "$2" $_st
	if [ "${21}" != "$1" ]; then
		_is=other
	elif [ "$2" != Z ]; then
		_is=live
	fi
}
while [ -d "$_dir/jobs" ]; do
	_term= _kill= _period=1
	[ -s "$_dir/lease" ] && read -r _fence _term _kill _period _rest <"$_dir/lease"
	read -r _up _rest </proc/uptime
	_now=${_up%.*}${_up#*.}
	_live=0
	for _run in "$_dir"/jobs/[0-9]*-[0-9]*; do
		[ -s "$_run/session" ] && read -r _pid _start <"$_run/session" || continue
		_check "$_pid" "$_start"
		[ "$_is" = live ] && _live=1
		[ "$_is" != other ] && [ -n "$_term" ] && [ "$_now" -ge "$_term" ] || continue
		if [ "$_is" = dead ]; then
			kill -s KILL -- "-$_pid"
		elif [ ! -s "$_run/fenced" ]; then
			echo fenced >"$_run/fenced"
			kill -s TERM -- "-$_pid"
		elif [ "$_now" -ge "$_kill" ]; then
			kill -s KILL -- "-$_pid"
		fi
	done
	if [ "$_live" = 0 ]; then
		_idle=$((_idle+1))
		[ "$_idle" -ge 20 ] && exit 0
	else
		_idle=0
	fi
	sleep "$_period" || sleep 1
done
`

// keeperProc is a keeper this daemon started.
type keeperProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

type keeperRecord struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_ticks"`
}

// stopOldKeeper stops the keeper an earlier daemon left running; this
// daemon starts its own when it has runs to guard.
func (d *Daemon) stopOldKeeper() {
	path := filepath.Join(d.cfg.DataDir, keeperFile)
	var rec keeperRecord
	if err := procref.ReadJSON(path, &rec); err != nil {
		return
	}
	if ref, err := procref.Open(rec.PID, rec.Start, false); err == nil {
		ref.Signal(syscall.SIGKILL)
		ref.Close()
	}
	os.Remove(path)
}

// ensureKeeper starts the keeper when the node has a lease and live runs
// and none runs. Only the loop calls it (or Run before the loop starts).
func (d *Daemon) ensureKeeper() {
	if d.keeper != nil || d.liveCount() == 0 {
		return
	}
	if t, _ := d.lease.current(); !t.known() {
		return
	}
	k, err := d.startKeeper()
	if err != nil {
		d.log.Warn("cannot start the lease keeper; a frozen daemon could not stop its jobs when its lease runs out", "err", err)
		return
	}
	d.keeper = k
}

func (d *Daemon) startKeeper() (*keeperProc, error) {
	cmd := &exec.Cmd{
		Path:        "/bin/sh",
		Args:        []string{"/bin/sh", "-c", keeperScript, "corral-lease-keeper", d.cfg.DataDir},
		Env:         []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"},
		Dir:         "/",
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the lease keeper: %w", err)
	}
	pid := cmd.Process.Pid
	st, err := procref.ReadStat(pid)
	if err == nil {
		err = procref.WriteJSON(filepath.Join(d.cfg.DataDir, keeperFile), keeperRecord{PID: pid, Start: st.Start})
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("recording the lease keeper: %w", err)
	}
	k := &keeperProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(k.done)
		select {
		case d.keeperCh <- k:
		case <-d.loopDone:
		}
	}()
	return k, nil
}

// onKeeperExited starts the keeper again if a run is alive: it exits when
// it finds none, and a run may have started just then.
func (d *Daemon) onKeeperExited(k *keeperProc) {
	if d.keeper != k {
		return
	}
	d.keeper = nil
	d.ensureKeeper()
}

// stopKeeper stops this daemon's keeper: Run does so on its way out when no
// run is left to guard.
func (d *Daemon) stopKeeper() {
	k := d.keeper
	if k == nil {
		return
	}
	d.keeper = nil
	k.cmd.Process.Kill()
	<-k.done
	os.Remove(filepath.Join(d.cfg.DataDir, keeperFile))
}

// recordSession writes the run's process group for the keeper, if its
// handle names one.
func (d *Daemon) recordSession(lj *localJob) {
	pg, ok := lj.handle.(ProcessGroup)
	if !ok {
		return
	}
	pid, start := pg.ProcessGroup()
	line := strconv.Itoa(pid) + " " + strconv.FormatUint(start, 10) + "\n"
	if err := procref.WriteInPlace(filepath.Join(lj.dir, sessionFile), []byte(line), 0o600); err != nil {
		d.log.Warn("cannot record a job's process group for the lease keeper", "job", lj.key.ID, "err", err)
	}
}

// fencedByKeeper reports whether the keeper marked the run as stopped for
// the lease.
func fencedByKeeper(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, fencedFile))
	return err == nil && fi.Size() > 0
}
