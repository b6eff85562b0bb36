package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestAfterokChainWithFailure submits A → B → C linked by afterok through
// the CLI; B fails, so C can never run: it shows DependencyNeverSatisfied
// and stays pending, while D (afterok on C, --kill-on-invalid-dep=yes) is
// cancelled by the scheduler.
func TestAfterokChainWithFailure(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "2", "--mem", "1G")
	work := t.TempDir()
	cl := c.client(t)
	sub := func(args ...string) string { return c.submit(t, work, append([]string{"--mem", "50M"}, args...)...) }
	a := sub("--wrap", "sleep 0.2")
	b := sub("-d", "afterok:"+a, "--wrap", "exit 4")
	cID := sub("-d", "afterok:"+b, "--wrap", "true")
	d := sub("-d", "afterok:"+cID, "--kill-on-invalid-dep=yes", "--wrap", "true")
	id := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }

	waitJob(t, cl, id(a), api.StateCompleted, 20*time.Second)
	waitJob(t, cl, id(b), api.StateFailed, 20*time.Second)
	dj := waitJob(t, cl, id(d), api.StateCancelled, 20*time.Second)
	if !strings.Contains(dj.Message, "never be satisfied") {
		t.Errorf("D's message = %q, want it to say its dependency can never be satisfied", dj.Message)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := cl.Job(context.Background(), id(cID), false)
		if err == nil && j.Reason == api.ReasonDependencyNeverSatisfied && j.State == api.StatePending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("C is %+v, want PENDING (DependencyNeverSatisfied)", j)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := cli(t, c.addr, work, "queue", "-h", "-j", cID, "-o", "%T %r")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "PENDING DependencyNeverSatisfied" {
		t.Errorf("queue shows %q for C", out)
	}
}

// TestDependencyCycleRefused: A is held, B waits on A; updating A to wait on
// B would make a cycle: scontrol update refuses it, naming the cycle, and
// A's dependency stays as it was. A dependency that closes no cycle is
// accepted and shown.
func TestDependencyCycleRefused(t *testing.T) {
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	work := t.TempDir()
	sub := func(args ...string) string { return c.submit(t, work, args...) }
	a := sub("--hold", "--wrap", "true")
	b := sub("-d", "afterok:"+a, "--wrap", "true")
	_, err := cli(t, c.addr, work, "scontrol", "update", "JobId="+a, "Dependency=afterok:"+b)
	if err == nil || !strings.Contains(err.Error(), a+" → "+b+" → "+a) {
		t.Fatalf("update closing a cycle: err = %v, want a refusal naming %s → %s → %s", err, a, b, a)
	}
	cl := c.client(t)
	if j, _ := cl.Job(context.Background(), mustID(t, a), false); j.Spec.Dependency != nil {
		t.Errorf("refused update changed A's dependency to %+v", j.Spec.Dependency)
	}
	other := sub("--hold", "--wrap", "true")
	if _, err := cli(t, c.addr, work, "update", a, "Dependency=afterany:"+other); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, c.addr, work, "show", "job", a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Dependency=afterany:"+other) {
		t.Errorf("show job after update:\n%s\nwant Dependency=afterany:%s", out, other)
	}
}
