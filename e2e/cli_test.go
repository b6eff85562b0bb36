package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/display"
)

// cliResult is what one run of the CLI left behind.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runBinary runs bin (the corral binary or one of its Slurm aliases) with
// CORRAL_ADDR and USER=tester set, in dir.
func runBinary(t *testing.T, bin, addr, dir string, args ...string) cliResult {
	t.Helper()
	if bin == corralBin {
		// Users' commands run in the client binary; what it does not
		// hold it hands to corral beside it.
		bin = clientBin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CORRAL_ADDR="+addr, "USER=tester")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %s %v: %v", bin, args, err)
	}
	return r
}

// mustCLI runs bin and fails the test unless it exits 0; it returns stdout.
func mustCLI(t *testing.T, bin, addr, dir string, args ...string) string {
	t.Helper()
	r := runBinary(t, bin, addr, dir, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d: %s", filepath.Base(bin), strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// submitParsable submits with --parsable and returns the job id.
func submitParsable(t *testing.T, addr, dir string, args ...string) uint64 {
	t.Helper()
	out := mustCLI(t, corralBin, addr, dir, append([]string{"submit", "--parsable"}, args...)...)
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("submit --parsable printed %q", out)
	}
	return id
}

// cliRows splits output into lines of whitespace-separated fields.
func cliRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows = append(rows, f)
		}
	}
	return rows
}

func idText(id uint64) string { return strconv.FormatUint(id, 10) }

// eventually polls check every 50 ms until it returns "" (success) or limit
// passes, then fails with check's last complaint.
func eventually(t *testing.T, limit time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		why := check()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sleeperScript writes a job script that records its pid in pidFile and
// then becomes `sleep 30`, so a test can tell whether the job's process is
// gone and kill what a SIGKILLed node daemon left behind.
func sleeperScript(t *testing.T, dir, name string) (script, pidFile string) {
	t.Helper()
	script = filepath.Join(dir, name+".sh")
	pidFile = filepath.Join(dir, name+".pid")
	writeFile(t, script, fmt.Sprintf("#!/bin/sh\necho $$ > %s.tmp && mv %s.tmp %s\nexec sleep 30\n", pidFile, pidFile, pidFile))
	t.Cleanup(func() { killSleeper(pidFile) })
	return script, pidFile
}

// sleeperPID waits for the pid a sleeper script recorded.
func sleeperPID(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	eventually(t, 10*time.Second, func() string {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return fmt.Sprintf("no pid in %s: %v", pidFile, err)
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		if pid <= 0 {
			return fmt.Sprintf("%s holds %q", pidFile, data)
		}
		return ""
	})
	return pid
}

// processLive reports whether pid runs (a zombie does not count).
func processLive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

// killSleeper kills the sleep a sleeper script became, if it still runs and
// is still that sleep (the pid may have been reused).
func killSleeper(pidFile string) {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || !processLive(pid) {
		return
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if strings.HasPrefix(string(cmdline), "sleep\x0030") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// showJobJSON returns a job as `corral show job ID --json` prints it.
func showJobJSON(t *testing.T, addr, dir string, id uint64) api.Job {
	t.Helper()
	var doc struct{ Jobs []api.Job }
	decodeJSON(t, mustCLI(t, corralBin, addr, dir, "show", "job", idText(id), "--json"), &doc)
	if len(doc.Jobs) != 1 || doc.Jobs[0].ID != id {
		t.Fatalf("show job %d --json: %+v", id, doc.Jobs)
	}
	return doc.Jobs[0]
}

// TestCLIEndToEnd drives one controller and two node daemons through the
// real binary and its Slurm aliases.
func TestCLIEndToEnd(t *testing.T) {
	t.Parallel()
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	c.startNode(t, "n2", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 2)
	work := t.TempDir()

	t.Run("aliases", func(t *testing.T) { testAliases(t, c, work) })
	t.Run("env", func(t *testing.T) { testJobEnv(t, c, work) })
	t.Run("jobs", func(t *testing.T) {
		// The subtests of both run side by side.
		testJobStarts(t, c, work)
		testJobEndings(t, c, work)
	})
	t.Run("queue", func(t *testing.T) { testQueue(t, c, work) })
	t.Run("nodes", func(t *testing.T) { testNodes(t, c, work) })
	t.Run("status", func(t *testing.T) { testStatus(t, c, work) })
}

// testJobStarts adds parallel subtests for how jobs start: --wrap, --wait,
// a hold, --begin and a time limit.
func testJobStarts(t *testing.T, c *cluster, work string) {
	cl := c.client(t)
	t.Run("wrap", func(t *testing.T) {
		t.Parallel()
		id := submitParsable(t, c.addr, work, "-o", "wrap-%j.out", "--wrap", "echo wrapped $SLURM_JOB_NAME")
		waitJob(t, cl, id, api.StateCompleted, 20*time.Second)
		if got := readFile(t, filepath.Join(work, "wrap-"+idText(id)+".out")); got != "wrapped wrap\n" {
			t.Fatalf("--wrap job wrote %q, want %q", got, "wrapped wrap\n")
		}
	})
	t.Run("wait", func(t *testing.T) {
		t.Parallel()
		r := runBinary(t, corralBin, c.addr, work, "submit", "--wait", "-o", "/dev/null", "--wrap", "exit 3")
		if r.code != 3 || !strings.HasPrefix(r.stdout, "Submitted batch job ") {
			t.Fatalf("submit --wait of a job that exits 3: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(r.stdout, "Submitted batch job ")), 10, 64)
		if j := showJobJSON(t, c.addr, work, id); j.State != api.StateFailed {
			t.Fatalf("after submit --wait returned, job %d is %s, want FAILED", id, j.State)
		}
		if r := runBinary(t, corralBin, c.addr, work, "submit", "--wait", "-o", "/dev/null", "--wrap", "true"); r.code != 0 {
			t.Fatalf("submit --wait of a job that succeeds: exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("hold then release", func(t *testing.T) {
		t.Parallel()
		id := submitParsable(t, c.addr, work, "-H", "-o", "/dev/null", "--wrap", "true")
		time.Sleep(500 * time.Millisecond)
		if out := mustCLI(t, corralBin, c.addr, work, "queue", "-h", "-j", idText(id), "-o", "%T %r"); out != "PENDING JobHeldUser\n" {
			t.Fatalf("held job: %q, want PENDING JobHeldUser", out)
		}
		mustCLI(t, corralBin, c.addr, work, "release", idText(id))
		waitJob(t, cl, id, api.StateCompleted, 20*time.Second)
	})
	t.Run("begin", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits 2 s")
		}
		t.Parallel()
		submitted := time.Now()
		id := submitParsable(t, c.addr, work, "--begin", "now+2", "-o", "/dev/null", "--wrap", "true")
		// The scheduler's next pass gives the reason; look while the
		// job cannot have started yet.
		var out string
		for time.Since(submitted) < 1500*time.Millisecond {
			if out = mustCLI(t, corralBin, c.addr, work, "queue", "-h", "-j", idText(id), "-o", "%T %r"); out == "PENDING BeginTime\n" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if out != "PENDING BeginTime\n" && time.Since(submitted) < 1900*time.Millisecond {
			t.Errorf("job with --begin now+2: %q, want PENDING BeginTime", out)
		}
		j := waitJob(t, cl, id, api.StateCompleted, 20*time.Second)
		if waited := j.StartTime.Sub(j.SubmitTime); waited < 1900*time.Millisecond || j.StartTime.Before(j.Spec.Begin) {
			t.Fatalf("--begin now+2: submitted %s, begin %s, started %s (%s later)", j.SubmitTime, j.Spec.Begin, j.StartTime, waited)
		}
	})
	t.Run("time limit", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits for a 2 s time limit")
		}
		t.Parallel()
		submitted := time.Now()
		id := submitParsable(t, c.addr, work, "-t", "0:02", "-o", "/dev/null", "--wrap", "sleep 30")
		waitJob(t, cl, id, api.StateTimeout, 10*time.Second)
		if took := time.Since(submitted); took > 10*time.Second {
			t.Fatalf("a 2 s job ended TIMEOUT after %s", took)
		}
	})
}

// testJobEndings adds parallel subtests for how jobs end: cancelled,
// failed, and dependencies on jobs that succeed or fail.
func testJobEndings(t *testing.T, c *cluster, work string) {
	cl := c.client(t)
	t.Run("cancel running", func(t *testing.T) {
		t.Parallel()
		script, pidFile := sleeperScript(t, work, "cancelme")
		id := submitParsable(t, c.addr, work, "-o", "/dev/null", script)
		waitJob(t, cl, id, api.StateRunning, 20*time.Second)
		pid := sleeperPID(t, pidFile)
		mustCLI(t, corralBin, c.addr, work, "cancel", idText(id))
		waitJob(t, cl, id, api.StateCancelled, 10*time.Second)
		eventually(t, 5*time.Second, func() string {
			if processLive(pid) {
				return fmt.Sprintf("job %d is CANCELLED but its process %d still runs", id, pid)
			}
			return ""
		})
	})
	t.Run("failing script with an error file", func(t *testing.T) {
		t.Parallel()
		script := filepath.Join(work, "fail.sh")
		writeFile(t, script, "#!/bin/sh\necho to-out\necho to-err >&2\nexit 3\n")
		id := submitParsable(t, c.addr, work, "-o", "fail-%j.out", "-e", "fail-%j.err", script)
		waitJob(t, cl, id, api.StateFailed, 20*time.Second)
		out := mustCLI(t, corralBin, c.addr, work, "show", "job", idText(id))
		errPath := filepath.Join(work, "fail-"+idText(id)+".err")
		for _, want := range []string{"JobState=FAILED", "ExitCode=3:0"} {
			if !strings.Contains(out, want) {
				t.Errorf("show job does not hold %q:\n%s", want, out)
			}
		}
		if !regexp.MustCompile(`StdErr=\S*fail-(%j|` + idText(id) + `)\.err\n`).MatchString(out) {
			t.Errorf("show job does not name the -e file:\n%s", out)
		}
		if got := readFile(t, filepath.Join(work, "fail-"+idText(id)+".out")); got != "to-out\n" {
			t.Errorf("output file %q, want only stdout", got)
		}
		if got := readFile(t, errPath); got != "to-err\n" {
			t.Errorf("error file %q, want only stderr", got)
		}
	})
	t.Run("afterok", func(t *testing.T) {
		t.Parallel()
		a := submitParsable(t, c.addr, work, "-o", "/dev/null", "--wrap", "sleep 2")
		b := submitParsable(t, c.addr, work, "--dependency=afterok:"+idText(a), "-o", "/dev/null", "--wrap", "true")
		eventually(t, 1500*time.Millisecond, func() string {
			if out := mustCLI(t, corralBin, c.addr, work, "queue", "-h", "-j", idText(b), "-o", "%i %r"); out != idText(b)+" Dependency\n" {
				return fmt.Sprintf("dependent job: %q, want %d Dependency", out, b)
			}
			return ""
		})
		ja := waitJob(t, cl, a, api.StateCompleted, 20*time.Second)
		jb := waitJob(t, cl, b, api.StateCompleted, 20*time.Second)
		if jb.StartTime.Before(ja.EndTime) {
			t.Fatalf("job %d started %s, before job %d ended %s", b, jb.StartTime, a, ja.EndTime)
		}
	})
	t.Run("afterok of a failed job", func(t *testing.T) {
		t.Parallel()
		f := submitParsable(t, c.addr, work, "-o", "/dev/null", "--wrap", "exit 1")
		g := submitParsable(t, c.addr, work, "--dependency=afterok:"+idText(f), "-o", "/dev/null", "--wrap", "true")
		waitJob(t, cl, f, api.StateFailed, 20*time.Second)
		want := idText(g) + " PD DependencyNeverSatisfied\n"
		eventually(t, 5*time.Second, func() string {
			if out := mustCLI(t, corralBin, c.addr, work, "queue", "-h", "-j", idText(g), "-o", "%i %t %r"); out != want {
				return fmt.Sprintf("queue -o '%%i %%t %%r' printed %q, want %q", out, want)
			}
			return ""
		})
		mustCLI(t, corralBin, c.addr, work, "cancel", idText(g))
	})
}

func testStatus(t *testing.T, c *cluster, work string) {
	out := mustCLI(t, corralBin, c.addr, work, "status")
	for _, want := range []string{"Member: c1 (Leader)", "Leader: c1", "commit=", "applied=", "Nodes:  2 (idle 2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not hold %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^c1 +127\.0\.0\.1:\d+ +127\.0\.0\.1:\d+ +leader +yes$`).MatchString(out) {
		t.Errorf("status has no member row for c1 as leader:\n%s", out)
	}
	var st api.ClusterStatus
	decodeJSON(t, mustCLI(t, corralBin, c.addr, work, "status", "--json"), &st)
	if st.Self != "c1" || st.Leader != "c1" || st.State != "Leader" || len(st.Members) != 1 || st.Members[0].HTTPAddr != strings.TrimPrefix(c.http[0], "http://") {
		t.Errorf("status --json: %+v", st)
	}
	if st.AppliedIndex == 0 || st.CommitIndex < st.AppliedIndex || st.LastIndex < st.CommitIndex || st.Term == 0 {
		t.Errorf("status --json indexes: term %d commit %d applied %d last %d", st.Term, st.CommitIndex, st.AppliedIndex, st.LastIndex)
	}
	if st.Nodes["IDLE"]+st.Nodes["idle"] != 2 || st.Jobs["COMPLETED"] == 0 {
		t.Errorf("status --json counts: nodes %v jobs %v", st.Nodes, st.Jobs)
	}
}

func testAliases(t *testing.T, c *cluster, work string) {
	bin := filepath.Join(work, "bin")
	mustCLI(t, corralBin, c.addr, work, "install-aliases", bin)
	real, err := filepath.EvalSymlinks(clientBin)
	if err != nil {
		t.Fatal(err)
	}
	alias := map[string]string{}
	for _, name := range []string{"sbatch", "squeue", "sinfo", "scancel", "scontrol"} {
		alias[name] = filepath.Join(bin, name)
		if got, err := filepath.EvalSymlinks(alias[name]); err != nil || got != real {
			t.Fatalf("%s resolves to %q (%v), want %s", alias[name], got, err, real)
		}
	}
	script := filepath.Join(work, "alias.sh")
	writeFile(t, script, "#!/bin/sh\n#SBATCH --job-name=aliasjob\n#SBATCH --output=alias-%j.out\n#SBATCH --time=1:00\necho alias-ran $SLURM_JOB_ID\n")
	out := mustCLI(t, alias["sbatch"], c.addr, work, "--parsable", "-H", script)
	held, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("sbatch --parsable printed %q", out)
	}
	h := idText(held)

	if out := mustCLI(t, alias["squeue"], c.addr, work, "-h", "-o", "%i %j %T"); out != h+" aliasjob PENDING\n" {
		t.Errorf("squeue -h -o '%%i %%j %%T': %q, want %q", out, h+" aliasjob PENDING\n")
	}
	if rows := cliRows(mustCLI(t, alias["squeue"], c.addr, work, "-u", "tester")); len(rows) != 2 || rows[0][0] != "JOBID" || rows[1][0] != h {
		t.Errorf("squeue -u tester: %v, want the header and job %s", rows, h)
	}
	if rows := cliRows(mustCLI(t, alias["squeue"], c.addr, work, "-u", "nobody")); len(rows) != 1 {
		t.Errorf("squeue -u nobody: %v, want only the header", rows)
	}
	show := mustCLI(t, alias["scontrol"], c.addr, work, "show", "job", h)
	for _, want := range []string{"JobId=" + h + " JobName=aliasjob", "JobState=PENDING Reason=JobHeldUser", "TimeLimit=00:01:00"} {
		if !strings.Contains(show, want) {
			t.Errorf("scontrol show job does not hold %q:\n%s", want, show)
		}
	}
	// StdOut is shown as submitted (display.ShowJob does not expand %j).
	if !regexp.MustCompile(`StdOut=\S*alias-(%j|` + h + `)\.out\n`).MatchString(show) {
		t.Errorf("scontrol show job does not name the #SBATCH --output file:\n%s", show)
	}

	// scontrol hold and release a job that waits for its begin time.
	later := submitParsable(t, c.addr, work, "--begin", "now+300", "-o", "/dev/null", "--wrap", "true")
	reason := func(id uint64) string {
		return strings.TrimSpace(mustCLI(t, alias["squeue"], c.addr, work, "-h", "-j", idText(id), "-o", "%r"))
	}
	mustCLI(t, alias["scontrol"], c.addr, work, "hold", idText(later))
	if got := reason(later); got != "JobHeldUser" {
		t.Errorf("after scontrol hold: reason %q, want JobHeldUser", got)
	}
	mustCLI(t, alias["scontrol"], c.addr, work, "release", idText(later))
	eventually(t, 5*time.Second, func() string {
		if got := reason(later); got != "BeginTime" {
			return fmt.Sprintf("after scontrol release: reason %q, want BeginTime", got)
		}
		return ""
	})
	mustCLI(t, alias["scancel"], c.addr, work, idText(later))
	waitJob(t, c.client(t), later, api.StateCancelled, 10*time.Second)

	mustCLI(t, alias["scontrol"], c.addr, work, "release", h)
	waitJob(t, c.client(t), held, api.StateCompleted, 20*time.Second)
	if got := readFile(t, filepath.Join(work, "alias-"+h+".out")); got != "alias-ran "+h+"\n" {
		t.Errorf("alias job wrote %q", got)
	}

	var doc display.JSONQueue
	decodeJSON(t, mustCLI(t, alias["squeue"], c.addr, work, "-t", "all", "--json"), &doc)
	states := map[uint64]string{}
	for _, j := range doc.Jobs {
		states[j.JobID] = j.State
	}
	if states[held] != "COMPLETED" || states[later] != "CANCELLED" || len(states) != 2 {
		t.Errorf("squeue -t all --json states %v, want %d COMPLETED and %d CANCELLED", states, held, later)
	}

	want := [][]string{{"PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"}, {"batch*", "up", "infinite", "2", "idle", "n[1-2]"}}
	eventually(t, 5*time.Second, func() string {
		if rows := cliRows(mustCLI(t, alias["sinfo"], c.addr, work)); fmt.Sprint(rows) != fmt.Sprint(want) {
			return fmt.Sprintf("sinfo: %v, want %v", rows, want)
		}
		return ""
	})
	rows := cliRows(mustCLI(t, alias["sinfo"], c.addr, work, "-N", "-l"))
	// sinfo -l prints the date first, as Slurm's does.
	if len(rows) != 4 || len(rows[0]) != 5 || rows[1][0] != "NODELIST" {
		t.Fatalf("sinfo -N -l: %v, want the date, the header and two nodes", rows)
	}
	rows = rows[1:]
	for i, name := range []string{"n1", "n2"} {
		if r := rows[i+1]; r[0] != name || r[2] != "batch*" || r[3] != "idle" || r[4] != "2" || r[6] != "1024" {
			t.Errorf("sinfo -N -l row %v, want %s batch* idle with 2 CPUs and 1024 MB", r, name)
		}
	}

	// The aliases report errors under their own names.
	if r := runBinary(t, alias["squeue"], c.addr, work, "--bogus"); r.code != 2 || !strings.HasPrefix(r.stderr, "squeue: error:") {
		t.Errorf("squeue --bogus: exit %d, stderr %q; want 2 and squeue: error:", r.code, r.stderr)
	}
	if r := runBinary(t, alias["scontrol"], c.addr, work); r.code != 2 || r.stderr == "" {
		t.Errorf("scontrol alone: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
	if r := runBinary(t, alias["scancel"], c.addr, work, "99999"); r.code != 1 || !strings.Contains(r.stderr, "scancel: error: Kill job error on job id 99999") {
		t.Errorf("scancel of no job: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
}

func testJobEnv(t *testing.T, c *cluster, work string) {
	script := filepath.Join(work, "env.sh")
	writeFile(t, script, "#!/bin/sh\nenv | grep -E '^(CORRAL|SLURM)_' | sort\n")
	id := submitParsable(t, c.addr, work, "-J", "envjob", "-n", "1", "-c", "2", "--mem=256M", "-o", "out-%j-%x.txt", script)
	j := waitJob(t, c.client(t), id, api.StateCompleted, 20*time.Second)
	got := map[string]string{}
	for _, line := range strings.Split(readFile(t, filepath.Join(work, "out-"+idText(id)+"-envjob.txt")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	submitDir, err := filepath.EvalSymlinks(work)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CORRAL_JOB_ID": idText(id), "CORRAL_JOB_NAME": "envjob", "CORRAL_SUBMIT_DIR": submitDir,
		"CORRAL_CPUS_ON_NODE": "2", "CORRAL_JOB_NODELIST": j.Node,
		"SLURM_JOB_ID": idText(id), "SLURM_JOB_NAME": "envjob", "SLURM_SUBMIT_DIR": submitDir,
		"SLURM_CPUS_ON_NODE": "2", "SLURM_JOB_NODELIST": j.Node, "SLURM_NTASKS": "1",
		"SLURM_CPUS_PER_TASK": "2", "SLURM_MEM_PER_NODE": "256",
	}
	if j.Node != "n1" && j.Node != "n2" {
		t.Errorf("job ran on %q, want n1 or n2", j.Node)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q in the job, want %q", k, got[k], v)
		}
	}
}

func testQueue(t *testing.T, c *cluster, work string) {
	cl := c.client(t)
	held := submitParsable(t, c.addr, work, "-H", "-J", "qheld", "-p", "batch", "--mem=200M", "-o", "/dev/null", "--wrap", "true")
	script, _ := sleeperScript(t, work, "qrun")
	running := submitParsable(t, c.addr, work, "-J", "qrun", "-t", "5:00", "--mem=100M", "-o", "/dev/null", script)
	waitJob(t, cl, running, api.StateRunning, 20*time.Second)
	h, r := idText(held), idText(running)
	defer mustCLI(t, corralBin, c.addr, work, "cancel", h, r)

	rows := cliRows(mustCLI(t, corralBin, c.addr, work, "queue"))
	if len(rows) != 3 || strings.Join(rows[0], " ") != "JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)" {
		t.Fatalf("queue: %v, want the default header and 2 jobs", rows)
	}
	byID := map[string][]string{}
	for _, row := range rows[1:] {
		byID[row[0]] = row
	}
	if got := strings.Join(byID[h], " "); got != h+" batch qheld tester PD 0:00 1 (JobHeldUser)" {
		t.Errorf("held job's row %q", got)
	}
	if row := byID[r]; len(row) != 8 || row[1] != "batch" || row[2] != "qrun" || row[4] != "R" || (row[7] != "n1" && row[7] != "n2") {
		t.Errorf("running job's row %v", row)
	}

	format := "%i %P %j %u %t %T %M %l %D %R %C %m %Q %V %S"
	rows = cliRows(mustCLI(t, corralBin, c.addr, work, "queue", "-o", format))
	wantHeader := "JOBID PARTITION NAME USER ST STATE TIME TIME_LIMIT NODES NODELIST(REASON) CPUS MIN_MEMORY PRIORITY SUBMIT_TIME START_TIME"
	if len(rows) != 3 || strings.Join(rows[0], " ") != wantHeader {
		t.Fatalf("queue -o %q: %v, want header %q and 2 jobs", format, rows, wantHeader)
	}
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$`)
	for _, row := range rows[1:] {
		if len(row) != 15 {
			t.Errorf("row %v has %d fields, want 15", row, len(row))
			continue
		}
		if _, err := strconv.Atoi(row[12]); err != nil || !stamp.MatchString(row[13]) {
			t.Errorf("row %v: priority or submit time malformed", row)
		}
		switch row[0] {
		case h:
			if got := strings.Join(row[:12], " ") + " " + row[14]; got != h+" batch qheld tester PD PENDING 0:00 UNLIMITED 1 (JobHeldUser) 1 200M N/A" {
				t.Errorf("held job: %q", got)
			}
		case r:
			if got := strings.Join(append(row[1:6:6], row[7], row[8], row[10], row[11]), " "); got != "batch qrun tester R RUNNING 5:00 1 1 100M" || !stamp.MatchString(row[14]) {
				t.Errorf("running job: %v", row)
			}
		default:
			t.Errorf("unexpected row %v", row)
		}
	}

	// squeue's default order, "P,t,-p", puts PD before R.
	filters := map[string]struct {
		args []string
		want []string // job ids, in order, after a header
	}{
		"-h":       {[]string{"-h", "-t", "PD"}, []string{h}},
		"-j":       {[]string{"-j", h}, []string{"JOBID", h}},
		"-p batch": {[]string{"-p", "batch", "-o", "%i", "-t", "PD,R"}, []string{"JOBID", h, r}},
		"-t PD":    {[]string{"-t", "PD"}, []string{"JOBID", h}},
		"-t R":     {[]string{"-t", "R"}, []string{"JOBID", r}},
		"-n":       {[]string{"-n", "qrun", "-h"}, []string{r}},
	}
	for name, tc := range filters {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, row := range cliRows(mustCLI(t, corralBin, c.addr, work, append([]string{"queue"}, tc.args...)...)) {
				got = append(got, row[0])
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("queue %v: first column %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

// nodeRows returns `nodes -N -l -h` as name -> fields.
func nodeRows(t *testing.T, c *cluster, work string) map[string][]string {
	out := map[string][]string{}
	for _, row := range cliRows(mustCLI(t, corralBin, c.addr, work, "nodes", "-N", "-l", "-h")) {
		out[row[0]] = row
	}
	return out
}

// waitNodeState waits until `nodes -N -l` shows node in state (and, when
// reason is set, with that reason in sinfo's REASON column, the 11th; corral's
// RUNNER, ACCEL and IMAGES follow it).
func waitNodeState(t *testing.T, c *cluster, work, node, state, reason string) {
	t.Helper()
	eventually(t, 10*time.Second, func() string {
		row := nodeRows(t, c, work)[node]
		if len(row) < 11 || row[3] != state || (reason != "" && row[10] != reason) {
			return fmt.Sprintf("nodes -N -l: %s is %v, want %s %s", node, row, state, reason)
		}
		return ""
	})
}

func testNodes(t *testing.T, c *cluster, work string) {
	cl := c.client(t)
	rows := cliRows(mustCLI(t, corralBin, c.addr, work, "nodes"))
	if len(rows) < 1 || strings.Join(rows[0], " ") != "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST" {
		t.Fatalf("nodes: %v, want sinfo's header", rows)
	}

	mustCLI(t, corralBin, c.addr, work, "node", "drain", "n1", "--reason", "maint")
	waitNodeState(t, c, work, "n1", "drained", "maint")

	// With n1 drained, a job that needs a whole node goes to n2, which
	// then drains with the job still on it.
	script, _ := sleeperScript(t, work, "busy")
	id := submitParsable(t, c.addr, work, "-c", "2", "-o", "/dev/null", script)
	if j := waitJob(t, cl, id, api.StateRunning, 20*time.Second); j.Node != "n2" {
		t.Errorf("job %d runs on %s while n1 is drained", id, j.Node)
	}
	mustCLI(t, corralBin, c.addr, work, "node", "drain", "n2", "--reason", "busy")
	waitNodeState(t, c, work, "n2", "draining", "busy")
	show := mustCLI(t, corralBin, c.addr, work, "show", "node", "n2")
	for _, want := range []string{"NodeName=n2", "CPUAlloc=2 CPUTot=2", "Reason=busy", "Jobs=" + idText(id)} {
		if !strings.Contains(show, want) {
			t.Errorf("show node n2 does not hold %q:\n%s", want, show)
		}
	}
	mustCLI(t, corralBin, c.addr, work, "cancel", idText(id))
	waitJob(t, cl, id, api.StateCancelled, 10*time.Second)
	waitNodeState(t, c, work, "n2", "drained", "busy")

	var doc struct{ Nodes []api.Node }
	decodeJSON(t, mustCLI(t, corralBin, c.addr, work, "show", "node", "n1", "--json"), &doc)
	if len(doc.Nodes) != 1 || doc.Nodes[0].Name != "n1" || !doc.Nodes[0].Drain || doc.Nodes[0].Reason != "maint" || doc.Nodes[0].CPUs != 2 || doc.Nodes[0].MemMB != 1024 {
		t.Errorf("show node n1 --json: %+v", doc.Nodes)
	}

	mustCLI(t, corralBin, c.addr, work, "node", "resume", "n1")
	mustCLI(t, corralBin, c.addr, work, "node", "resume", "n2")
	waitNodeState(t, c, work, "n1", "idle", "")
	waitNodeState(t, c, work, "n2", "idle", "")
}

// TestCLINodeFailure kills a node daemon under running jobs: the node goes
// down, a job without --requeue ends NODE_FAIL and one with it is pending
// again.
func TestCLINodeFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a node timeout")
	}
	t.Parallel()
	c := startControllers(t, 1, "--node-timeout", "2s")
	c.leader(t, 15*time.Second)
	n1 := c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 1)
	work := t.TempDir()
	cl := c.client(t)

	plainScript, plainPID := sleeperScript(t, work, "plain")
	requeueScript, requeuePID := sleeperScript(t, work, "requeue")
	plain := submitParsable(t, c.addr, work, "-o", "/dev/null", plainScript)
	requeue := submitParsable(t, c.addr, work, "--requeue", "-o", "/dev/null", requeueScript)
	waitJob(t, cl, plain, api.StateRunning, 20*time.Second)
	waitJob(t, cl, requeue, api.StateRunning, 20*time.Second)
	sleeperPID(t, plainPID)
	sleeperPID(t, requeuePID)

	// Signal the daemon directly: proc.kill would take the one exit value
	// its done channel holds, and the harness's cleanup, which kills it
	// again, would then wait for it forever.
	if err := n1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(t, 6*time.Second, func() string {
		rows := cliRows(mustCLI(t, corralBin, c.addr, work, "nodes", "-h"))
		if len(rows) != 1 || rows[0][4] != "down" || rows[0][5] != "n1" {
			return fmt.Sprintf("nodes: %v, want n1 down", rows)
		}
		return ""
	})
	t.Logf("n1 down %s after its daemon was killed", time.Since(killed).Round(time.Millisecond))

	// squeue's default order compares compact states as text: NF before PD.
	want := idText(plain) + " NODE_FAIL\n" + idText(requeue) + " PENDING\n"
	eventually(t, 5*time.Second, func() string {
		if out := mustCLI(t, corralBin, c.addr, work, "queue", "-h", "-t", "all", "-o", "%i %T"); out != want {
			return fmt.Sprintf("queue: %q, want %q", out, want)
		}
		return ""
	})
	if j := showJobJSON(t, c.addr, work, requeue); j.Restarts != 1 {
		t.Errorf("requeued job: restarts %d, want 1", j.Restarts)
	}
	if out := mustCLI(t, corralBin, c.addr, work, "show", "job", idText(plain)); !strings.Contains(out, "JobState=NODE_FAIL") {
		t.Errorf("show job of the failed job:\n%s", out)
	}
}
