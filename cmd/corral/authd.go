//go:build !corral_client

package main

import (
	"context"
	"fmt"

	"corral/internal/authd"
	"corral/internal/getopt"
	"corral/noded"
)

// runAuthd is `corral authd`: the host's identity agent, which vouches
// for the host's Unix users with the host's certificate (see package
// authd).
func runAuthd(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "authd", getopt.Permute, args,
		valued(0, "socket", "PATH", "the Unix socket local users ask (default $"+authd.SocketEnv+" or "+authd.DefaultSocket+")"),
		valued(0, "tls-cert", "FILE", "this host's certificate, whose key signs the tokens: corral ca issue --role login --name HOST (a node's certificate serves too)"),
		valued(0, "tls-key", "FILE", "the certificate's key (keep it readable by root only: whoever reads it can vouch for any user)"),
		valued(0, "tls-ca", "FILE", "the cluster's authority (ca.crt of corral ca init): the agent checks its certificate against it before it listens"),
		valued(0, "ttl", "DURATION", "how long each token lives (default 1m, at most 2m)"),
		valued(0, "log-level", "LEVEL", "debug (logs each token minted), info, warn or error (default info)"),
	)
	if err != nil {
		return err
	}
	if len(o.args) > 0 {
		return fmt.Errorf("authd: unexpected argument %q (see corral authd --help)", o.args[0])
	}
	log, err := newLogger(env.stderr, orString(o.get("log-level"), "info"))
	if err != nil {
		return err
	}
	ttl, err := parseDuration("ttl", o.get("ttl"), authd.DefaultTTL)
	if err != nil {
		return err
	}
	return authd.Serve(ctx, authd.Config{Socket: agentSocket(env, o.get("socket")), Files: tlsFiles(o), Log: log, TTL: ttl})
}

// runNodedWithAgent runs the node daemon d and, beside it, the host's
// identity agent with the node's certificate (noded --authd-socket). An
// agent that cannot start stops the daemon: it was told to vouch for the
// host's users and cannot.
func runNodedWithAgent(ctx context.Context, d *noded.Daemon, cfg authd.Config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	agentErr := make(chan error, 1)
	go func() {
		err := authd.Serve(ctx, cfg)
		if err != nil {
			cancel()
		}
		agentErr <- err
	}()
	err := d.Run(ctx)
	cancel()
	if aerr := <-agentErr; aerr != nil {
		return fmt.Errorf("noded: --authd-socket: %w", aerr)
	}
	return err
}
