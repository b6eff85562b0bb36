package ctld

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/pki"
)

// TestNodeJoin checks the join tokens: a node without a certificate joins
// with an admin's single-use token and gets a node certificate for its own
// key, with which it registers; the token then lets no other node in; a
// reusable token lets two; a user may not make join tokens, a join token
// is no API credential, and a name pinned to another key cannot join.
func TestNodeJoin(t *testing.T) {
	tc := startClusterTuned(t, 1, true, true, nil)
	sc := &authScene{tc: tc, leader: tc.waitLeader(t), clients: map[string]*http.Client{}, tokens: map[string]string{}, base: tc.addrs[0]}
	sc.leader.cfg.NodeCA = tc.caDir
	sc.tokens["root"] = addToken(t, sc.leader, "root", "root", api.RoleAdmin)
	sc.tokens["alice"] = addToken(t, sc.leader, "alice", "alice", api.RoleUser)
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.tls}}
	sc.clients[pAdmin], sc.clients[pUserA] = anon, anon
	joinToken := func(reusable bool) string {
		st, body := sc.do(t, pAdmin, "POST", "/v1/tokens", map[string]any{"join": true, "reusable": reusable})
		var resp api.TokenResponse
		if st != http.StatusOK || json.Unmarshal([]byte(body), &resp) != nil || !resp.Token.Join {
			t.Fatalf("an admin's join token: %d %s", st, body)
		}
		if resp.Token.Expires.Sub(time.Now()) > time.Hour+time.Minute {
			t.Errorf("a join token lasts until %s; want an hour by default", resp.Token.Expires)
		}
		return resp.Secret
	}
	join := func(token, name string) (*x509.Certificate, *tls.Certificate, error) {
		cl, err := api.NewTLSClient(sc.base, tc.tls)
		if err != nil {
			t.Fatal(err)
		}
		cl.RetryFor = time.Second
		key, csr, err := pki.NewKeyRequest(name)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Join(context.Background(), api.JoinRequest{Token: token, Name: name, CSR: csr, Hosts: []string{"127.0.0.1"}})
		if err != nil {
			return nil, nil, err
		}
		cert, err := x509.ParseCertificate(resp.Cert)
		if err != nil {
			t.Fatal(err)
		}
		return cert, &tls.Certificate{Certificate: [][]byte{resp.Cert}, PrivateKey: key}, nil
	}
	once := joinToken(false)
	cert, pair, err := join(once, "n5")
	if err != nil {
		t.Fatalf("n5 joining with a join token: %v", err)
	}
	if id, ok := pki.IdentityOf(cert); !ok || id.Role != pki.RoleNode || id.Name != "n5" {
		t.Fatalf("n5's certificate names %+v", id)
	}
	roots, _ := (pki.Files{CA: filepath.Join(tc.caDir, pki.CACertFile)}).Pool()
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("n5's certificate does not verify against the cluster's authority: %v", err)
	}
	nodeTLS := tc.tls.Clone()
	nodeTLS.Certificates = []tls.Certificate{*pair}
	ncl, err := api.NewTLSClient(sc.base, nodeTLS)
	if err != nil {
		t.Fatal(err)
	}
	if err := ncl.Register(context.Background(), api.NodeInfo{Name: "n5", CPUs: 1, MemMB: 1024, Runner: "test", BootID: "b5"}); err != nil {
		t.Fatalf("n5 registering with the certificate it joined with: %v", err)
	}
	refusedWith := func(what string, err error, status int, want string) {
		t.Helper()
		var ae *api.APIError
		if !asAPIError(err, &ae) || ae.Status != status || !strings.Contains(ae.Message, want) {
			t.Errorf("%s: %v; want %d with %q", what, err, status, want)
		}
	}
	_, _, err = join(once, "n6")
	refusedWith("a second node with a single-use token", err, http.StatusUnauthorized, "used already")
	_, _, err = join(once, "n5")
	refusedWith("n5 again with a used token", err, http.StatusUnauthorized, "used already")
	many := joinToken(true)
	if _, _, err := join(many, "n6"); err != nil {
		t.Errorf("n6 with a reusable token: %v", err)
	}
	if _, _, err := join(many, "n7"); err != nil {
		t.Errorf("n7 with the same reusable token: %v", err)
	}
	_, _, err = join(many, "n5")
	refusedWith("a name pinned to another key", err, http.StatusUnauthorized, "forget-key")
	_, _, err = join(sc.tokens["alice"], "n8")
	refusedWith("an API token as a join token", err, http.StatusUnauthorized, "not a join token")
	if st, body := sc.do(t, pUserA, "POST", "/v1/tokens", map[string]any{"join": true}); st != http.StatusForbidden {
		t.Errorf("a user making a join token: %d %s; want 403", st, body)
	}
	req, _ := http.NewRequest("GET", sc.base+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+many)
	resp, err := anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a join token on the API: %d; want 401", resp.StatusCode)
	}
}
