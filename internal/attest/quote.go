package attest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/google/go-tpm/tpm2"
)

// NonceSize is the size of the nonces NewNonce makes: a SHA-256 digest's.
const NonceSize = 32

// maxNonceSize is the largest qualifying data a TPM accepts in a quote
// (a TPM2B_DATA holds at most one TPMT_HA, 64 bytes with SHA-512).
const maxNonceSize = 64

// maxQuoteSize bounds the attest and signature bytes accepted from a node; a
// quote over 24 PCRs is about 150 bytes and a P-256 signature 72.
const maxQuoteSize = 2048

// MaxPCR is the highest PCR index a PC Client TPM has (PCRs 0–23).
const MaxPCR = 23

// Errors that VerifyQuote wraps, one per check, so that the caller can tell
// a replayed quote from a changed boot with errors.Is.
var (
	ErrSignature = errors.New("the quote's signature does not verify")
	ErrNonce     = errors.New("stale or replayed nonce")
	ErrPCRDigest = errors.New("the reported PCR values do not match the quoted digest")
	ErrPCR       = errors.New("a PCR value differs from the policy")
)

// Quote is a node's TPM2_Quote over SHA-256 PCRs, with the PCR values it read
// so that the verifier can recompute the quoted digest and compare each
// value with the policy.
type Quote struct {
	// Attest is the TPMS_ATTEST the TPM signed (the TPM2B_ATTEST's contents).
	Attest []byte `json:"attest"`
	// Signature is the TPMT_SIGNATURE over SHA-256(Attest).
	Signature []byte `json:"signature"`
	// PCRs holds each quoted PCR's SHA-256 value by index.
	PCRs map[int][]byte `json:"pcrs"`
}

// NewNonce returns a fresh random nonce for one quote. The controller keeps
// it until the quote comes back and uses it once.
func NewNonce() ([]byte, error) {
	n := make([]byte, NonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("making a quote nonce: %w", err)
	}
	return n, nil
}

// VerifyQuote checks q against the attestation key akPublic (already proven
// by credential activation to share a TPM with an allowed EK), the nonce the
// controller sent, and policy (PCR index → expected SHA-256 value): the
// signature over the attest structure, its magic and type, the nonce as its
// extra data, the PCR digest over the reported values, and each policy PCR.
// The error names the check that failed.
func VerifyQuote(akPublic []byte, q *Quote, nonce []byte, policy map[int][]byte) error {
	_, key, err := parseAK(akPublic)
	if err != nil {
		return err
	}
	if q == nil {
		return fmt.Errorf("%w: no quote", ErrMalformed)
	}
	if len(nonce) == 0 {
		return fmt.Errorf("%w: the controller's nonce is empty: send the node a fresh nonce from NewNonce", ErrNonce)
	}
	attest, err := checkSignature(key, q)
	if err != nil {
		return err
	}
	// A restricted key signs nothing that starts with TPM_GENERATED unless
	// the TPM made it, so the magic is what proves the TPM made this quote.
	if attest.Magic != tpm2.TPMGeneratedValue {
		return fmt.Errorf("%w: the attest structure's magic is 0x%x, not TPM_GENERATED: the TPM did not make it", ErrMalformed, uint32(attest.Magic))
	}
	if attest.Type != tpm2.TPMSTAttestQuote {
		return fmt.Errorf("%w: the attest structure is of type 0x%x, not a quote", ErrMalformed, uint16(attest.Type))
	}
	if !bytes.Equal(attest.ExtraData.Buffer, nonce) {
		return fmt.Errorf("%w: the quote was made for nonce %x, not the one sent (%x): ask the node for a new quote with a fresh nonce", ErrNonce, attest.ExtraData.Buffer, nonce)
	}
	info, err := attest.Attested.Quote()
	if err != nil {
		return fmt.Errorf("%w: the quote info: %v", ErrMalformed, err)
	}
	if err := checkPCRDigest(info, q.PCRs); err != nil {
		return err
	}
	return checkPolicy(q.PCRs, policy)
}

// checkSignature verifies the AK's ECDSA signature over SHA-256 of the attest
// bytes and only then decodes them, so that nothing unsigned is interpreted.
func checkSignature(key *ecdsa.PublicKey, q *Quote) (*tpm2.TPMSAttest, error) {
	if len(q.Attest) == 0 || len(q.Attest) > maxQuoteSize || len(q.Signature) == 0 || len(q.Signature) > maxQuoteSize {
		return nil, fmt.Errorf("%w: the quote's attest (%d bytes) or signature (%d bytes) is empty or too large", ErrMalformed, len(q.Attest), len(q.Signature))
	}
	sig, err := decode[tpm2.TPMTSignature]("quote signature", q.Signature)
	if err != nil {
		return nil, err
	}
	if sig.SigAlg != tpm2.TPMAlgECDSA {
		return nil, fmt.Errorf("%w: it uses algorithm 0x%x, not the AK's ECDSA", ErrSignature, uint16(sig.SigAlg))
	}
	ecc, err := sig.Signature.ECDSA()
	if err != nil || ecc.Hash != tpm2.TPMAlgSHA256 {
		return nil, fmt.Errorf("%w: it is not an ECDSA signature over SHA-256", ErrSignature)
	}
	digest := sha256.Sum256(q.Attest)
	r := new(big.Int).SetBytes(ecc.SignatureR.Buffer)
	s := new(big.Int).SetBytes(ecc.SignatureS.Buffer)
	if !ecdsa.Verify(key, digest[:], r, s) {
		return nil, fmt.Errorf("%w: the quote was not signed by this attestation key (or was altered): refuse the node", ErrSignature)
	}
	attest, err := decode[tpm2.TPMSAttest]("quote attest structure", q.Attest)
	if err != nil {
		return nil, err
	}
	return attest, nil
}

// checkPCRDigest checks that the quote selects the SHA-256 bank, that the
// node reported a value for exactly the selected PCRs, and that the digest
// of those values, in index order, is the digest the TPM signed.
func checkPCRDigest(info *tpm2.TPMSQuoteInfo, reported map[int][]byte) error {
	if len(info.PCRSelect.PCRSelections) != 1 || info.PCRSelect.PCRSelections[0].Hash != tpm2.TPMAlgSHA256 {
		return fmt.Errorf("%w: the quote must select PCRs of the SHA-256 bank only", ErrPCRDigest)
	}
	selected := selectedPCRs(info.PCRSelect.PCRSelections[0].PCRSelect)
	reportedIdx := sortedKeys(reported)
	if !slices.Equal(selected, reportedIdx) {
		return fmt.Errorf("%w: the quote covers PCRs %v but the node reported values for %v", ErrPCRDigest, selected, reportedIdx)
	}
	h := sha256.New()
	for _, i := range selected {
		if len(reported[i]) != sha256.Size {
			return fmt.Errorf("%w: PCR %d's reported value is %d bytes, not a SHA-256 digest", ErrPCRDigest, i, len(reported[i]))
		}
		h.Write(reported[i])
	}
	if !bytes.Equal(h.Sum(nil), info.PCRDigest.Buffer) {
		return fmt.Errorf("%w: the node reported PCR values other than those the TPM quoted: refuse the node and ask it for a new quote", ErrPCRDigest)
	}
	return nil
}

// checkPolicy compares each PCR the policy names with the reported (and by
// now quoted) value.
func checkPolicy(reported map[int][]byte, policy map[int][]byte) error {
	for _, i := range sortedKeys(policy) {
		got, ok := reported[i]
		if !ok {
			return fmt.Errorf("%w: the quote does not cover PCR %d, which the policy names: quote PCRs %v", ErrPCR, i, sortedKeys(policy))
		}
		if !bytes.Equal(got, policy[i]) {
			return fmt.Errorf("%w: PCR %d is %s, the policy wants %s: the node booted something else (or the policy is out of date)",
				ErrPCR, i, hex.EncodeToString(got), hex.EncodeToString(policy[i]))
		}
	}
	return nil
}

// selectedPCRs lists the PCR indices set in a TPMS_PCR_SELECTION bitmap
// (byte i holds PCRs 8i…8i+7, least significant bit first).
func selectedPCRs(bitmap []byte) []int {
	var out []int
	for i, b := range bitmap {
		for bit := range 8 {
			if b&(1<<bit) != 0 {
				out = append(out, 8*i+bit)
			}
		}
	}
	return out
}

// sortedKeys returns a map's PCR indices in ascending order.
func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// decode decodes a TPM structure from a node, insisting on no trailing bytes
// and turning a panic in go-tpm's reflective decoder into an error.
func decode[T tpm2.Marshallable, P interface {
	*T
	tpm2.Unmarshallable
}](what string, b []byte) (v *T, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%w: the %s does not decode: %v", ErrMalformed, what, r)
		}
	}()
	v, err = tpm2.Unmarshal[T, P](b)
	if err != nil {
		return nil, fmt.Errorf("%w: the %s does not decode: %v", ErrMalformed, what, err)
	}
	if !bytes.Equal(tpm2.Marshal(*v), b) {
		return nil, fmt.Errorf("%w: the %s has trailing or non-canonical bytes", ErrMalformed, what)
	}
	return v, nil
}
