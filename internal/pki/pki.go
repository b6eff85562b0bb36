// Package pki is a cluster's small certificate authority and the TLS
// configurations built on it: `corral ca init` makes the authority,
// `corral ca issue` a certificate for a controller member, a node daemon or
// a client, and the daemons and the CLI load them with Files.
//
// A certificate names what it was issued for in a URI SAN,
// corral:ROLE/NAME (corral:member/c1, corral:node/n1, corral:login/login1,
// corral:client/ops): the controllers learn who is at the other end of a
// connection from it, so a node can only act as itself and only members may
// use the internal endpoints and Raft. Login and node certificates also let
// their host's agent (package authd) vouch for the host's Unix users. Host names and addresses go in the DNS and IP SANs,
// as any TLS client checks them.
//
// It never listens, dials or decides what a role may do (the daemons do).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Role is what a certificate was issued for.
type Role string

// Roles.
const (
	// RoleMember is a controller member: it serves the API, speaks Raft
	// with the other members and may call their internal endpoints.
	RoleMember Role = "member"
	// RoleNode is a node daemon: it may register, heartbeat and report as
	// the node its certificate names, and serves its job API.
	RoleNode Role = "node"
	// RoleLogin is a login host: its agent (corral authd) vouches for
	// the host's Unix users with the certificate's key. It serves
	// nothing and joins nothing.
	RoleLogin Role = "login"
	// RoleClient is a client (the CLI, automation): it proves nothing
	// beyond holding a certificate of the cluster's authority.
	RoleClient Role = "client"
)

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(strings.ToLower(s)); r {
	case RoleMember, RoleNode, RoleLogin, RoleClient:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: use member (a controller), node (a node daemon), login (a login host's agent) or client", s)
}

// The authority's files in its directory.
const (
	CACertFile = "ca.crt"
	caKeyFile  = "ca.key"
)

// caValidity and certValidity are how long the authority and what it issues
// are valid.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 2 * 365 * 24 * time.Hour
)

// InitCA makes a new authority named name in dir (created when missing):
// ca.crt, which every member, node and client is given, and ca.key, which
// stays there (mode 0600). It refuses to replace an authority already in
// dir: every certificate issued by it would stop working.
func InitCA(dir, name string) error {
	if _, err := os.Stat(filepath.Join(dir, caKeyFile)); err == nil {
		return fmt.Errorf("%s already holds an authority (%s): remove it first to start a new one, which invalidates every certificate it issued", dir, caKeyFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("authority directory: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"corral"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, caKeyFile), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, CACertFile), "CERTIFICATE", der, 0o644)
}

// Request is one certificate to issue.
type Request struct {
	Role Role
	// Name is the member id, the node name or the client's name.
	Name string
	// Hosts are the host names and IP addresses others reach the holder
	// at (members and nodes serve TLS; clients need none).
	Hosts []string
	// Validity is how long the certificate is valid; zero is two years.
	Validity time.Duration
}

// Issue signs a certificate for r with the authority in caDir and writes it
// and its key to outDir as NAME.crt and NAME.key (0600), returning their
// paths.
func Issue(caDir, outDir string, r Request) (certPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := Sign(caDir, &key.PublicKey, r)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(outDir, 0o700); err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(outDir, r.Name+".crt"), filepath.Join(outDir, r.Name+".key")
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePEM(certPath, "CERTIFICATE", der, 0o644)
}

// Sign signs a certificate of r for the public key pub with the authority
// in caDir and returns it (DER): what Issue does for a key it makes, and
// the controllers for a node that joins with a key of its own.
func Sign(caDir string, pub crypto.PublicKey, r Request) ([]byte, error) {
	if err := checkName(r.Name); err != nil {
		return nil, err
	}
	if _, err := ParseRole(string(r.Role)); err != nil {
		return nil, err
	}
	caCert, caKey, err := loadCA(caDir)
	if err != nil {
		return nil, err
	}
	validity := r.Validity
	if validity <= 0 {
		validity = certValidity
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: r.Name, OrganizationalUnit: []string{string(r.Role)}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{{Scheme: "corral", Opaque: string(r.Role) + "/" + r.Name}},
	}
	for _, h := range r.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, caKey)
}

// NewKeyRequest makes a key pair and a certificate request for it naming
// name, signed with the key (so whoever signs it knows the requester holds
// the key): what a node that joins sends.
func NewKeyRequest(name string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	return key, csr, err
}

// WritePair writes a certificate (DER) and its key to certPath and
// keyPath (0600), as Issue writes them.
func WritePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der, 0o644)
}

// checkName refuses names that cannot be a file name or a URI path element.
func checkName(name string) error {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" || strings.HasPrefix(name, ".") {
		return fmt.Errorf("name %q: use 1 to 64 letters, digits, '-', '_' and '.', not starting with '.'", name)
	}
	return nil
}

// Identity is who a verified certificate was issued for.
type Identity struct {
	Role Role
	Name string
}

// IdentityOf reads the role and name a certificate of the authority names;
// false when it names none (a certificate issued elsewhere).
func IdentityOf(cert *x509.Certificate) (Identity, bool) {
	for _, u := range cert.URIs {
		if u.Scheme != "corral" {
			continue
		}
		role, name, ok := strings.Cut(u.Opaque, "/")
		if r, err := ParseRole(role); ok && err == nil && name != "" {
			return Identity{Role: r, Name: name}, true
		}
	}
	return Identity{}, false
}

// PeerIdentity returns the identity of a TLS connection's verified client
// certificate; false when the peer showed none.
func PeerIdentity(cs *tls.ConnectionState) (Identity, bool) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	return IdentityOf(cs.VerifiedChains[0][0])
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists: remove it first, or issue under another name", path)
	}
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: kind, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loadCA reads the authority's certificate and key from dir.
func loadCA(dir string) (*x509.Certificate, any, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CACertFile), filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("the authority in %s: %w (make one with corral ca init)", dir, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return cert, pair.PrivateKey, nil
}

// KeyFingerprint is the SHA-256 of a certificate's public key, in hex: what
// the controllers pin a node to.
func KeyFingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// PeerKey is the fingerprint of a TLS connection's verified client
// certificate's key; "" when the peer showed none.
func PeerKey(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return KeyFingerprint(cs.VerifiedChains[0][0])
}
