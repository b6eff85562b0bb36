package attest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
	"github.com/google/go-tpm/tpm2/transport/linuxudstpm"
)

// quoteAttempts is how often Quote retries when a PCR changes between
// reading the PCRs and quoting them (something on the host extended one).
const quoteAttempts = 3

// TPM is a node's TPM: a kernel device (/dev/tpmrm0, the resource manager)
// or an swtpm Unix socket. Its methods are safe for concurrent use; the TPM
// runs one command at a time.
type TPM struct {
	mu         sync.Mutex
	path       string
	t          transport.TPMCloser
	ekTemplate tpm2.TPMTPublic
	ek         *loadedKey
	aks        []*AK
}

// loadedKey is a key loaded in the TPM under a transient handle.
type loadedKey struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
	public []byte
}

// AK is an attestation key loaded in a node's TPM.
type AK struct {
	tpm *TPM
	key loadedKey
}

// Public returns the attestation key's TPMT_PUBLIC in the TPM's encoding, as
// the node sends it to the controller.
func (ak *AK) Public() []byte { return slices.Clone(ak.key.public) }

// Open opens the TPM at path: a character device (use /dev/tpmrm0, the
// kernel's resource manager, rather than /dev/tpm0) or a Unix socket where
// swtpm listens.
func Open(path string) (*TPM, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: %w (use /dev/tpmrm0, or the socket swtpm listens on)", path, err)
	}
	var t transport.TPMCloser
	switch {
	case fi.Mode()&os.ModeSocket != 0:
		t, err = linuxudstpm.Open(path)
	case fi.Mode()&os.ModeDevice != 0:
		t, err = linuxtpm.Open(path)
	default:
		return nil, fmt.Errorf("TPM %s is neither a device nor a Unix socket (use /dev/tpmrm0, or the socket swtpm listens on)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("TPM %s: %w (the node daemon needs read-write access: run it as root or in the tss group)", path, err)
	}
	return &TPM{path: path, t: t, ekTemplate: tpm2.ECCEKTemplate}, nil
}

// Close flushes the keys this TPM value loaded and closes the connection.
func (t *TPM) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, ak := range t.aks {
		errs = append(errs, t.flush(ak.key.handle))
	}
	t.aks = nil
	if t.ek != nil {
		errs = append(errs, t.flush(t.ek.handle))
		t.ek = nil
	}
	errs = append(errs, t.t.Close())
	return errors.Join(errs...)
}

// flush unloads a transient key.
func (t *TPM) flush(h tpm2.TPMHandle) error {
	if _, err := (tpm2.FlushContext{FlushHandle: h}).Execute(t.t); err != nil {
		return fmt.Errorf("TPM %s: unloading key 0x%x: %w", t.path, uint32(h), err)
	}
	return nil
}

// EK returns the endorsement key's public part. The EK is the primary key of
// the endorsement hierarchy made from the TCG's default ECC P-256 EK template,
// so a TPM always derives the same EK; its Fingerprint is what the
// administrator puts on the allow list.
func (t *TPM) EK() (EK, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ek, err := t.loadEK()
	if err != nil {
		return EK{}, err
	}
	return EK{Public: slices.Clone(ek.public)}, nil
}

// loadEK creates the EK on first use; t.mu is held.
func (t *TPM) loadEK() (*loadedKey, error) {
	if t.ek != nil {
		return t.ek, nil
	}
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.TPMRHEndorsement,
		InPublic:      tpm2.New2B(t.ekTemplate),
	}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: creating the endorsement key: %w (is the endorsement hierarchy's password set? corral expects it empty)", t.path, err)
	}
	t.ek = &loadedKey{handle: rsp.ObjectHandle, name: rsp.Name, public: slices.Clone(rsp.OutPublic.Bytes())}
	return t.ek, nil
}

// NewAK loads an attestation key: an ECC P-256 restricted signing key, a
// primary key of the owner hierarchy. The same TPM derives the same AK each
// time (until the TPM is cleared), so a node that restarts presents the key
// the controller already knows.
func (t *TPM) NewAK() (*AK, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.createAK(akTemplate)
}

// createAK loads a primary key of the owner hierarchy from template; t.mu
// is held.
func (t *TPM) createAK(template tpm2.TPMTPublic) (*AK, error) {
	rsp, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.TPMRHOwner,
		InPublic:      tpm2.New2B(template),
	}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: creating the attestation key: %w (is the owner hierarchy's password set? corral expects it empty)", t.path, err)
	}
	ak := &AK{tpm: t, key: loadedKey{handle: rsp.ObjectHandle, name: rsp.Name, public: slices.Clone(rsp.OutPublic.Bytes())}}
	t.aks = append(t.aks, ak)
	return ak, nil
}

// Activate runs TPM2_ActivateCredential with the EK (authorised by a policy
// session for the EK's PolicySecret(endorsement) policy) and ak, returning
// the secret the controller encrypted. The TPM releases it only when the
// challenge was made for this TPM's EK and ak's name.
func (t *TPM) Activate(ak *AK, ch Challenge) ([]byte, error) {
	if ak == nil || ak.tpm != t {
		return nil, fmt.Errorf("TPM %s: the attestation key was not loaded by this TPM", t.path)
	}
	if len(ch.Credential) == 0 || len(ch.Credential) > maxChallengeSize || len(ch.Secret) == 0 || len(ch.Secret) > maxChallengeSize {
		return nil, fmt.Errorf("%w: the controller's challenge has a credential of %d bytes and a secret of %d bytes", ErrMalformed, len(ch.Credential), len(ch.Secret))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ek, err := t.loadEK()
	if err != nil {
		return nil, err
	}
	rsp, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: ak.key.handle, Name: ak.key.name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle: tpm2.AuthHandle{Handle: ek.handle, Name: ek.name,
			Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16, endorsementPolicy)},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: ch.Credential},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: ch.Secret},
	}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: activating the controller's credential: %w (the challenge was made for another TPM's endorsement key or another attestation key)", t.path, err)
	}
	return rsp.CertInfo.Buffer, nil
}

// endorsementPolicy satisfies the TCG EK template's policy,
// TPM2_PolicySecret(TPM_RH_ENDORSEMENT), with the hierarchy's empty password.
func endorsementPolicy(tpm transport.TPM, session tpm2.TPMISHPolicy, nonceTPM tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{
		AuthHandle:    tpm2.TPMRHEndorsement,
		PolicySession: session,
		NonceTPM:      nonceTPM,
	}.Execute(tpm)
	return err
}

// Quote quotes the SHA-256 PCRs pcrs with nonce as qualifying data, signed by
// ak, and reads the PCR values so that the verifier can recompute the
// digest. When a PCR changes between the read and the quote, it tries again.
func (t *TPM) Quote(ak *AK, nonce []byte, pcrs []int) (*Quote, error) {
	if ak == nil || ak.tpm != t {
		return nil, fmt.Errorf("TPM %s: the attestation key was not loaded by this TPM", t.path)
	}
	if len(nonce) == 0 || len(nonce) > maxNonceSize {
		return nil, fmt.Errorf("TPM %s: the controller's nonce is %d bytes; it must be 1–%d", t.path, len(nonce), maxNonceSize)
	}
	sel, err := pcrSelection(pcrs)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: %w", t.path, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for range quoteAttempts {
		values, err := t.readPCRs(sel)
		if err != nil {
			return nil, err
		}
		q, digest, err := t.quote(ak, nonce, sel)
		if err != nil {
			return nil, err
		}
		if bytes.Equal(digest, pcrDigest(sel, values)) {
			q.PCRs = values
			return q, nil
		}
	}
	return nil, fmt.Errorf("TPM %s: the PCRs kept changing while being quoted (%d tries): try again when the host is quiet", t.path, quoteAttempts)
}

// quote runs TPM2_Quote and returns the quote (without PCR values) and the
// PCR digest the TPM signed.
func (t *TPM) quote(ak *AK, nonce []byte, sel []int) (*Quote, []byte, error) {
	rsp, err := tpm2.Quote{
		SignHandle:     tpm2.AuthHandle{Handle: ak.key.handle, Name: ak.key.name, Auth: tpm2.PasswordAuth(nil)},
		QualifyingData: tpm2.TPM2BData{Buffer: nonce},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		PCRSelect:      sha256Selection(sel),
	}.Execute(t.t)
	if err != nil {
		return nil, nil, fmt.Errorf("TPM %s: quoting PCRs %v: %w", t.path, sel, err)
	}
	attest, err := rsp.Quoted.Contents()
	if err != nil {
		return nil, nil, fmt.Errorf("TPM %s: decoding its own quote: %w", t.path, err)
	}
	info, err := attest.Attested.Quote()
	if err != nil {
		return nil, nil, fmt.Errorf("TPM %s: decoding its own quote: %w", t.path, err)
	}
	q := &Quote{Attest: slices.Clone(rsp.Quoted.Bytes()), Signature: tpm2.Marshal(rsp.Signature)}
	return q, info.PCRDigest.Buffer, nil
}

// readPCRs reads the SHA-256 values of sel. A TPM returns at most eight
// PCRs per TPM2_PCR_Read, so it asks again for those not yet returned.
func (t *TPM) readPCRs(sel []int) (map[int][]byte, error) {
	values := make(map[int][]byte, len(sel))
	for len(values) < len(sel) {
		var want []int
		for _, i := range sel {
			if _, ok := values[i]; !ok {
				want = append(want, i)
			}
		}
		rsp, err := tpm2.PCRRead{PCRSelectionIn: sha256Selection(want)}.Execute(t.t)
		if err != nil {
			return nil, fmt.Errorf("TPM %s: reading PCRs %v: %w", t.path, want, err)
		}
		var got []int
		for _, s := range rsp.PCRSelectionOut.PCRSelections {
			if s.Hash == tpm2.TPMAlgSHA256 {
				got = append(got, selectedPCRs(s.PCRSelect)...)
			}
		}
		if len(got) == 0 || len(got) != len(rsp.PCRValues.Digests) {
			return nil, fmt.Errorf("TPM %s: reading PCRs %v: the TPM returned none (is its SHA-256 PCR bank allocated?)", t.path, want)
		}
		for k, i := range got {
			values[i] = slices.Clone(rsp.PCRValues.Digests[k].Buffer)
		}
	}
	return values, nil
}

// pcrSelection validates, sorts and de-duplicates a list of PCR indices.
func pcrSelection(pcrs []int) ([]int, error) {
	if len(pcrs) == 0 {
		return nil, errors.New("no PCRs to quote: name at least one (PCRs 0–7 hold the boot measurements)")
	}
	sel := slices.Clone(pcrs)
	slices.Sort(sel)
	sel = slices.Compact(sel)
	if sel[0] < 0 || sel[len(sel)-1] > MaxPCR {
		return nil, fmt.Errorf("PCRs %v: a TPM has PCRs 0–%d", pcrs, MaxPCR)
	}
	return sel, nil
}

// sha256Selection is a TPML_PCR_SELECTION of the SHA-256 bank.
func sha256Selection(sel []int) tpm2.TPMLPCRSelection {
	idx := make([]uint, len(sel))
	for k, i := range sel {
		idx[k] = uint(i)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash:      tpm2.TPMAlgSHA256,
		PCRSelect: tpm2.PCClientCompatible.PCRs(idx...),
	}}}
}

// pcrDigest is the digest a quote signs: SHA-256 over the values of sel in
// ascending order.
func pcrDigest(sel []int, values map[int][]byte) []byte {
	h := sha256.New()
	for _, i := range sel {
		h.Write(values[i])
	}
	return h.Sum(nil)
}

// Extend extends SHA-256 PCR pcr with the digest of data, as a boot stage
// measures the next (or a node measures what it runs).
func (t *TPM) Extend(pcr int, data []byte) error {
	if pcr < 0 || pcr > MaxPCR {
		return fmt.Errorf("PCR %d: give 0 to %d", pcr, MaxPCR)
	}
	sum := sha256.Sum256(data)
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests: tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{
			{HashAlg: tpm2.TPMAlgSHA256, Digest: sum[:]},
		}},
	}.Execute(t.t)
	if err != nil {
		return fmt.Errorf("extending PCR %d: %w", pcr, err)
	}
	return nil
}
