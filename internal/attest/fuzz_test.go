package attest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The fuzz targets feed everything a node sends the controller — EK and AK
// public areas, quotes, PCR values — and what the controller sends a node (a
// challenge) through the code that decodes them. None may panic, and none
// may accept what it should not.

// pcrsFromBytes turns fuzz bytes into reported PCR values: each entry is an
// index byte and 32 value bytes.
func pcrsFromBytes(b []byte) map[int][]byte {
	out := map[int][]byte{}
	for len(b) >= 33 {
		out[int(b[0])] = b[1:33]
		b = b[33:]
	}
	return out
}

// pcrsToBytes is pcrsFromBytes's inverse, for seeds.
func pcrsToBytes(m map[int][]byte) []byte {
	var out []byte
	for _, i := range sortedKeys(m) {
		out = append(out, byte(i))
		out = append(out, m[i]...)
	}
	return out
}

func FuzzVerifyQuote(f *testing.F) {
	ak := newSoftAK(f, "fuzz-1", nil)
	nonce := []byte("fuzz nonce")
	pcrs := bootPCRs()
	q := ak.quote(f, nonce, pcrs)
	f.Add(ak.public, q.Attest, q.Signature, pcrsToBytes(pcrs), nonce)
	f.Add(ak.public, q.Attest, q.Signature, pcrsToBytes(pcrs), []byte("other"))
	f.Add([]byte{}, []byte{}, []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, akPublic, attest, sig, pcrBytes, n []byte) {
		q := &Quote{Attest: attest, Signature: sig, PCRs: pcrsFromBytes(pcrBytes)}
		err := VerifyQuote(akPublic, q, n, map[int][]byte{7: pcrs[7]})
		if err != nil {
			return
		}
		// Attributes the signature does not depend on may differ from the
		// seed's (so the controller must verify with the AK bytes it
		// activated), but the key must be the seed's: the fuzzer cannot sign.
		if _, key, err := parseAK(akPublic); err != nil || !key.Equal(&ak.priv.PublicKey) {
			t.Fatalf("a quote verified under a key the fuzzer made up: %x", akPublic)
		}
	})
}

func FuzzMakeChallenge(f *testing.F) {
	ek, ak := softEK(f, "fuzz-3"), newSoftAK(f, "fuzz-2", nil)
	f.Add(ek.Public, ak.public)
	f.Add(ak.public, ek.Public)
	f.Add([]byte{0, 1}, []byte{})
	f.Fuzz(func(t *testing.T, ekPublic, akPublic []byte) {
		ch, secret, err := MakeChallenge(EK{Public: ekPublic}, akPublic)
		if err != nil {
			return
		}
		if len(secret) != secretSize || len(ch.Credential) == 0 || len(ch.Secret) == 0 {
			t.Fatalf("MakeChallenge accepted the keys but made no challenge")
		}
		if _, _, err := parseAK(akPublic); err != nil {
			t.Fatalf("MakeChallenge accepted an AK parseAK refuses: %v", err)
		}
	})
}

func FuzzCheckEK(f *testing.F) {
	ek := softEK(f, "fuzz-4")
	policy := Policy{EndorsementKeys: []string{ek.Fingerprint()}}
	f.Add(ek.Public)
	f.Add([]byte("not a key"))
	f.Fuzz(func(t *testing.T, ekPublic []byte) {
		err := policy.CheckEK(EK{Public: ekPublic})
		if err == nil && (EK{Public: ekPublic}).Fingerprint() != ek.Fingerprint() {
			t.Fatal("an EK off the allow list was accepted")
		}
	})
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"pcrs": {"7": "` + string(bytes.Repeat([]byte("ab"), 32)) + `"}, "endorsement_keys": []}`))
	f.Add([]byte(`{"pcrs": {"99": ""}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			return
		}
		if _, err := p.PCRValues(); err != nil {
			t.Fatalf("a parsed policy has bad PCR values: %v", err)
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzActivate sends mutated challenges to a real swtpm: the TPM must refuse
// every one but the genuine challenge, and Activate must never return a
// secret other than the one the controller encrypted.
func FuzzActivate(f *testing.F) {
	tpm := openSWTPM(f)
	ak, err := tpm.NewAK()
	if err != nil {
		f.Fatal(err)
	}
	ek, err := tpm.EK()
	if err != nil {
		f.Fatal(err)
	}
	ch, secret, err := MakeChallenge(ek, ak.Public())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ch.Credential, ch.Secret)
	f.Add([]byte{1}, []byte{2})
	f.Fuzz(func(t *testing.T, cred, seed []byte) {
		got, err := tpm.Activate(ak, Challenge{Credential: cred, Secret: seed})
		if err == nil && !bytes.Equal(got, secret) {
			t.Fatalf("a mutated challenge yielded another secret %x", got)
		}
	})
}
