package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAttachStreamsLiveOutput runs `corral attach` on a job that prints a
// line every 200 ms: attach shows the lines while the job runs and returns
// when it ends.
func TestAttachStreamsLiveOutput(t *testing.T) {
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 1)
	work := t.TempDir()
	out, err := cli(t, c.addr, work, "submit", "--parsable", "-o", filepath.Join(work, "live.out"),
		"--wrap", "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.2; done")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	start := time.Now()
	got, err := cli(t, c.addr, work, "attach", id)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= 8; i++ {
		want = append(want, "line "+strconv.Itoa(i))
	}
	if strings.TrimSpace(got) != strings.Join(want, "\n") {
		t.Errorf("attach printed %q, want lines 1 to 8", got)
	}
	if time.Since(start) < time.Second {
		t.Errorf("attach returned after %s: it should follow the job until it ends (~1.6 s)", time.Since(start))
	}
	if _, err := cli(t, c.addr, work, "attach", "999"); err == nil {
		t.Error("attach to a job that does not exist succeeded")
	}
}
