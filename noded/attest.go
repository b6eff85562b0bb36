package noded

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"corral/api"
	"corral/internal/attest"
)

// Attester proves to the controllers, with the node's TPM, what the node
// booted (ctld --tpm-policy): once before the daemon registers, then every
// period. It keeps one open TPM and one attestation key.
type Attester struct {
	Name   string
	Client *api.Client
	TPM    *attest.TPM
	Log    *slog.Logger
	ak     *attest.AK
}

// Attest runs one attestation: the keys, the credential to activate when
// the controllers do not trust the attestation key yet, and a quote with
// their nonce over the PCRs they name.
func (a *Attester) Attest(ctx context.Context) error {
	ek, err := a.TPM.EK()
	if err != nil {
		return fmt.Errorf("node %s: reading the TPM's endorsement key: %w", a.Name, err)
	}
	if a.ak == nil {
		if a.ak, err = a.TPM.NewAK(); err != nil {
			return fmt.Errorf("node %s: making the attestation key: %w", a.Name, err)
		}
	}
	ch, err := a.Client.AttestBeginRequest(ctx, api.AttestBegin{Name: a.Name, EK: ek.Public, AK: a.ak.Public()})
	if err != nil {
		return err
	}
	fin := api.AttestFinish{Name: a.Name}
	if len(ch.Credential) > 0 {
		if fin.Activated, err = a.TPM.Activate(a.ak, attest.Challenge{Credential: ch.Credential, Secret: ch.Secret}); err != nil {
			return fmt.Errorf("node %s: activating the controllers' credential: %w", a.Name, err)
		}
	}
	q, err := a.TPM.Quote(a.ak, ch.Nonce, ch.PCRs)
	if err != nil {
		return fmt.Errorf("node %s: quoting PCRs %v: %w", a.Name, ch.PCRs, err)
	}
	fin.Quote = api.AttestQuote{Attest: q.Attest, Signature: q.Signature, PCRs: q.PCRs}
	return a.Client.AttestFinishRequest(ctx, fin)
}

// Run attests again every period until ctx ends, logging failures (the
// controllers drain a node whose attestation fails).
func (a *Attester) Run(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := a.Attest(ctx); err != nil && ctx.Err() == nil {
			a.Log.Warn("re-attestation failed", "node", a.Name, "err", err)
		} else if err == nil {
			a.Log.Debug("re-attested", "node", a.Name)
		}
	}
}
