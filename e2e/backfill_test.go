package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestBackfillThroughCluster runs EASY backfill on a real cluster: one
// 4-CPU node; a 3-CPU job with a 10-minute limit runs; a 4-CPU job waits
// with a reservation at that job's limit, shown by `queue --start`; a
// 1-CPU job with a 1-minute limit starts at once in front of it (it ends
// before the reservation), while a 1-CPU job with a 20-minute limit, which
// would delay the reservation, waits with reason Priority.
func TestBackfillThroughCluster(t *testing.T) {
	c := oneNodeCluster(t, "n1", "--cpus", "4", "--mem", "4G")
	work := t.TempDir()
	cl := c.client(t)
	sub := func(args ...string) uint64 {
		return mustID(t, c.submit(t, work, append([]string{"--mem", "100M"}, args...)...))
	}
	running := sub("-c", "3", "--time", "10", "--wrap", "sleep 300")
	r := waitJob(t, cl, running, api.StateRunning, 15*time.Second)
	big := sub("-c", "4", "--time", "10", "--wrap", "true")
	long := sub("-c", "1", "--time", "20", "--wrap", "sleep 300")
	short := sub("-c", "1", "--time", "1", "--wrap", "sleep 300")
	waitJob(t, cl, short, api.StateRunning, 15*time.Second)

	deadline := time.Now().Add(10 * time.Second)
	jb, jl := &api.Job{}, &api.Job{}
	for time.Now().Before(deadline) {
		if j, err := cl.Job(context.Background(), big, false); err == nil {
			jb = j
		}
		if j, err := cl.Job(context.Background(), long, false); err == nil {
			jl = j
		}
		if jb.Reason == api.ReasonResources && jl.Reason == api.ReasonPriority && !jb.EstStart.IsZero() {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if jb.State != api.StatePending || jb.Reason != api.ReasonResources {
		t.Errorf("4-CPU job: %s (%s), want PENDING (Resources)", jb.State, jb.Reason)
	}
	if jl.State != api.StatePending || jl.Reason != api.ReasonPriority {
		t.Errorf("20-minute job: %s (%s), want PENDING (Priority): it would delay the reservation", jl.State, jl.Reason)
	}
	if want := r.StartTime.Add(10 * time.Minute); jb.EstStart.Sub(want).Abs() > time.Second {
		t.Errorf("4-CPU job expected to start at %v, want the running job's limit %v", jb.EstStart, want)
	}
	out, err := cli(t, c.addr, work, "queue", "--start", "-h", "-j", strconv.FormatUint(big, 10), "-o", "%i %S")
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out); len(f) != 2 || f[1] == "N/A" {
		t.Errorf("queue --start shows %q, want the job's expected start", out)
	}
	for _, id := range []uint64{running, big, long, short} {
		cli(t, c.addr, work, "cancel", strconv.FormatUint(id, 10))
	}
}
