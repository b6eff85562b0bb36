package pki

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// authority makes an authority in a temporary directory and issues one
// certificate per request, returning the directory and each one's Files.
func authority(t *testing.T, reqs ...Request) (string, []Files) {
	t.Helper()
	dir := t.TempDir()
	if err := InitCA(filepath.Join(dir, "ca"), "test cluster"); err != nil {
		t.Fatal(err)
	}
	var out []Files
	for _, r := range reqs {
		cert, key, err := Issue(filepath.Join(dir, "ca"), filepath.Join(dir, "issued"), r)
		if err != nil {
			t.Fatalf("issue %s %s: %v", r.Role, r.Name, err)
		}
		out = append(out, Files{Cert: cert, Key: key, CA: filepath.Join(dir, "ca", CACertFile)})
	}
	return dir, out
}

func TestIssueNamesRoleAndHosts(t *testing.T) {
	dir, files := authority(t, Request{Role: RoleMember, Name: "c1", Hosts: []string{"127.0.0.1", "ctl1.example"}})
	pair, err := tls.LoadX509KeyPair(files[0].Cert, files[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	cert := pair.Leaf
	id, ok := IdentityOf(cert)
	if !ok || id != (Identity{Role: RoleMember, Name: "c1"}) {
		t.Fatalf("identity %+v, %v; want member c1", id, ok)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || len(cert.DNSNames) != 1 || cert.DNSNames[0] != "ctl1.example" {
		t.Fatalf("SANs: IPs %v, DNS %v; want 127.0.0.1 and ctl1.example", cert.IPAddresses, cert.DNSNames)
	}
	for _, f := range []string{files[0].Key, filepath.Join(dir, "ca", caKeyFile)} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v, %v; want 0600", f, fi.Mode().Perm(), err)
		}
	}
}

func TestAuthorityAndCertificatesAreNotReplaced(t *testing.T) {
	dir, _ := authority(t, Request{Role: RoleNode, Name: "n1"})
	if err := InitCA(filepath.Join(dir, "ca"), "again"); err == nil || !strings.Contains(err.Error(), "already holds an authority") {
		t.Fatalf("a second InitCA: %v; want a refusal", err)
	}
	if _, _, err := Issue(filepath.Join(dir, "ca"), filepath.Join(dir, "issued"), Request{Role: RoleNode, Name: "n1"}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("issuing n1 twice: %v; want a refusal", err)
	}
}

func TestIssueRefusesBadRequests(t *testing.T) {
	dir, _ := authority(t)
	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"path in the name", Request{Role: RoleNode, Name: "../n1"}, "name"},
		{"empty name", Request{Role: RoleNode}, "name"},
		{"unknown role", Request{Role: "root", Name: "x"}, "unknown role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Issue(filepath.Join(dir, "ca"), filepath.Join(dir, "issued"), tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%+v: %v; want an error about %s", tc.r, err, tc.want)
			}
		})
	}
	if _, _, err := Issue(filepath.Join(dir, "nowhere"), dir, Request{Role: RoleNode, Name: "n"}); err == nil || !strings.Contains(err.Error(), "corral ca init") {
		t.Fatalf("issuing without an authority: %v; want a hint to corral ca init", err)
	}
}

// handshake connects a client with files c to a server with files s that
// requires a certificate of role, and returns each side's error.
func handshake(t *testing.T, s, c Files, role Role) (serverErr, clientErr error) {
	t.Helper()
	scfg, err := s.Server(tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	scfg.VerifyConnection = RequireRole(role)
	ccfg, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ccfg.ServerName = "127.0.0.1"
	ccfg.VerifyConnection = RequireRole(role)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		err = conn.(*tls.Conn).Handshake()
		if err == nil {
			_, err = conn.Write([]byte("x")) // the client's check runs after the server's
		}
		done <- err
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
	if err == nil {
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	return <-done, err
}

func TestMembersOnlyHandshake(t *testing.T) {
	_, f := authority(t,
		Request{Role: RoleMember, Name: "c1", Hosts: []string{"127.0.0.1"}},
		Request{Role: RoleMember, Name: "c2", Hosts: []string{"127.0.0.1"}},
		Request{Role: RoleNode, Name: "n1", Hosts: []string{"127.0.0.1"}})
	_, other := authority(t, Request{Role: RoleMember, Name: "c2", Hosts: []string{"127.0.0.1"}})
	if s, c := handshake(t, f[0], f[1], RoleMember); s != nil || c != nil {
		t.Fatalf("member to member: server %v, client %v; want both to succeed", s, c)
	}
	if s, _ := handshake(t, f[0], f[2], RoleMember); s == nil || !strings.Contains(s.Error(), "not a member's") {
		t.Fatalf("a node's certificate on a members-only listener: %v; want a refusal naming the role", s)
	}
	if s, c := handshake(t, f[0], other[0], RoleMember); s == nil && c == nil {
		t.Fatal("a member certificate of another authority was accepted")
	}
	noCert := Files{CA: f[1].CA}
	if s, _ := handshake(t, f[0], noCert, RoleMember); s == nil {
		t.Fatal("a client without a certificate was accepted where one is required")
	}
}

func TestClientNeedsTheAuthority(t *testing.T) {
	if _, err := (Files{}).Client(); err == nil || !strings.Contains(err.Error(), "CORRAL_CA") {
		t.Fatalf("a client without the authority: %v; want a hint naming CORRAL_CA", err)
	}
	if _, err := (Files{CA: "x"}).Server(tls.NoClientCert); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("a server without its certificate: %v; want a hint naming --tls-cert", err)
	}
	bad := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(bad, []byte("not pem"), 0o644)
	if _, err := (Files{CA: bad}).Client(); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("an authority file without a certificate: %v", err)
	}
	var pe *os.PathError
	if _, err := (Files{CA: "/nonexistent/ca.crt"}).Client(); !errors.As(err, &pe) {
		t.Fatalf("a missing authority file: %v; want the path error", err)
	}
}

func TestLoginRole(t *testing.T) {
	if r, err := ParseRole("Login"); err != nil || r != RoleLogin {
		t.Fatalf("ParseRole(Login) = %q, %v; want login", r, err)
	}
	_, files := authority(t, Request{Role: RoleLogin, Name: "login1"})
	pair, err := tls.LoadX509KeyPair(files[0].Cert, files[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := IdentityOf(pair.Leaf); !ok || id != (Identity{Role: RoleLogin, Name: "login1"}) {
		t.Fatalf("identity %+v, %v; want login login1", id, ok)
	}
}
