package noded

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// daemonProcessEnv carries a daemonProcessConfig to TestDaemonProcess.
const daemonProcessEnv = "CORRAL_NODED_TEST_DAEMON"

type daemonProcessConfig struct {
	URL       string        `json:"url"`
	DataDir   string        `json:"data_dir"`
	KillGrace time.Duration `json:"kill_grace"`
	SpareIdle time.Duration `json:"spare_idle"`
}

// TestDaemonProcess is not a test of its own: it is the daemon that the
// SIGKILL tests run in a child process, so that they can kill it as a crash
// or the OOM killer would, with none of its cleanup.
func TestDaemonProcess(t *testing.T) {
	env := os.Getenv(daemonProcessEnv)
	if env == "" {
		return
	}
	var c daemonProcessConfig
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		t.Fatal(err)
	}
	cl, err := api.NewClient(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{
		Name: "n1", CPUs: 2, MemMB: 1024, DataDir: c.DataDir, Client: cl,
		HeartbeatInterval: 20 * time.Millisecond, WaitTimeout: 500 * time.Millisecond, KillGrace: c.KillGrace,
		RunJobsAs: RunAsDaemon,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	d.dirs.idle = c.SpareIdle
	d.Run(context.Background()) // until SIGKILL
}

// startDaemonProcess runs a daemon named n1 against f in a child process.
func startDaemonProcess(t *testing.T, f *fakeCtl, c daemonProcessConfig) *exec.Cmd {
	t.Helper()
	c.URL = f.srv.URL
	b, _ := json.Marshal(c)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDaemonProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), daemonProcessEnv+"="+string(b))
	lg := &testLog{t: t}
	cmd.Stdout, cmd.Stderr = lg, lg
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sigkill(cmd)
		lg.mu.Lock()
		lg.done = true
		lg.mu.Unlock()
	})
	return cmd
}

func sigkill(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// blockingScript runs until the file go appears in its working directory,
// then exits with code; it also ends when its working directory is removed,
// so that a failed test leaves nothing running.
func blockingScript(code int) string {
	return fmt.Sprintf("touch started; while [ ! -e go ] && [ -e started ]; do sleep 0.01; done; exit %d", code)
}

// waitContent waits until path holds something.
func waitContent(t *testing.T, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still empty after %s", path, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runDir(data string, j api.Job) string {
	return filepath.Join(data, "jobs", jobKey{j.ID, j.StartIndex}.String())
}

func mkdirs(t *testing.T, parent string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		p := filepath.Join(parent, n)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func checkReportedOnce(t *testing.T, f *fakeCtl, ids ...uint64) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // room for a duplicate to arrive
	for _, id := range ids {
		if n := len(f.reportsFor(id)); n != 1 {
			t.Errorf("job %d reported %d times, want once", id, n)
		}
	}
}

// TestDaemonSIGKILL kills a daemon with SIGKILL while one job runs in a
// directory reused from an acknowledged run (whose exit file said 7) and
// another is about to end. The next daemon must re-adopt the first, report
// the second (which ended while no daemon ran) with its true exit code,
// report every run once and leave nothing behind.
func TestDaemonSIGKILL(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemonProcess(t, f, daemonProcessConfig{DataDir: data, KillGrace: 300 * time.Millisecond, SpareIdle: time.Minute})
	j1 := f.addJob("n1", shJob(1, work, "exit 7"))
	f.waitReport(t, 1, 10*time.Second)
	spare := filepath.Join(data, "jobs", "."+jobKey{1, j1.StartIndex}.String())
	waitFile(t, spare, 5*time.Second)
	ino := inode(t, spare)
	// The daemon empties a spare in the background before it reuses it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(filepath.Join(spare, exitFile)); err == nil && fi.Size() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spare was not emptied")
		}
	}
	time.Sleep(200 * time.Millisecond) // it becomes a spare just after

	w := mkdirs(t, work, "2", "3")
	j2 := f.addJob("n1", shJob(2, w[0], blockingScript(3)))
	waitFile(t, filepath.Join(w[0], "started"), 10*time.Second)
	if inode(t, runDir(data, j2)) != ino {
		t.Error("job 2 did not reuse job 1's directory")
	}
	j3 := f.addJob("n1", shJob(3, w[1], blockingScript(42)))
	waitFile(t, filepath.Join(w[1], "started"), 10*time.Second)
	sigkill(d1)

	os.WriteFile(filepath.Join(w[1], "go"), nil, 0o644)
	waitContent(t, filepath.Join(runDir(data, j3), exitFile), 5*time.Second)
	waitShimGone(t, runDir(data, j3))
	startDaemon(t, f, data)
	f.waitRegistrations(t, 2)
	reg := f.registrations()[1]
	if !slices.Equal(reg.Running, []uint64{2}) {
		t.Errorf("the restarted daemon registered running jobs %v, want [2]", reg.Running)
	}
	if len(reg.Reports) != 1 || reg.Reports[0].JobID != 3 || reg.Reports[0].ExitCode != 42 {
		t.Errorf("the restarted daemon's registration carried reports %+v, want job 3's (exit code 42)", reg.Reports)
	}
	if r := f.waitReport(t, 3, 10*time.Second); r.State != api.StateFailed || r.ExitCode != 42 {
		t.Errorf("job 3 report %+v, want FAILED with exit code 42", r)
	}
	time.Sleep(100 * time.Millisecond) // a few reconciles while job 2 runs
	if n := len(f.reportsFor(2)); n != 0 {
		t.Fatalf("job 2 reported while it runs: %+v", f.reportsFor(2))
	}
	os.WriteFile(filepath.Join(w[0], "go"), nil, 0o644)
	if r := f.waitReport(t, 2, 10*time.Second); r.State != api.StateFailed || r.ExitCode != 3 {
		t.Errorf("job 2 report %+v, want FAILED with exit code 3", r)
	}
	waitEmpty(t, data)
	checkReportedOnce(t, f, 1, 2, 3)
}

// TestDaemonSIGKILLUnacknowledged kills a daemon whose reports the
// controller has not taken yet. Only the launch failure's report was written
// to disk; the next daemon must derive the others from the record and the
// runner's files, a kill decision included.
func TestDaemonSIGKILLUnacknowledged(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	f.refuse.Store(true)
	d1 := startDaemonProcess(t, f, daemonProcessConfig{DataDir: data, KillGrace: 300 * time.Millisecond})
	jobs := map[uint64]api.Job{
		21: f.addJob("n1", shJob(21, work, "exit 5")),
		22: f.addJob("n1", shJob(22, "/nonexistent/corral-work", "exit 0")),
		23: f.addJob("n1", shJob(23, work, "kill -s KILL $$")),
		24: f.addJob("n1", shJob(24, mkdirs(t, work, "24")[0], "touch started; sleep 1000")),
	}
	waitFile(t, filepath.Join(work, "24", "started"), 10*time.Second)
	f.removeJob("n1", 24)
	for _, id := range []uint64{21, 23, 24} {
		waitContent(t, filepath.Join(runDir(data, jobs[id]), exitFile), 10*time.Second)
	}
	waitContent(t, filepath.Join(runDir(data, jobs[22]), reportFile), 10*time.Second)
	time.Sleep(50 * time.Millisecond) // let the daemon take the ends in
	sigkill(d1)
	for _, id := range []uint64{21, 23, 24} {
		if _, err := os.Stat(filepath.Join(runDir(data, jobs[id]), reportFile)); err == nil {
			t.Errorf("job %d: a report the runner's files prove was written", id)
		}
	}
	for id := range jobs {
		if reps := f.reportsFor(id); len(reps) != 0 {
			t.Fatalf("reports taken while refused: %+v", reps)
		}
	}

	f.refuse.Store(false)
	startDaemon(t, f, data)
	want := map[uint64]api.JobReport{
		21: {State: api.StateFailed, ExitCode: 5},
		22: {State: api.StateFailed, ExitCode: 1},
		23: {State: api.StateFailed, Signal: 9},
		24: {State: api.StateCancelled, Signal: 15},
	}
	for id, w := range want {
		r := f.waitReport(t, id, 10*time.Second)
		if id == 22 && !strings.Contains(r.Message, "/nonexistent/corral-work does not exist") {
			t.Errorf("job 22 message %q", r.Message)
		}
		r.JobID, r.StartIndex, r.Message = 0, 0, ""
		if r != w {
			t.Errorf("job %d report %+v, want %+v", id, r, w)
		}
	}
	waitEmpty(t, data)
	checkReportedOnce(t, f, 21, 22, 23, 24)
}

// TestDaemonSIGKILLWhileKilling kills a daemon after it decided that a job
// ran out of time but before the job died (it ignores SIGTERM). The next
// daemon must finish the kill and report TIMEOUT.
func TestDaemonSIGKILLWhileKilling(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	d1 := startDaemonProcess(t, f, daemonProcessConfig{DataDir: data, KillGrace: time.Minute})
	j := shJob(8, work, `trap '' TERM; touch started; while [ -e started ]; do sleep 0.01; done`)
	j.Spec.TimeLimit = 1
	j = f.addJob("n1", j)
	waitFile(t, filepath.Join(work, "started"), 10*time.Second)
	record := filepath.Join(runDir(data, j), recordFile)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(waitContent(t, record, time.Second), "TIMEOUT"); {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not record the time-out")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sigkill(d1)

	startDaemon(t, f, data)
	r := f.waitReport(t, 8, 10*time.Second)
	if r.State != api.StateTimeout || r.Signal != int(syscall.SIGKILL) || !strings.Contains(r.Message, "time limit of 1s") {
		t.Errorf("report %+v, want TIMEOUT by signal 9", r)
	}
	waitEmpty(t, data)
	checkReportedOnce(t, f, 8)
}

// TestDaemonRecoversLeftovers starts a daemon on directories in the states
// a SIGKILL can leave them in, and checks what it reports of each.
func TestDaemonRecoversLeftovers(t *testing.T) {
	f := newFakeCtl(t)
	data := t.TempDir()
	jobsDir := filepath.Join(data, "jobs")
	record := func(id uint64) string {
		b, _ := json.Marshal(jobRecord{Job: api.Job{ID: id, StartIndex: 1}, Started: time.Now()})
		return string(b) + "\n"
	}
	dirs := map[string]map[string]string{
		// Dot-directories: a spare, and one being prepared for a run.
		".6-1": {recordFile: record(6), stateFile: `{"pid":1}` + "\n", exitFile: "0\n"},
		".n5":  {recordFile: "", exitFile: "0\n"},
		// Named directories without a whole record of their own run.
		"7-1": {recordFile: record(8), exitFile: "0\n"},
		"9-1": {recordFile: `{"job":{"id":9`, exitFile: "0\n"},
		// A reused directory whose shim never started.
		"10-1": {recordFile: record(10), scriptFile: "", stateFile: "", exitFile: "", reportFile: ""},
		// A shim that ended before its daemon recorded it.
		"11-1": {recordFile: record(11), stateFile: "", exitFile: "3\n", reportFile: ""},
	}
	for dir, files := range dirs {
		p := filepath.Join(jobsDir, dir)
		os.MkdirAll(p, 0o700)
		for name, content := range files {
			os.WriteFile(filepath.Join(p, name), []byte(content), 0o600)
		}
	}
	startDaemon(t, f, data)
	if r := f.waitReport(t, 10, 10*time.Second); r.State != api.StateNodeFail || !strings.Contains(r.Message, "never started") {
		t.Errorf("job 10 report %+v, want NODE_FAIL (never started)", r)
	}
	if r := f.waitReport(t, 11, 10*time.Second); r.State != api.StateFailed || r.ExitCode != 3 {
		t.Errorf("job 11 report %+v, want FAILED with exit code 3", r)
	}
	waitEmpty(t, data)
	checkReportedOnce(t, f, 10, 11)
	for _, id := range []uint64{5, 6, 7, 8, 9} {
		if reps := f.reportsFor(id); len(reps) != 0 {
			t.Errorf("job %d reported from a leftover: %+v", id, reps)
		}
	}
}

// plainRunner hides the process runner's ReusableState, as a runner that
// does not keep its rules would.
type plainRunner struct{ Runner }

// TestDaemonPlainRunner checks that with a runner that does not implement
// ReusableState the daemon writes every report to disk and reuses no
// directory.
func TestDaemonPlainRunner(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	f.refuse.Store(true)
	startDaemon(t, f, data, func(c *Config) { c.Runner = plainRunner{NewProcessRunner()} })
	j := f.addJob("n1", shJob(40, work, "exit 5"))
	waitContent(t, filepath.Join(runDir(data, j), reportFile), 10*time.Second)
	f.refuse.Store(false)
	if r := f.waitReport(t, 40, 10*time.Second); r.State != api.StateFailed || r.ExitCode != 5 {
		t.Errorf("report %+v, want FAILED with exit code 5", r)
	}
	// No spare: the directory goes well before a spare's second is up.
	for deadline := time.Now().Add(500 * time.Millisecond); len(dirNames(t, filepath.Join(data, "jobs"))) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("jobs directory still holds %v", dirNames(t, filepath.Join(data, "jobs")))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
