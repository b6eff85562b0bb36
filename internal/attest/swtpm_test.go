package attest

import (
	"testing"

	"corral/internal/attest/swtpmtest"
)

// startSWTPM starts a fresh swtpm and returns its socket (swtpmtest.Start).
func startSWTPM(t testing.TB) string { return swtpmtest.Start(t) }

// openSWTPM starts an swtpm and opens it; t.Cleanup closes it.
func openSWTPM(t testing.TB) *TPM {
	t.Helper()
	tpm, err := Open(startSWTPM(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tpm.Close(); err != nil {
			t.Errorf("closing the TPM: %v", err)
		}
	})
	return tpm
}

// extendPCR extends a SHA-256 PCR with the digest of data, as a boot stage
// measuring the next would.
func extendPCR(t testing.TB, tpm *TPM, pcr int, data string) {
	t.Helper()
	if err := tpm.Extend(pcr, []byte(data)); err != nil {
		t.Fatal(err)
	}
}
