package noded

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestJobAPIChecksOnTheNode calls a node's job API directly, as anyone who
// reaches its port could: the node itself refuses a request without a
// caller, from a user who does not own the job, for a job it does not run,
// with a bad signal or a path with "..", and serves the owner.
func TestJobAPIChecksOnTheNode(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	td := startDaemon(t, f, data, func(c *Config) { c.APIListen = "127.0.0.1:0" })
	f.addJob("n1", shJob(5, work, `trap 'echo got > usr1' USR1; touch started; while :; do sleep 0.05; done`))
	waitFor(t, "the job to start", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(work, "started"))
		return err == nil
	})
	base := td.apiAddr()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("api address %q", base)
	}
	if regs := f.registrations(); len(regs) == 0 || regs[len(regs)-1].APIAddr != base {
		t.Fatalf("the registration does not carry the job API's address %s", base)
	}
	post := func(path, user string, body any) (int, api.Error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
		if user != "" {
			req.Header.Set(api.UserHeader, user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	usr1 := api.SignalRequest{Signal: "USR1"}
	tests := map[string]struct {
		path, user string
		body       any
		status     int
		msg        string
	}{
		"no caller":               {"/v1/jobs/5/signal", "", usr1, http.StatusUnauthorized, "no caller"},
		"not the owner":           {"/v1/jobs/5/signal", "bob", usr1, http.StatusForbidden, "belongs to alice"},
		"not running here":        {"/v1/jobs/6/signal", "alice", usr1, http.StatusNotFound, "not running on node n1"},
		"a bad signal":            {"/v1/jobs/5/signal", "alice", api.SignalRequest{Signal: "NOPE"}, http.StatusBadRequest, "unknown"},
		"root as a user":          {"/v1/jobs/5/exec", "alice", api.ExecRequest{Argv: []string{"id"}, Root: true}, http.StatusForbidden, "only root"},
		"exec without an upgrade": {"/v1/jobs/5/exec", "alice", api.ExecRequest{Argv: []string{"id"}}, http.StatusBadRequest, "Upgrade"},
		"an unknown field":        {"/v1/jobs/5/signal", "alice", map[string]any{"signal": "USR1", "pid": 1}, http.StatusBadRequest, "unknown field"},
		"the owner":               {"/v1/jobs/5/signal", "alice", usr1, http.StatusOK, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			status, e := post(tc.path, tc.user, tc.body)
			if status != tc.status || !strings.Contains(e.Error, tc.msg) {
				t.Fatalf("%d %q, want %d with %q", status, e.Error, tc.status, tc.msg)
			}
		})
	}
	waitFor(t, "the job's trap", 10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(work, "usr1"))
		return err == nil
	})
	resp, err := http.Get(base + "/v1/jobs/5/file?path=" + "../x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a file request without a caller: %d", resp.StatusCode)
	}
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
