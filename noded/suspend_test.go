package noded

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"

	"corral/internal/procref"
)

// setState sets the state of job id's allocation on node, as scontrol
// suspend and resume do on the controller.
func (f *fakeCtl) setState(node string, id uint64, state api.JobState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.allocs[node] {
		if f.allocs[node][i].ID == id {
			f.allocs[node][i].State = state
		}
	}
	f.bump()
}

// outputWatch follows a job's output file from the host, noting when each
// line arrived: a guest's own clock stops while its VM is paused, so only
// the host can see the gap.
type outputWatch struct {
	arrivals chan []time.Time
	stop     chan struct{}
}

func watchOutput(path string) *outputWatch {
	w := &outputWatch{arrivals: make(chan []time.Time, 1), stop: make(chan struct{})}
	go func() {
		var at []time.Time
		defer func() { w.arrivals <- at }()
		for {
			b, _ := os.ReadFile(path)
			for n := strings.Count(string(b), "\n"); len(at) < n; {
				at = append(at, time.Now())
			}
			select {
			case <-w.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

// lines waits until at least n lines arrived.
func (w *outputWatch) waitLines(t *testing.T, path string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(path)
		if strings.Count(string(b), "\n") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has fewer than %d lines after %s: %q", path, n, within, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finish stops the watch and returns the longest time between two lines.
func (w *outputWatch) finish() (maxGap time.Duration, lines int) {
	close(w.stop)
	at := <-w.arrivals
	for i := 1; i < len(at); i++ {
		maxGap = max(maxGap, at[i].Sub(at[i-1]))
	}
	return maxGap, len(at)
}

// counterJob prints a counter n times, every 100 ms, to out.txt in work.
func counterJob(id uint64, work string, n int) api.Job {
	j := shJob(id, work, `i=0; while [ $i -lt `+itoa(n)+` ]; do echo $i; i=$((i+1)); sleep 0.1; done`)
	j.Spec.Output = filepath.Join(work, "out.txt")
	return j
}

func itoa(n int) string { return strconv.Itoa(n) }

// readRecord reads run k's job.json from data.
func readRecord(t *testing.T, data string, k jobKey) jobRecord {
	t.Helper()
	var rec jobRecord
	if err := procref.ReadJSON(filepath.Join(data, "jobs", k.String(), recordFile), &rec); err != nil {
		t.Fatalf("reading the record: %v", err)
	}
	return rec
}

// waitPausedRecord waits until run k's record says paused is its state.
func waitPausedRecord(t *testing.T, data string, k jobKey, paused bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for readRecord(t, data, k).paused() != paused {
		if time.Now().After(deadline) {
			t.Fatalf("job.json of %s never said paused=%v", k, paused)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// suspendGap runs a counter job with runner r, suspends it for 2 s once it
// printed 5 lines and resumes it: its output must show the gap and the job
// must complete. The vm runner's test (package noded_test) runs it too.
func suspendGap(t *testing.T, r Runner, memMB int64, startWithin time.Duration) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data, func(c *Config) { c.Runner = r; c.MemMB = 4096 })
	job := counterJob(11, work, 20)
	job.MemMB = memMB
	job = f.addJob("n1", job)
	k := jobKey{job.ID, job.StartIndex}
	out := job.Spec.Output
	w := watchOutput(out)
	w.waitLines(t, out, 5, startWithin)
	f.setState("n1", 11, api.StateSuspended)
	waitPausedRecord(t, data, k, true)
	time.Sleep(2 * time.Second)
	f.setState("n1", 11, api.StateRunning)
	waitPausedRecord(t, data, k, false)
	if rec := readRecord(t, data, k); rec.PausedFor < 1500*time.Millisecond {
		t.Errorf("job.json records %s suspended, want at least 1.5s", rec.PausedFor)
	}
	rep := f.waitReport(t, 11, 30*time.Second)
	gap, lines := w.finish()
	if rep.State != api.StateCompleted || rep.ExitCode != 0 {
		t.Errorf("report %+v, want COMPLETED with exit code 0", rep)
	}
	if lines != 20 {
		t.Errorf("the job printed %d lines, want 20", lines)
	}
	if gap < 1500*time.Millisecond {
		t.Errorf("the longest pause between two lines was %s, want at least 1.5s for a 2s suspension", gap)
	}
}

func TestDaemonSuspendResume(t *testing.T) {
	suspendGap(t, NewProcessRunner(), 64, 10*time.Second)
}

func TestDaemonSuspendStopsTimeLimit(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	job := counterJob(12, work, 10) // about 1 s of running
	job.Spec.TimeLimit = 2
	job = f.addJob("n1", job)
	k := jobKey{job.ID, job.StartIndex}
	w := watchOutput(job.Spec.Output)
	w.waitLines(t, job.Spec.Output, 5, 10*time.Second)
	f.setState("n1", 12, api.StateSuspended)
	waitPausedRecord(t, data, k, true)
	time.Sleep(3 * time.Second) // past the limit, were it counting
	if reps := f.reportsFor(12); len(reps) > 0 {
		t.Fatalf("the job ended while suspended: %+v", reps[0])
	}
	f.setState("n1", 12, api.StateRunning)
	rep := f.waitReport(t, 12, 10*time.Second)
	w.finish()
	if rep.State != api.StateCompleted {
		t.Errorf("report %+v, want COMPLETED: the time limit ran while the job was suspended", rep)
	}
}

func TestDaemonSuspendedTimeLimitStillFires(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	job := counterJob(13, work, 100) // 10 s of running
	job.Spec.TimeLimit = 1
	job = f.addJob("n1", job)
	k := jobKey{job.ID, job.StartIndex}
	w := watchOutput(job.Spec.Output)
	w.waitLines(t, job.Spec.Output, 3, 10*time.Second)
	f.setState("n1", 13, api.StateSuspended)
	waitPausedRecord(t, data, k, true)
	time.Sleep(1500 * time.Millisecond)
	f.setState("n1", 13, api.StateRunning)
	rep := f.waitReport(t, 13, 10*time.Second)
	w.finish()
	if rep.State != api.StateTimeout {
		t.Errorf("report %+v, want TIMEOUT once the job ran its second", rep)
	}
}

func TestDaemonCancelWhileSuspended(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	job := f.addJob("n1", shJob(14, work, `echo $$ >pid; sleep 1000 & echo $! >child; touch started; wait`))
	k := jobKey{job.ID, job.StartIndex}
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	pids := []int{readPids1(t, filepath.Join(work, "pid")), readPids1(t, filepath.Join(work, "child"))}
	f.setState("n1", 14, api.StateSuspended)
	waitPausedRecord(t, data, k, true)
	for _, pid := range pids {
		if st, err := procref.ReadStat(pid); err != nil || st.State != 'T' {
			t.Errorf("process %d of the suspended job is not stopped (state %q, err %v)", pid, st.State, err)
		}
	}
	start := time.Now()
	f.removeJob("n1", 14)
	rep := f.waitReport(t, 14, 10*time.Second)
	if rep.State != api.StateCancelled {
		t.Errorf("report %+v, want CANCELLED", rep)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancelling the suspended job took %s", d)
	}
	for _, pid := range pids {
		if st, err := procref.ReadStat(pid); err == nil && st.State != 'Z' {
			t.Errorf("process %d of the cancelled job is still there (state %q)", pid, st.State)
		}
	}
	waitEmpty(t, data)
}

func TestDaemonRestartWhileSuspended(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemon(t, f, data)
	job := f.addJob("n1", counterJob(15, work, 10))
	k := jobKey{job.ID, job.StartIndex}
	w := watchOutput(job.Spec.Output)
	w.waitLines(t, job.Spec.Output, 3, 10*time.Second)
	f.setState("n1", 15, api.StateSuspended)
	waitPausedRecord(t, data, k, true)
	d1.stop(t)

	d2 := startDaemon(t, f, data)
	f.waitRegistrations(t, 2)
	time.Sleep(1500 * time.Millisecond) // the new daemon keeps it paused
	if reps := f.reportsFor(15); len(reps) > 0 {
		t.Fatalf("the job ended while suspended: %+v", reps[0])
	}
	_ = d2
	f.setState("n1", 15, api.StateRunning)
	rep := f.waitReport(t, 15, 10*time.Second)
	gap, _ := w.finish()
	if rep.State != api.StateCompleted {
		t.Errorf("report %+v, want COMPLETED", rep)
	}
	if gap < 1500*time.Millisecond {
		t.Errorf("the longest pause between two lines was %s, want the suspension's", gap)
	}
}

func TestProcessHandlePausedAfterRecover(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemon(t, f, data)
	job := f.addJob("n1", counterJob(16, work, 10))
	k := jobKey{job.ID, job.StartIndex}
	w := watchOutput(job.Spec.Output)
	w.waitLines(t, job.Spec.Output, 3, 10*time.Second)
	d1.stop(t)
	// A daemon that died after pausing the job but before recording it.
	h, _, err := NewProcessRunner().Recover(filepath.Join(data, "jobs", k.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.(Pausable).Pause(); err != nil {
		t.Fatal(err)
	}
	if p, err := h.(PauseReporter).Paused(); err != nil || !p {
		t.Fatalf("Paused() = %v, %v after Pause, want true", p, err)
	}
	f.setState("n1", 16, api.StateSuspended)
	startDaemon(t, f, data)
	f.waitRegistrations(t, 2)
	waitPausedRecord(t, data, k, true)
	f.setState("n1", 16, api.StateRunning)
	if rep := f.waitReport(t, 16, 10*time.Second); rep.State != api.StateCompleted {
		t.Errorf("report %+v, want COMPLETED", rep)
	}
	w.finish()
}

// offeringRunner is the process runner saying what a vm runner says of
// itself at registration.
type offeringRunner struct{ Runner }

func (offeringRunner) Images() []string  { return []string{"default", "big"} }
func (offeringRunner) Accel() string     { return "tcg" }
func (offeringRunner) OverheadMB() int64 { return 42 }
func (offeringRunner) Overlay() netip.AddrPort {
	return netip.MustParseAddrPort("192.0.2.1:4789")
}

func TestDaemonRegistersRunnerOffer(t *testing.T) {
	tests := map[string]struct {
		runner     Runner
		images     []string
		accel      string
		overheadMB int64
		overlay    string
	}{
		"vm-like runner": {offeringRunner{NewProcessRunner()}, []string{"default", "big"}, "tcg", 42, "192.0.2.1:4789"},
		"process runner": {NewProcessRunner(), nil, "", 0, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFakeCtl(t)
			startDaemon(t, f, t.TempDir(), func(c *Config) { c.Runner = tc.runner })
			f.waitRegistrations(t, 1)
			reg := f.registrations()[0]
			if !slices.Equal(reg.Images, tc.images) || reg.Accel != tc.accel || reg.OverheadMB != tc.overheadMB || reg.Overlay != tc.overlay {
				t.Errorf("registered images %v accel %q overhead %d MB overlay %q, want %v %q %d %q",
					reg.Images, reg.Accel, reg.OverheadMB, reg.Overlay, tc.images, tc.accel, tc.overheadMB, tc.overlay)
			}
		})
	}
}

// TestPauseStopsAShellBetweenVforkAndExec suspends a shell that runs
// commands in a tight loop until a SIGSTOP has landed between one of its
// vforks and the exec that follows: the shell then sleeps uninterruptibly
// (state D) under a stopped child, takes no signal, and must count as
// stopped, or Pause gives up after pauseTimeout as if the job could not be
// suspended.
func TestPauseStopsAShellBetweenVforkAndExec(t *testing.T) {
	h, _ := launch(t, `while :; do /bin/true; done`)
	p := h.(Pausable)
	held := 0
	for round := 0; round < 2000 && held < 3; round++ {
		if err := p.Pause(); err != nil {
			t.Fatalf("round %d: Pause: %v", round, err)
		}
		all := sessionMembers(h.(*procHandle).sessionAll())
		for _, m := range all {
			switch {
			case heldByStoppedVforkChild(m, all):
				held++
			case !m.st.Stopped():
				t.Fatalf("round %d: Pause returned with process %d in state %c", round, m.pid, m.st.State)
			}
		}
		if err := p.Continue(); err != nil {
			t.Fatalf("round %d: Continue: %v", round, err)
		}
		time.Sleep(time.Millisecond)
	}
	if held == 0 {
		t.Skip("no SIGSTOP landed between a vfork and its exec in 2000 rounds (the shell may not use vfork)")
	}
	t.Logf("%d pauses caught the shell in a vfork", held)
}
