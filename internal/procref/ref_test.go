package procref

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startSleep starts a child `sleep` and returns it with its start time.
func startSleep(t *testing.T) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	st, err := ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, st.Start
}

// waitReturns runs r.Wait and fails the test if it has not returned within
// d.
func waitReturns(t *testing.T, r *Ref, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("Wait did not return")
	}
}

// TestOpenChecksIdentity checks that Open accepts only the recorded process:
// a pid with another start time, or one that no longer exists, is gone.
func TestOpenChecksIdentity(t *testing.T) {
	cmd, start := startSleep(t)
	pid := cmd.Process.Pid
	tests := map[string]struct {
		pid     int
		start   uint64
		child   bool
		wantErr error
	}{
		"recorded process":  {pid: pid, start: start},
		"as a child":        {pid: pid, start: start, child: true},
		"child skips check": {pid: pid, start: start + 1, child: true},
		"other start time":  {pid: pid, start: start + 1, wantErr: os.ErrProcessDone},
		"self, other start": {pid: os.Getpid(), start: 1, wantErr: os.ErrProcessDone},
		"no such process":   {pid: 1 << 22, start: start, wantErr: os.ErrProcessDone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := Open(tc.pid, tc.start, tc.child)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Open = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer r.Close()
			if r.PID() != tc.pid || r.StartTicks() != tc.start {
				t.Errorf("Ref names %d/%d, want %d/%d", r.PID(), r.StartTicks(), tc.pid, tc.start)
			}
		})
	}
}

// TestRefLifecycle follows a child from start to exit: alive and signallable
// while it runs, exited, waited for and no longer signallable after SIGKILL,
// whether or not it has been reaped.
func TestRefLifecycle(t *testing.T) {
	for name, reap := range map[string]bool{"unreaped": false, "reaped": true} {
		t.Run(name, func(t *testing.T) {
			cmd, start := startSleep(t)
			r, err := Open(cmd.Process.Pid, start, true)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if !r.Alive() || r.Exited() {
				t.Fatalf("running child: Alive %v, Exited %v", r.Alive(), r.Exited())
			}
			if err := r.Signal(0); err != nil {
				t.Fatalf("Signal(0) to a running child: %v", err)
			}
			if err := r.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("SIGKILL: %v", err)
			}
			waitReturns(t, r, 5*time.Second)
			if reap {
				cmd.Wait()
			}
			if r.Alive() || !r.Exited() {
				t.Errorf("ended child: Alive %v, Exited %v", r.Alive(), r.Exited())
			}
			if err := r.Signal(syscall.SIGKILL); reap && !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("SIGKILL to a reaped child = %v, want os.ErrProcessDone", err)
			}
		})
	}
}

// TestCloseEndsWait checks that Close ends a Wait in progress, and that a
// closed reference is taken for an ended process.
func TestCloseEndsWait(t *testing.T) {
	cmd, start := startSleep(t)
	r, err := Open(cmd.Process.Pid, start, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.f == nil {
		t.Skip("no pidfds here: Close has nothing to end")
	}
	done := make(chan struct{})
	go func() { r.Wait(); close(done) }()
	time.Sleep(20 * time.Millisecond) // let Wait park in the poller
	r.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after Close")
	}
	if !r.Exited() {
		t.Error("Exited false after Close")
	}
	if err := r.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after Close = %v, want os.ErrProcessDone", err)
	}
}
