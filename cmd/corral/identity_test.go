package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/authd"
	"corral/internal/pki"
)

func TestCallerCredentials(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "authd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	private := file("token", "corral_abc\n", 0o600)
	shared := file("shared", "corral_abc\n", 0o640)
	empty := file("empty", "\n", 0o600)
	twoLines := file("two", "corral_abc\ncorral_def\n", 0o600)
	for name, tc := range map[string]struct {
		env  map[string]string
		want api.Credentials // nil with want err: a refusal
		err  string
	}{
		"a token":                   {env: map[string]string{"CORRAL_TOKEN": "corral_abc"}, want: api.BearerToken("corral_abc")},
		"a token before the agent":  {env: map[string]string{"CORRAL_TOKEN": "corral_abc", "CORRAL_AUTHD": sock}, want: api.BearerToken("corral_abc")},
		"a token file":              {env: map[string]string{"CORRAL_TOKEN_FILE": private}, want: api.BearerToken("corral_abc")},
		"a token file others read":  {env: map[string]string{"CORRAL_TOKEN_FILE": shared}, err: "chmod 600 " + shared},
		"an empty token file":       {env: map[string]string{"CORRAL_TOKEN_FILE": empty}, err: "is empty"},
		"two tokens in the file":    {env: map[string]string{"CORRAL_TOKEN_FILE": twoLines}, err: "put only the token in it"},
		"no token file":             {env: map[string]string{"CORRAL_TOKEN_FILE": filepath.Join(dir, "none")}, err: "no such file"},
		"the agent":                 {env: map[string]string{"CORRAL_AUTHD": sock}, want: &authd.Agent{Socket: sock}},
		"no agent where named":      {env: map[string]string{"CORRAL_AUTHD": filepath.Join(dir, "none.sock")}, err: "is corral authd running?"},
		"a file named as the agent": {env: map[string]string{"CORRAL_AUTHD": private}, err: "is not a socket"},
	} {
		t.Run(name, func(t *testing.T) {
			env := &cliEnv{getenv: func(k string) string { return tc.env[k] }}
			got, err := callerCredentials(env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("callerCredentials: %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a, ok := tc.want.(*authd.Agent); ok {
				if g, ok := got.(*authd.Agent); !ok || g.Socket != a.Socket {
					t.Fatalf("callerCredentials = %#v; want the agent on %s", got, a.Socket)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("callerCredentials = %#v; want %#v", got, tc.want)
			}
		})
	}
	t.Run("nothing", func(t *testing.T) {
		if _, err := os.Stat(authd.DefaultSocket); err == nil {
			t.Skipf("an agent's socket is at %s on this host", authd.DefaultSocket)
		}
		got, err := callerCredentials(&cliEnv{getenv: func(string) string { return "" }})
		if got != nil || err != nil {
			t.Fatalf("callerCredentials without a token or an agent = %#v, %v; want none", got, err)
		}
	})
}

// hostFiles makes an authority and issues a certificate of role to name,
// returning its files and the authority's pool.
func hostFiles(t *testing.T, role pki.Role, name string) (pki.Files, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if err := pki.InitCA(ca, "test"); err != nil {
		t.Fatal(err)
	}
	cert, key, err := pki.Issue(ca, ca, pki.Request{Role: role, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	f := pki.Files{Cert: cert, Key: key, CA: filepath.Join(ca, pki.CACertFile)}
	pool, err := f.Pool()
	if err != nil {
		t.Fatal(err)
	}
	return f, pool
}

// agentToken waits for an agent on sock and returns the claims of the
// token the CLI's client gets from it, verified against roots.
func agentToken(t *testing.T, sock string, roots *x509.CertPool) (authd.Claims, pki.Identity) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent on %s after 20s", sock)
		}
	}
	vars := map[string]string{"CORRAL_AUTHD": sock, "CORRAL_ADDR": "http://127.0.0.1:1"}
	env := &cliEnv{getenv: func(k string) string { return vars[k] }}
	cl, err := env.client()
	if err != nil {
		t.Fatal(err)
	}
	auth, err := cl.Auth.Authorization(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, id, err := authd.Verify(strings.TrimPrefix(auth, authd.Scheme+" "), roots, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != uint32(os.Geteuid()) {
		t.Fatalf("the token names uid %d; want this process's %d", c.UID, os.Geteuid())
	}
	return c, id
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
