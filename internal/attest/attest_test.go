package attest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
)

// quotedPCRs are the PCRs the tests' policy names: the firmware and Secure
// Boot PCRs a real policy uses, and the two PCRs software may extend.
var quotedPCRs = []int{0, 7, 16, 23}

// pair is two nodes' TPMs, A and B, each with its attestation key, and a
// policy taken from A after a "boot" measured into PCR 7.
type pair struct {
	a, b     *TPM
	akA, akB *AK
	policy   Policy
}

// newPair starts two swtpms and takes the policy from A.
func newPair(t *testing.T) *pair {
	t.Helper()
	p := &pair{a: openSWTPM(t), b: openSWTPM(t)}
	p.akA, p.akB = newAK(t, p.a), newAK(t, p.b)
	extendPCR(t, p.a, 7, "secure boot: db, dbx, shim, grub")
	extendPCR(t, p.b, 7, "secure boot: db, dbx, shim, grub")
	nonce := mustNonce(t)
	q, err := p.a.Quote(p.akA, nonce, quotedPCRs)
	if err != nil {
		t.Fatal(err)
	}
	p.policy = Policy{PCRs: PolicyPCRs(q), EndorsementKeys: []string{mustEK(t, p.a).Fingerprint()}}
	if err := p.policy.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// attempt is what a node presents and does in one join; the zero value of
// each field is the honest node A.
type attempt struct {
	ek       func(p *pair) EK
	ak       func(t *testing.T, p *pair) []byte
	activate func(p *pair, ch Challenge) ([]byte, error)
	quote    func(p *pair, nonce []byte) (*Quote, error)
}

// join runs one attestation as the controller would: the EK against the
// allow list, the challenge and its activation, then a quote for a fresh
// nonce against the policy.
func join(t *testing.T, p *pair, n attempt) error {
	t.Helper()
	ek := mustEK(t, p.a)
	if n.ek != nil {
		ek = n.ek(p)
	}
	akPublic := p.akA.Public()
	if n.ak != nil {
		akPublic = n.ak(t, p)
	}
	if err := p.policy.CheckEK(ek); err != nil {
		return err
	}
	ch, secret, err := MakeChallenge(ek, akPublic)
	if err != nil {
		return err
	}
	activate := func(p *pair, ch Challenge) ([]byte, error) { return p.a.Activate(p.akA, ch) }
	if n.activate != nil {
		activate = n.activate
	}
	recovered, err := activate(p, ch)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnboundKey, err)
	}
	if err := CheckActivation(secret, recovered); err != nil {
		return err
	}
	nonce := mustNonce(t)
	quote := func(p *pair, nonce []byte) (*Quote, error) { return p.a.Quote(p.akA, nonce, p.policy.PCRSelection()) }
	if n.quote != nil {
		quote = n.quote
	}
	q, err := quote(p, nonce)
	if err != nil {
		return err
	}
	return p.policy.VerifyQuote(akPublic, q, nonce)
}

// joinCase is one join of TestJoin: what the node does, what changes after
// the policy was taken, and the refusal expected (none for the honest node).
type joinCase struct {
	attempt  attempt
	tamper   func(t *testing.T, p *pair)
	wantErr  error
	wantText string
}

// joinCases are the honest join and the attacks the issue names (wrong PCR,
// stale nonce, unknown EK, unbound AK), plus the other checks' failures.
func joinCases() map[string]joinCase {
	return map[string]joinCase{
		"right PCRs, allowed EK, activated AK": {},
		"PCR 16 extended after the policy was taken": {
			tamper:   func(t *testing.T, p *pair) { extendPCR(t, p.a, 16, "debugger") },
			wantErr:  ErrPCR,
			wantText: "PCR 16 is ",
		},
		"PCR 23 extended after the policy was taken": {
			tamper:   func(t *testing.T, p *pair) { extendPCR(t, p.a, 23, "application") },
			wantErr:  ErrPCR,
			wantText: "PCR 23 is ",
		},
		"PCR 7 differs (another boot chain)": {
			tamper:   func(t *testing.T, p *pair) { extendPCR(t, p.a, 7, "unsigned kernel") },
			wantErr:  ErrPCR,
			wantText: "PCR 7 is ",
		},
		"stale nonce: a quote made for an earlier nonce": {
			attempt: attempt{quote: func(p *pair, _ []byte) (*Quote, error) {
				earlier, err := NewNonce()
				if err != nil {
					return nil, err
				}
				return p.a.Quote(p.akA, earlier, p.policy.PCRSelection())
			}},
			wantErr:  ErrNonce,
			wantText: "stale or replayed nonce",
		},
		"unknown EK": {
			attempt:  attempt{ek: func(p *pair) EK { ek, _ := p.b.EK(); return ek }, ak: func(t *testing.T, p *pair) []byte { return p.akB.Public() }},
			wantErr:  ErrUnknownEK,
			wantText: "is not on the allow list",
		},
		"AK of TPM B with A's EK, activated on A": {
			attempt: attempt{ak: func(t *testing.T, p *pair) []byte { return p.akB.Public() }},
			wantErr: ErrUnboundKey,
		},
		"AK of TPM B with A's EK, activated on B": {
			attempt: attempt{
				ak:       func(t *testing.T, p *pair) []byte { return p.akB.Public() },
				activate: func(p *pair, ch Challenge) ([]byte, error) { return p.b.Activate(p.akB, ch) },
			},
			wantErr: ErrUnboundKey,
		},
		"activated AK of A, quote signed by B's AK": {
			attempt: attempt{quote: func(p *pair, nonce []byte) (*Quote, error) {
				return p.b.Quote(p.akB, nonce, p.policy.PCRSelection())
			}},
			wantErr: ErrSignature,
		},
		"reported PCR value altered after the quote": {
			attempt: attempt{quote: func(p *pair, nonce []byte) (*Quote, error) {
				q, err := p.a.Quote(p.akA, nonce, p.policy.PCRSelection())
				if err == nil {
					q.PCRs[16] = make([]byte, 32)
					q.PCRs[16][0] = 1
				}
				return q, err
			}},
			wantErr: ErrPCRDigest,
		},
		"quote leaves out a policy PCR": {
			attempt: attempt{quote: func(p *pair, nonce []byte) (*Quote, error) {
				return p.a.Quote(p.akA, nonce, []int{0, 16, 23})
			}},
			wantErr:  ErrPCR,
			wantText: "does not cover PCR 7",
		},
		"unrestricted signing key presented as AK": {
			attempt: attempt{ak: func(t *testing.T, p *pair) []byte {
				tmpl := akTemplate
				tmpl.ObjectAttributes.Restricted = false
				return loadKey(t, p.a, tmpl).Public()
			}},
			wantErr:  ErrUnboundKey,
			wantText: "lacks [restricted]",
		},
	}
}

// TestJoin runs the join's attestation against two real swtpms: the honest
// node passes, and each attack is refused by the check meant for it.
func TestJoin(t *testing.T) {
	for name, tc := range joinCases() {
		t.Run(name, func(t *testing.T) {
			p := newPair(t)
			if tc.tamper != nil {
				tc.tamper(t, p)
			}
			err := join(t, p, tc.attempt)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("join refused: %v", err)
				}
				return
			}
			t.Logf("refused: %v", err)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("join: got %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("join: %q does not say %q", err, tc.wantText)
			}
		})
	}
}

// TestJoinRSAEK runs the honest join with an RSA-2048 EK (the TCG's other
// default template, the one most TPM makers certify), to show MakeChallenge
// encrypts to either kind.
func TestJoinRSAEK(t *testing.T) {
	tpm := openSWTPM(t)
	tpm.ekTemplate = tpm2.RSAEKTemplate
	ak := newAK(t, tpm)
	ek := mustEK(t, tpm)
	ch, secret, err := MakeChallenge(ek, ak.Public())
	if err != nil {
		t.Fatal(err)
	}
	recovered, err := tpm.Activate(ak, ch)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckActivation(secret, recovered); err != nil {
		t.Fatal(err)
	}
}

// TestAKIsStable shows that a node restarting (a new connection, a new
// NewAK) presents the same attestation key and EK, so the controller's
// record of them stays valid.
func TestAKIsStable(t *testing.T) {
	sock := startSWTPM(t)
	first, err := Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	ak1, ek1 := newAK(t, first).Public(), mustEK(t, first)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	ak2, ek2 := newAK(t, second).Public(), mustEK(t, second)
	if string(ak1) != string(ak2) || ek1.Fingerprint() != ek2.Fingerprint() {
		t.Fatal("the same TPM gave another AK or EK after a reopen")
	}
}

// TestQuoteRefusesBadArguments covers the node side's own checks.
func TestQuoteRefusesBadArguments(t *testing.T) {
	tpm := openSWTPM(t)
	ak := newAK(t, tpm)
	other := openSWTPM(t)
	cases := map[string]struct {
		ak    *AK
		nonce []byte
		pcrs  []int
		want  string
	}{
		"no PCRs":             {ak: ak, nonce: []byte("n"), want: "no PCRs"},
		"PCR 24":              {ak: ak, nonce: []byte("n"), pcrs: []int{24}, want: "PCRs 0–23"},
		"empty nonce":         {ak: ak, pcrs: []int{0}, want: "nonce is 0 bytes"},
		"nonce of 65 bytes":   {ak: ak, nonce: make([]byte, 65), pcrs: []int{0}, want: "nonce is 65 bytes"},
		"another TPM's AK":    {ak: newAK(t, other), nonce: []byte("n"), pcrs: []int{0}, want: "not loaded by this TPM"},
		"nine PCRs at a time": {ak: ak, nonce: []byte("n"), pcrs: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 23}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, err := tpm.Quote(tc.ak, tc.nonce, tc.pcrs)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := VerifyQuote(ak.Public(), q, tc.nonce, nil); err != nil {
					t.Fatal(err)
				}
				if len(q.PCRs) != len(tc.pcrs) {
					t.Fatalf("got %d PCR values, want %d", len(q.PCRs), len(tc.pcrs))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestOpenRefusesOtherFiles checks that a path that is neither a device nor
// a socket is refused with advice.
func TestOpenRefusesOtherFiles(t *testing.T) {
	for name, path := range map[string]string{
		"a directory":      t.TempDir(),
		"a path not there": "/nonexistent/tpm",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "/dev/tpmrm0") {
				t.Fatalf("Open(%s): got %v, want advice naming /dev/tpmrm0", path, err)
			}
		})
	}
}

func newAK(t testing.TB, tpm *TPM) *AK {
	t.Helper()
	ak, err := tpm.NewAK()
	if err != nil {
		t.Fatal(err)
	}
	return ak
}

// loadKey loads a key of any template as a primary key of the owner
// hierarchy, for presenting keys that are not attestation keys.
func loadKey(t testing.TB, tpm *TPM, template tpm2.TPMTPublic) *AK {
	t.Helper()
	tpm.mu.Lock()
	defer tpm.mu.Unlock()
	ak, err := tpm.createAK(template)
	if err != nil {
		t.Fatal(err)
	}
	return ak
}

func mustEK(t testing.TB, tpm *TPM) EK {
	t.Helper()
	ek, err := tpm.EK()
	if err != nil {
		t.Fatal(err)
	}
	return ek
}

func mustNonce(t testing.TB) []byte {
	t.Helper()
	n, err := NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
