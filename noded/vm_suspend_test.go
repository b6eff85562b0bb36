package noded_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"corral/noded"
	"corral/noded/vmrun"
	"corral/vmimage"
)

// TestDaemonSuspendResumeVM runs the suspend scenario of
// TestDaemonSuspendResume through the daemon with the vm runner: QMP stop
// and cont instead of SIGSTOP and SIGCONT. It runs in the plain go test
// step only: under -race, TestDaemonSuspendResume runs the daemon's side
// of the scenario and vmrun's TestPauseStopsTheJobAndContinueResumesIt the
// VM's, without a probe guest and a job VM booted a second time here.
func TestDaemonSuspendResumeVM(t *testing.T) {
	if raceEnabled {
		t.Skip("boots VMs for what TestDaemonSuspendResume and vmrun's pause test check under -race: it runs in the plain go test step")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86): this test boots a real VM")
	}
	root := os.Getenv("CORRAL_IMAGE_ROOT")
	if root == "" {
		root = filepath.Join("..", "build", "images")
	}
	if _, err := vmimage.Load(filepath.Join(root, "default")); err != nil {
		t.Skipf("no guest image (run make image, or set CORRAL_IMAGE_ROOT): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := vmrun.New(ctx, vmrun.Config{ImageRoot: root, Logger: log, NFSServer: []string{os.Args[0], nfsdChild}})
	if err != nil {
		t.Fatalf("vmrun.New: %v", err)
	}
	t.Logf("accelerator %s: %s", r.Accel(), r.ProbeReport())
	noded.SuspendGap(t, r, 256, time.Minute)
}
