package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestArrayThroughCLI submits --array=0-9%2 through the CLI: squeue folds
// the pending tasks into one line, at most two tasks run at a time, a
// pending task cancelled by ARRAYID_TASK never runs, and every other task
// writes its own output file (%A_%a) with the array variables set.
func TestArrayThroughCLI(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "4", "--mem", "2G")
	work := t.TempDir()
	script := filepath.Join(work, "task.sh")
	writeFile(t, script, "#!/bin/sh\necho \"$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $CORRAL_ARRAY_TASK_COUNT $SLURM_JOB_ID\"\nsleep 0.3\n")
	out, err := cli(t, c.addr, work, "submit", "--parsable", "--mem", "50M", "--array=0-9%2", "-o", filepath.Join(work, "out_%A_%a.txt"), script)
	if err != nil {
		t.Fatal(err)
	}
	arr := strings.TrimSpace(out)
	if _, err := cli(t, c.addr, work, "cancel", arr+"_9"); err != nil {
		t.Fatal(err)
	}
	q, err := cli(t, c.addr, work, "queue", "-h", "-j", arr, "-o", "%i %T")
	if err != nil {
		t.Fatal(err)
	}
	folded := regexp.MustCompile(`(?m)^` + arr + `_\[[0-9,-]+%2\] PENDING$`)
	if !folded.MatchString(q) {
		t.Errorf("queue shows\n%s\nwant the pending tasks folded as %s_[...%%2] on one line", q, arr)
	}

	cl := c.client(t)
	deadline := time.Now().Add(60 * time.Second)
	maxRunning := 0
	for {
		jobs, err := cl.Jobs(context.Background(), api.JobFilter{IDs: []uint64{mustID(t, arr)}}, false)
		if err != nil {
			t.Fatal(err)
		}
		running, done := 0, 0
		for _, j := range jobs {
			switch {
			case j.State == api.StateRunning:
				running++
			case j.State == api.StateCompleted && j.IsArrayTask():
				done++
			}
		}
		maxRunning = max(maxRunning, running)
		if done == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 9 tasks completed within 60 s: %+v", done, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if maxRunning > 2 {
		t.Errorf("%d tasks ran at once; the array allows 2", maxRunning)
	}
	for task := 0; task < 10; task++ {
		path := filepath.Join(work, fmt.Sprintf("out_%s_%d.txt", arr, task))
		if task == 9 {
			if fileExists(path) {
				t.Errorf("cancelled task 9 wrote %s", path)
			}
			continue
		}
		f := strings.Fields(readFile(t, path))
		if len(f) != 4 || f[0] != arr || f[1] != strconv.Itoa(task) || f[2] != "10" {
			t.Errorf("task %d printed %q, want %q", task, f, []string{arr, strconv.Itoa(task), "10", "<its own id>"})
		}
	}
}

// TestLargeArrayIsOneRecord submits 100,000 tasks in one call, held: the
// queue shows them as one line.
func TestLargeArrayIsOneRecord(t *testing.T) {
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	work := t.TempDir()
	out, err := cli(t, c.addr, work, "submit", "--parsable", "--hold", "--array=0-99999", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	arr := strings.TrimSpace(out)
	q, err := cli(t, c.addr, work, "queue", "-h", "-o", "%i %T %r")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(q) != arr+"_[0-99999] PENDING JobHeldUser" {
		t.Errorf("queue shows %q, want one line for the whole array", q)
	}
}

func mustID(t *testing.T, s string) uint64 {
	t.Helper()
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a job id", s)
	}
	return id
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestDependencyOnWholeArray: a job afterok on an array starts only once
// every task of the array completed.
func TestDependencyOnWholeArray(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "2", "--mem", "1G")
	work := t.TempDir()
	cl := c.client(t)
	out, err := cli(t, c.addr, work, "submit", "--parsable", "--mem", "50M", "--array=0-3", "-o", "/dev/null", "--wrap", "sleep 0.3")
	if err != nil {
		t.Fatal(err)
	}
	arr := strings.TrimSpace(out)
	out, err = cli(t, c.addr, work, "submit", "--parsable", "--mem", "50M", "-d", "afterok:"+arr, "-o", "/dev/null", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	after := waitJob(t, cl, mustID(t, strings.TrimSpace(out)), api.StateCompleted, 30*time.Second)
	jobs, err := cl.Jobs(context.Background(), api.JobFilter{IDs: []uint64{mustID(t, arr)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 {
		t.Fatalf("array has %d records, want 4 tasks", len(jobs))
	}
	for _, j := range jobs {
		if j.State != api.StateCompleted || after.StartTime.Before(j.EndTime) {
			t.Errorf("task %s: %s, ended %v; the dependent job started %v", j.Ref(), j.State, j.EndTime, after.StartTime)
		}
	}
}
