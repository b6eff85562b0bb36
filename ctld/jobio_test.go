package ctld

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/api"
)

// TestJobIOIsCheckedThenProxied sends job I/O requests to a controller
// whose node is a recording HTTP server: what the controller refuses
// (another user's job, a pending job, no caller, a bad signal, root for a
// user) never reaches the node; what it passes arrives with the caller it
// was checked for.
func TestJobIOIsCheckedThenProxied(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" as "+r.Header.Get(api.UserHeader))
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	}))
	defer node.Close()
	c := startOne(t, HTTPTimeouts{})
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "test", BootID: "b1", APIAddr: node.URL}
	if err := cl.Register(ctx, info); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Submit(ctx, []api.JobSpec{spec("running")})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].JobID
	waitState(t, cl, id, api.StateRunning)
	held := spec("held")
	held.Hold = true
	res, err = cl.Submit(ctx, []api.JobSpec{held})
	if err != nil {
		t.Fatal(err)
	}
	heldID := res[0].JobID

	as := func(user string) *api.Client {
		one, _ := api.NewClient("http://" + c.HTTPAddr())
		one.User = user
		return one
	}
	tests := map[string]struct {
		call   func() error
		status int    // 0: passed to the node
		msg    string // in the refusal
		saw    string // what the node saw
	}{
		"the owner signals": {call: func() error { return as("alice").SignalJob(ctx, id, api.SignalRequest{Signal: "USR1"}) },
			saw: "POST /v1/jobs/1/signal as alice"},
		"root signals": {call: func() error { return as("root").SignalJob(ctx, id, api.SignalRequest{Signal: "TERM"}) },
			saw: "POST /v1/jobs/1/signal as root"},
		"another user": {call: func() error { return as("bob").SignalJob(ctx, id, api.SignalRequest{Signal: "USR1"}) },
			status: http.StatusForbidden, msg: "belongs to alice"},
		"no caller": {call: func() error { return as("").SignalJob(ctx, id, api.SignalRequest{Signal: "USR1"}) },
			status: http.StatusUnauthorized, msg: api.UserHeader},
		"a bad signal": {call: func() error { return as("alice").SignalJob(ctx, id, api.SignalRequest{Signal: "NOPE"}) },
			status: http.StatusBadRequest, msg: "unknown"},
		"a pending job": {call: func() error { return as("alice").SignalJob(ctx, heldID, api.SignalRequest{Signal: "USR1"}) },
			status: http.StatusConflict, msg: "pending"},
		"no such job": {call: func() error { return as("alice").SignalJob(ctx, 999, api.SignalRequest{Signal: "USR1"}) },
			status: http.StatusNotFound, msg: "no such job"},
		"root exec by the owner": {call: func() error {
			_, err := as("alice").Exec(ctx, id, api.ExecRequest{Argv: []string{"id"}, Root: true})
			return err
		}, status: http.StatusForbidden, msg: "only root"},
		"an exec without argv": {call: func() error { _, err := as("alice").Exec(ctx, id, api.ExecRequest{}); return err },
			status: http.StatusBadRequest, msg: "no command"},
		"a file path with ..": {call: func() error { _, _, err := as("alice").ReadJobFile(ctx, id, "../etc/passwd"); return err },
			status: http.StatusBadRequest, msg: `".."`},
		"a file read": {call: func() error {
			rd, _, err := as("alice").ReadJobFile(ctx, id, "out.txt")
			if err == nil {
				rd.Close()
			}
			return err
		}, saw: "GET /v1/jobs/1/file as alice"},
		"a file write": {call: func() error {
			return as("alice").WriteJobFile(ctx, id, "in.txt", 0o644, strings.NewReader("bytes"))
		}, saw: "PUT /v1/jobs/1/file as alice"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			err := tc.call()
			mu.Lock()
			got := append([]string(nil), seen...)
			mu.Unlock()
			if tc.status == 0 {
				if err != nil || len(got) != 1 || got[0] != tc.saw {
					t.Fatalf("err %v, the node saw %q; want %q", err, got, tc.saw)
				}
				return
			}
			var ae *api.APIError
			if !errors.As(err, &ae) || ae.Status != tc.status || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("err %v, want %d with %q", err, tc.status, tc.msg)
			}
			if len(got) != 0 {
				t.Fatalf("a refused request reached the node: %q", got)
			}
		})
	}
}
