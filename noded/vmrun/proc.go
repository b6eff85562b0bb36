package vmrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// startTicks reads field 22 of /proc/<pid>/stat: the process's start time in
// clock ticks since boot. With the boot id it names one process for good,
// where a pid may be reused. It also reports whether the process has ended
// (a zombie still has its stat file).
func startTicks(pid int) (start uint64, ended bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name may hold spaces and parentheses: count fields from
	// its last ')'. f[0] is field 3 (state), so field n is f[n-3].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, errors.New("malformed /proc stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, false, errors.New("short /proc stat line")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("malformed /proc stat line: %w", err)
	}
	return start, f[0] == "Z" || f[0] == "X", nil
}

var (
	bootIDOnce sync.Once
	bootIDVal  string
)

// hostBootID returns the kernel's boot id: a recorded (pid, start time) pair
// means something only within the boot that recorded it.
func hostBootID() string {
	bootIDOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootIDVal = strings.TrimSpace(string(b))
		}
	})
	return bootIDVal
}

// vmProc watches one QEMU process, named by pid and start time. It holds a
// pidfd where the kernel has them, so that waiting costs no thread (the fd
// sits in Go's poller) and SIGKILL cannot reach a process that reused the
// pid; without pidfds it polls /proc.
type vmProc struct {
	pid   int
	start uint64
	f     *os.File        // the pidfd, or nil
	rc    syscall.RawConn // f's raw connection
}

// openVMProc returns a reference to process pid, which must have started at
// start. It fails with os.ErrProcessDone when that process is gone. An
// unreaped child cannot be gone or replaced: child skips the check.
func openVMProc(pid int, start uint64, child bool) (*vmProc, error) {
	p := &vmProc{pid: pid, start: start}
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(fd)
			return nil, err
		}
		p.f = os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
		if p.rc, err = p.f.SyscallConn(); err != nil {
			p.f.Close()
			return nil, err
		}
	case errors.Is(err, syscall.ESRCH):
		return nil, os.ErrProcessDone
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EPERM):
		// An old kernel or a sandbox without pidfd_open: poll /proc.
	default:
		return nil, err
	}
	// The pidfd was opened before this check, so if pid still has the
	// recorded start time the pidfd names that process, not a successor.
	if !child && !p.alive() {
		p.close()
		return nil, os.ErrProcessDone
	}
	return p, nil
}

// alive reports whether pid still names the recorded, running process.
func (p *vmProc) alive() bool {
	st, ended, err := startTicks(p.pid)
	return err == nil && st == p.start && !ended
}

// wait blocks until the process has ended.
func (p *vmProc) wait() {
	if p.f == nil {
		for p.alive() {
			time.Sleep(50 * time.Millisecond)
		}
		return
	}
	// Read waits in the poller until the pidfd is readable: the process
	// exited. An error means the fd was closed, which happens only after.
	_ = p.rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd)) })
}

func pidfdReadable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err != nil || n > 0
	}
}

// kill sends SIGKILL. A process already gone is not an error.
func (p *vmProc) kill() error {
	var err error
	if p.f == nil {
		if !p.alive() {
			return nil
		}
		err = syscall.Kill(p.pid, syscall.SIGKILL)
	} else if cerr := p.rc.Control(func(fd uintptr) {
		err = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0)
	}); cerr != nil {
		return nil // closed: the process ended
	}
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func (p *vmProc) close() {
	if p.f != nil {
		p.f.Close()
	}
}

// strayQEMU finds QEMU processes whose command line holds arg: those a
// runner started from a state directory but never recorded.
func strayQEMU(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// hostTSCkHz returns the host's TSC frequency in kHz for tsc_early_khz, and
// where it came from. The guest's TSC runs at the host's rate under both TCG
// (QEMU reads the host TSC) and KVM, so the host's rate is the right value.
// "cpu MHz" in /proc/cpuinfo is the TSC rate inside VMs and on hosts without
// frequency scaling, but on a scaling bare-metal host it is the current
// clock; with constant_tsc the TSC is measured against CLOCK_MONOTONIC
// instead, which is right everywhere the TSC is usable at all.
func hostTSCkHz() (int, string) {
	info, _ := os.ReadFile("/proc/cpuinfo")
	mhz, constant := cpuinfoMHz(info)
	if haveRDTSC && constant {
		if khz := measureTSCkHz(); khz > 0 {
			return khz, fmt.Sprintf("measured %d kHz (cpuinfo says %d)", khz, int(mhz*1000))
		}
	}
	if mhz > 0 {
		return int(mhz * 1000), "from /proc/cpuinfo cpu MHz"
	}
	return 0, "unknown (no cpu MHz in /proc/cpuinfo): tsc_early_khz left out"
}

// cpuinfoMHz returns the first "cpu MHz" of /proc/cpuinfo and whether the
// CPU has constant_tsc.
func cpuinfoMHz(info []byte) (float64, bool) {
	var mhz float64
	constant := false
	sc := bufio.NewScanner(bytes.NewReader(info))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "cpu MHz":
			if mhz == 0 {
				mhz, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		case "flags":
			constant = constant || strings.Contains(" "+v+" ", " constant_tsc ")
		}
	}
	return mhz, constant
}

// measureTSCkHz counts TSC ticks over three 20 ms windows of the monotonic
// clock and returns the median rate; the thread stays on one CPU while it
// reads the counter.
func measureTSCkHz() int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var rates []int
	for range 3 {
		t0, c0 := time.Now(), rdtsc()
		time.Sleep(20 * time.Millisecond)
		c1, t1 := rdtsc(), time.Now()
		ns := t1.Sub(t0).Nanoseconds()
		if ns <= 0 || c1 <= c0 {
			return 0
		}
		rates = append(rates, int((c1-c0)*1_000_000/uint64(ns)))
	}
	sort.Ints(rates)
	return rates[1]
}

// writeJSONFile writes v as one newline-terminated line to path, in place:
// the daemon may hand over a state directory with an emptied file of the
// same name, and truncating then writing costs an ext4 flush at close (see
// noded's writeFileInPlace). readJSONFile takes a file without the final
// newline for absent.
func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileInPlace(path, append(b, '\n'))
}

// writeFileInPlace writes b to path without truncating an existing file
// first (see writeJSONFile).
func writeFileInPlace(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err == nil && fi.Size() > int64(len(b)) {
		err = f.Truncate(int64(len(b)))
	}
	return errors.Join(err, f.Close())
}

// errIncomplete marks a state file without its final newline: cut short, or
// emptied for reuse.
var errIncomplete = errors.New("incomplete file")

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return fmt.Errorf("%s: %w", path, errIncomplete)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
