package attest

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/google/go-tpm/tpm2"
)

// The fixtures below make TPM structures in software — an attestation key,
// an endorsement key and quotes signed like a TPM signs them — so that the
// controller side's checks, fuzz targets and benchmark run without swtpm.
// They stand in for a TPM only where the controller reads bytes a node sent;
// the node side is tested against swtpm.

// softAK is a software key in the attestation key's TPM form.
type softAK struct {
	priv   *ecdsa.PrivateKey
	public []byte
}

// newSoftAK makes a key with the attestation key template's attributes
// (edit, when given, changes the template first). The key is derived from
// label, so that a fuzz worker process makes the same key as the
// coordinator that made the seeds.
func newSoftAK(t testing.TB, label string, edit func(*tpm2.TPMTPublic)) softAK {
	t.Helper()
	d := sha256.Sum256([]byte("soft AK " + label))
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d[:])
	if err != nil {
		t.Fatal(err)
	}
	pub := akTemplate
	if edit != nil {
		edit(&pub)
	}
	raw, err := priv.PublicKey.ECDH()
	if err != nil {
		t.Fatal(err)
	}
	b := raw.Bytes() // 0x04 || X || Y
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: b[1:33]},
		Y: tpm2.TPM2BECCParameter{Buffer: b[33:]},
	})
	return softAK{priv: priv, public: tpm2.Marshal(pub)}
}

// softEK makes an endorsement key of the TCG ECC template in software,
// derived from label.
func softEK(t testing.TB, label string) EK {
	t.Helper()
	d := sha256.Sum256([]byte("soft EK " + label))
	priv, err := ecdh.P256().NewPrivateKey(d[:])
	if err != nil {
		t.Fatal(err)
	}
	b := priv.PublicKey().Bytes()
	pub := tpm2.ECCEKTemplate
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: b[1:33]},
		Y: tpm2.TPM2BECCParameter{Buffer: b[33:]},
	})
	return EK{Public: tpm2.Marshal(pub)}
}

// attestFor is the TPMS_ATTEST of a quote over pcrs for nonce.
func attestFor(nonce []byte, pcrs map[int][]byte) tpm2.TPMSAttest {
	sel := sortedKeys(pcrs)
	return tpm2.TPMSAttest{
		Magic:           tpm2.TPMGeneratedValue,
		Type:            tpm2.TPMSTAttestQuote,
		QualifiedSigner: tpm2.TPM2BName{Buffer: make([]byte, 34)},
		ExtraData:       tpm2.TPM2BData{Buffer: nonce},
		Attested: tpm2.NewTPMUAttest(tpm2.TPMSTAttestQuote, &tpm2.TPMSQuoteInfo{
			PCRSelect: sha256Selection(sel),
			PCRDigest: tpm2.TPM2BDigest{Buffer: pcrDigest(sel, pcrs)},
		}),
	}
}

// sign signs attest as a TPM signs a quote and returns the Quote with pcrs.
func (k softAK) sign(t testing.TB, attest tpm2.TPMSAttest, pcrs map[int][]byte) *Quote {
	t.Helper()
	b := tpm2.Marshal(attest)
	digest := sha256.Sum256(b)
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := tpm2.TPMTSignature{
		SigAlg: tpm2.TPMAlgECDSA,
		Signature: tpm2.NewTPMUSignature(tpm2.TPMAlgECDSA, &tpm2.TPMSSignatureECC{
			Hash:       tpm2.TPMAlgSHA256,
			SignatureR: tpm2.TPM2BECCParameter{Buffer: r.FillBytes(make([]byte, 32))},
			SignatureS: tpm2.TPM2BECCParameter{Buffer: s.FillBytes(make([]byte, 32))},
		}),
	}
	return &Quote{Attest: b, Signature: tpm2.Marshal(sig), PCRs: pcrs}
}

// quote is a well-formed quote over pcrs for nonce.
func (k softAK) quote(t testing.TB, nonce []byte, pcrs map[int][]byte) *Quote {
	return k.sign(t, attestFor(nonce, pcrs), pcrs)
}

// bootPCRs are PCR values as a measured boot leaves them.
func bootPCRs() map[int][]byte {
	out := map[int][]byte{}
	for _, i := range []int{0, 2, 4, 7} {
		v := sha256.Sum256([]byte{byte(i)})
		out[i] = v[:]
	}
	return out
}
