package attest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownEK is returned (wrapped) by CheckEK for an endorsement key that
// is not on the allow list.
var ErrUnknownEK = errors.New("unknown endorsement key")

// Policy is what a node group's TPM must show: the SHA-256 value each named
// PCR must hold, and the endorsement keys (by Fingerprint) allowed to join.
// An operator writes it as JSON:
//
//	{
//	  "pcrs": {"0": "3d45…", "7": "65ca…"},
//	  "endorsement_keys": ["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
//	}
type Policy struct {
	// PCRs maps a PCR index (0–23) to its expected SHA-256 value in hex.
	PCRs map[int]string `json:"pcrs"`
	// EndorsementKeys lists the allowed EK fingerprints (hex SHA-256 of the
	// EK's PKIX public key, as EK.Fingerprint prints it).
	EndorsementKeys []string `json:"endorsement_keys"`
}

// ParsePolicy decodes and validates an operator's policy, refusing unknown
// fields so that a misspelt key is not silently ignored. Hex values are
// lower-cased.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("attestation policy: %w (write {\"pcrs\": {\"7\": \"<hex sha256>\"}, \"endorsement_keys\": [\"<fingerprint>\"]})", err)
	}
	if dec.More() {
		return Policy{}, errors.New("attestation policy: more than one JSON value; write one object")
	}
	for i, v := range p.PCRs {
		p.PCRs[i] = strings.ToLower(v)
	}
	for i, fp := range p.EndorsementKeys {
		p.EndorsementKeys[i] = strings.ToLower(fp)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// Validate checks that every PCR index is 0–23 with a 64-digit hex value and
// that every fingerprint is 64 hex digits.
func (p Policy) Validate() error {
	for _, i := range sortedKeys(p.PCRs) {
		if i < 0 || i > MaxPCR {
			return fmt.Errorf("attestation policy: pcrs: index %d: a TPM has PCRs 0–%d", i, MaxPCR)
		}
		if !isHexDigest(p.PCRs[i]) {
			return fmt.Errorf("attestation policy: pcrs: PCR %d: %q is not a SHA-256 value (64 hex digits)", i, p.PCRs[i])
		}
	}
	for _, fp := range p.EndorsementKeys {
		if !isHexDigest(fp) {
			return fmt.Errorf("attestation policy: endorsement_keys: %q is not a fingerprint (64 hex digits, as the node prints its EK's)", fp)
		}
	}
	return nil
}

// CheckEK refuses an endorsement key that does not decode or whose
// fingerprint is not on the allow list.
func (p Policy) CheckEK(ek EK) error {
	pub, err := parseEK(ek.Public)
	if err != nil {
		return err
	}
	fp, err := fingerprint(pub)
	if err != nil {
		return err
	}
	for _, allowed := range p.EndorsementKeys {
		if strings.EqualFold(allowed, fp) {
			return nil
		}
	}
	return fmt.Errorf("%w: endorsement key %s is not on the allow list: add %q to endorsement_keys in the attestation policy if this node's TPM is trusted", ErrUnknownEK, fp, fp)
}

// PCRSelection returns the PCR indices the policy names, in ascending order:
// the PCRs the controller asks a node to quote.
func (p Policy) PCRSelection() []int {
	return sortedKeys(p.PCRs)
}

// PCRValues returns the policy's PCR values as bytes, for VerifyQuote. It
// fails on a value that is not hex (a Policy built without ParsePolicy).
func (p Policy) PCRValues() (map[int][]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	out := make(map[int][]byte, len(p.PCRs))
	for i, v := range p.PCRs {
		b, _ := hex.DecodeString(v)
		out[i] = b
	}
	return out, nil
}

// VerifyQuote checks a quote against the policy's PCR values; see the
// package's VerifyQuote.
func (p Policy) VerifyQuote(akPublic []byte, q *Quote, nonce []byte) error {
	want, err := p.PCRValues()
	if err != nil {
		return err
	}
	return VerifyQuote(akPublic, q, nonce, want)
}

// PolicyPCRs returns a quote's PCR values in the policy's hex form, so that
// an operator can take a known-good node's values as the policy.
func PolicyPCRs(q *Quote) map[int]string {
	if q == nil {
		return nil
	}
	out := make(map[int]string, len(q.PCRs))
	for i, v := range q.PCRs {
		out[i] = hex.EncodeToString(v)
	}
	return out
}

// isHexDigest reports whether s is 64 hex digits.
func isHexDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
