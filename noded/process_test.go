package noded

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"

	"corral/internal/procref"
)

// launch starts script with the process runner in fresh directories and
// makes sure nothing of it outlives the test.
func launch(t *testing.T, script string, args ...string) (Handle, LaunchSpec) {
	t.Helper()
	spec := testSpec(t, script, args...)
	h, err := NewProcessRunner().Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { h.Kill(0); h.Wait() })
	return h, spec
}

func testSpec(t *testing.T, script string, args ...string) LaunchSpec {
	t.Helper()
	dir, work := t.TempDir(), t.TempDir()
	return LaunchSpec{
		Job:     &api.Job{ID: 1},
		Dir:     dir,
		Env:     []string{"PATH=" + defaultPath},
		Stdout:  filepath.Join(work, "out"),
		Stderr:  filepath.Join(work, "err"),
		Script:  "#!/bin/sh\n" + script + "\n",
		Args:    args,
		WorkDir: work,
	}
}

// waitResult waits for h with a deadline, so a hung job fails the test
// instead of the whole run.
func waitResult(t *testing.T, h Handle, within time.Duration) Result {
	t.Helper()
	ch := make(chan Result, 1)
	go func() { ch <- h.Wait() }()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("job still running after %s", within)
		return Result{}
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProcessExitStatus(t *testing.T) {
	tests := map[string]struct {
		script string
		want   Result
	}{
		"success":         {"exit 0", Result{}},
		"exit code":       {"exit 3", Result{ExitCode: 3}},
		"high exit code":  {"exit 200", Result{ExitCode: 200}},
		"killed by USR1":  {"kill -s USR1 $$", Result{Signal: int(syscall.SIGUSR1)}},
		"last command":    {"false", Result{ExitCode: 1}},
		"args are passed": {`[ "$1 $2" = "a b c" ] && [ $# = 2 ] || exit 9`, Result{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, _ := launch(t, tc.script, "a", "b c")
			if got := waitResult(t, h, 10*time.Second); got != tc.want {
				t.Errorf("result %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestProcessOutputFiles(t *testing.T) {
	t.Run("separate", func(t *testing.T) {
		h, spec := launch(t, "echo out; echo err >&2")
		waitResult(t, h, 10*time.Second)
		checkFile(t, spec.Stdout, "out\n")
		checkFile(t, spec.Stderr, "err\n")
	})
	t.Run("shared", func(t *testing.T) {
		spec := testSpec(t, "echo one; echo two >&2; echo three")
		spec.Stderr = spec.Stdout
		os.WriteFile(spec.Stdout, []byte("old content that must be truncated\n"), 0o644)
		h, err := NewProcessRunner().Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		waitResult(t, h, 10*time.Second)
		checkFile(t, spec.Stdout, "one\ntwo\nthree\n")
	})
}

func checkFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s = %q, want %q", filepath.Base(path), b, want)
	}
}

func TestProcessStartFailures(t *testing.T) {
	tests := map[string]struct {
		edit func(*LaunchSpec)
		want string
	}{
		"missing workdir": {func(s *LaunchSpec) { s.WorkDir = "/nonexistent/corral-work" }, "/nonexistent/corral-work does not exist"},
		"missing output dir": {func(s *LaunchSpec) { s.Stdout = filepath.Join(s.WorkDir, "no/such/dir/out") },
			"no/such/dir/out: no such file or directory (its directory must exist"},
		"missing error dir": {func(s *LaunchSpec) { s.Stderr = "/nonexistent/err" }, "cannot open output file /nonexistent/err"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := testSpec(t, "exit 0")
			tc.edit(&spec)
			_, err := NewProcessRunner().Start(context.Background(), spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestProcessEnvironment checks that a job sees exactly the environment it
// was given, with its signals at their defaults (a background child of dash
// would ignore SIGINT and SIGQUIT).
func TestProcessEnvironment(t *testing.T) {
	h, spec := launch(t, `env | sort; grep SigIgn /proc/$$/status`)
	waitResult(t, h, 10*time.Second)
	b, _ := os.ReadFile(spec.Stdout)
	var env []string
	var sigIgn string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			sigIgn = strings.TrimSpace(v)
		} else if !strings.HasPrefix(line, "PWD=") && !strings.HasPrefix(line, "SHLVL=") && !strings.HasPrefix(line, "_=") {
			env = append(env, line)
		}
	}
	if strings.Join(env, " ") != "PATH="+defaultPath {
		t.Errorf("job environment %q, want only PATH (plus what sh sets)", env)
	}
	own, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(own), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok && strings.TrimSpace(v) != sigIgn {
			t.Errorf("job ignores signals %s, the daemon %s", sigIgn, strings.TrimSpace(v))
		}
	}
}

// TestProcessKillTree checks that Kill reaches every process of the job,
// grandchildren and a process that moved to a group of its own included.
func TestProcessKillTree(t *testing.T) {
	h, spec := launch(t, `sleep 1000 & echo $! >>pids
sh -c 'sleep 1000 & echo $! >>pids; wait' &
echo $! >>pids
perl -e 'setpgrp(0,0); exec "sleep", "1000"' 2>/dev/null &
echo $! >>pids
touch started
wait`)
	waitFile(t, filepath.Join(spec.WorkDir, "started"), 10*time.Second)
	time.Sleep(50 * time.Millisecond) // let the grandchild write its pid
	pids := readPids(t, filepath.Join(spec.WorkDir, "pids"))
	start := time.Now()
	h.Kill(5 * time.Second)
	res := waitResult(t, h, 10*time.Second)
	if res.Signal != int(syscall.SIGTERM) {
		t.Errorf("result %+v, want signal %d", res, syscall.SIGTERM)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the job took %s to die of SIGTERM", d)
	}
	for _, pid := range pids {
		if st, err := procref.ReadStat(pid); err == nil && st.State != 'Z' {
			t.Errorf("process %d survived the kill", pid)
		}
	}
}

func readPids(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) < 3 {
		t.Fatalf("only %d pids recorded: %q", len(pids), b)
	}
	return pids
}

func TestProcessKillEscalates(t *testing.T) {
	tests := map[string]struct {
		script string
		want   Result
	}{
		// sleep inherits the ignored SIGTERM, so only SIGKILL ends it.
		"ignores SIGTERM":     {`trap '' TERM; touch started; sleep 1000`, Result{Signal: int(syscall.SIGKILL)}},
		"exits on SIGTERM":    {`trap 'exit 7' TERM; touch started; sleep 1000 & wait`, Result{ExitCode: 7}},
		"default disposition": {`touch started; sleep 1000`, Result{Signal: int(syscall.SIGTERM)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, spec := launch(t, tc.script)
			waitFile(t, filepath.Join(spec.WorkDir, "started"), 10*time.Second)
			grace := 300 * time.Millisecond
			start := time.Now()
			h.Kill(grace)
			h.Kill(grace) // idempotent
			got := waitResult(t, h, 10*time.Second)
			if got != tc.want {
				t.Errorf("result %+v, want %+v", got, tc.want)
			}
			if tc.want.Signal == int(syscall.SIGKILL) && time.Since(start) < grace {
				t.Errorf("SIGKILL came before the grace of %s ended", grace)
			}
		})
	}
}

// TestProcessShimKilled checks that a job whose wrapper shell was killed
// ends, with what is known, and leaves no process behind.
func TestProcessShimKilled(t *testing.T) {
	h, spec := launch(t, `echo $$ >pid; touch started; sleep 1000`)
	waitFile(t, filepath.Join(spec.WorkDir, "started"), 10*time.Second)
	var ls launchState
	if err := procref.ReadJSON(filepath.Join(spec.Dir, stateFile), &ls); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(ls.PID, syscall.SIGKILL)
	res := waitResult(t, h, 10*time.Second)
	if res.Signal != int(syscall.SIGKILL) || !strings.Contains(res.Message, "wrapper shell was killed") {
		t.Errorf("result %+v", res)
	}
	pid := readPids1(t, filepath.Join(spec.WorkDir, "pid"))
	if st, err := procref.ReadStat(pid); err == nil && st.State != 'Z' {
		t.Errorf("the script (pid %d) outlived its wrapper", pid)
	}
}

func TestProcessRecoverRunning(t *testing.T) {
	r := NewProcessRunner()
	h, spec := launch(t, `touch started; while [ ! -e go ]; do sleep 0.01; done; exit 4`)
	waitFile(t, filepath.Join(spec.WorkDir, "started"), 10*time.Second)
	_ = h // dropped: a new daemon knows only the directory

	h2, res, err := r.Recover(spec.Dir)
	if err != nil || res != nil {
		t.Fatalf("Recover = %v, %v; want a handle", res, err)
	}
	os.WriteFile(filepath.Join(spec.WorkDir, "go"), nil, 0o644)
	if got := waitResult(t, h2, 10*time.Second); got != (Result{ExitCode: 4}) {
		t.Errorf("recovered result %+v, want exit 4", got)
	}
}

func TestProcessRecoverKill(t *testing.T) {
	h, spec := launch(t, `touch started; sleep 1000`)
	waitFile(t, filepath.Join(spec.WorkDir, "started"), 10*time.Second)
	_ = h
	h2, _, err := NewProcessRunner().Recover(spec.Dir)
	if err != nil {
		t.Fatal(err)
	}
	h2.Kill(5 * time.Second)
	if got := waitResult(t, h2, 10*time.Second); got.Signal != int(syscall.SIGTERM) {
		t.Errorf("result %+v, want signal 15", got)
	}
}

// TestProcessRecoverEnded checks that a job that ended while no daemon
// watched is found with its true status.
func TestProcessRecoverEnded(t *testing.T) {
	tests := map[string]struct {
		script string
		want   Result
	}{
		"exit code": {"exit 42", Result{ExitCode: 42}},
		"signal":    {"kill -s KILL $$", Result{Signal: int(syscall.SIGKILL)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, spec := launch(t, tc.script)
			waitResult(t, h, 10*time.Second)
			h2, res, err := NewProcessRunner().Recover(spec.Dir)
			if h2 != nil || !errors.Is(err, ErrGone) {
				t.Fatalf("Recover = %v, %v; want ErrGone", h2, err)
			}
			if res == nil || *res != tc.want {
				t.Fatalf("recovered result %+v, want %+v", res, tc.want)
			}
		})
	}
}

// TestProcessRecoverPidReuse checks that a recorded pid now used by another
// process (here the test itself) is not taken for the job.
func TestProcessRecoverPidReuse(t *testing.T) {
	self, err := procref.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]launchState{
		"other start time": {PID: os.Getpid(), Start: self.Start + 1, BootID: procref.BootID()},
		"other boot":       {PID: os.Getpid(), Start: self.Start, BootID: "another-boot"},
	}
	for name, ls := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := procref.WriteJSON(filepath.Join(dir, stateFile), ls); err != nil {
				t.Fatal(err)
			}
			h, res, err := NewProcessRunner().Recover(dir)
			if h != nil || res != nil || !errors.Is(err, ErrGone) {
				t.Fatalf("Recover = %v, %v, %v; want nothing and ErrGone", h, res, err)
			}
		})
	}
	t.Run("no state", func(t *testing.T) {
		if _, _, err := NewProcessRunner().Recover(t.TempDir()); !errors.Is(err, ErrGone) {
			t.Fatalf("Recover of an empty dir: %v, want ErrGone", err)
		}
	})
}

func TestExitFileNeedsNewline(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, exitFile), []byte("3"), 0o600)
	if _, ok := readExitFile(dir); ok {
		t.Error("a record without its newline was accepted")
	}
	os.WriteFile(filepath.Join(dir, exitFile), []byte("137\n"), 0o600)
	if r, ok := readExitFile(dir); !ok || r != (Result{Signal: 9}) {
		t.Errorf("readExitFile = %+v, %v; want signal 9", r, ok)
	}
}

func TestHostDiscovery(t *testing.T) {
	if HostCPUs() < 1 {
		t.Error("HostCPUs < 1")
	}
	if HostMemMB() < 1 {
		t.Error("HostMemMB < 1")
	}
	if kb, ok := parseMemTotal("MemTotal:       16318912 kB"); !ok || kb != 16318912 {
		t.Errorf("parseMemTotal = %d, %v", kb, ok)
	}
}

// BenchmarkSessionScan measures the /proc walk behind Kill and the sweep
// after every job; it grows with the number of processes on the host.
func BenchmarkSessionScan(b *testing.B) {
	for b.Loop() {
		signalSession(sessionFilter{sid: 1 << 30, except: 1}, 0)
	}
}

// TestShimWaitsForTheGate runs the shim as the process runner does: the
// script runs only once the daemon opened the gate (fd 6); a gate closed
// unopened, as a daemon that died before recording the job leaves it, ends
// the shim with neither the script run nor an exit record.
func TestShimWaitsForTheGate(t *testing.T) {
	for _, open := range []bool{false, true} {
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		scriptPath := filepath.Join(dir, "script")
		if err := os.WriteFile(scriptPath, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		script, err := os.Open(scriptPath)
		if err != nil {
			t.Fatal(err)
		}
		exitPath := filepath.Join(dir, "exit")
		exit, err := os.OpenFile(exitPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		gate, opened, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", shimScript, "corral-job", "/dev/fd/3")
		cmd.ExtraFiles = []*os.File{script, exit, nil, gate}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		gate.Close()
		script.Close()
		exit.Close()
		if open {
			opened.Write([]byte("go\n"))
		}
		opened.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("gate open=%v: the shim: %v", open, err)
		}
		_, ranErr := os.Stat(marker)
		record, _ := os.ReadFile(exitPath)
		if ran := ranErr == nil; ran != open || (open && string(record) != "0\n") || (!open && len(record) != 0) {
			t.Errorf("gate open=%v: the script ran %v, exit record %q", open, ran, record)
		}
	}
}
