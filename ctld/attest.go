package ctld

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/attest"
	"corral/submit"
)

// TPM attestation (Config.TPMPolicy): a node proves what it booted before it
// may register, and again every AttestEvery; a failure drains it. The
// exchange is two calls of the node's daemon (noded --tpm) to the leader:
// begin sends the node's endorsement and attestation keys and gets a
// credential to activate (the first time) and a nonce; finish sends the
// recovered secret and a quote over the policy's PCRs with that nonce.
// What the leader is waiting for lives in its memory only: a node whose
// leader changed starts again.

// attestWindow is how long a begun attestation may take to finish.
const attestWindow = time.Minute

// defaultAttestEvery is Config.AttestEvery's default.
const defaultAttestEvery = 10 * time.Minute

// pendingAttest is an attestation the leader began for a node.
type pendingAttest struct {
	ek      attest.EK
	ak      []byte
	secret  []byte // nil when the AK is trusted already
	nonce   []byte
	expires time.Time
}

// attestations holds the begun attestations, by node.
type attestations struct {
	mu      sync.Mutex
	pending map[string]*pendingAttest
}

// handleAttestBegin answers POST /v1/nodes/attest/begin.
func (c *Controller) handleAttestBegin(w http.ResponseWriter, r *http.Request) error {
	var req api.AttestBegin
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := c.attestingNode(r, req.Name); err != nil {
		return err
	}
	ek := attest.EK{Public: req.EK}
	p := &pendingAttest{ek: ek, ak: req.AK, expires: c.clock.Now().Add(attestWindow)}
	var known *state.Attestation
	c.fsm.Read(func(s *state.State) { known = s.Attestations[req.Name] })
	var resp api.AttestChallenge
	// A re-attestation, with the key this node proved before, needs a
	// quote alone; any other key must first prove it shares the EK's TPM.
	if trusted := known != nil && len(known.AK) > 0 && bytes.Equal(known.AK, req.AK) && known.EK == ek.Fingerprint(); !trusted {
		if err := c.cfg.TPMPolicy.CheckEK(ek); err != nil {
			return c.attestFailed(req.Name, "", err)
		}
		ch, secret, err := attest.MakeChallenge(ek, req.AK)
		if err != nil {
			return c.attestFailed(req.Name, "", err)
		}
		p.secret, resp.Credential, resp.Secret = secret, ch.Credential, ch.Secret
	}
	nonce, err := attest.NewNonce()
	if err != nil {
		return err
	}
	p.nonce, resp.Nonce, resp.PCRs = nonce, nonce, c.cfg.TPMPolicy.PCRSelection()
	c.attest.mu.Lock()
	c.attest.pending[req.Name] = p
	c.attest.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// handleAttestFinish answers POST /v1/nodes/attest/finish: it checks the
// node's proof and records the outcome.
func (c *Controller) handleAttestFinish(w http.ResponseWriter, r *http.Request) error {
	var req api.AttestFinish
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := c.attestingNode(r, req.Name); err != nil {
		return err
	}
	c.attest.mu.Lock()
	p := c.attest.pending[req.Name]
	delete(c.attest.pending, req.Name) // a nonce is used once
	c.attest.mu.Unlock()
	if p == nil || c.clock.Now().After(p.expires) {
		return &httpError{status: http.StatusConflict, field: "name", msg: fmt.Sprintf("node %s: no attestation of it is begun on this controller, or it took longer than %s: begin again (stale or replayed nonce)", req.Name, attestWindow)}
	}
	if p.secret != nil {
		if err := attest.CheckActivation(p.secret, req.Activated); err != nil {
			return c.attestFailed(req.Name, "", err)
		}
	}
	q := &attest.Quote{Attest: req.Quote.Attest, Signature: req.Quote.Signature, PCRs: req.Quote.PCRs}
	if err := c.cfg.TPMPolicy.VerifyQuote(p.ak, q, p.nonce); err != nil {
		return c.attestFailed(req.Name, p.ek.Fingerprint(), err)
	}
	cmd := &state.NodeAttest{Now: c.clock.Now().UTC(), Node: req.Name, OK: true, EK: p.ek.Fingerprint(), AK: p.ak}
	if err := c.proposeChecked(state.CmdNodeAttest, cmd); err != nil {
		return err
	}
	c.log.Info("node attested", "node", req.Name, "ek", cmd.EK)
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// attestingNode says why r may not attest as node name: the cluster asks
// for no attestation, or r is not that node's daemon.
func (c *Controller) attestingNode(r *http.Request, name string) error {
	if why := submit.NameProblem(name, maxNodeNameBytes); why != "" {
		return &fieldError{Field: "name", Msg: fmt.Sprintf("node %q %s", submit.Shown(name), why)}
	}
	noteTarget(r, "node %s", name)
	if err := c.checkNode(r, name); err != nil {
		return err
	}
	if c.cfg.TPMPolicy == nil {
		return &httpError{status: http.StatusNotImplemented, msg: "this cluster asks for no TPM attestation (ctld --tpm-policy): start the node daemon without --tpm"}
	}
	return nil
}

// attestFailed records node's failed attestation (which drains it) and
// returns the refusal the node gets.
func (c *Controller) attestFailed(node, ek string, why error) error {
	cmd := &state.NodeAttest{Now: c.clock.Now().UTC(), Node: node, Reason: why.Error(), EK: ek}
	if _, err := c.propose(state.CmdNodeAttest, cmd); err != nil {
		return err
	}
	c.log.Warn("node failed its attestation; drained", "node", node, "err", why)
	return &httpError{status: http.StatusForbidden, msg: fmt.Sprintf("node %s: attestation refused: %v", node, why)}
}

// checkAttested says why node may not register: the cluster asks for an
// attestation and node has none that passed within 2×AttestEvery.
func (c *Controller) checkAttested(s *state.State, node string) error {
	if c.cfg.TPMPolicy == nil {
		return nil
	}
	a := s.Attestations[node]
	switch {
	case a == nil:
		return fmt.Errorf("node %s has not attested: this cluster asks every node for a TPM quote first (noded --tpm /dev/tpmrm0)", node)
	case !a.OK:
		return fmt.Errorf("node %s failed its last attestation (%s): fix the node, attest again, and have an operator resume it", node, a.Reason)
	case c.clock.Now().Sub(a.At) > 2*c.cfg.AttestEvery:
		return fmt.Errorf("node %s last attested at %s, more than %s ago: attest again (noded --tpm)", node, a.At.UTC().Format(time.RFC3339), 2*c.cfg.AttestEvery)
	}
	return nil
}

// drainUnattested records a failed attestation, which drains it, for each
// registered node whose last attestation passed longer than twice
// AttestEvery ago: a node that stopped proving what it runs gets no new
// work.
func (c *Controller) drainUnattested(now time.Time) {
	if c.cfg.TPMPolicy == nil {
		return
	}
	stale := map[string]time.Time{}
	c.fsm.Read(func(s *state.State) {
		for name, n := range s.Nodes {
			if a := s.Attestations[name]; !n.Drain && !n.Down && a != nil && a.OK && now.Sub(a.At) > 2*c.cfg.AttestEvery {
				stale[name] = a.At
			}
		}
	})
	for _, name := range slices.Sorted(maps.Keys(stale)) {
		why := fmt.Sprintf("no attestation since %s (one every %s is asked)", stale[name].UTC().Format(time.RFC3339), c.cfg.AttestEvery)
		if _, err := c.propose(state.CmdNodeAttest, &state.NodeAttest{Now: now, Node: name, Reason: why}); err != nil {
			c.log.Warn("draining a node that stopped attesting failed", "node", name, "err", err)
			continue
		}
		c.log.Warn("node stopped attesting; drained", "node", name, "reason", why)
	}
}
