package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"corral/internal/getopt"
	"corral/internal/pki"
)

// runCA is `corral ca init|issue`: the cluster's certificate authority for
// TLS (see package pki).
func runCA(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: corral ca init [--dir DIR] [--name NAME] | corral ca issue --role member|node|login|client --name NAME [--host H,...] [--dir DIR] [--out DIR] [--days N]")
	}
	switch args[0] {
	case "init":
		return runCAInit(env, args[1:])
	case "issue":
		return runCAIssue(env, args[1:])
	}
	return fmt.Errorf("ca: unknown subcommand %q: use init or issue", args[0])
}

func runCAInit(env *cliEnv, args []string) error {
	o, err := parseOpts(env, "ca init", getopt.Permute, args,
		valued(0, "dir", "DIR", "where the authority's ca.crt and ca.key go (default ./corral-ca)"),
		valued(0, "name", "NAME", "the authority's name (default \"corral cluster\")"),
	)
	if err != nil {
		return err
	}
	dir := orString(o.get("dir"), "corral-ca")
	if err := pki.InitCA(dir, orString(o.get("name"), "corral cluster")); err != nil {
		return fmt.Errorf("ca init: %w", err)
	}
	fmt.Fprintf(env.stdout, "authority in %s: give %s to every controller, node and client (--tls-ca, CORRAL_CA); keep ca.key there\n",
		dir, filepath.Join(dir, pki.CACertFile))
	return nil
}

func runCAIssue(env *cliEnv, args []string) error {
	o, err := parseOpts(env, "ca issue", getopt.Permute, args,
		valued(0, "role", "ROLE", "member (a controller), node (a node daemon), login (a login host's agent, corral authd) or client"),
		valued(0, "name", "NAME", "the member id (--id of corral ctld), the node name, the login host's name, or the client's name"),
		valued(0, "host", "H,...", "host names and IP addresses the holder is reached at (members and nodes; a login host needs none)"),
		valued(0, "dir", "DIR", "the authority's directory (default ./corral-ca)"),
		valued(0, "out", "DIR", "where NAME.crt and NAME.key go (default: the authority's directory)"),
		valued(0, "days", "N", "days the certificate is valid (default 730)"),
	)
	if err != nil {
		return err
	}
	role, err := pki.ParseRole(o.get("role"))
	if err != nil {
		return fmt.Errorf("ca issue: --role: %w", err)
	}
	var validity time.Duration
	if v := o.get("days"); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 1 || days > 36500 {
			return fmt.Errorf("ca issue: --days=%s: a whole number of days from 1 to 36500", v)
		}
		validity = time.Duration(days) * 24 * time.Hour
	}
	dir := orString(o.get("dir"), "corral-ca")
	cert, key, err := pki.Issue(dir, orString(o.get("out"), dir), pki.Request{Role: role, Name: o.get("name"), Hosts: o.list("host"), Validity: validity})
	if err != nil {
		return fmt.Errorf("ca issue: %w", err)
	}
	fmt.Fprintf(env.stdout, "%s %s: certificate %s, key %s\n", role, o.get("name"), cert, key)
	return nil
}

// tlsOptions are the --tls-* flags of the daemons.
func tlsOptions() []getopt.Option {
	return []getopt.Option{
		valued(0, "tls-cert", "FILE", "this daemon's certificate (corral ca issue): run the API, Raft and the calls between daemons over TLS"),
		valued(0, "tls-key", "FILE", "the certificate's key"),
		valued(0, "tls-ca", "FILE", "the cluster's authority (ca.crt of corral ca init), which every peer's certificate must be signed by"),
	}
}

func tlsFiles(o *optSet) pki.Files {
	return pki.Files{Cert: o.get("tls-cert"), Key: o.get("tls-key"), CA: o.get("tls-ca")}
}
