//go:build !corral_client

package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"corral/api"
	"corral/internal/pki"
)

// The tests of code only the full binary holds (full.go, the daemons'
// files); the client binary's build (-tags corral_client) leaves them out.

func TestParsePartitions(t *testing.T) {
	good := map[string][]api.Partition{
		"batch*,debug:30:00": {{Name: "batch", Default: true}, {Name: "debug", MaxTime: 1800}},
		"batch":              {{Name: "batch"}},
		" a , b*:1-0 ,":      {{Name: "a"}, {Name: "b", Default: true, MaxTime: 86400}},
		"long:UNLIMITED":     {{Name: "long"}},
		"short*:5":           {{Name: "short", Default: true, MaxTime: 300}},
	}
	for in, want := range good {
		t.Run(in, func(t *testing.T) {
			got, err := parsePartitions(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("parsePartitions(%q) = %+v, want %+v", in, got, want)
			}
			for i := range got {
				if got[i].Name != want[i].Name || got[i].Default != want[i].Default || got[i].MaxTime != want[i].MaxTime {
					t.Fatalf("parsePartitions(%q) = %+v, want %+v", in, got, want)
				}
			}
		})
	}
	bad := map[string]string{
		"*":                 "empty partition name",
		":30":               "empty partition name",
		"debug:abc":         "debug",
		"debug:-5":          "debug",
		"batch,x:1:2:3:4":   "x",
		"batch*,debug*":     "both batch and debug are marked default",
		"batch,debug,batch": "batch is listed twice",
		"batch*,batch:5":    "batch is listed twice",
	}
	for in, want := range bad {
		t.Run("bad "+in, func(t *testing.T) {
			got, err := parsePartitions(in)
			if err == nil {
				t.Fatalf("parsePartitions(%q) = %+v, want an error", in, got)
			}
			if !strings.Contains(err.Error(), "--partitions") || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name --partitions and %q", err, want)
			}
		})
	}
}

func TestDispatchDevRefusesBadNodesBeforeStarting(t *testing.T) {
	raftAddr := freeAddr(t)
	r := runCLI(t, context.Background(), "", "corral", "dev", "--data", t.TempDir(), "--http", "127.0.0.1:0",
		"--raft", raftAddr, "--nodes", "0")
	if r.code != 1 || !strings.Contains(r.stderr, "--nodes=0") {
		t.Fatalf("exit %d, stderr %q; want 1 naming --nodes=0", r.code, r.stderr)
	}
	// Nothing may be left running: the Raft port is free again.
	l, err := net.Listen("tcp", raftAddr)
	if err != nil {
		t.Fatalf("after a refused dev the Raft address is still taken: %v", err)
	}
	l.Close()
}

func TestAuthdCommand(t *testing.T) {
	files, roots := hostFiles(t, pki.RoleLogin, "login1")
	client, _ := hostFiles(t, pki.RoleClient, "ops")
	sock := filepath.Join(t.TempDir(), "run", "authd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		env := &cliEnv{stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(string) string { return "" }}
		done <- dispatch(ctx, env, []string{"corral", "authd", "--socket", sock, "--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA})
	}()
	_, id := agentToken(t, sock, roots)
	if id != (pki.Identity{Role: pki.RoleLogin, Name: "login1"}) {
		t.Fatalf("the token is vouched for by %+v; want login login1", id)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("corral authd: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "identity agent listening") {
		t.Errorf("corral authd logged no start:\n%s", stderr.String())
	}
	for name, tc := range map[string]struct {
		argv []string
		want string
	}{
		"no certificate":     {[]string{"corral", "authd", "--socket", sock}, "--tls-cert, --tls-key and --tls-ca are required"},
		"only a certificate": {[]string{"corral", "authd", "--socket", sock, "--tls-cert", files.Cert}, "--tls-cert, --tls-key and --tls-ca are required"},
		"a client's":         {[]string{"corral", "authd", "--socket", sock, "--tls-cert", client.Cert, "--tls-key", client.Key, "--tls-ca", client.CA}, "may not vouch for users"},
		"a bad ttl":          {[]string{"corral", "authd", "--ttl", "forever"}, "--ttl=forever"},
		"an argument":        {[]string{"corral", "authd", "extra"}, `unexpected argument "extra"`},
		"noded without TLS":  {[]string{"corral", "noded", "--data", t.TempDir(), "--ctld", "127.0.0.1:1", "--authd-socket", sock}, "--authd-socket needs the node's certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, context.Background(), "", tc.argv...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("%s: exit %d, stderr %q; want a refusal containing %q", strings.Join(tc.argv, " "), r.code, r.stderr, tc.want)
			}
		})
	}
}

// TestNodedRunsTheAgent starts a node daemon with --authd-socket: its
// agent vouches for this process's user with the node's certificate, while
// the daemon tries to reach a controller that is not there.
func TestNodedRunsTheAgent(t *testing.T) {
	files, roots := hostFiles(t, pki.RoleNode, "n1")
	sock := filepath.Join(t.TempDir(), "authd.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data, ctl := t.TempDir(), freeAddr(t)
	done := make(chan result, 1)
	go func() {
		done <- runCLI(t, ctx, "", "corral", "noded", "--name", "n1", "--data", data, "--ctld", ctl,
			"--runner", "process", "--listen", "none", "--tls-cert", files.Cert, "--tls-key", files.Key, "--tls-ca", files.CA,
			"--authd-socket", sock)
	}()
	c, id := agentToken(t, sock, roots)
	if id != (pki.Identity{Role: pki.RoleNode, Name: "n1"}) || c.Host != "n1" {
		t.Fatalf("the token is vouched for by %+v for host %q; want node n1", id, c.Host)
	}
	cancel()
	if r := <-done; r.code != 0 {
		t.Fatalf("noded: exit %d: %s", r.code, r.stderr)
	}
}
