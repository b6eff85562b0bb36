package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestSuspendResumeThroughCLI suspends a running job for 2 s with `corral
// suspend`, checks it shows SUSPENDED with its allocation kept and its
// elapsed time stopped, resumes it and checks the gap in its output.
func TestSuspendResumeThroughCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job for several seconds")
	}
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 1)
	work := t.TempDir()
	script := filepath.Join(work, "count.sh")
	// Each line carries the host's clock in milliseconds.
	writeFile(t, script, "#!/bin/sh\ni=0\nwhile [ $i -lt 30 ]; do echo \"$i $(date +%s%3N)\"; i=$((i+1)); sleep 0.1; done\n")
	out, err := cli(t, c.addr, work, "submit", "--parsable", "-o", filepath.Join(work, "count.out"), script)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	jobID, _ := strconv.ParseUint(id, 10, 64)
	cl := c.client(t)
	waitJob(t, cl, jobID, api.StateRunning, 15*time.Second)
	time.Sleep(500 * time.Millisecond)
	if _, err := cli(t, c.addr, work, "suspend", id); err != nil {
		t.Fatal(err)
	}
	st, _ := cli(t, c.addr, work, "queue", "-h", "-j", id, "-o", "%t %N")
	if strings.Fields(st)[0] != "S" || !strings.Contains(st, "n1") {
		t.Fatalf("queue shows %q, want state S on n1", st)
	}
	j1, _ := cl.Job(context.Background(), jobID, false)
	time.Sleep(2 * time.Second)
	j2, _ := cl.Job(context.Background(), jobID, false)
	now := time.Now()
	if e1, e2 := j1.Elapsed(now), j2.Elapsed(now); e1 != e2 {
		t.Errorf("elapsed time moved while suspended: %s then %s", e1, e2)
	}
	if _, err := cli(t, c.addr, work, "resume", id); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, cl, jobID, api.StateCompleted, 30*time.Second)
	if done.SuspendedFor < 1500*time.Millisecond {
		t.Errorf("SuspendedFor = %s, want about 2 s", done.SuspendedFor)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(work, "count.out"))), "\n")
	if len(lines) != 30 {
		t.Fatalf("%d output lines, want 30", len(lines))
	}
	var prev, gap int64
	for _, l := range lines {
		f := strings.Fields(l)
		ms, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		if prev != 0 && ms-prev > gap {
			gap = ms - prev
		}
		prev = ms
	}
	if gap < 1500 {
		t.Errorf("largest gap between lines %d ms, want ≥ 1500 (the 2 s suspension)", gap)
	}
}
