package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

func TestRestartAllControllersKeepsState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts 3 controller processes")
	}
	c := startControllers(t, 3, "--node-timeout", "60s")
	c.leader(t, 15*time.Second)
	work := t.TempDir()
	script := work + "/q.sh"
	writeFile(t, script, "#!/bin/sh\necho queued-ran \"$SLURM_JOB_ID\"\n")

	// No node yet: the jobs stay queued across the restart.
	var ids []uint64
	for i := 0; i < 5; i++ {
		out, err := cli(t, c.addr, work, "submit", "--parsable", "-o", work+"/q-%j.out", script)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		ids = append(ids, id)
	}
	if _, err := cli(t, c.addr, work, "hold", strconv.FormatUint(ids[4], 10)); err != nil {
		t.Fatal(err)
	}
	before := waitConverged(t, c)
	for _, p := range c.ctlds {
		p.kill(syscall.SIGTERM)
	}
	for _, p := range c.ctlds {
		p.start(t)
	}
	c.leader(t, 15*time.Second)
	deadline := time.Now().Add(15 * time.Second)
	var after map[string]uint64
	for {
		after = stateHashes(t, c)
		if len(after) == 1 && equalKeys(before, after) {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range c.ctlds {
				t.Logf("%s:\n%s", p.name, p.tail())
			}
			t.Fatalf("state after restart %v differs from before %v", after, before)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The queued jobs still run once a node joins; the held one waits.
	c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	cl := c.client(t)
	for _, id := range ids[:4] {
		waitJob(t, cl, id, api.StateCompleted, 30*time.Second)
		if got := readFile(t, work+"/q-"+strconv.FormatUint(id, 10)+".out"); got != "queued-ran "+strconv.FormatUint(id, 10)+"\n" {
			t.Errorf("job %d output %q", id, got)
		}
	}
	j, err := cl.Job(context.Background(), ids[4], false)
	if err != nil || j.State != api.StatePending || j.Reason != api.ReasonJobHeldUser {
		t.Fatalf("held job: %+v %v, want PENDING (JobHeldUser)", j, err)
	}
}

// waitConverged waits until every member holds the same state and it has
// not changed for a second (members announce their addresses after start).
func waitConverged(t *testing.T, c *cluster) map[string]uint64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last map[string]uint64
	stableSince := time.Now()
	for time.Now().Before(deadline) {
		cur := stateHashes(t, c)
		if len(cur) != 1 || !equalKeys(cur, last) {
			last, stableSince = cur, time.Now()
		} else if time.Since(stableSince) > time.Second {
			return cur
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("members did not converge: %v", last)
	return nil
}

// stateHashes returns each member's state hash with its applied index.
func stateHashes(t *testing.T, c *cluster) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, h := range c.http {
		st, err := c.client(t, h).StatusWithHash(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[st.StateHash] = st.AppliedIndex
	}
	return out
}

func equalKeys(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func waitJob(t *testing.T, cl *api.Client, id uint64, want api.JobState, limit time.Duration) *api.Job {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j, err := cl.Job(context.Background(), id, false)
		if err == nil && j.State == want {
			return j
		}
		if err == nil && j.State.Terminal() {
			t.Fatalf("job %d ended %s (%s), want %s", id, j.State, j.Message, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: %+v after %s, want %s (err %v)", id, j, limit, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartReportsRunsThatEndedWhileDaemonDown SIGKILLs a node daemon
// under two running jobs, lets both end while no daemon runs (one exits 7,
// one, submitted with --requeue, completes), and starts the daemon again well
// within the node timeout. The registration must carry both outcomes: the
// first is FAILED with exit code 7, not NODE_FAIL, and the second is
// COMPLETED after one run, not requeued and run again.
func TestRestartReportsRunsThatEndedWhileDaemonDown(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "2", "--mem", "1G")
	n1 := c.nodeds[0]
	work := t.TempDir()
	cl := c.client(t)
	// Each job records its start, waits for its go file, records its
	// end and exits with the code it was given.
	script := work + "/gated.sh"
	writeFile(t, script, "#!/bin/sh\necho run >> \"$1.runs\"\nwhile [ ! -e \"$1.go\" ]; do sleep 0.02; done\necho end >> \"$1.runs\"\nexit \"$2\"\n")
	failing := submitParsable(t, c.addr, work, "-o", work+"/failing.out", script, work+"/failing", "7")
	requeued := submitParsable(t, c.addr, work, "--requeue", "-o", work+"/requeued.out", script, work+"/requeued", "0")
	for _, id := range []uint64{failing, requeued} {
		waitJob(t, cl, id, api.StateRunning, 20*time.Second)
	}
	for _, name := range []string{"failing", "requeued"} {
		waitFileContent(t, work+"/"+name+".runs", "run\n", 10*time.Second)
	}

	if err := n1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n1.done
	for _, name := range []string{"failing", "requeued"} {
		writeFile(t, work+"/"+name+".go", "")
		waitFileContent(t, work+"/"+name+".runs", "run\nend\n", 10*time.Second)
	}
	n1.start(t)

	j := waitJob(t, cl, failing, api.StateFailed, 20*time.Second)
	if j.ExitCode != 7 || j.Signal != 0 {
		t.Errorf("job that exited 7 while its daemon was down: exit code %d signal %d (%s), want 7", j.ExitCode, j.Signal, j.Message)
	}
	j = waitJob(t, cl, requeued, api.StateCompleted, 20*time.Second)
	if j.Restarts != 0 {
		t.Errorf("--requeue job that completed while its daemon was down: restarts %d, want 0", j.Restarts)
	}
	// A second run would start at once; give it the time to show.
	time.Sleep(time.Second)
	if got := readFile(t, work+"/requeued.runs"); got != "run\nend\n" {
		t.Errorf("--requeue job that completed while its daemon was down ran again: %q", got)
	}
	if j, _ := cl.Job(context.Background(), requeued, false); j == nil || j.State != api.StateCompleted || j.Restarts != 0 {
		t.Errorf("--requeue job after a second: %+v, want COMPLETED with no restart", j)
	}
}

// waitFileContent waits until path holds exactly want.
func waitFileContent(t *testing.T, path, want string, limit time.Duration) {
	t.Helper()
	eventually(t, limit, func() string {
		if got := readFileOr(path); got != want {
			return fmt.Sprintf("%s holds %q, want %q", path, got, want)
		}
		return ""
	})
}
