package api

import (
	"context"
	"net/http"
)

// AttestBegin opens a node's TPM attestation: its endorsement key's and
// attestation key's public areas (TPMT_PUBLIC), as package internal/attest
// makes them.
type AttestBegin struct {
	Name string `json:"name"`
	EK   []byte `json:"ek"`
	AK   []byte `json:"ak"`
}

// AttestChallenge is the controller's answer: a credential to activate
// (empty when the controller already trusts the node's attestation key),
// the nonce to quote with and the PCRs to quote.
type AttestChallenge struct {
	Credential []byte `json:"credential,omitempty"`
	Secret     []byte `json:"secret,omitempty"`
	Nonce      []byte `json:"nonce"`
	PCRs       []int  `json:"pcrs"`
}

// AttestFinish is the node's proof: the secret its TPM recovered (none on a
// re-attestation) and its quote.
type AttestFinish struct {
	Name      string      `json:"name"`
	Activated []byte      `json:"activated,omitempty"`
	Quote     AttestQuote `json:"quote"`
}

// AttestQuote is a TPM2_Quote over SHA-256 PCRs and the values read.
type AttestQuote struct {
	Attest    []byte         `json:"attest"`
	Signature []byte         `json:"signature"`
	PCRs      map[int][]byte `json:"pcrs"`
}

// AttestBeginRequest starts an attestation (noded --tpm).
func (c *Client) AttestBeginRequest(ctx context.Context, req AttestBegin) (*AttestChallenge, error) {
	var v AttestChallenge
	return &v, c.do(ctx, http.MethodPost, "/v1/nodes/attest/begin", req, &v)
}

// AttestFinishRequest ends an attestation with the node's proof.
func (c *Client) AttestFinishRequest(ctx context.Context, req AttestFinish) error {
	return c.do(ctx, http.MethodPost, "/v1/nodes/attest/finish", req, nil)
}
