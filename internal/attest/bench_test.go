package attest

import "testing"

// BenchmarkVerifyQuote measures the controller's check of one quote over
// four PCRs (software-made: the checks are the same as for a TPM's).
func BenchmarkVerifyQuote(b *testing.B) {
	ak := newSoftAK(b, "bench-1", nil)
	nonce := []byte("benchmark nonce 0123456789abcdef")
	pcrs := bootPCRs()
	q := ak.quote(b, nonce, pcrs)
	policy := map[int][]byte{0: pcrs[0], 7: pcrs[7]}
	for b.Loop() {
		if err := VerifyQuote(ak.public, q, nonce, policy); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMakeChallenge measures the controller's side of credential
// activation: checking the AK and encrypting a secret to an ECC P-256 EK.
func BenchmarkMakeChallenge(b *testing.B) {
	ek, ak := softEK(b, "bench-3"), newSoftAK(b, "bench-2", nil)
	for b.Loop() {
		if _, _, err := MakeChallenge(ek, ak.public); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAttestation measures attestations against swtpm, both sides in
// one process: "join" is the EK check, the challenge, its activation and a
// quote over PCRs 0–7 checked against the policy; "reattest" is the quote
// and its check alone, what a periodic re-attestation costs.
func BenchmarkAttestation(b *testing.B) {
	tpm := openSWTPM(b)
	ek, err := tpm.EK()
	if err != nil {
		b.Fatal(err)
	}
	ak, err := tpm.NewAK()
	if err != nil {
		b.Fatal(err)
	}
	pcrs := []int{0, 1, 2, 3, 4, 5, 6, 7}
	q, err := tpm.Quote(ak, []byte("policy"), pcrs)
	if err != nil {
		b.Fatal(err)
	}
	policy := Policy{PCRs: PolicyPCRs(q), EndorsementKeys: []string{ek.Fingerprint()}}
	reattest := func() {
		nonce, err := NewNonce()
		if err != nil {
			b.Fatal(err)
		}
		q, err := tpm.Quote(ak, nonce, policy.PCRSelection())
		if err != nil {
			b.Fatal(err)
		}
		if err := policy.VerifyQuote(ak.Public(), q, nonce); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("join", func(b *testing.B) {
		for b.Loop() {
			if err := policy.CheckEK(ek); err != nil {
				b.Fatal(err)
			}
			ch, secret, err := MakeChallenge(ek, ak.Public())
			if err != nil {
				b.Fatal(err)
			}
			got, err := tpm.Activate(ak, ch)
			if err != nil {
				b.Fatal(err)
			}
			if err := CheckActivation(secret, got); err != nil {
				b.Fatal(err)
			}
			reattest()
		}
	})
	b.Run("reattest", func(b *testing.B) {
		for b.Loop() {
			reattest()
		}
	})
}
