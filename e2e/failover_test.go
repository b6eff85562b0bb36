package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// jobScript writes job i's script: even jobs carry #SBATCH directives, odd
// ones are submitted with command-line options instead.
func jobScript(t *testing.T, dir string, i int) (path string, args []string) {
	t.Helper()
	path = filepath.Join(dir, fmt.Sprintf("job%03d.sh", i))
	body := "#!/bin/sh\n"
	if i%2 == 0 {
		body += fmt.Sprintf("#SBATCH --job-name=dir%03d\n#SBATCH -o %s/out-%%j-%%x.txt\n#SBATCH --time=2:00\n#SBATCH -c 1\n#SBATCH --mem=64M\n", i, dir)
	}
	body += fmt.Sprintf("sleep 0.3\necho \"token-%03d job=$SLURM_JOB_ID name=$SLURM_JOB_NAME cpus=$SLURM_CPUS_ON_NODE\"\necho \"$SLURM_JOB_ID\" >> %s/runs.log\n", i, dir)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if i%2 == 1 {
		variants := [][]string{
			{"-J", fmt.Sprintf("cli%03d", i), "-t", "5", "--mem=32M"},
			{"--job-name", fmt.Sprintf("cli%03d", i), "--time=0:02:00", "-n", "1", "--comment", "odd"},
			{fmt.Sprintf("--job-name=cli%03d", i), "-t", "0-0:03", "--mem-per-cpu=16M", "--requeue"},
			{"-J", fmt.Sprintf("cli%03d", i), "--cpus-per-task=1", "-p", "batch", "--export=ALL,EXTRA=1"},
		}
		args = append(variants[(i/2)%len(variants)], "-o", filepath.Join(dir, "out-%j-%x.txt"))
	}
	return path, args
}

func TestLeaderKilledWhileJobsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 5 processes and runs 100 jobs")
	}
	c := startControllers(t, 3)
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "4", "--mem", "2G")
	c.startNode(t, "n2", "--cpus", "4", "--mem", "2G")
	c.waitNodes(t, 2)
	work := t.TempDir()

	expect := map[uint64]string{} // job id → token
	submitRange := func(from, to int) {
		for i := from; i < to; i++ {
			path, args := jobScript(t, work, i)
			out, err := cli(t, c.addr, work, append(append([]string{"submit", "--parsable"}, args...), path)...)
			if err != nil {
				t.Fatalf("job %d: %v", i, err)
			}
			id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
			if err != nil {
				t.Fatalf("job %d: submit printed %q", i, out)
			}
			if _, dup := expect[id]; dup {
				t.Fatalf("job id %d given twice", id)
			}
			expect[id] = fmt.Sprintf("token-%03d", i)
		}
	}
	submitRange(0, 50)

	// Kill the leader while jobs run; the next submissions must still be
	// acknowledged, and the cluster must answer again within 5 s.
	lead := c.leader(t, 5*time.Second)
	killed := c.ctlds[lead]
	killed.kill(syscall.SIGKILL)
	killedAt := time.Now()
	var others []string
	for i, h := range c.http {
		if i != lead {
			others = append(others, h)
		}
	}
	cl := c.client(t, others...)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cl.Status(ctx)
		cancel()
		if err == nil && st.Leader != "" && st.Leader != killed.name {
			break
		}
		if time.Since(killedAt) > 5*time.Second {
			t.Fatalf("no new leader 5s after the leader was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	recovered := time.Since(killedAt)
	submitRange(50, 100)
	answered := time.Since(killedAt)
	t.Logf("leader %s killed: new leader after %s; 50 submissions acknowledged %s after the kill", killed.name, recovered, answered)

	// Restart the killed member: it rejoins and catches up.
	killed.start(t)

	waitAllDone(t, c, expect, 90*time.Second)
	checkOutputs(t, work, expect)

	// The restarted member has the same state as the others.
	deadline := time.Now().Add(20 * time.Second)
	for {
		hashes := map[string]bool{}
		var idx []uint64
		for _, h := range c.http {
			st, err := c.client(t, h).StatusWithHash(context.Background())
			if err == nil {
				hashes[st.StateHash] = true
				idx = append(idx, st.AppliedIndex)
			}
		}
		if len(idx) == 3 && len(hashes) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted member did not converge: %d distinct hashes at indexes %v\n%s", len(hashes), idx, killed.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitAllDone waits for every expected job to be COMPLETED.
func waitAllDone(t *testing.T, c *cluster, expect map[uint64]string, limit time.Duration) {
	t.Helper()
	cl := c.client(t)
	deadline := time.Now().Add(limit)
	for {
		jobs := allJobs(t, cl)
		done, bad := 0, []string{}
		for id := range expect {
			j, ok := jobs[id]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%d missing", id))
			case j.State == api.StateCompleted:
				done++
			case j.State.Terminal():
				bad = append(bad, fmt.Sprintf("%d %s (%s)", id, j.State, j.Message))
			}
		}
		// A job that ended in any state but COMPLETED fails the test at once.
		for _, b := range bad {
			if !strings.HasSuffix(b, "missing") {
				t.Fatalf("job %s", b)
			}
		}
		if done == len(expect) {
			if len(jobs) != len(expect) {
				t.Fatalf("%d jobs stored, %d acknowledged: duplicates", len(jobs), len(expect))
			}
			return
		}
		if time.Now().After(deadline) {
			for _, p := range append(c.ctlds, c.nodeds...) {
				t.Logf("%s log:\n%s", p.name, p.tail())
			}
			t.Fatalf("%d of %d jobs completed after %s; problems: %v", done, len(expect), limit, bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkOutputs checks each job's output file and that each job ran once.
func checkOutputs(t *testing.T, dir string, expect map[uint64]string) {
	t.Helper()
	for id, token := range expect {
		matches, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("out-%d-*.txt", id)))
		if len(matches) != 1 {
			t.Errorf("job %d: %d output files, want 1", id, len(matches))
			continue
		}
		data, err := os.ReadFile(matches[0])
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s job=%d name=", token, id)
		if !strings.HasPrefix(string(data), want) || strings.Count(string(data), "\n") != 1 {
			t.Errorf("job %d: output %q, want one line starting %q", id, data, want)
		}
		name := strings.TrimSuffix(strings.SplitN(filepath.Base(matches[0]), "-", 3)[2], ".txt")
		if !strings.Contains(string(data), "name="+name+" cpus=1") {
			t.Errorf("job %d: output %q does not show name %s and 1 CPU", id, data, name)
		}
	}
	runs, err := os.ReadFile(filepath.Join(dir, "runs.log"))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range strings.Fields(string(runs)) {
		count[l]++
	}
	var twice []string
	for id, n := range count {
		if n != 1 {
			twice = append(twice, id)
		}
	}
	sort.Strings(twice)
	if len(twice) > 0 || len(count) != len(expect) {
		t.Errorf("runs: %d distinct jobs ran (want %d); ran more than once: %v", len(count), len(expect), twice)
	}
}
