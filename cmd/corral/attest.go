//go:build !corral_client

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"corral/api"
	"corral/internal/attest"
	"corral/noded"
)

// attestOptions reads ctld's --tpm-policy and --attest-every.
func attestOptions(o *optSet) (*attest.Policy, time.Duration, error) {
	every, err := parseDuration("attest-every", o.get("attest-every"), 0)
	if err != nil {
		return nil, 0, err
	}
	path := o.get("tpm-policy")
	if path == "" {
		return nil, every, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("--tpm-policy: %w", err)
	}
	p, err := attest.ParsePolicy(data)
	if err != nil {
		return nil, 0, fmt.Errorf("--tpm-policy %s: %w", path, err)
	}
	return &p, every, nil
}

// startAttesting attests the node once before it registers (retrying
// while the controllers elect a leader) and then every --attest-every in
// the background.
func startAttesting(ctx context.Context, o *optSet, cl *api.Client, name, path string, log *slog.Logger) error {
	every, err := parseDuration("attest-every", o.get("attest-every"), 10*time.Minute)
	if err != nil {
		return err
	}
	tpm, err := attest.Open(path)
	if err != nil {
		return fmt.Errorf("noded %s: --tpm %s: %w", name, path, err)
	}
	a := &noded.Attester{Name: name, Client: cl, TPM: tpm, Log: log}
	if err := a.Attest(ctx); err != nil {
		tpm.Close()
		return fmt.Errorf("noded %s: the first attestation failed: %w", name, err)
	}
	log.Info("attested with the node's TPM", "node", name, "tpm", path)
	go func() {
		a.Run(ctx, every)
		tpm.Close()
	}()
	return nil
}
