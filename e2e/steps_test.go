package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/pmi"
)

// TestStepsInABatchJob runs srun inside a batch script on a process-runner
// node: a step of three tasks with --label, then one whose tasks exit with
// their rank (srun exits with the worst), then one scancel cancels
// (JOB.STEP) while squeue -s lists it. The steps reach the controllers
// through the node daemon's forwarder, as every srun inside a job does.
func TestStepsInABatchJob(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "4")
	dir := t.TempDir()
	srun := filepath.Join(dir, "srun")
	if err := os.Symlink(corralBin, srun); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "third-started")
	script := "#!/bin/sh\n" +
		srun + " -n 3 --label sh -c 'echo task $SLURM_PROCID of $SLURM_NTASKS step $SLURM_STEP_ID local $SLURM_LOCALID on $SLURMD_NODENAME'\n" +
		srun + " -n 2 sh -c 'exit $SLURM_PROCID'\necho second=$?\n" +
		srun + " sh -c 'touch " + marker + "; exec sleep 300'\necho third=$?\nsleep 8\n"
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	id := submitParsable(t, c.addr, dir, "-n", "3", "-o", "out.txt", "job.sh")
	eventually(t, 60*time.Second, func() string {
		if _, err := os.Stat(marker); err != nil {
			return "the third step has not started"
		}
		return ""
	})
	ref := strings.TrimSpace(strings.Fields(mustCLI(t, corralBin, c.addr, dir, "queue", "-s", "-h"))[0])
	if want := strconv.FormatUint(id, 10) + ".2"; ref != want {
		t.Fatalf("squeue -s shows step %q, want %s", ref, want)
	}
	// sattach JOB.STEP streams the job's output while the step runs and
	// returns when it ends.
	attached := make(chan string, 1)
	go func() {
		out, err := cli(t, c.addr, dir, "attach", ref)
		if err != nil {
			out = err.Error()
		}
		attached <- out
	}()
	time.Sleep(2 * time.Second)
	mustCLI(t, corralBin, c.addr, dir, "cancel", ref)
	select {
	case out := <-attached:
		if !strings.Contains(out, "second=1") {
			t.Errorf("attach %s printed %q, want the job's output so far", ref, out)
		}
		// The script sleeps on after the step: attach returned for the
		// step, not the job.
		if j, err := c.client(t).Job(t.Context(), id, true); err != nil || j.State != api.StateRunning {
			t.Errorf("attach %s returned when the job had ended, not its step", ref)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("attach %s still runs 30 s after its step was cancelled", ref)
	}
	j := waitJob(t, c.client(t), id, api.StateCompleted, 60*time.Second)
	out, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, want := range []string{
		"0: task 0 of 3 step 0 local 0 on n1", "1: task 1 of 3 step 0 local 1 on n1", "2: task 2 of 3 step 0 local 2 on n1",
		"second=1",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("the job's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(string(out), "third=") || strings.Contains(string(out), "third=0") {
		t.Errorf("the cancelled step's srun should exit non-zero:\n%s", out)
	}
	if j.State != api.StateCompleted {
		t.Errorf("job %d ended %s: %s", id, j.State, j.Message)
	}
	steps, err := c.client(t).Steps(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 || steps[0].State != api.StateCompleted || steps[1].State != api.StateFailed || steps[1].ExitCode != 1 ||
		steps[2].State != api.StateCancelled || steps[0].NTasks != 3 {
		t.Errorf("steps: %+v", steps)
	}
	// sacct lists the steps under the job's line and its batch step's (a
	// step scancel cancelled records no signal: 0:0).
	want := fmt.Sprintf("%d|COMPLETED|0:0\n%d.batch|COMPLETED|0:0\n%d.0|COMPLETED|0:0\n%d.1|FAILED|1:0\n%d.2|CANCELLED|0:0\n", id, id, id, id, id)
	eventually(t, 20*time.Second, func() string {
		if out := mustCLI(t, corralBin, c.addr, dir, "acct", "-P", "-n", "-j", strconv.FormatUint(id, 10), "-o", "JobID,State,ExitCode"); out != want {
			return fmt.Sprintf("sacct printed\n%s\nwant\n%s", out, want)
		}
		return ""
	})
}

// stepsInJob runs two steps in a job of user's (in dir, on node, whatever
// runs it): srun, a copy of the CLI in the job's submit directory (which
// every runner shares with the job), launches each step's two tasks
// through its node's step forwarder; the labelled output lands in the
// job's output file, and srun exits with the worst task's status.
func stepsInJob(t *testing.T, c *cluster, dir, user, node string) {
	bin, err := os.ReadFile(corralBin)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "srun"), string(bin))
	os.Chmod(filepath.Join(dir, "srun"), 0o755)
	writeFile(t, filepath.Join(dir, "steps.sh"), "#!/bin/sh\n"+
		"./srun -n 2 --label sh -c 'echo step $SLURM_STEP_ID task $SLURM_PROCID on $SLURMD_NODENAME'\n"+
		"./srun -n 2 sh -c 'exit $((SLURM_PROCID + 3))'\necho worst=$?\n")
	out, err := cliAs(t, c.addr, dir, user, "submit", "--parsable", "-n", "2", "--mem=256M", "-o", "steps.out", "steps.sh")
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("submit printed %q", out)
	}
	waitJob(t, c.client(t), id, api.StateCompleted, 180*time.Second)
	got := readFile(t, filepath.Join(dir, "steps.out"))
	for _, want := range []string{"0: step 0 task 0 on " + node + "\n", "1: step 0 task 1 on " + node + "\n", "worst=4\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the job's output lacks %q:\n%s", want, got)
		}
	}
}

// TestMPIHelloInABatchJob builds an MPI hello world with the host's MPICH
// and runs it as a step of four ranks (srun's default --mpi=pmi2): every
// rank reports its rank and the size, so the ranks found each other
// through srun's PMI server.
func TestMPIHelloInABatchJob(t *testing.T) {
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skip("mpicc is not installed (scripts/install-deps.sh installs MPICH)")
	}
	c := oneNodeCluster(t, "n1", "--cpus", "4")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "hello.c"), pmi.HelloSource)
	if out, err := exec.Command(mpicc, "-o", filepath.Join(dir, "hello"), filepath.Join(dir, "hello.c")).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v: %s", err, out)
	}
	if err := os.Symlink(corralBin, filepath.Join(dir, "srun")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "mpi.sh"), "#!/bin/sh\n./srun ./hello\n")
	id := submitParsable(t, c.addr, dir, "-n", "4", "-o", "mpi.out", "mpi.sh")
	waitJob(t, c.client(t), id, api.StateCompleted, 120*time.Second)
	out := readFile(t, filepath.Join(dir, "mpi.out"))
	for rank := range 4 {
		if want := "rank " + strconv.Itoa(rank) + " of 4 on "; !strings.Contains(out, want) {
			t.Errorf("the job's output lacks %q:\n%s", want, out)
		}
	}
}
