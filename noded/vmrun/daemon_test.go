package vmrun

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/noded"
	"corral/vmimage"
)

// The environment that turns this test binary into a stand-in daemon.
const (
	helperDir   = "VMRUN_HELPER_DIR"
	helperAccel = "VMRUN_HELPER_ACCEL"
	helperTSC   = "VMRUN_HELPER_TSC"
)

// TestHelperDaemon is not a test: run by TestRecoverAfterDaemonSIGKILL as a
// separate process, it starts one VM, says so, and waits to be killed.
func TestHelperDaemon(t *testing.T) {
	dir := os.Getenv(helperDir)
	if dir == "" {
		t.Skip("helper process of TestRecoverAfterDaemonSIGKILL")
	}
	tsc, _ := strconv.Atoi(os.Getenv(helperTSC))
	r, err := unprobedRunner(os.Getenv(helperAccel), tsc)
	if err != nil {
		t.Fatal(err)
	}
	spec := jobSpec(t, "echo begun\nsleep 2\necho done\nexit 7\n", 1, 256)
	spec.Dir, spec.Stdout = dir, filepath.Join(dir, "out.txt")
	if _, err := r.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to start", time.Minute, func() bool {
		return strings.Contains(readFile(t, spec.Stdout), "begun")
	})
	fmt.Println("VM STARTED")
	select {}
}

// unprobedRunner builds a Runner without New's probe, taking the
// accelerator and TSC frequency a probed runner found.
func unprobedRunner(accel string, tscKHz int) (*Runner, error) {
	imgs, err := vmimage.List(imageRoot())
	if err != nil {
		return nil, err
	}
	// The file server is this test binary too, as testRunner's is.
	r := &Runner{cfg: Config{QEMU: "qemu-system-x86_64", DefaultImage: "default", ImageRoot: imageRoot(),
		NFSServer: []string{os.Args[0], nfsdChild}, VMIDs: DefaultVMIDs}, log: slog.Default(),
		images: map[string]*vmimage.Image{}, tscKHz: tscKHz}
	r.found.Store(&probeOutcome{Accel: accel})
	if r.cfg.QEMU, err = exec.LookPath(r.cfg.QEMU); err != nil {
		return nil, err
	}
	for i := range imgs {
		r.images[imgs[i].Name] = &imgs[i]
		r.names = append(r.names, imgs[i].Name)
	}
	return r, nil
}

func TestRecoverAfterDaemonSIGKILL(t *testing.T) {
	r := testRunner(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDaemon$", "-test.v")
	cmd.Env = append(os.Environ(), helperDir+"="+dir, helperAccel+"="+r.Accel(), helperTSC+"="+strconv.Itoa(r.tscKHz))
	cmd.Stderr = os.Stderr // the stand-in's own failures
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			ok = ok || sc.Text() == "VM STARTED"
			if ok {
				break
			}
		}
		started <- ok
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the stand-in daemon ended without starting its VM")
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the stand-in daemon did not start its VM")
	}
	cmd.Process.Kill()
	cmd.Wait()

	h, res, err := r.Recover(dir)
	if err != nil || res != nil || h == nil {
		t.Fatalf("Recover after the daemon's SIGKILL = %v, %+v, %v; want a handle", h, res, err)
	}
	v := h.(*VM)
	// The re-adopted VM keeps its QEMU's id, and the runner holds it.
	if uid, ok := statusUID("/proc/" + strconv.Itoa(v.st.PID) + "/status"); !ok || uid != v.st.As.UID || (os.Geteuid() == 0 && uid == 0) {
		t.Errorf("re-adopted QEMU runs as uid %d (%v), vm.json says %d", uid, ok, v.st.As.UID)
	}
	heldIDs.Lock()
	holder := heldIDs.m[v.st.As.UID]
	heldIDs.Unlock()
	if os.Geteuid() == 0 && holder != v.f.dir {
		t.Errorf("after Recover, uid %d is held for %q, want %q", v.st.As.UID, holder, v.f.dir)
	}
	got := waitResult(t, v, time.Minute)
	if got != (noded.Result{ExitCode: 7}) || !strings.Contains(readFile(t, filepath.Join(dir, "out.txt")), "done") {
		t.Errorf("Result = %+v, output %q; want ExitCode 7 after done", got, readFile(t, filepath.Join(dir, "out.txt")))
	}
	assertGone(t, v)
}
