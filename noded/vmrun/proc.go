package vmrun

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral/internal/procref"
)

// killProc sends SIGKILL to p. A process already gone is not an error.
func killProc(p *procref.Ref) error {
	if err := p.Signal(syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
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
