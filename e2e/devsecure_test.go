package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevSecure runs `corral dev --secure` (process runner): the CLI with
// the CORRAL_ADDR, CORRAL_CA and CORRAL_AUTHD it prints is its caller
// through the dev cluster's agent, submits a job that runs, and a request
// without credentials is refused.
func TestDevSecure(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	dev := exec.CommandContext(ctx, corralBin, "dev", "--secure", "--runner", "process", "--data", filepath.Join(dir, "state"),
		"--http", ports[0], "--raft", ports[1], "--log-level", "warn")
	dev.Stdout, dev.Stderr = &out, &out
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dev.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { dev.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cancel()
			<-done
		}
		cancel()
		if t.Failed() {
			t.Logf("corral dev:\n%s", out.String())
		}
	})
	env := []string{"CORRAL_ADDR=https://" + ports[0], "CORRAL_CA=" + filepath.Join(dir, "state", "pki", "ca.crt"),
		"CORRAL_AUTHD=" + filepath.Join(dir, "state", "authd.sock"), "PATH=/usr/bin:/bin", "HOME=" + dir}
	cli := func(extra []string, args ...string) (string, string, error) {
		cmd := exec.Command(corralBin, args...)
		cmd.Env, cmd.Dir = append(append([]string{}, env...), extra...), dir
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}
	deadline := time.Now().Add(30 * time.Second)
	var who, stderr string
	var err error
	for time.Now().Before(deadline) {
		if who, stderr, err = cli(nil, "whoami"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(who, "role admin") || !strings.Contains(who, "agent on login dev-login") {
		t.Fatalf("whoami on the secure dev cluster: %q %q %v", who, stderr, err)
	}
	if !strings.Contains(out.String(), "export CORRAL_CA=") {
		t.Errorf("corral dev --secure did not print the CLI's settings:\n%s", out.String())
	}
	id, stderr, err := cli(nil, "submit", "--parsable", "--wait", "--wrap", "echo secure-dev")
	if err != nil {
		t.Fatalf("submit --wait: %q %v", stderr, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "slurm-"+strings.TrimSpace(id)+".out"))
	if err != nil || string(got) != "secure-dev\n" {
		t.Errorf("the job's output: %q %v", got, err)
	}
	if _, stderr, err := cli([]string{"CORRAL_AUTHD=" + filepath.Join(dir, "none")}, "queue"); err == nil || !strings.Contains(stderr, "no identity agent") {
		t.Errorf("the CLI pointed at no agent: %q %v; want it to say so", stderr, err)
	}
	if _, stderr, err := cli([]string{"CORRAL_TOKEN=corral_x_y"}, "queue"); err == nil || !strings.Contains(stderr, "unknown") {
		t.Errorf("a made-up token: %q %v; want 401", stderr, err)
	}
}
