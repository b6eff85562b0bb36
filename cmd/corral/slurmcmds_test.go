package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// runCLIWithInput is runCLI with standard input.
func runCLIWithInput(t *testing.T, ctx context.Context, addr, stdin string, argv ...string) result {
	t.Helper()
	vars := map[string]string{"USER": "tester", "CORRAL_ADDR": addr}
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin), getenv: func(k string) string { return vars[k] }}
	return result{code: dispatch(ctx, env, argv), stdout: out.String(), stderr: errb.String()}
}

// TestScancelAndTopForms runs scancel -i (a prompt per job, y cancels),
// scancel -Q (silent about a job that ended), scancel --me and scontrol
// top (the jobs named go first by nice values exchanged) against a
// controller.
func TestScancelAndTopForms(t *testing.T) {
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := api.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"one", "two", "three"} {
		ids = append(ids, strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", name, "--begin=now+1hour", "--wrap", "true")))
	}
	r := runCLIWithInput(t, ctx, addr, "y\nn\ny\n", "scancel", "-i", "-u", "tester")
	if r.code != 0 || strings.Count(r.stdout, "[y/n]? ") != 3 || !strings.Contains(r.stdout, "Cancel job_id="+ids[0]+" name=one partition=batch [y/n]? ") {
		t.Fatalf("scancel -i: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	states := map[string]string{}
	for _, row := range fields(mustRun(t, ctx, addr, "squeue", "-h", "-t", "all", "-o", "%i %T")) {
		states[row[0]] = row[1]
	}
	if states[ids[0]] != "CANCELLED" || states[ids[1]] != "PENDING" || states[ids[2]] != "CANCELLED" {
		t.Fatalf("after answering y, n, y: %v", states)
	}
	if r := runCLI(t, ctx, addr, "scancel", ids[0]); r.code != 1 || !strings.Contains(r.stderr, "already finished") {
		t.Errorf("scancel of an ended job: exit %d, stderr %q; want 1 and an error", r.code, r.stderr)
	}
	if r := runCLI(t, ctx, addr, "scancel", "-Q", ids[0]); r.code != 0 || r.stderr != "" {
		t.Errorf("scancel -Q of an ended job: exit %d, stderr %q; want 0 and silence", r.code, r.stderr)
	}

	// scontrol top: job four (nice 20) first, then two (nice 0 → its
	// place), five (nice 10) last.
	four := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", "four", "--nice=20", "--begin=now+1hour", "--wrap", "true"))
	mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", "five", "--nice=10", "--begin=now+1hour", "--wrap", "true")
	mustRun(t, ctx, addr, "scontrol", "top", four)
	nice := map[string]int{}
	jobs, err := cl.Jobs(ctx, api.JobFilter{States: []api.JobState{api.StatePending}}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		nice[j.Spec.Name] = j.Spec.Nice
	}
	if nice["four"] != 0 || nice["two"] != 10 || nice["five"] != 20 {
		t.Errorf("nice values after top: %v; want four 0, two 10, five 20", nice)
	}
	mustRun(t, ctx, addr, "scancel", "--me")
	if rows := fields(mustRun(t, ctx, addr, "squeue", "-h")); len(rows) != 0 {
		t.Errorf("jobs left after scancel --me: %v", rows)
	}
}
