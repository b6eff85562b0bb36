package noded

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HostCPUs returns the number of CPUs this process may run on (its scheduler
// affinity), which is what a node offers by default.
func HostCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		if n := set.Count(); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// HostMemMB returns the host's total memory in MiB (MemTotal in
// /proc/meminfo), or 0 when it cannot be read.
func HostMemMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := parseMemTotal(sc.Text()); ok {
			return kb / 1024
		}
	}
	return 0
}

// parseMemTotal parses meminfo's "MemTotal:  16318912 kB" line.
func parseMemTotal(line string) (kb int64, ok bool) {
	rest, found := strings.CutPrefix(line, "MemTotal:")
	if !found {
		return 0, false
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
