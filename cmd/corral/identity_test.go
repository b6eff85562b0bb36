package main

import (
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
