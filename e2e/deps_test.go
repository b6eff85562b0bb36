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
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 1)
	work := t.TempDir()
	cl := c.client(t)
	sub := func(args ...string) string {
		t.Helper()
		out, err := cli(t, c.addr, work, append([]string{"submit", "--parsable", "--mem", "50M"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
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
