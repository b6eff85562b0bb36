package attest

import (
	"crypto/ecdh"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
)

// TestVerifyQuoteChecks covers each check of VerifyQuote on quotes made in
// software, one way to break each.
func TestVerifyQuoteChecks(t *testing.T) {
	ak := newSoftAK(t, "verify-1", nil)
	other := newSoftAK(t, "verify-2", nil)
	nonce := []byte("controller nonce 0123456789abcde")
	pcrs := bootPCRs()
	policy := map[int][]byte{0: pcrs[0], 7: pcrs[7]}
	cases := map[string]struct {
		akPublic []byte
		quote    func() *Quote
		nonce    []byte
		wantErr  error
		wantText string
	}{
		"a good quote": {quote: func() *Quote { return ak.quote(t, nonce, pcrs) }},
		"signed by another key": {
			quote:   func() *Quote { return other.quote(t, nonce, pcrs) },
			wantErr: ErrSignature,
		},
		"attest altered after signing": {
			quote: func() *Quote {
				q := ak.quote(t, nonce, pcrs)
				q.Attest[len(q.Attest)-1] ^= 1
				return q
			},
			wantErr: ErrSignature,
		},
		"signature truncated": {
			quote: func() *Quote {
				q := ak.quote(t, nonce, pcrs)
				q.Signature = q.Signature[:10]
				return q
			},
			wantErr: ErrMalformed,
		},
		"no quote": {quote: func() *Quote { return nil }, wantErr: ErrMalformed},
		"another nonce": {
			quote:    func() *Quote { return ak.quote(t, []byte("an earlier nonce"), pcrs) },
			wantErr:  ErrNonce,
			wantText: "stale or replayed nonce",
		},
		"empty nonce": {
			quote:   func() *Quote { return ak.quote(t, nil, pcrs) },
			nonce:   []byte{},
			wantErr: ErrNonce,
		},
		"bad magic": {
			quote: func() *Quote {
				a := attestFor(nonce, pcrs)
				a.Magic = 0x12345678
				return ak.sign(t, a, pcrs)
			},
			wantErr:  ErrMalformed,
			wantText: "TPM_GENERATED",
		},
		"not a quote": {
			quote: func() *Quote {
				a := attestFor(nonce, pcrs)
				a.Type = tpm2.TPMSTAttestTime
				a.Attested = tpm2.NewTPMUAttest(tpm2.TPMSTAttestTime, &tpm2.TPMSTimeAttestInfo{})
				return ak.sign(t, a, pcrs)
			},
			wantErr:  ErrMalformed,
			wantText: "not a quote",
		},
		"a reported value is not the quoted one": {
			quote: func() *Quote {
				q := ak.quote(t, nonce, pcrs)
				q.PCRs = bootPCRs()
				q.PCRs[4] = make([]byte, 32)
				return q
			},
			wantErr: ErrPCRDigest,
		},
		"a quoted PCR without a reported value": {
			quote: func() *Quote {
				q := ak.quote(t, nonce, pcrs)
				q.PCRs = bootPCRs()
				delete(q.PCRs, 4)
				return q
			},
			wantErr:  ErrPCRDigest,
			wantText: "covers PCRs [0 2 4 7] but the node reported values for [0 2 7]",
		},
		"the SHA-1 bank": {
			quote: func() *Quote {
				a := attestFor(nonce, pcrs)
				info, _ := a.Attested.Quote()
				info.PCRSelect.PCRSelections[0].Hash = tpm2.TPMAlgSHA1
				return ak.sign(t, a, pcrs)
			},
			wantErr:  ErrPCRDigest,
			wantText: "SHA-256 bank",
		},
		"PCR 7 other than the policy": {
			quote: func() *Quote {
				other := bootPCRs()
				other[7] = make([]byte, 32)
				return ak.quote(t, nonce, other)
			},
			wantErr:  ErrPCR,
			wantText: "PCR 7 is 0000000000000000000000000000000000000000000000000000000000000000, the policy wants " + hex.EncodeToString(pcrs[7]),
		},
		"AK with trailing bytes": {
			akPublic: append(slices.Clone(ak.public), 0),
			quote:    func() *Quote { return ak.quote(t, nonce, pcrs) },
			wantErr:  ErrMalformed,
			wantText: "trailing",
		},
		"a decryption key as AK": {
			akPublic: newSoftAK(t, "verify-3", func(p *tpm2.TPMTPublic) { p.ObjectAttributes.Decrypt = true }).public,
			quote:    func() *Quote { return ak.quote(t, nonce, pcrs) },
			wantErr:  ErrUnboundKey,
			wantText: "not decrypt",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			akPublic := ak.public
			if tc.akPublic != nil {
				akPublic = tc.akPublic
			}
			n := nonce
			if tc.nonce != nil {
				n = tc.nonce
			}
			err := VerifyQuote(akPublic, tc.quote(), n, policy)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("got %v, want %v saying %q", err, tc.wantErr, tc.wantText)
			}
		})
	}
}

// TestMakeChallengeRefusesKeys covers the attestation key checks: each
// attribute that keeps a key in its TPM is required.
func TestMakeChallengeRefusesKeys(t *testing.T) {
	ek := softEK(t, "verify-6")
	cases := map[string]struct {
		edit     func(*tpm2.TPMTPublic)
		ek       EK
		wantErr  error
		wantText string
	}{
		"an attestation key": {},
		"not restricted": {
			edit: func(p *tpm2.TPMTPublic) { p.ObjectAttributes.Restricted = false }, wantErr: ErrUnboundKey, wantText: "restricted",
		},
		"not fixedTPM": {
			edit: func(p *tpm2.TPMTPublic) { p.ObjectAttributes.FixedTPM = false }, wantErr: ErrUnboundKey, wantText: "fixedTPM",
		},
		"not fixedParent": {
			edit: func(p *tpm2.TPMTPublic) { p.ObjectAttributes.FixedParent = false }, wantErr: ErrUnboundKey, wantText: "fixedParent",
		},
		"imported (not sensitiveDataOrigin)": {
			edit: func(p *tpm2.TPMTPublic) { p.ObjectAttributes.SensitiveDataOrigin = false }, wantErr: ErrUnboundKey, wantText: "sensitiveDataOrigin",
		},
		"not a signing key": {
			edit: func(p *tpm2.TPMTPublic) { p.ObjectAttributes.SignEncrypt = false }, wantErr: ErrUnboundKey, wantText: "sign",
		},
		"a SHA-1 name": {
			edit: func(p *tpm2.TPMTPublic) { p.NameAlg = tpm2.TPMAlgSHA1 }, wantErr: ErrMalformed, wantText: "name algorithm",
		},
		"an AK given as the EK": {
			ek: EK{Public: newSoftAK(t, "verify-4", nil).public}, wantErr: ErrMalformed, wantText: "restricted, fixedTPM decryption key",
		},
		"an empty EK": {ek: EK{Public: []byte{}}, wantErr: ErrMalformed, wantText: "empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := ek
			if tc.ek.Public != nil {
				e = tc.ek
			}
			ch, secret, err := MakeChallenge(e, newSoftAK(t, "verify-5", tc.edit).public)
			if tc.wantErr == nil {
				if err != nil || len(secret) != secretSize || len(ch.Credential) == 0 || len(ch.Secret) == 0 {
					t.Fatalf("got %v, %d-byte secret, want a challenge", err, len(secret))
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("got %v, want %v saying %q", err, tc.wantErr, tc.wantText)
			}
		})
	}
}

// TestFingerprintIsSPKIHash checks that an EK's fingerprint is the SHA-256
// of its PKIX public key, the value an EK certificate's key hashes to.
func TestFingerprintIsSPKIHash(t *testing.T) {
	ek := softEK(t, "verify-7")
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](ek.Public)
	if err != nil {
		t.Fatal(err)
	}
	point, _ := pub.Unique.ECC()
	raw := append([]byte{4}, append(point.X.Buffer, point.Y.Buffer...)...)
	key, err := ecdh.P256().NewPublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	if got, want := ek.Fingerprint(), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("Fingerprint() = %s, want %s", got, want)
	}
	if got := (EK{Public: []byte{1, 2}}).Fingerprint(); got != "" {
		t.Fatalf("a malformed EK's fingerprint is %q, want empty", got)
	}
}

// TestCheckActivation checks the comparison of the recovered secret.
func TestCheckActivation(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	for name, tc := range map[string]struct {
		secret, recovered []byte
		ok                bool
	}{
		"the same secret":  {secret, slices.Clone(secret), true},
		"another secret":   {secret, []byte("0123456789abcdef0123456789abcdeX"), false},
		"nothing":          {secret, nil, false},
		"no secret issued": {nil, nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := CheckActivation(tc.secret, tc.recovered)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnboundKey)) {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
