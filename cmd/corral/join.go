package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"corral/api"
	"corral/internal/pki"
)

// joinCluster gives a node daemon started with --join TOKEN its
// credential: a key of its own and a node certificate the controllers sign
// for it (POST /v1/nodes/join), kept in DATA/credential/ and used as
// --tls-cert and --tls-key. A daemon that joined before reuses them; the
// token is spent once.
func joinCluster(ctx context.Context, o *optSet, name, addrs string) error {
	if o.get("tls-cert") != "" || o.get("tls-key") != "" {
		return errors.New("noded: --join gets the node's certificate; give it or --tls-cert and --tls-key, not both")
	}
	if o.get("tls-ca") == "" {
		return errors.New("noded: --join needs --tls-ca: the cluster's authority, to know the controllers it joins")
	}
	dir := filepath.Join(o.get("data"), "credential")
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	o.last["tls-cert"], o.last["tls-key"] = certPath, keyPath
	if _, err := os.Stat(certPath); err == nil {
		if _, err := os.Stat(keyPath); err == nil {
			return nil // joined before
		}
	}
	cfg, err := (pki.Files{CA: o.get("tls-ca")}).Client()
	if err != nil {
		return fmt.Errorf("noded: %w", err)
	}
	cfg.VerifyConnection = pki.RequireRole(pki.RoleMember)
	cl, err := api.NewTLSClient(addrs, cfg)
	if err != nil {
		return err
	}
	key, csr, err := pki.NewKeyRequest(name)
	if err != nil {
		return err
	}
	resp, err := cl.Join(ctx, api.JoinRequest{Token: o.get("join"), Name: name, CSR: csr, Hosts: joinHosts(o.get("listen"))})
	if err != nil {
		return fmt.Errorf("noded %s: joining the cluster: %w", name, err)
	}
	if err := pki.WritePair(certPath, keyPath, resp.Cert, key); err != nil {
		return fmt.Errorf("noded %s: keeping the credential in %s: %w", name, dir, err)
	}
	return nil
}

// joinHosts are the names the node's certificate is issued for: the job
// API's address (when it names a host) and the host's name, so that the
// controllers can verify the node's job API.
func joinHosts(listen string) []string {
	hosts := []string{"127.0.0.1", "localhost"}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" && !net.ParseIP(h).IsUnspecified() {
		hosts = append(hosts, h)
	}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	return hosts
}
