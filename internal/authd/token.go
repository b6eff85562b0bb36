package authd

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"corral/internal/pki"
)

// Claims is what a host's agent vouches for: the Unix user that asked it,
// as the kernel and the host's passwd and group databases know them.
type Claims struct {
	User   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups, as the host's group database lists them
	// Host is the name in the vouching host's certificate.
	Host string
	// IssuedAt and Expires bound the token's life (at most MaxLifetime);
	// the token carries them in whole seconds.
	IssuedAt, Expires time.Time
	// Nonce makes every token unique; Mint fills in a random one when it
	// is empty.
	Nonce string
}

// The limits Verify holds a token to.
const (
	// MaxLifetime is the longest life a token may have: a stolen token
	// is of use for at most this long.
	MaxLifetime = 2 * time.Minute
	// Skew is how far ahead of the verifier's clock a token's IssuedAt
	// may be (the hosts' clocks differ a little).
	Skew = 5 * time.Second
	// MaxTokenBytes bounds a token, far below the controllers' header
	// limit.
	MaxTokenBytes = 32 << 10
	maxChain      = 4
	maxGroups     = 1024
	maxNameBytes  = 256
	maxNonceBytes = 64
	maxUnix       = 253402300799 // 9999-12-31T23:59:59Z
	version       = "v1"
	// signContext separates these signatures from anything else the
	// host's key signs (TLS handshakes).
	signContext = "corral agent identity token v1\x00"
)

// b64 is the token's strict, unpadded base64url.
var b64 = base64.RawURLEncoding.Strict()

// payload is the claims as the token carries them.
type payload struct {
	User     string   `json:"user"`
	UID      uint32   `json:"uid"`
	GID      uint32   `json:"gid"`
	Groups   []uint32 `json:"groups,omitempty"`
	Host     string   `json:"host"`
	IssuedAt int64    `json:"iat"`
	Expires  int64    `json:"exp"`
	Nonce    string   `json:"nonce"`
}

func (p payload) claims() Claims {
	return Claims{User: p.User, UID: p.UID, GID: p.GID, Groups: p.Groups, Host: p.Host,
		IssuedAt: time.Unix(p.IssuedAt, 0), Expires: time.Unix(p.Expires, 0), Nonce: p.Nonce}
}

// Mint signs c with key, the private key of chain[0] (the host's
// certificate, DER, followed by any intermediates), and returns the token.
// It refuses claims Verify would refuse whatever the time.
func Mint(key crypto.Signer, chain [][]byte, c Claims) (string, error) {
	if len(chain) == 0 || len(chain) > maxChain {
		return "", fmt.Errorf("minting an identity token: give the host's certificate chain (1 to %d certificates), not %d", maxChain, len(chain))
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return "", fmt.Errorf("minting an identity token: the host's certificate: %w", err)
	}
	if err := checkHostKey(leaf); err != nil {
		return "", fmt.Errorf("minting an identity token: %w", err)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return "", fmt.Errorf("minting an identity token: the key is not the key of certificate %q: give the key issued with it", leaf.Subject.CommonName)
	}
	id, err := vouchingIdentity(leaf)
	if err != nil {
		return "", err
	}
	if c.Host != id.Name {
		return "", fmt.Errorf("minting an identity token: the claims name host %q but the certificate is %s's", c.Host, id.Name)
	}
	if c.Nonce == "" {
		n := make([]byte, 16)
		rand.Read(n)
		c.Nonce = b64.EncodeToString(n)
	}
	p := payload{User: c.User, UID: c.UID, GID: c.GID, Groups: c.Groups, Host: c.Host,
		IssuedAt: c.IssuedAt.Unix(), Expires: c.Expires.Unix(), Nonce: c.Nonce}
	if len(p.Groups) == 0 {
		p.Groups = nil
	}
	if err := p.check(); err != nil {
		return "", fmt.Errorf("minting an identity token: %w", err)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	digest := sha256.Sum256(append([]byte(signContext), body...))
	sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("minting an identity token: signing: %w", err)
	}
	parts := []string{version, b64.EncodeToString(body), b64.EncodeToString(sig)}
	for _, der := range chain {
		parts = append(parts, b64.EncodeToString(der))
	}
	token := strings.Join(parts, ".")
	if len(token) > MaxTokenBytes {
		return "", fmt.Errorf("minting an identity token for %s: %d bytes, more than the %d a token may have (too many groups or certificates?)", c.User, len(token), MaxTokenBytes)
	}
	return token, nil
}

// Verify checks token at now against the cluster's authority (roots) and
// returns the claims and the identity of the host that vouched for them.
// It refuses a token whose host certificate does not chain to roots, is
// not a login host's or a node's, or names another host than the claims;
// whose signature does not verify; that is not yet valid, has expired or
// was made to live longer than MaxLifetime.
func Verify(token string, roots *x509.CertPool, now time.Time) (Claims, pki.Identity, error) {
	if roots == nil {
		return Claims{}, pki.Identity{}, errors.New("identity token: no authority to verify it against (the controllers need --tls-ca)")
	}
	body, sig, certs, err := split(token)
	if err != nil {
		return Claims{}, pki.Identity{}, err
	}
	leaf, id, err := verifyChain(certs, roots, now)
	if err != nil {
		return Claims{}, pki.Identity{}, err
	}
	digest := sha256.Sum256(append([]byte(signContext), body...))
	if !ecdsa.VerifyASN1(leaf.PublicKey.(*ecdsa.PublicKey), digest[:], sig) {
		return Claims{}, pki.Identity{}, fmt.Errorf("identity token of host %s: the signature does not match its claims (altered on the way?): ask the host's agent for a new one", id.Name)
	}
	p, err := decodePayload(body)
	if err != nil {
		return Claims{}, pki.Identity{}, fmt.Errorf("identity token of host %s: %w", id.Name, err)
	}
	if p.Host != id.Name {
		return Claims{}, pki.Identity{}, fmt.Errorf("identity token: it names host %q but is signed with %s's certificate: refused", p.Host, id.Name)
	}
	if err := p.checkTime(now); err != nil {
		return Claims{}, pki.Identity{}, fmt.Errorf("identity token of %s from host %s: %w", p.User, id.Name, err)
	}
	return p.claims(), id, nil
}

// split takes a token apart: "v1", the payload, the signature, then the
// certificates, leaf first, each base64url without padding, joined by dots.
func split(token string) (body, sig []byte, certs []*x509.Certificate, err error) {
	if len(token) > MaxTokenBytes {
		return nil, nil, nil, fmt.Errorf("identity token: %d bytes, more than the %d a token may have", len(token), MaxTokenBytes)
	}
	parts := strings.Split(token, ".")
	if len(parts) < 4 || len(parts) > 3+maxChain || parts[0] != version {
		return nil, nil, nil, errors.New("identity token: not a corral agent token (v1.PAYLOAD.SIGNATURE.CERTIFICATE...): ask the host's agent (corral authd) for one")
	}
	if body, err = b64.DecodeString(parts[1]); err != nil {
		return nil, nil, nil, fmt.Errorf("identity token: the payload is not base64url: %w", err)
	}
	if sig, err = b64.DecodeString(parts[2]); err != nil {
		return nil, nil, nil, fmt.Errorf("identity token: the signature is not base64url: %w", err)
	}
	for i, part := range parts[3:] {
		der, err := b64.DecodeString(part)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("identity token: certificate %d is not base64url: %w", i+1, err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("identity token: certificate %d: %w", i+1, err)
		}
		certs = append(certs, cert)
	}
	return body, sig, certs, nil
}

// verifyChain checks that certs[0] chains to roots at now and may vouch
// for users.
func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, now time.Time) (*x509.Certificate, pki.Identity, error) {
	leaf := certs[0]
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return nil, pki.Identity{}, fmt.Errorf("identity token: the host certificate %q is not valid under this cluster's authority at %s: %w (issue the host a certificate with corral ca issue --role login)",
			leaf.Subject.CommonName, now.UTC().Format(time.RFC3339), err)
	}
	if err := checkHostKey(leaf); err != nil {
		return nil, pki.Identity{}, fmt.Errorf("identity token: %w", err)
	}
	id, err := vouchingIdentity(leaf)
	if err != nil {
		return nil, pki.Identity{}, err
	}
	return leaf, id, nil
}

// checkHostKey requires what pki issues: an ECDSA P-256 key allowed to
// sign.
func checkHostKey(cert *x509.Certificate) error {
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return fmt.Errorf("the host certificate %q has no ECDSA P-256 key: use one corral ca issue made", cert.Subject.CommonName)
	}
	if cert.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		return fmt.Errorf("the host certificate %q may not sign: use one corral ca issue made", cert.Subject.CommonName)
	}
	return nil
}

// vouchingIdentity returns the identity a certificate names when its role
// may vouch for users: a login host or a node.
func vouchingIdentity(cert *x509.Certificate) (pki.Identity, error) {
	id, ok := pki.IdentityOf(cert)
	if !ok {
		return pki.Identity{}, fmt.Errorf("identity token: the host certificate %q names no corral role: issue the host one with corral ca issue --role login", cert.Subject.CommonName)
	}
	if id.Role != pki.RoleLogin && id.Role != pki.RoleNode {
		return pki.Identity{}, fmt.Errorf("identity token: the certificate of %s %s may not vouch for users (only login hosts and nodes may): issue the host a login certificate with corral ca issue --role login --name HOST", id.Role, id.Name)
	}
	return id, nil
}

// decodePayload reads the claims, which must be exactly as Mint encodes
// them: no unknown, repeated or reordered fields, no spaces.
func decodePayload(body []byte) (payload, error) {
	var p payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return payload{}, fmt.Errorf("the claims are not valid: %w", err)
	}
	canon, err := json.Marshal(p)
	if err != nil || !bytes.Equal(canon, body) {
		return payload{}, errors.New("the claims are not in the agent's encoding: refused")
	}
	if err := p.check(); err != nil {
		return payload{}, err
	}
	return p, nil
}

// check refuses claims no agent makes, whatever the time.
func (p payload) check() error {
	switch {
	case !goodName(p.User):
		return fmt.Errorf("user name %q: give 1 to %d printable characters", p.User, maxNameBytes)
	case !goodName(p.Host):
		return fmt.Errorf("host name %q: give 1 to %d printable characters", p.Host, maxNameBytes)
	case p.Nonce == "" || len(p.Nonce) > maxNonceBytes:
		return fmt.Errorf("nonce: give 1 to %d characters", maxNonceBytes)
	case len(p.Groups) > maxGroups:
		return fmt.Errorf("user %s: %d groups, more than the %d a token may carry", p.User, len(p.Groups), maxGroups)
	case p.IssuedAt < 1 || p.IssuedAt > maxUnix || p.Expires < 1 || p.Expires > maxUnix:
		// Bounded, so that Expires-IssuedAt cannot overflow.
		return fmt.Errorf("its times (issued %d, expires %d) are not seconds between 1970 and 9999", p.IssuedAt, p.Expires)
	case p.Expires <= p.IssuedAt:
		return fmt.Errorf("it expires (%s) no later than it was issued (%s)", unixText(p.Expires), unixText(p.IssuedAt))
	case p.Expires-p.IssuedAt > int64(MaxLifetime/time.Second):
		return fmt.Errorf("it lives %ds, longer than the %s a token may: refused (an agent mints tokens of a minute)", p.Expires-p.IssuedAt, MaxLifetime)
	}
	return nil
}

// checkTime refuses a token that is not valid at now.
func (p payload) checkTime(now time.Time) error {
	if time.Unix(p.IssuedAt, 0).After(now.Add(Skew)) {
		return fmt.Errorf("issued at %s, ahead of this host's clock (%s) by more than %s: synchronise the hosts' clocks (NTP)",
			unixText(p.IssuedAt), now.UTC().Format(time.RFC3339), Skew)
	}
	if !now.Before(time.Unix(p.Expires, 0)) {
		return fmt.Errorf("expired at %s (now %s): the host's agent mints a new one each minute; is `corral authd` running, and are the hosts' clocks synchronised?",
			unixText(p.Expires), now.UTC().Format(time.RFC3339))
	}
	return nil
}

func unixText(s int64) string { return time.Unix(s, 0).UTC().Format(time.RFC3339) }

// goodName accepts 1 to maxNameBytes printable characters.
func goodName(s string) bool {
	if s == "" || len(s) > maxNameBytes {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}

// peek reads a token's claims without verifying anything: the agent's
// client uses it to learn when the token it was given expires.
func peek(token string) (Claims, error) {
	parts := strings.SplitN(token, ".", 3)
	if len(parts) != 3 || parts[0] != version {
		return Claims{}, errors.New("not a corral agent token")
	}
	body, err := b64.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("the payload is not base64url: %w", err)
	}
	p, err := decodePayload(body)
	if err != nil {
		return Claims{}, err
	}
	return p.claims(), nil
}
