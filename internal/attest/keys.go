package attest

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
)

// maxPublicSize bounds the TPMT_PUBLIC bytes accepted from the network. A
// TPM's public area is at most a few hundred bytes (an RSA-2048 key with a
// policy digest is about 320), so anything near this size is not a key.
const maxPublicSize = 1024

// ErrMalformed is returned (wrapped) when bytes from a node do not decode as
// the TPM structure they claim to be.
var ErrMalformed = errors.New("malformed TPM structure")

// ErrUnboundKey is returned (wrapped) when a key offered as an attestation
// key lacks the attributes that keep it inside one TPM.
var ErrUnboundKey = errors.New("the attestation key is not bound to a TPM")

// EK is the public part of a TPM's endorsement key, as a node sends it to the
// controller: the TPMT_PUBLIC structure the TPM returned, in the TPM's own
// encoding. The zero EK is not a key.
type EK struct {
	// Public is the endorsement key's TPMT_PUBLIC, big-endian TPM encoding.
	Public []byte `json:"public"`
}

// Fingerprint returns the hex SHA-256 of the endorsement key's public key in
// PKIX (SubjectPublicKeyInfo) DER form — the value an administrator puts on
// the allow list, and the same value as the SHA-256 of the public key in the
// TPM maker's EK certificate. It returns "" when Public does not decode as
// an endorsement key; CheckEK and MakeChallenge report why.
func (ek EK) Fingerprint() string {
	pub, err := parseEK(ek.Public)
	if err != nil {
		return ""
	}
	fp, err := fingerprint(pub)
	if err != nil {
		return ""
	}
	return fp
}

// fingerprint hashes a TPM public key's PKIX encoding.
func fingerprint(pub *tpm2.TPMTPublic) (string, error) {
	key, err := tpm2.Pub(*pub)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]), nil
}

// decodePublic decodes a TPMT_PUBLIC and insists that it is in canonical
// form: re-encoding it must give back exactly the bytes received, so that the
// name the controller computes is the name the TPM computes over the same
// structure.
func decodePublic(what string, b []byte) (*tpm2.TPMTPublic, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: the %s is empty", ErrMalformed, what)
	}
	if len(b) > maxPublicSize {
		return nil, fmt.Errorf("%w: the %s is %d bytes, more than a TPM public area (%d)", ErrMalformed, what, len(b), maxPublicSize)
	}
	return decode[tpm2.TPMTPublic](what, b)
}

// parseEK decodes an endorsement key and checks that it is a restricted
// decryption key with a SHA-256 name, of a type MakeChallenge can encrypt to
// (ECC P-256 or RSA-2048, the TCG's default EK templates).
func parseEK(b []byte) (*tpm2.TPMTPublic, error) {
	pub, err := decodePublic("endorsement key", b)
	if err != nil {
		return nil, err
	}
	a := pub.ObjectAttributes
	if !a.Restricted || !a.Decrypt || a.SignEncrypt || !a.FixedTPM || !a.FixedParent {
		return nil, fmt.Errorf("%w: the endorsement key is not a restricted, fixedTPM decryption key (the node must send the EK made from the TCG EK template)", ErrMalformed)
	}
	if pub.NameAlg != tpm2.TPMAlgSHA256 {
		return nil, fmt.Errorf("%w: the endorsement key's name algorithm is 0x%x, not SHA-256", ErrMalformed, uint16(pub.NameAlg))
	}
	key, err := tpm2.Pub(*pub)
	if err != nil {
		return nil, fmt.Errorf("%w: the endorsement key: %v", ErrMalformed, err)
	}
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize != 256 {
			return nil, fmt.Errorf("%w: the endorsement key is ECC on a %d-bit curve; use the P-256 EK", ErrMalformed, k.Curve.Params().BitSize)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() != 2048 {
			return nil, fmt.Errorf("%w: the endorsement key is RSA-%d; use the RSA-2048 or ECC P-256 EK", ErrMalformed, k.N.BitLen())
		}
	default:
		return nil, fmt.Errorf("%w: the endorsement key is of type %T; use an ECC P-256 or RSA-2048 EK", ErrMalformed, key)
	}
	return pub, nil
}

// parseAK decodes an attestation key and checks the attributes that make it
// one: restricted (it signs only structures the TPM made, so a quote cannot
// be forged with it), sign only, fixedTPM and fixedParent (it cannot leave
// the TPM), sensitiveDataOrigin (the TPM made its private part), ECC P-256
// with ECDSA over SHA-256 and a SHA-256 name. These attributes are part of
// the key's name, so credential activation proves them too.
func parseAK(b []byte) (*tpm2.TPMTPublic, *ecdsa.PublicKey, error) {
	pub, err := decodePublic("attestation key", b)
	if err != nil {
		return nil, nil, err
	}
	a := pub.ObjectAttributes
	var missing []string
	for _, c := range []struct {
		ok   bool
		name string
	}{
		{a.FixedTPM, "fixedTPM"},
		{a.FixedParent, "fixedParent"},
		{a.SensitiveDataOrigin, "sensitiveDataOrigin"},
		{a.Restricted, "restricted"},
		{a.SignEncrypt, "sign"},
		{!a.Decrypt, "not decrypt"},
	} {
		if !c.ok {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%w: it lacks %v (the node must create its AK from the restricted signing template, not present another key)", ErrUnboundKey, missing)
	}
	if pub.NameAlg != tpm2.TPMAlgSHA256 {
		return nil, nil, fmt.Errorf("%w: the attestation key's name algorithm is 0x%x, not SHA-256", ErrMalformed, uint16(pub.NameAlg))
	}
	if pub.Type != tpm2.TPMAlgECC {
		return nil, nil, fmt.Errorf("%w: the attestation key is of type 0x%x; corral verifies ECC P-256 attestation keys only", ErrMalformed, uint16(pub.Type))
	}
	parms, err := pub.Parameters.ECCDetail()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the attestation key's ECC parameters: %v", ErrMalformed, err)
	}
	if parms.CurveID != tpm2.TPMECCNistP256 || parms.Scheme.Scheme != tpm2.TPMAlgECDSA {
		return nil, nil, fmt.Errorf("%w: the attestation key must be ECC P-256 with the ECDSA scheme", ErrMalformed)
	}
	scheme, err := parms.Scheme.Details.ECDSA()
	if err != nil || scheme.HashAlg != tpm2.TPMAlgSHA256 {
		return nil, nil, fmt.Errorf("%w: the attestation key's ECDSA scheme must use SHA-256", ErrMalformed)
	}
	key, err := tpm2.Pub(*pub)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the attestation key: %v", ErrMalformed, err)
	}
	ecKey, ok := key.(*ecdsa.PublicKey)
	if !ok {
		return nil, nil, fmt.Errorf("%w: the attestation key is not an ECDSA key", ErrMalformed)
	}
	return pub, ecKey, nil
}

// akTemplate is the attestation key: an ECC P-256 restricted signing key
// (ECDSA, SHA-256) that never leaves the TPM. It is a primary key of the
// owner hierarchy, so the same TPM derives the same key again after a
// restart, until the TPM is cleared.
var akTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA256,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM:            true,
		FixedParent:         true,
		SensitiveDataOrigin: true,
		UserWithAuth:        true,
		NoDA:                true,
		Restricted:          true,
		SignEncrypt:         true,
	},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
		Scheme: tpm2.TPMTECCScheme{
			Scheme: tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA,
				&tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256}),
		},
		CurveID: tpm2.TPMECCNistP256,
		KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
		Y: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
	}),
}
