package ctld

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/pki"
)

// TestNodeKeyPinned checks that a node is held to the key it first
// registered with: a second certificate of its name (another key) can
// neither register, heartbeat, report nor read its jobs, until an operator
// forgets the old key; then the new key is the node's and the old one is
// refused.
func TestNodeKeyPinned(t *testing.T) {
	sc := newAuthScene(t)
	ctx := context.Background()
	client := func() *api.Client {
		cert, key, err := pki.Issue(sc.tc.caDir, t.TempDir(), pki.Request{Role: pki.RoleNode, Name: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := (pki.Files{Cert: cert, Key: key, CA: filepath.Join(sc.tc.caDir, pki.CACertFile)}).Client()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := api.NewTLSClient(sc.base, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl.RetryFor = time.Second
		return cl
	}
	first, second := client(), client()
	info := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 2048, Runner: "test", BootID: "b1"}
	if err := first.Register(ctx, info); err != nil {
		t.Fatalf("n1's first registration: %v", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		var ae *api.APIError
		if !asAPIError(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(ae.Message, "forget-key") {
			t.Errorf("%s with a second key of n1: %v; want 403 naming forget-key", what, err)
		}
	}
	refused("register", second.Register(ctx, info))
	refused("heartbeat", second.Heartbeat(ctx, "n1", "b1"))
	refused("report", second.Report(ctx, api.NodeStatus{Name: "n1", BootID: "b1"}))
	_, err := second.Desired(ctx, "n1", 0, 0)
	refused("desired", err)
	if err := first.Heartbeat(ctx, "n1", "b1"); err != nil {
		t.Errorf("n1's own key, heartbeating: %v", err)
	}
	if st, body := sc.do(t, pOperator, "POST", "/v1/nodes/forget-key", map[string]any{"node": "n1"}); st != http.StatusOK {
		t.Fatalf("forget-key as operator: %d %s", st, body)
	}
	if err := second.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 2048, Runner: "test", BootID: "b2"}); err != nil {
		t.Fatalf("the reinstalled n1 registering with its new key: %v", err)
	}
	refused("the old key, heartbeating", first.Heartbeat(ctx, "n1", "b2"))
}

func asAPIError(err error, target **api.APIError) bool { return errorsAs(err, target) }
