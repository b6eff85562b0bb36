package e2e

import (
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestSubmitWaitThroughAFollower runs `corral submit --wait` against a
// follower only: its first read of the new job may reach the follower
// before it applied the submission, which once failed with "no such job".
func TestSubmitWaitThroughAFollower(t *testing.T) {
	c := startControllers(t, 3)
	lead := c.leader(t, 15*time.Second)
	c.startNode(t, "n1")
	c.waitNodes(t, 1)
	follower := c.http[(lead+1)%len(c.http)]
	work := t.TempDir()
	for i := 0; i < 5; i++ {
		if out, err := cli(t, follower, work, "submit", "--wait", "-o", "/dev/null", "--wrap", "true"); err != nil {
			t.Fatalf("submit --wait #%d through a follower: %v (%s)", i+1, err, out)
		}
	}
	_, err := cli(t, follower, work, "submit", "--wait", "-o", "/dev/null", "--wrap", "exit 3")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("submit --wait of a job that exits 3: %v, want exit status 3", err)
	}
}
