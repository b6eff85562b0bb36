//go:build !corral_client

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"

	"corral/api"
	"corral/internal/authd"
	"corral/internal/pki"
)

// devSecurity is what `corral dev --secure` runs with: a small authority
// of its own in the state directory, the controller's, each node's and the
// host agent's certificates, and the agent's socket.
type devSecurity struct {
	caDir  string
	member pki.Files
	nodes  []pki.Files
	login  pki.Files
	socket string
}

// newDevSecurity makes (or, on a later start, reuses: the nodes are pinned
// to their keys) the dev cluster's authority and certificates in dir/pki.
func newDevSecurity(dir string, nodes int) (*devSecurity, error) {
	sec := &devSecurity{caDir: filepath.Join(dir, "pki"), socket: filepath.Join(dir, "authd.sock")}
	ca := filepath.Join(sec.caDir, pki.CACertFile)
	if _, err := os.Stat(ca); errors.Is(err, os.ErrNotExist) {
		if err := pki.InitCA(sec.caDir, "corral dev"); err != nil {
			return nil, fmt.Errorf("dev --secure: making the authority in %s: %w", sec.caDir, err)
		}
	}
	issue := func(role pki.Role, name string) (pki.Files, error) {
		out := filepath.Join(sec.caDir, "issued")
		f := pki.Files{Cert: filepath.Join(out, name+".crt"), Key: filepath.Join(out, name+".key"), CA: ca}
		if _, err := os.Stat(f.Cert); err == nil {
			return f, nil
		}
		if _, _, err := pki.Issue(sec.caDir, out, pki.Request{Role: role, Name: name, Hosts: []string{"127.0.0.1", "localhost"}}); err != nil {
			return f, fmt.Errorf("dev --secure: issuing %s %s's certificate: %w", role, name, err)
		}
		return f, nil
	}
	var err error
	if sec.member, err = issue(pki.RoleMember, "dev"); err != nil {
		return nil, err
	}
	if sec.login, err = issue(pki.RoleLogin, "dev-login"); err != nil {
		return nil, err
	}
	for i := 1; i <= nodes; i++ {
		f, err := issue(pki.RoleNode, fmt.Sprintf("n%d", i))
		if err != nil {
			return nil, err
		}
		sec.nodes = append(sec.nodes, f)
	}
	return sec, nil
}

// nodeClient is node i's client of the controller at addr, showing its
// own certificate.
func (sec *devSecurity) nodeClient(i int, addr string) (*api.Client, error) {
	cfg, err := sec.nodes[i].Client()
	if err != nil {
		return nil, err
	}
	cfg.VerifyConnection = pki.RequireRole(pki.RoleMember)
	return api.NewTLSClient("https://"+addr, cfg)
}

// serveAgent runs the host's identity agent for the dev cluster's users
// until ctx ends.
func (sec *devSecurity) serveAgent(ctx context.Context, log *slog.Logger) {
	if err := authd.Serve(ctx, authd.Config{Socket: sec.socket, Files: sec.login, Log: log.With("authd", sec.socket)}); err != nil {
		log.Error("dev --secure: the identity agent stopped", "socket", sec.socket, "err", err)
	}
}

// devAdmins are the users a secure dev cluster takes for admins: the one
// who runs it (root is one anyway).
func devAdmins() []string {
	if u, err := user.Current(); err == nil && u.Username != "root" {
		return []string{u.Username}
	}
	return nil
}
