package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// ioResult is what one CLI run printed and how it exited.
type ioResult struct {
	stdout, stderr string
	code           int
}

// cliIn runs the CLI as user (by $USER) with stdin, and returns its output
// and exit code whatever they are.
func cliIn(t testing.TB, addr, dir, user, stdin string, args ...string) ioResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CORRAL_ADDR="+addr, "USER="+user)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("corral %s: %v", strings.Join(args, " "), err)
	}
	return ioResult{out.String(), errb.String(), code}
}

// waitOutput waits until path holds want.
func waitOutput(t *testing.T, path, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lacks %q after %s:\n%s", path, want, limit, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reachIntoJob is the acceptance of exec, cp, attach and signals on a
// running job of user (nobody) in dir, whatever runs it: output, stdin and
// exit code as the job's uid; srun --jobid; a caller who does not own the
// job refused; files copied both ways as the user, with EACCES for one the
// user cannot read; attach from a directory where the output file is not,
// so the lines come from the node; scancel --signal=USR1 reaching the
// script's trap. show job (and scontrol show job) say whether the running
// job could migrate (migration is the line it must show), and a held
// --no-migrate job says it could not, and why.
func reachIntoJob(t *testing.T, c *cluster, dir, user, uid, node, migration string) {
	writeFile(t, filepath.Join(dir, "job.sh"), `#!/bin/bash
#SBATCH --mem=256M
trap 'echo got-usr1' USR1
echo started
for i in $(seq 120); do sleep 1; done
`)
	writeFile(t, filepath.Join(dir, "secret"), "root only\n")
	os.Chmod(filepath.Join(dir, "secret"), 0o600)
	id := submitAs(t, c, dir, user, "-o", "job-%j.out", "job.sh")
	ids := strconv.FormatUint(id, 10)
	cl := c.client(t)
	waitJob(t, cl, id, api.StateRunning, 90*time.Second)
	outFile := filepath.Join(dir, "job-"+ids+".out")
	waitOutput(t, outFile, "started", 90*time.Second)
	for _, show := range [][]string{{"show", "job", ids}, {"scontrol", "show", "job", ids}} {
		if r := cliIn(t, c.addr, dir, user, "", show...); r.code != 0 || !strings.Contains(r.stdout, migration) {
			t.Errorf("%s: %+v, want a line %q", strings.Join(show, " "), r, migration)
		}
	}
	pinned := submitAs(t, c, dir, user, "--hold", "--no-migrate", "--wrap", "true")
	if r := cliIn(t, c.addr, dir, user, "", "show", "job", strconv.FormatUint(pinned, 10)); !strings.Contains(r.stdout,
		"Migratable=No MigrationBlocker=it asked for --no-migrate: its files go over the fast share (virtiofs), whose vhost-user-fs device QEMU 7.2 cannot migrate") {
		t.Errorf("show job of a held --no-migrate job: %+v", r)
	}
	cliIn(t, c.addr, dir, user, "", "cancel", strconv.FormatUint(pinned, 10))

	elsewhere := t.TempDir()
	attach := exec.Command(corralBin, "attach", ids)
	attach.Dir = elsewhere
	attach.Env = append(os.Environ(), "CORRAL_ADDR="+c.addr, "USER="+user)
	var attached bytes.Buffer
	attach.Stdout, attach.Stderr = &attached, &attached
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	r := cliIn(t, c.addr, dir, user, "from stdin\n", "exec", ids, "--", "sh", "-c", "id -u; cat; echo to-stderr >&2; exit 3")
	if r.code != 3 || r.stdout != uid+"\nfrom stdin\n" || r.stderr != "to-stderr\n" {
		t.Fatalf("exec: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	t.Logf("corral exec (sh -c with stdin) took %v", time.Since(start))
	var took []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		if r := cliIn(t, c.addr, dir, user, "", "exec", ids, "true"); r.code != 0 {
			t.Fatalf("exec true: %+v", r)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("corral exec JOB true, CLI to CLI (5 runs): min %v, median %v, max %v", took[0], took[2], took[4])
	if r := cliIn(t, c.addr, dir, user, "", "srun", "--jobid="+ids, "--overlap", "hostname"); r.code != 0 || strings.TrimSpace(r.stdout) != node {
		t.Errorf("srun --jobid hostname: %+v, want %s", r, node)
	}
	if r := cliIn(t, c.addr, dir, "mallory", "", "exec", ids, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "belongs to "+user) {
		t.Errorf("exec by a user who does not own the job: %+v", r)
	}
	if r := cliIn(t, c.addr, dir, user, "", "exec", "--root", ids, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "only root") {
		t.Errorf("exec --root by the owner: %+v", r)
	}
	if r := cliIn(t, c.addr, dir, user, "", "exec", ids, "--", "no-such-command"); r.code != 127 {
		t.Errorf("exec of a missing command: %+v, want exit code 127", r)
	}

	local := filepath.Join(elsewhere, "in.txt")
	writeFile(t, local, "copied in\n")
	os.Chmod(local, 0o640)
	if r := cliIn(t, c.addr, elsewhere, user, "", "cp", local, ids+":in.txt"); r.code != 0 {
		t.Fatalf("cp into the job: %+v", r)
	}
	if got := readFile(t, filepath.Join(dir, "in.txt")); got != "copied in\n" {
		t.Errorf("in.txt in the job's directory = %q", got)
	}
	assertOwner(t, filepath.Join(dir, "in.txt"), uid)
	if r := cliIn(t, c.addr, elsewhere, user, "", "cp", ids+":in.txt", filepath.Join(elsewhere, "back.txt")); r.code != 0 {
		t.Fatalf("cp out of the job: %+v", r)
	}
	if got := readFile(t, filepath.Join(elsewhere, "back.txt")); got != "copied in\n" {
		t.Errorf("back.txt = %q", got)
	}
	if r := cliIn(t, c.addr, elsewhere, user, "", "cp", ids+":secret", elsewhere); r.code == 0 || !strings.Contains(r.stderr, "EACCES") {
		t.Errorf("cp of a file the user cannot read: %+v, want EACCES", r)
	}

	if r := cliIn(t, c.addr, dir, user, "", "cancel", "--signal=USR1", ids); r.code != 0 {
		t.Fatalf("scancel --signal=USR1: %+v", r)
	}
	waitOutput(t, outFile, "got-usr1", 30*time.Second)
	if j, err := cl.Job(context.Background(), id, true); err != nil || j.State != api.StateRunning {
		t.Errorf("after scancel --signal the job is %v (%v), want RUNNING", j.State, err)
	}
	if r := cliIn(t, c.addr, dir, user, "", "cancel", ids); r.code != 0 {
		t.Fatalf("scancel: %+v", r)
	}
	done := make(chan error, 1)
	go func() { done <- attach.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		attach.Process.Kill()
		t.Fatalf("attach did not return when the job ended; it printed:\n%s", attached.String())
	}
	if s := attached.String(); !strings.Contains(s, "started") || !strings.Contains(s, "got-usr1") {
		t.Errorf("attach printed %q, want the job's lines", s)
	}
}

// TestReachIntoAVMJob runs exec, cp, attach and scancel --signal on a job
// in a VM (real QEMU, TCG here), through the controller and the node, and
// srun's steps in one (stepsInJob).
func TestReachIntoAVMJob(t *testing.T) {
	root := imageRoot(t)
	dir, u := userDir(t)
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--run-jobs-as", "user")
	c.waitNodes(t, 1)
	reachIntoJob(t, c, dir, u.Username, u.Uid, "vm1", "\n   Migratable=Yes\n")
	t.Run("steps", func(t *testing.T) { stepsInJob(t, c, dir, u.Username, "vm1") })
}

// TestReachIntoAProcessJob is the same for the process runner: the
// commands, files, signals and steps are the host's, as the job's user.
func TestReachIntoAProcessJob(t *testing.T) {
	dir, u := userDir(t)
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "p1", "--cpus", "2", "--mem", "2G", "--run-jobs-as", "user")
	c.waitNodes(t, 1)
	host, _ := os.Hostname()
	reachIntoJob(t, c, dir, u.Username, u.Uid, host, "Migratable=No MigrationBlocker=it runs as processes on node p1 (runner process), not in a VM")
	t.Run("steps", func(t *testing.T) { stepsInJob(t, c, dir, u.Username, "p1") })
}
