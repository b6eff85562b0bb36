package noded

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// TestDaemonTimeLimitWarning runs a job with --signal=USR1@2 and a 3 s
// limit: its trap gets USR1 about a second in, and the job ends by itself
// before its limit.
func TestDaemonTimeLimitWarning(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	j := shJob(9, work, `trap 'echo warned > warned; exit 0' USR1; while :; do sleep 0.05; done`)
	j.Spec.TimeLimit = 3
	j.Spec.Signal = &api.WarnSignal{Signal: int(syscall.SIGUSR1), BeforeS: 2}
	start := time.Now()
	f.addJob("n1", j)
	r := f.waitReport(t, 9, 10*time.Second)
	d := time.Since(start)
	if r.State != api.StateCompleted {
		t.Fatalf("report %+v, want COMPLETED (the trap exits 0)", r)
	}
	if _, err := os.Stat(filepath.Join(work, "warned")); err != nil {
		t.Errorf("the trap did not run: %v", err)
	}
	if d < 700*time.Millisecond || d > 2800*time.Millisecond {
		t.Errorf("the job ended %s after its allocation; want about 1s (3s limit, warning 2s before)", d)
	}
}
