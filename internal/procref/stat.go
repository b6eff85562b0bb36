package procref

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Stat is the part of /proc/<pid>/stat the node daemon needs.
type Stat struct {
	State byte
	// PPID is the parent's pid.
	PPID    int
	PGID    int
	Session int
	// Start is the process's start time in clock ticks since boot; with the
	// boot id it names a process for good, where a pid may be reused.
	Start uint64
	// CPUTicks is the CPU time the process used so far, user and system,
	// in clock ticks (utime + stime; 100 a second on Linux).
	CPUTicks uint64
	// Flags are the kernel's per-process flags (PF_*).
	Flags uint64
}

// pfForkNoExec is the kernel's PF_FORKNOEXEC: the process was forked and
// has not exec'd yet.
const pfForkNoExec = 0x40

// ForkedNotExeced reports whether the process is a fork (or vfork) child
// that has not called exec yet.
func (s Stat) ForkedNotExeced() bool { return s.Flags&pfForkNoExec != 0 }

// Ended reports whether the process has exited: a zombie (or a dying
// process) still has its stat file.
func (s Stat) Ended() bool {
	return s.State == 'Z' || s.State == 'X'
}

// Stopped reports whether the process is stopped by a signal or a tracer.
func (s Stat) Stopped() bool {
	return s.State == 'T' || s.State == 't'
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// ParseStat parses a /proc/<pid>/stat line. The command name may contain
// spaces and parentheses, so fields are counted from its last ')'.
func ParseStat(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, errors.New("malformed /proc stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return Stat{}, errors.New("short /proc stat line")
	}
	var st Stat
	st.State = f[0][0]
	var err0, err1, err2, err3, err4, err5, err6 error
	var utime, stime uint64
	st.PPID, err0 = strconv.Atoi(f[1])
	st.PGID, err1 = strconv.Atoi(f[2])
	st.Session, err2 = strconv.Atoi(f[3])
	utime, err3 = strconv.ParseUint(f[11], 10, 64)
	stime, err4 = strconv.ParseUint(f[12], 10, 64)
	st.Start, err5 = strconv.ParseUint(f[19], 10, 64)
	st.Flags, err6 = strconv.ParseUint(f[6], 10, 64)
	st.CPUTicks = utime + stime
	if err := errors.Join(err0, err1, err2, err3, err4, err5, err6); err != nil {
		return Stat{}, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	return st, nil
}

var (
	bootIDOnce sync.Once
	bootIDVal  string
)

// BootID returns the kernel's boot id, which changes on every boot, or ""
// where it cannot be read. It is read once per process.
func BootID() string {
	bootIDOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootIDVal = strings.TrimSpace(string(b))
		}
	})
	return bootIDVal
}
