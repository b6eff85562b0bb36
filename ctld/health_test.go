package ctld

import (
	"context"
	"testing"
	"time"

	"corral/api"
)

// TestHealthCheckDrainsAndResumes reports a node's health check as its
// daemon does: a failing check drains the node with the check's output as
// the reason (recorded as the health check's), the same failure again
// commits nothing, a passing check resumes it; a node an operator drained
// keeps the operator's drain through a failing and a passing check.
func TestHealthCheckDrainsAndResumes(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := api.NewClient("http://" + c.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	health := func(ok bool, output string) {
		t.Helper()
		if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "b", Health: &api.HealthReport{OK: ok, Output: output}}); err != nil {
			t.Fatal(err)
		}
	}
	node := func() *api.Node {
		t.Helper()
		n, err := cl.Node(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	commit := func() uint64 {
		t.Helper()
		st, err := cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.CommitIndex
	}
	health(false, "/scratch is full")
	if n := node(); n.State() != api.NodeDrained || n.Reason != "health check failed: /scratch is full" || n.ReasonUser != api.HealthCheckUser {
		t.Fatalf("after a failing check: state %s, reason %q by %q", n.State(), n.Reason, n.ReasonUser)
	}
	before := commit()
	health(false, "/scratch is full")
	if after := commit(); after != before {
		t.Errorf("the same failure again committed entries %d → %d", before, after)
	}
	health(true, "")
	if n := node(); n.State() != api.NodeIdle || n.Reason != "" {
		t.Fatalf("after a passing check: state %s, reason %q", n.State(), n.Reason)
	}
	if err := cl.Drain(ctx, api.DrainRequest{Node: "n1", Drain: true, Reason: "new fans"}); err != nil {
		t.Fatal(err)
	}
	health(false, "fan 2 stopped")
	health(true, "")
	if n := node(); n.State() != api.NodeDrained || n.Reason != "new fans" {
		t.Errorf("an operator's drain after the checks: state %s, reason %q; want drained for new fans", n.State(), n.Reason)
	}
	bad := post(t, "http://"+c.HTTPAddr(), "/v1/nodes/status", api.NodeStatus{Name: "n1", BootID: "b", Health: &api.HealthReport{Output: "bell\a"}})
	refused(t, bad, "health.output", "")
}
