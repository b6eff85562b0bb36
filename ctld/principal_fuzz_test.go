package ctld

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/authd"
	"corral/internal/pki"
)

// FuzzAuthorization decides the principal of requests with arbitrary
// Authorization headers on an authenticating member that holds one token:
// nothing may panic, and only that token's exact text may make a user.
func FuzzAuthorization(f *testing.F) {
	caDir := filepath.Join(f.TempDir(), "ca")
	if err := pki.InitCA(caDir, "fuzz"); err != nil {
		f.Fatal(err)
	}
	roots, err := (pki.Files{CA: filepath.Join(caDir, pki.CACertFile)}).Pool()
	if err != nil {
		f.Fatal(err)
	}
	fsm := NewFSM(quietLog())
	now := time.Now().UTC()
	fsm.state.Apply(1, state.CmdPutToken, &state.PutToken{Now: now, Token: state.TokenRecord{Hash: state.HashSecret("sesame"),
		Token: api.Token{ID: "t1", User: "alice", Role: api.RoleUser, Expires: now.Add(time.Hour)}}})
	c := &Controller{cfg: Config{Auth: true}, fsm: fsm, log: quietLog(), clock: realClock{},
		agents: func(token string, at time.Time) (agentClaims, pki.Identity, error) {
			cl, host, err := authd.Verify(token, roots, at)
			return agentClaims{user: cl.User, uid: cl.UID}, host, err
		}}
	for _, h := range []string{"Bearer corral_t1_sesame", "Bearer corral_t1_sesamE", "Bearer corral__", "Bearer corral_t1", "Corral-Agent v1.e30.AA.AA",
		"Basic YWxpY2U6eA==", "Bearer", "Corral-Agent ", "bearer corral_t1_sesame", ""} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/v1/jobs", nil)
		r.Header.Set("Authorization", header)
		r.Header.Set(api.UserHeader, "root")
		p, err := c.principalOf(r)
		if err == nil && p.kind == kindUser && r.Header.Get("Authorization") != "" {
			// principalOf trims the credential as HTTP trims header values.
			if cred, ok := strings.CutPrefix(header, "Bearer "); !ok || strings.TrimSpace(cred) != "corral_t1_sesame" {
				t.Fatalf("header %q made user %s", header, p)
			}
		}
		if err == nil && p.kind == kindUser && p.name != "alice" {
			t.Fatalf("header %q made user %q", header, p.name)
		}
	})
}
