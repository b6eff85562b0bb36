package cgroup

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestGroupLimitsAndUsage runs a process that burns CPU and touches
// memory in a group with one CPU and a memory limit: it is confined to the
// CPU, and the group's usage shows its CPU time and peak memory.
func TestGroupLimitsAndUsage(t *testing.T) {
	m, err := Detect()
	if err != nil {
		t.Skipf("no usable cgroups on this host: %v", err)
	}
	g, err := m.Create("test-"+time.Now().Format("150405.000000"), Limits{CPUs: []int{0}, MemBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	cmd := exec.Command("/bin/sh", "-c", `read x; x=$(head -c 8m /dev/zero | tr "\0" a); i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; grep Cpus_allowed_list /proc/self/status`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// The process waits on stdin until it is in the group.
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	b, _ := io.ReadAll(stdout)
	got := string(b)
	if want := "Cpus_allowed_list:\t0\n"; got != want {
		t.Errorf("the grouped process says %q, want %q", got, want)
	}
	u, err := g.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU < 10*time.Millisecond || u.PeakBytes < 4<<20 {
		t.Errorf("usage %+v: want some CPU time and at least 4 MiB of peak memory (%s)", u, m.Version())
	}
	t.Logf("cgroup %s: %+v", m.Version(), u)
}
