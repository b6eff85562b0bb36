package ctld

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/attest"
	"corral/internal/attest/swtpmtest"
	"corral/internal/pki"
	"corral/noded"
)

// testTPM starts a fresh swtpm and opens it; the test is skipped without
// swtpm. t.Cleanup closes it and stops swtpm by its PID.
func testTPM(t *testing.T) *attest.TPM {
	t.Helper()
	sock := swtpmtest.Start(t)
	tpm, err := attest.Open(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tpm.Close() })
	return tpm
}

// attestScene is an authenticating cluster of one member whose policy
// allows TPM A's endorsement key and expects A's PCR 7 and 16, TPM B beside
// it, and a way to make node daemons' clients.
type attestScene struct {
	a, b   *attest.TPM
	ak     *attest.AK
	ekA    attest.EK
	leader *Controller
	node   func(name string) *api.Client
	info   func(name string) api.NodeInfo
}

func newAttestScene(t *testing.T, every time.Duration) *attestScene {
	sc := &attestScene{a: testTPM(t), b: testTPM(t)}
	if err := sc.a.Extend(7, []byte("secure boot: db, shim, grub")); err != nil {
		t.Fatal(err)
	}
	sc.ekA, _ = sc.a.EK()
	var err error
	if sc.ak, err = sc.a.NewAK(); err != nil {
		t.Fatal(err)
	}
	nonce, _ := attest.NewNonce()
	q, err := sc.a.Quote(sc.ak, nonce, []int{7, 16})
	if err != nil {
		t.Fatal(err)
	}
	policy := attest.Policy{PCRs: attest.PolicyPCRs(q), EndorsementKeys: []string{sc.ekA.Fingerprint()}}
	tc := startClusterTuned(t, 1, true, true, func(c *Config) { c.TPMPolicy, c.AttestEvery = &policy, every })
	sc.leader = tc.waitLeader(t)
	sc.node = func(name string) *api.Client {
		cert, key, err := pki.Issue(tc.caDir, t.TempDir(), pki.Request{Role: pki.RoleNode, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := (pki.Files{Cert: cert, Key: key, CA: filepath.Join(tc.caDir, pki.CACertFile)}).Client()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := api.NewTLSClient(tc.addrs[0], cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl.RetryFor = time.Second
		return cl
	}
	sc.info = func(name string) api.NodeInfo {
		return api.NodeInfo{Name: name, CPUs: 2, MemMB: 2048, Runner: "test", BootID: name + "-boot"}
	}
	return sc
}

// TestStaleAttestationDrains checks that a registered node which stops
// attesting is drained once its last attestation is older than twice the
// period, with the reason.
func TestStaleAttestationDrains(t *testing.T) {
	sc := newAttestScene(t, 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n1 := sc.node("n1")
	if err := (&noded.Attester{Name: "n1", Client: n1, TPM: sc.a, Log: quietLog()}).Attest(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n1.Register(ctx, sc.info("n1")); err != nil {
		t.Fatal(err)
	}
	go func() { // alive, but no longer attesting
		for ctx.Err() == nil {
			_ = n1.Heartbeat(ctx, "n1", "n1-boot")
			time.Sleep(200 * time.Millisecond)
		}
	}()
	var reason string
	waitFor(t, func() bool {
		sc.leader.fsm.Read(func(s *state.State) { reason = s.Nodes["n1"].Reason })
		return strings.Contains(reason, "no attestation since")
	})
}

// TestNodeAttestation runs the attestation against two real TPMs (swtpm):
// the controllers' policy allows A's endorsement key and expects A's PCR 7
// and 16. A node that has not attested cannot register; with A it attests
// (credential activation, then a quote), registers, and re-attests with a
// quote alone. With B (an EK not on the list), with a stale nonce, and with
// a PCR changed since the policy, it is refused with the reason, and a
// registered node that fails is drained.
func TestNodeAttestation(t *testing.T) {
	sc := newAttestScene(t, 0)
	a, b, ak, ekA, leader, node, info := sc.a, sc.b, sc.ak, sc.ekA, sc.leader, sc.node, sc.info
	ctx := context.Background()
	refused := func(what string, err error, want string) {
		t.Helper()
		var ae *api.APIError
		if !asAPIError(err, &ae) || ae.Status != http.StatusForbidden && ae.Status != http.StatusConflict || !strings.Contains(ae.Message, want) {
			t.Errorf("%s: %v; want a refusal naming %q", what, err, want)
		}
	}
	n1 := node("n1")
	refused("n1 registering before it attested", n1.Register(ctx, info("n1")), "has not attested")
	att := &noded.Attester{Name: "n1", Client: n1, TPM: a, Log: quietLog()}
	if err := att.Attest(ctx); err != nil {
		t.Fatalf("n1 attesting with TPM A: %v", err)
	}
	if err := n1.Register(ctx, info("n1")); err != nil {
		t.Fatalf("n1 registering once attested: %v", err)
	}
	again, err := n1.AttestBeginRequest(ctx, api.AttestBegin{Name: "n1", EK: ekA.Public, AK: ak.Public()})
	if err != nil || len(again.Credential) != 0 {
		t.Fatalf("a re-attestation's begin: %v, credential %d bytes; want a nonce alone", err, len(again.Credential))
	}
	if err := att.Attest(ctx); err != nil {
		t.Errorf("n1 re-attesting: %v", err)
	}

	n2 := node("n2")
	refused("n2 with TPM B", (&noded.Attester{Name: "n2", Client: n2, TPM: b, Log: quietLog()}).Attest(ctx), "not on the allow list")
	refused("n2 registering after its failed attestation", n2.Register(ctx, info("n2")), "failed its last attestation")

	// A stale nonce: the quote answers the first of two begun attestations.
	first, err := n1.AttestBeginRequest(ctx, api.AttestBegin{Name: "n1", EK: ekA.Public, AK: ak.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.AttestBeginRequest(ctx, api.AttestBegin{Name: "n1", EK: ekA.Public, AK: ak.Public()}); err != nil {
		t.Fatal(err)
	}
	old, err := a.Quote(ak, first.Nonce, first.PCRs)
	if err != nil {
		t.Fatal(err)
	}
	refused("a quote over a replaced nonce", n1.AttestFinishRequest(ctx, api.AttestFinish{Name: "n1",
		Quote: api.AttestQuote{Attest: old.Attest, Signature: old.Signature, PCRs: old.PCRs}}), "nonce")
	if err := att.Attest(ctx); err != nil {
		t.Fatalf("n1 attesting again after the refusal: %v", err)
	}

	// A PCR changed since the policy was taken: n1 is drained.
	if err := a.Extend(16, []byte("a debugger")); err != nil {
		t.Fatal(err)
	}
	refused("n1 after PCR 16 changed", att.Attest(ctx), "PCR 16")
	var drain bool
	var reason string
	leader.fsm.Read(func(s *state.State) { drain, reason = s.Nodes["n1"].Drain, s.Nodes["n1"].Reason })
	if !drain || !strings.Contains(reason, "attestation failed") || !strings.Contains(reason, "PCR 16") {
		t.Errorf("n1 after a failed re-attestation: drain %v, reason %q; want drained with the reason", drain, reason)
	}
}
