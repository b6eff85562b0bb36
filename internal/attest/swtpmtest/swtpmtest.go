// Package swtpmtest starts software TPMs (swtpm) for tests of the
// attestation code on both of its sides, the node's (internal/attest) and
// the controller's (ctld): one starter, so that both wait for swtpm the
// same way.
package swtpmtest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Start starts a fresh swtpm (a new TPM with its own endorsement seed)
// in a temporary directory and returns its socket's path; t.Cleanup stops it
// by its PID. The test is skipped when swtpm is not installed.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("swtpm")
	if err != nil {
		t.Skip("swtpm is not installed: TPM tests skipped (install it with scripts/install-deps.sh or apt-get install swtpm)")
	}
	// A Unix socket's path is limited to 107 bytes, so the directory is not
	// t.TempDir(), whose name grows with the test's.
	dir, err := os.MkdirTemp("", "swtpm")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "socket", "--tpm2",
		"--server", "type=unixio,path="+sock,
		"--tpmstate", "dir="+dir,
		"--flags", "not-need-init,startup-clear")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("starting swtpm: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		// swtpm creates the socket file (bind) a moment before it listens:
		// it is ready once a connection is taken (and closed at once: swtpm
		// then waits for the next).
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
				return sock
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("swtpm exited before listening: %v: %s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm did not create %s within 10 s: %s", sock, stderr.String())
		}
	}
}
