package noded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"corral/api"

	"corral/internal/procref"
)

// testLog sends a daemon's log to the test's, and drops what comes after
// the test ended.
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
	// lines keeps every message for tests that count them.
	lines []string
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	if !l.done {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (l *testLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

type testDaemon struct {
	*Daemon
	log    *testLog
	cancel context.CancelFunc
	done   chan error
}

// startDaemon runs a daemon named n1 against f with short intervals. At the
// end of the test it is stopped and its jobs killed.
func startDaemon(t *testing.T, f *fakeCtl, dataDir string, edit ...func(*Config)) *testDaemon {
	t.Helper()
	lg := &testLog{t: t}
	cfg := Config{
		Name: "n1", CPUs: 2, MemMB: 1024, DataDir: dataDir, Client: f.client(t),
		HeartbeatInterval: 20 * time.Millisecond, WaitTimeout: 500 * time.Millisecond,
		KillGrace: 300 * time.Millisecond, RunJobsAs: RunAsDaemon,
		Logger: slog.New(slog.NewTextHandler(lg, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, e := range edit {
		e(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	td := &testDaemon{Daemon: d, log: lg, cancel: cancel, done: make(chan error, 1)}
	go func() { td.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		d.Shutdown(true)
		td.stop(t)
		lg.mu.Lock()
		lg.done = true
		lg.mu.Unlock()
	})
	return td
}

// stop cancels Run and waits for it to return.
func (td *testDaemon) stop(t *testing.T) {
	td.cancel()
	select {
	case err := <-td.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		td.done <- err // a later stop returns at once
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func shJob(id uint64, work, script string) api.Job {
	return api.Job{
		ID: id, CPUs: 1, MemMB: 64,
		Spec: api.JobSpec{
			Name: fmt.Sprintf("job%d", id), User: "alice", Script: "#!/bin/sh\n" + script + "\n",
			WorkDir: work, SubmitDir: work, NTasks: 1, CPUsPerTask: 1,
			Env: []string{"PATH=" + defaultPath},
		},
	}
}

// waitEmpty waits until the daemon's jobs directory is empty: every run
// reported and its state removed.
func waitEmpty(t *testing.T, dataDir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "jobs"))
		if len(entries) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("jobs directory still holds %v", names)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDaemonRunsJobs(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	noDir := shJob(14, "/nonexistent/corral-work", "exit 0")
	badOut := shJob(15, work, "exit 0")
	badOut.Spec.Output = "nodir/out-%j"
	tests := map[string]struct {
		job     api.Job
		want    api.JobReport
		message string
	}{
		"completes":       {shJob(10, work, `echo "hello from $SLURM_JOB_ID on $SLURMD_NODENAME"`), api.JobReport{State: api.StateCompleted}, ""},
		"exit code":       {shJob(11, work, "exit 3"), api.JobReport{State: api.StateFailed, ExitCode: 3}, ""},
		"signal":          {shJob(12, work, "kill -s KILL $$"), api.JobReport{State: api.StateFailed, Signal: 9}, ""},
		"no such command": {shJob(13, work, "/nonexistent/cmd"), api.JobReport{State: api.StateFailed, ExitCode: 127}, ""},
		"missing workdir": {noDir, api.JobReport{State: api.StateFailed, ExitCode: 1}, "/nonexistent/corral-work does not exist"},
		"missing out dir": {badOut, api.JobReport{State: api.StateFailed, ExitCode: 1}, "cannot open output file " + work + "/nodir/out-15"},
	}
	for _, tc := range tests {
		f.addJob("n1", tc.job)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := f.waitReport(t, tc.job.ID, 10*time.Second)
			if !strings.Contains(got.Message, tc.message) {
				t.Errorf("message %q, want it to contain %q", got.Message, tc.message)
			}
			got.JobID, got.StartIndex, got.Message = 0, 0, ""
			if got != tc.want {
				t.Errorf("report %+v, want %+v", got, tc.want)
			}
		})
	}
	checkFile(t, filepath.Join(work, "slurm-10.out"), "hello from 10 on n1\n")
	waitEmpty(t, data)
	for id := uint64(10); id <= 15; id++ {
		if n := len(f.reportsFor(id)); n != 1 {
			t.Errorf("job %d reported %d times", id, n)
		}
	}
	regs := f.registrations()
	if len(regs) != 1 || regs[0].Runner != "process" || regs[0].BootID == "" || regs[0].CPUs != 2 || regs[0].MemMB != 1024 {
		t.Errorf("registrations %+v", regs)
	}
}

// TestDaemonLatency measures allocation → report for a trivial job; the
// goal is well under 50 ms.
func TestDaemonLatency(t *testing.T) {
	f := newFakeCtl(t)
	work := t.TempDir()
	startDaemon(t, f, t.TempDir())
	f.waitRegistered(t)
	var lat []time.Duration
	for id := uint64(1); id <= 10; id++ {
		start := time.Now()
		f.addJob("n1", shJob(id, work, "true"))
		if r := f.waitReport(t, id, 5*time.Second); r.State != api.StateCompleted {
			t.Fatalf("report %+v", r)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("allocation → COMPLETED report: median %s, max %s", lat[len(lat)/2], lat[len(lat)-1])
	if lat[len(lat)/2] > time.Second {
		t.Errorf("median latency %s", lat[len(lat)/2])
	}
}

func (f *fakeCtl) waitRegistered(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(f.registrations()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not register")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDaemonCancel(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	f.addJob("n1", shJob(7, work, `echo $$ >pid; touch started; sleep 1000`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	start := time.Now()
	f.removeJob("n1", 7)
	r := f.waitReport(t, 7, 10*time.Second)
	if r.State != api.StateCancelled || r.Signal != int(syscall.SIGTERM) {
		t.Errorf("report %+v, want CANCELLED by signal 15", r)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancel took %s", d)
	}
	waitEmpty(t, data)
}

func TestDaemonTimeLimit(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	j := shJob(8, work, `trap '' TERM; touch started; sleep 1000`)
	j.Spec.TimeLimit = 1
	start := time.Now()
	f.addJob("n1", j)
	r := f.waitReport(t, 8, 10*time.Second)
	d := time.Since(start)
	if r.State != api.StateTimeout || r.Signal != int(syscall.SIGKILL) || !strings.Contains(r.Message, "time limit of 1s") {
		t.Errorf("report %+v, want TIMEOUT by signal 9 (the job ignores SIGTERM)", r)
	}
	if d < time.Second+300*time.Millisecond || d > 5*time.Second {
		t.Errorf("the job ended %s after its allocation; want its 1s limit plus the 300ms grace", d)
	}
	waitEmpty(t, data)
}

// TestDaemonRestartReadopts stops a daemon while its job runs: the job keeps
// running, the next daemon re-adopts it (NodeInfo.Running), and the job is
// reported once, with its true exit code.
func TestDaemonRestartReadopts(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemon(t, f, data)
	f.addJob("n1", shJob(5, work, `touch started; while [ ! -e go ]; do sleep 0.01; done; exit 3`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	d1.stop(t)

	startDaemon(t, f, data)
	f.waitRegistrations(t, 2)
	regs := f.registrations()
	if got := regs[1].Running; !slices.Equal(got, []uint64{5}) {
		t.Errorf("second registration lists running jobs %v, want [5]", got)
	}
	if regs[0].BootID == regs[1].BootID {
		t.Error("the restarted daemon kept its boot id")
	}
	time.Sleep(100 * time.Millisecond) // a few reconciles while it runs
	os.WriteFile(filepath.Join(work, "go"), nil, 0o644)
	r := f.waitReport(t, 5, 10*time.Second)
	if r.State != api.StateFailed || r.ExitCode != 3 {
		t.Errorf("report %+v, want FAILED with exit code 3", r)
	}
	waitEmpty(t, data)
	time.Sleep(100 * time.Millisecond)
	if n := len(f.reportsFor(5)); n != 1 {
		t.Errorf("job reported %d times", n)
	}
}

func (f *fakeCtl) waitRegistrations(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.registrations()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d registrations", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDaemonReportsJobEndedWhileDown checks that a job that ended while no
// daemon ran is reported by the next one, with its true exit code.
func TestDaemonReportsJobEndedWhileDown(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemon(t, f, data)
	f.addJob("n1", shJob(6, work, `touch started; while [ ! -e go ]; do sleep 0.01; done; exit 42`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	d1.stop(t)
	os.WriteFile(filepath.Join(work, "go"), nil, 0o644)
	matches, _ := filepath.Glob(filepath.Join(data, "jobs", "6-*", exitFile))
	for deadline := time.Now().Add(5 * time.Second); len(matches) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		matches, _ = filepath.Glob(filepath.Join(data, "jobs", "6-*", exitFile))
	}
	// The shim writes the exit file just before it exits: wait until it
	// is gone too, or the next daemon may still find it alive (slow under
	// -race) and re-adopt the run for an instant.
	if len(matches) > 0 {
		waitShimGone(t, filepath.Dir(matches[0]))
	}
	if len(f.reportsFor(6)) != 0 {
		t.Fatal("a stopped daemon reported")
	}

	startDaemon(t, f, data)
	r := f.waitReport(t, 6, 10*time.Second)
	if r.State != api.StateFailed || r.ExitCode != 42 {
		t.Errorf("report %+v, want FAILED with exit code 42", r)
	}
	if regs := f.registrations(); len(regs[len(regs)-1].Running) != 0 {
		t.Errorf("the ended job was registered as running: %v", regs[len(regs)-1].Running)
	}
	waitEmpty(t, data)
}

// TestDaemonReregisters checks that a node the controller forgot registers
// again, listing what it runs, and carries on.
func TestDaemonReregisters(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	f.addJob("n1", shJob(9, work, `touch started; while [ ! -e go ]; do sleep 0.01; done`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	f.forget("n1")
	f.waitRegistrations(t, 2)
	if regs := f.registrations(); !slices.Equal(regs[1].Running, []uint64{9}) {
		t.Errorf("re-registration lists running jobs %v, want [9]", regs[1].Running)
	}
	os.WriteFile(filepath.Join(work, "go"), nil, 0o644)
	if r := f.waitReport(t, 9, 10*time.Second); r.State != api.StateCompleted {
		t.Errorf("report %+v", r)
	}
	waitEmpty(t, data)
}

// TestDaemonOutage checks that an unreachable controller is logged once and
// that the report of a job that ended meanwhile arrives afterwards.
func TestDaemonOutage(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, f, data, func(c *Config) { c.Client.RetryFor = 20 * time.Millisecond })
	f.addJob("n1", shJob(4, work, `touch started; while [ ! -e go ]; do sleep 0.01; done`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	f.setDown(true)
	os.WriteFile(filepath.Join(work, "go"), nil, 0o644)
	time.Sleep(500 * time.Millisecond)
	f.setDown(false)
	if r := f.waitReport(t, 4, 10*time.Second); r.State != api.StateCompleted {
		t.Errorf("report %+v", r)
	}
	waitEmpty(t, data)
	if n := d.log.count("controller call failed"); n != 1 {
		t.Errorf("the outage was logged %d times, want once", n)
	}
	if n := d.log.count("controller reachable again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once", n)
	}
}

func TestDaemonKillAll(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, f, data)
	for id := uint64(1); id <= 3; id++ {
		w := filepath.Join(work, fmt.Sprint(id))
		os.Mkdir(w, 0o755)
		f.addJob("n1", shJob(id, w, `echo $$ >pid; touch started; sleep 1000`))
	}
	var pids []int
	for id := 1; id <= 3; id++ {
		waitFile(t, filepath.Join(work, fmt.Sprint(id), "started"), 10*time.Second)
		pids = append(pids, readPids1(t, filepath.Join(work, fmt.Sprint(id), "pid")))
	}
	d.KillAll()
	for _, pid := range pids {
		if st, err := procref.ReadStat(pid); err == nil && st.State != 'Z' {
			t.Errorf("job process %d survived KillAll", pid)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		if r := f.waitReport(t, id, 5*time.Second); r.State != api.StateCancelled {
			t.Errorf("job %d report %+v, want CANCELLED", id, r)
		}
	}
	// The daemon starts nothing after KillAll.
	f.addJob("n1", shJob(20, work, "exit 0"))
	time.Sleep(200 * time.Millisecond)
	if len(f.reportsFor(20)) != 0 {
		t.Error("a job started after KillAll")
	}
}

func readPids1(t *testing.T, path string) int {
	t.Helper()
	var pid int
	b, _ := os.ReadFile(path)
	fmt.Sscan(string(b), &pid)
	if pid <= 0 {
		t.Fatalf("no pid in %s", path)
	}
	return pid
}

func TestDaemonShutdownKillsJobs(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d := startDaemon(t, f, data)
	f.addJob("n1", shJob(3, work, `touch started; sleep 1000`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	d.Shutdown(true)
	d.stop(t)
	reps := f.reportsFor(3)
	if len(reps) != 1 || reps[0].State != api.StateCancelled {
		t.Fatalf("reports %+v, want one CANCELLED", reps)
	}
	waitEmpty(t, data)
}

// TestDaemonRequeue checks that a new run of a job (a new StartIndex)
// replaces the old one: the old run is cancelled and the new one starts
// once the old one is gone.
func TestDaemonRequeue(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	old := f.addJob("n1", shJob(2, work, `[ -e started ] && exit 5; touch started; sleep 1000`))
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	f.requeue("n1", 2)
	deadline := time.Now().Add(10 * time.Second)
	for len(f.reportsFor(2)) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	reps := f.reportsFor(2)
	sort.Slice(reps, func(i, j int) bool { return reps[i].StartIndex < reps[j].StartIndex })
	if len(reps) != 2 || reps[0].StartIndex != old.StartIndex || reps[0].State != api.StateCancelled ||
		reps[1].State != api.StateFailed || reps[1].ExitCode != 5 {
		t.Fatalf("reports %+v, want the old run CANCELLED and the new one FAILED with 5", reps)
	}
	waitEmpty(t, data)
}

// requeue replaces job id's run on node with a new one.
func (f *fakeCtl) requeue(node string, id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bump()
	for i, j := range f.allocs[node] {
		if j.ID == id {
			f.allocs[node][i].StartIndex = f.index
		}
	}
}

// TestDaemonStaleDesiredDoesNotRestart checks that a desired state that
// still lists a run after its report was acknowledged does not start it
// again.
func TestDaemonStaleDesiredDoesNotRestart(t *testing.T) {
	f := newFakeCtl(t)
	f.lag.Store(true)
	data, work := t.TempDir(), t.TempDir()
	startDaemon(t, f, data)
	f.addJob("n1", shJob(30, work, "echo run >>runs"))
	f.waitReport(t, 30, 10*time.Second)
	waitEmpty(t, data)
	f.addJob("n1", shJob(31, work, "true")) // moves the index with job 30 still listed
	f.waitReport(t, 31, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	checkFile(t, filepath.Join(work, "runs"), "run\n")
	if n := len(f.reportsFor(30)); n != 1 {
		t.Errorf("job reported %d times", n)
	}
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := New(Config{DataDir: t.TempDir()}); err == nil {
		t.Error("New accepted a config without a client")
	}
	c, _ := api.NewClient("127.0.0.1:1")
	if _, err := New(Config{Client: c}); err == nil {
		t.Error("New accepted a config without a data dir")
	}
	d, err := New(Config{Client: c, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if d.cfg.Name == "" || d.cfg.CPUs < 1 || d.cfg.KillGrace != 5*time.Second || d.cfg.WaitTimeout != 30*time.Second ||
		d.cfg.HeartbeatInterval != time.Second || d.runner.Name() != "process" {
		t.Errorf("defaults not applied: %+v", d.cfg)
	}
}

// TestDaemonReportsInventoryChanges: when re-discovery finds a different
// inventory (hugepages freed, say), the daemon registers again with it;
// an unchanged one causes no registration.
func TestDaemonReportsInventoryChanges(t *testing.T) {
	f := newFakeCtl(t)
	inv := func(free int64) *api.Inventory {
		return &api.Inventory{Topology: &api.Topology{Sockets: 1, Distances: [][]int{{10}}, Nodes: []api.NUMANode{
			{ID: 0, MemMB: 1024, Hugepages: map[int64]api.Hugepages{2048: {Total: 64, Free: free}}}}}}
	}
	var calls atomic.Int32
	changed := make(chan struct{})
	startDaemon(t, f, t.TempDir(), func(c *Config) {
		c.Inventory = inv(64)
		c.RediscoverInterval = 20 * time.Millisecond
		c.Rediscover = func() *api.Inventory {
			calls.Add(1)
			select {
			case <-changed:
				return inv(32)
			default:
				return inv(64) // unchanged
			}
		}
	})
	f.waitRegistered(t)
	for calls.Load() < 5 {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(f.registrations()); n != 1 {
		t.Fatalf("%d registrations after %d unchanged re-discoveries, want 1", n, calls.Load())
	}
	close(changed)
	f.waitRegistrations(t, 2)
	regs := f.registrations()
	if got := regs[0].Inventory.Topology.Nodes[0].Hugepages[2048].Free; got != 64 {
		t.Errorf("first registration reports %d free hugepages, want 64", got)
	}
	if got := regs[1].Inventory.Topology.Nodes[0].Hugepages[2048].Free; got != 32 {
		t.Errorf("re-registration reports %d free hugepages, want 32", got)
	}
}

// waitShimGone waits up to 5 s until the shim of the run in dir has exited
// (gone, or a zombie nobody reaped yet): it writes the exit file just
// before, and a daemon started in between would find it alive.
func waitShimGone(t *testing.T, dir string) {
	t.Helper()
	var ls launchState
	if procref.ReadJSON(filepath.Join(dir, stateFile), &ls) != nil {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ls.PID))
		if err != nil {
			return
		}
		// The state follows the command's closing parenthesis.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return
		}
	}
}
