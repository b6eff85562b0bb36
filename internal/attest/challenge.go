package attest

import (
	"crypto/rand"
	"crypto/subtle"
	"fmt"

	"github.com/google/go-tpm/tpm2"
)

// secretSize is the size of the secret MakeChallenge encrypts: the SHA-256
// digest size, the largest credential an EK with a SHA-256 name accepts.
const secretSize = 32

// maxChallengeSize bounds each field of a Challenge a node accepts; the
// credential blob of a 32-byte secret is about 70 bytes and an RSA-2048
// encrypted seed is 256.
const maxChallengeSize = 1024

// Challenge is what the controller sends a node to prove that its
// attestation key lives in the same TPM as its endorsement key: a fresh
// secret encrypted to the EK and bound to the AK's name (the output of
// TPM2_MakeCredential, computed in software). Only that TPM, with that AK
// loaded, can recover the secret with TPM2_ActivateCredential.
type Challenge struct {
	// Credential is the TPM2B_ID_OBJECT's contents: an HMAC and the
	// encrypted secret.
	Credential []byte `json:"credential"`
	// Secret is the TPM2B_ENCRYPTED_SECRET's contents: the seed encrypted
	// to the EK.
	Secret []byte `json:"secret"`
}

// MakeChallenge checks that akPublic is an attestation key bound to a TPM
// (restricted, sign only, fixedTPM, fixedParent, made by the TPM), computes
// its name and encrypts a fresh random secret to ek for that name. The
// controller keeps secret and compares it with what the node's Activate
// returns; only then does it trust akPublic as belonging to ek's TPM.
func MakeChallenge(ek EK, akPublic []byte) (Challenge, []byte, error) {
	ekPub, err := parseEK(ek.Public)
	if err != nil {
		return Challenge{}, nil, err
	}
	akPub, _, err := parseAK(akPublic)
	if err != nil {
		return Challenge{}, nil, err
	}
	name, err := tpm2.ObjectName(akPub)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("%w: the attestation key's name: %v", ErrMalformed, err)
	}
	key, err := tpm2.ImportEncapsulationKey(ekPub)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("%w: the endorsement key cannot be encrypted to: %v", ErrMalformed, err)
	}
	secret := make([]byte, secretSize)
	if _, err := rand.Read(secret); err != nil {
		return Challenge{}, nil, fmt.Errorf("making the attestation secret: %w", err)
	}
	cred, seed, err := tpm2.CreateCredential(rand.Reader, key, name.Buffer, secret)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("encrypting the attestation secret to the endorsement key: %w", err)
	}
	return Challenge{Credential: cred, Secret: seed}, secret, nil
}

// CheckActivation compares the secret a node recovered with Activate with
// the one MakeChallenge made (in constant time). A mismatch, like a node that
// cannot activate at all, means the attestation key is not in the TPM of the
// endorsement key on the allow list: refuse the node.
func CheckActivation(secret, recovered []byte) error {
	if len(secret) == 0 || subtle.ConstantTimeCompare(secret, recovered) != 1 {
		return fmt.Errorf("%w: the node did not recover the secret encrypted to its endorsement key for this attestation key: refuse it", ErrUnboundKey)
	}
	return nil
}
