package ctld

import (
	"context"
	"crypto"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/authd"
	"corral/internal/pki"
)

// hostKey issues a certificate of role for name from caDir and returns
// what an agent signs with.
func hostKey(t *testing.T, caDir string, role pki.Role, name string) (crypto.Signer, [][]byte) {
	t.Helper()
	cert, key, err := pki.Issue(caDir, t.TempDir(), pki.Request{Role: role, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return pair.PrivateKey.(crypto.Signer), pair.Certificate
}

// TestAgentIdentities checks the identities hosts' agents vouch for: a
// login host's and a node's are taken, as the user they name (root as an
// admin); a tampered, expired or too-early token, one signed by another
// authority's host or by a client's certificate is refused with 401.
func TestAgentIdentities(t *testing.T) {
	sc := newAuthScene(t)
	ctx := context.Background()
	now := time.Now()
	login, loginChain := hostKey(t, sc.tc.caDir, pki.RoleLogin, "login1")
	node, nodeChain := hostKey(t, sc.tc.caDir, pki.RoleNode, "n1")
	client, clientChain := hostKey(t, sc.tc.caDir, pki.RoleClient, "ops")
	other := filepath.Join(t.TempDir(), "other-ca")
	if err := pki.InitCA(other, "other"); err != nil {
		t.Fatal(err)
	}
	foreign, foreignChain := hostKey(t, other, pki.RoleLogin, "login1")
	mint := func(key crypto.Signer, chain [][]byte, host, user string, uid uint32, at time.Time) string {
		tok, err := authd.Mint(key, chain, authd.Claims{User: user, UID: uid, GID: uid, Host: host, IssuedAt: at, Expires: at.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	call := func(tok string) (int, string) {
		req, _ := http.NewRequest("GET", sc.base+"/v1/auth", nil)
		req.Header.Set("Authorization", authd.Scheme+" "+tok)
		resp, err := sc.clients[pAnon].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			api.AuthView
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v.Whoami.Name + "/" + string(v.Whoami.Role) + v.Error
	}
	good := mint(login, loginChain, "login1", "alice", 1000, now)
	tampered := good[:len(good)/2] + "A" + good[len(good)/2+1:]
	cases := []struct {
		name, token string
		status      int
		shown       string
	}{
		{"a login host's user", good, 200, "alice/user"},
		{"a node's user", mint(node, nodeChain, "n1", "bob", 1001, now), 200, "bob/user"},
		{"root on a login host", mint(login, loginChain, "login1", "root", 0, now), 200, "root/admin"},
		{"tampered", tampered, 401, "identity token"},
		{"expired", mint(login, loginChain, "login1", "alice", 1000, now.Add(-2*time.Minute)), 401, "expired"},
		{"issued in the future", mint(login, loginChain, "login1", "alice", 1000, now.Add(time.Minute)), 401, "identity token"},
		{"another authority's host", mint(foreign, foreignChain, "login1", "alice", 1000, now), 401, "identity token"},
	}
	for _, c := range cases {
		status, shown := call(c.token)
		if status != c.status || !strings.Contains(shown, c.shown) {
			t.Errorf("%s: %d %q; want %d with %q", c.name, status, shown, c.status, c.shown)
		}
	}
	// A client certificate proves no host: Mint itself refuses to sign
	// for one, and a hand-made token is refused by the controllers.
	if _, err := authd.Mint(client, clientChain, authd.Claims{User: "alice", Host: "ops", IssuedAt: now, Expires: now.Add(time.Minute)}); err == nil {
		t.Error("Mint signed an identity with a client certificate")
	}
	// The agent's identity submits as the user it names, whatever the
	// request says.
	cl, err := api.NewTLSClient(sc.base, sc.tc.tls)
	if err != nil {
		t.Fatal(err)
	}
	cl.Auth, cl.User = staticAuth(authd.Scheme+" "+good), "root"
	res, err := cl.Submit(ctx, []api.JobSpec{{Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1, Hold: true, Account: "phys"}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := cl.Job(ctx, res[0].JobID, false)
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.User != "alice" {
		t.Errorf("a job submitted with alice's identity belongs to %q", j.Spec.User)
	}
}

// staticAuth sends one fixed Authorization header.
type staticAuth string

func (s staticAuth) Authorization(context.Context) (string, error) { return string(s), nil }
