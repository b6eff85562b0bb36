package authd

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral/internal/pki"
)

// host is a certificate's key and chain, as an agent holds them.
type host struct {
	key   crypto.Signer
	chain [][]byte
	files pki.Files
}

// authority makes a cluster authority in a temporary directory and issues
// one certificate per request; it returns the authority's pool and the
// hosts in the order asked.
func authority(t testing.TB, reqs ...pki.Request) (*x509.CertPool, []host) {
	t.Helper()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if err := pki.InitCA(ca, "test cluster"); err != nil {
		t.Fatal(err)
	}
	files := pki.Files{CA: filepath.Join(ca, pki.CACertFile)}
	roots, err := files.Pool()
	if err != nil {
		t.Fatal(err)
	}
	var hosts []host
	for _, r := range reqs {
		cert, key, err := pki.Issue(ca, filepath.Join(dir, "issued"), r)
		if err != nil {
			t.Fatalf("issue %s %s: %v", r.Role, r.Name, err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, host{key: pair.PrivateKey.(crypto.Signer), chain: pair.Certificate,
			files: pki.Files{Cert: cert, Key: key, CA: files.CA}})
	}
	return roots, hosts
}

// signRaw makes a token of any payload, bypassing Mint's checks, so that
// Verify is tested on what Mint would never make.
func signRaw(t testing.TB, h host, body []byte) string {
	t.Helper()
	digest := sha256.Sum256(append([]byte(signContext), body...))
	sig, err := h.key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	parts := []string{version, b64.EncodeToString(body), b64.EncodeToString(sig)}
	for _, der := range h.chain {
		parts = append(parts, b64.EncodeToString(der))
	}
	return strings.Join(parts, ".")
}

func rawPayload(t testing.TB, p any) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustMint(t testing.TB, h host, c Claims) string {
	t.Helper()
	tok, err := Mint(h.key, h.chain, c)
	if err != nil {
		t.Fatalf("Mint(%+v): %v", c, err)
	}
	return tok
}

// replacePart returns token with its i-th dot-separated field replaced.
func replacePart(token string, i int, v string) string {
	parts := strings.Split(token, ".")
	parts[i] = v
	return strings.Join(parts, ".")
}

func TestVerify(t *testing.T) {
	roots, h := authority(t,
		pki.Request{Role: pki.RoleLogin, Name: "login1"},
		pki.Request{Role: pki.RoleNode, Name: "n1"},
		pki.Request{Role: pki.RoleClient, Name: "ops"},
		pki.Request{Role: pki.RoleMember, Name: "c1"})
	login, node, client, member := h[0], h[1], h[2], h[3]
	otherRoots, _ := authority(t)
	now := time.Now().Truncate(time.Second)
	alice := Claims{User: "alice", UID: 1000, GID: 1000, Groups: []uint32{27, 1000}, Host: "login1",
		IssuedAt: now, Expires: now.Add(time.Minute), Nonce: "n0"}
	good := mustMint(t, login, alice)
	long := payload{User: "alice", UID: 1000, GID: 1000, Host: "login1", IssuedAt: now.Unix(), Expires: now.Add(3 * time.Minute).Unix(), Nonce: "n"}
	asClient := payload{User: "alice", UID: 1000, GID: 1000, Host: "ops", IssuedAt: now.Unix(), Expires: now.Add(time.Minute).Unix(), Nonce: "n"}
	asMember := asClient
	asMember.Host = "c1"
	elsewhere := asClient
	elsewhere.Host = "login2"
	root := asClient
	root.UID, root.Host = 0, "login1"
	later := now.Add(3 * 365 * 24 * time.Hour)
	afterCert := payload{User: "alice", UID: 1000, GID: 1000, Host: "login1", IssuedAt: later.Unix(), Expires: later.Add(time.Minute).Unix(), Nonce: "n"}
	spaced := strings.Replace(string(rawPayload(t, root)), ",", ", ", 1)
	withRole := strings.Replace(string(rawPayload(t, root)), `"nonce"`, `"role":"admin","nonce"`, 1)
	sig, _ := b64.DecodeString(strings.Split(good, ".")[2])
	sig[len(sig)-1] ^= 1
	flipped := b64.EncodeToString(sig)
	for name, tc := range map[string]struct {
		token string
		pool  string // "" is the cluster's authority; "other" another; "none" no pool
		at    time.Time
		want  string // a part of the error; "" accepts
	}{
		"good":                       {token: good, at: now},
		"good a little later":        {token: good, at: now.Add(59 * time.Second)},
		"issued within the skew":     {token: mustMint(t, login, Claims{User: "a", Host: "login1", IssuedAt: now.Add(Skew), Expires: now.Add(time.Minute)}), at: now},
		"a node vouches":             {token: mustMint(t, node, Claims{User: "alice", UID: 1000, Host: "n1", IssuedAt: now, Expires: now.Add(time.Minute)}), at: now},
		"expired":                    {token: good, at: now.Add(time.Minute), want: "expired at"},
		"not yet valid":              {token: good, at: now.Add(-Skew - time.Second), want: "ahead of this host's clock"},
		"lives too long":             {token: signRaw(t, login, rawPayload(t, long)), at: now, want: "longer than"},
		"another authority":          {token: good, pool: "other", at: now, want: "not valid under this cluster's authority"},
		"no authority":               {token: good, pool: "none", at: now, want: "no authority"},
		"a client's certificate":     {token: signRaw(t, client, rawPayload(t, asClient)), at: now, want: "client ops may not vouch"},
		"a member's certificate":     {token: signRaw(t, member, rawPayload(t, asMember)), at: now, want: "member c1 may not vouch"},
		"another host in the claims": {token: signRaw(t, login, rawPayload(t, elsewhere)), at: now, want: `names host "login2"`},
		"tampered payload":           {token: replacePart(good, 1, b64.EncodeToString(rawPayload(t, root))), at: now, want: "signature does not match"},
		"tampered signature":         {token: replacePart(good, 2, flipped), at: now, want: "signature does not match"},
		"another token's signature":  {token: replacePart(good, 2, strings.Split(mustMint(t, login, Claims{User: "bob", Host: "login1", IssuedAt: now, Expires: now.Add(time.Minute)}), ".")[2]), at: now, want: "signature does not match"},
		"the certificate expired":    {token: signRaw(t, login, rawPayload(t, afterCert)), at: later, want: "not valid under this cluster's authority"},
		"spaces in the claims":       {token: signRaw(t, login, []byte(spaced)), at: now, want: "not in the agent's encoding"},
		"an unknown field":           {token: signRaw(t, login, []byte(withRole)), at: now, want: "unknown field"},
		"empty":                      {token: "", at: now, want: "not a corral agent token"},
		"another version":            {token: replacePart(good, 0, "v2"), at: now, want: "not a corral agent token"},
		"no certificate":             {token: strings.Join(strings.Split(good, ".")[:3], "."), at: now, want: "not a corral agent token"},
		"a certificate not DER":      {token: replacePart(good, 3, b64.EncodeToString([]byte("nope"))), at: now, want: "certificate 1"},
		"too long a token":           {token: good + strings.Repeat("A", MaxTokenBytes), at: now, want: "more than"},
	} {
		t.Run(name, func(t *testing.T) {
			pool := map[string]*x509.CertPool{"": roots, "other": otherRoots, "none": nil}[tc.pool]
			c, id, err := Verify(tc.token, pool, tc.at)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v; want it accepted", err)
				}
				if c.Host != id.Name || (id.Role != pki.RoleLogin && id.Role != pki.RoleNode) {
					t.Fatalf("claims of host %q from %+v", c.Host, id)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v; want an error containing %q", err, tc.want)
			}
			t.Log(err)
		})
	}
	c, id, err := Verify(good, roots, now)
	if err != nil || !reflect.DeepEqual(c, alice) || id != (pki.Identity{Role: pki.RoleLogin, Name: "login1"}) {
		t.Fatalf("Verify(good) = %+v, %+v, %v; want %+v from login login1", c, id, err, alice)
	}
}

func TestMintRefuses(t *testing.T) {
	_, h := authority(t,
		pki.Request{Role: pki.RoleLogin, Name: "login1"},
		pki.Request{Role: pki.RoleClient, Name: "ops"},
		pki.Request{Role: pki.RoleLogin, Name: "login2"})
	login, client, other := h[0], h[1], h[2]
	now := time.Now()
	ok := Claims{User: "alice", UID: 1000, Host: "login1", IssuedAt: now, Expires: now.Add(time.Minute)}
	with := func(f func(*Claims)) Claims { c := ok; f(&c); return c }
	for name, tc := range map[string]struct {
		key   crypto.Signer
		chain [][]byte
		c     Claims
		want  string
	}{
		"too long a life":        {login.key, login.chain, with(func(c *Claims) { c.Expires = now.Add(3 * time.Minute) }), "longer than"},
		"expires before issued":  {login.key, login.chain, with(func(c *Claims) { c.Expires = now.Add(-time.Second) }), "no later than"},
		"no times":               {login.key, login.chain, with(func(c *Claims) { c.IssuedAt, c.Expires = time.Time{}, time.Time{} }), "between 1970 and 9999"},
		"another host":           {login.key, login.chain, with(func(c *Claims) { c.Host = "login2" }), "certificate is login1's"},
		"no user":                {login.key, login.chain, with(func(c *Claims) { c.User = "" }), "user name"},
		"a control character":    {login.key, login.chain, with(func(c *Claims) { c.User = "al\nice" }), "user name"},
		"a client's certificate": {client.key, client.chain, with(func(c *Claims) { c.Host = "ops" }), "may not vouch"},
		"another key":            {other.key, login.chain, ok, "not the key of certificate"},
		"no chain":               {login.key, nil, ok, "certificate chain"},
		"too many groups":        {login.key, login.chain, with(func(c *Claims) { c.Groups = make([]uint32, maxGroups+1) }), "groups"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Mint(tc.key, tc.chain, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Mint: %v; want an error containing %q", err, tc.want)
			}
		})
	}
	a, b := mustMint(t, login, ok), mustMint(t, login, ok)
	if a == b {
		t.Fatal("two tokens of the same claims are equal: Mint gave them no nonce")
	}
	if len(a) > 2048 {
		t.Errorf("a token of one certificate is %d bytes; want about 1 KiB", len(a))
	}
}

// FuzzVerify feeds Verify (and the client's peek) any string: neither may
// panic, and whatever Verify accepts must hold to its rules.
func FuzzVerify(f *testing.F) {
	roots, h := authority(f, pki.Request{Role: pki.RoleLogin, Name: "login1"}, pki.Request{Role: pki.RoleClient, Name: "ops"})
	now := time.Unix(time.Now().Unix(), 0)
	good := mustMint(f, h[0], Claims{User: "alice", UID: 1000, GID: 100, Groups: []uint32{100, 27}, Host: "login1", IssuedAt: now, Expires: now.Add(time.Minute)})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(replacePart(good, 1, b64.EncodeToString([]byte(`{"user":"root","uid":0}`))))
	f.Add(signRaw(f, h[1], rawPayload(f, payload{User: "a", Host: "ops", IssuedAt: now.Unix(), Expires: now.Unix() + 60, Nonce: "n"})))
	f.Add(signRaw(f, h[0], []byte(`{"user":"a","uid":0,"gid":0,"host":"login1","iat":-9223372036854775808,"exp":9223372036854775807,"nonce":"n"}`)))
	f.Add("v1....")
	f.Add("v1.e30.AA.AA")
	f.Fuzz(func(t *testing.T, token string) {
		_, _ = peek(token)
		c, id, err := Verify(token, roots, now)
		if err != nil {
			return
		}
		if c.Host != id.Name || id.Role != pki.RoleLogin {
			t.Fatalf("accepted claims of host %q from %+v", c.Host, id)
		}
		if life := c.Expires.Sub(c.IssuedAt); life <= 0 || life > MaxLifetime || !now.Before(c.Expires) || c.IssuedAt.After(now.Add(Skew)) {
			t.Fatalf("accepted a token of %s..%s at %s", c.IssuedAt, c.Expires, now)
		}
	})
}
