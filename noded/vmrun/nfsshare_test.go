package vmrun

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digitalocean/go-qemu/qmp"

	"corral/noded"
	"corral/vmimage"
)

// appendScript appends "line N" to $1/log.txt every 50 ms, n times, and
// fails loudly if any append fails. It waits with read -t on a pipe
// nobody writes to, a builtin: an exec of sleep costs a TCG guest more
// than the 50 ms.
func appendScript(n int) string {
	return `#!/bin/bash
exec {never}<> <(:)
for ((i = 1; i <= ` + strconv.Itoa(n) + `; i++)); do
	echo "line $i" >> "$1/log.txt" || { echo "append $i failed" >&2; exit 3; }
	read -t 0.05 -u $never
done
echo appended
`
}

// checkLines checks that path holds "line 1" to "line n", each once, in
// order.
func checkLines(t *testing.T, path string, n int) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(readFile(t, path), "\n"), "\n")
	if len(got) != n {
		t.Errorf("%s has %d lines, want %d (lost or duplicated appends)", path, len(got), n)
	}
	for i, l := range got {
		if l != "line "+strconv.Itoa(i+1) {
			t.Fatalf("%s line %d is %q, want %q (lost, duplicated or reordered)", path, i+1, l, "line "+strconv.Itoa(i+1))
		}
	}
}

// lineCount returns how many lines path has now.
func lineCount(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// TestFileServerRestartIsAStall kills the VM's file server while the job
// appends to a file on its shared path: the runner restarts the server,
// the guest's hard mount waits and retries, and the job sees no error and
// loses nothing. The handles the guest holds (its working directory, the
// file) work with the new server process.
func TestFileServerRestartIsAStall(t *testing.T) {
	r := testRunner(t)
	const n = 100
	spec := jobSpec(t, appendScript(n), 1, 256)
	spec.Args = []string{spec.Dir}
	spec.Stderr = filepath.Join(spec.Dir, "err.txt")
	log := filepath.Join(spec.Dir, "log.txt")
	v := start(t, r, spec)
	waitFor(t, "the first appends", 60*time.Second, func() bool { return lineCount(log) >= 10 })
	old := v.NFSServerPID()
	if old == 0 {
		t.Fatal("the VM has no file server running")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed, at := time.Now(), lineCount(log)
	waitFor(t, "the file server's restart", 10*time.Second, func() bool { p := v.NFSServerPID(); return p != 0 && p != old })
	waitFor(t, "an append after the restart", 60*time.Second, func() bool { return lineCount(log) > at+1 })
	stall := time.Since(killed)
	res := waitResult(t, v, 90*time.Second)
	out, errOut := readFile(t, spec.Stdout), readFile(t, spec.Stderr)
	if res.ExitCode != 0 || !strings.Contains(out, "appended") || errOut != "" {
		t.Fatalf("result %+v, stdout %q, stderr %q", res, out, errOut)
	}
	checkLines(t, log, n)
	t.Logf("server %d killed after %d lines; restarted as another process; appends went on after %v; all %d lines there", old, at, stall.Round(time.Millisecond), n)
}

// TestMigrationBlockers asks QEMU whether it would migrate a running VM
// with the virtiofs share (--no-migrate): it names the vhost-user-fs
// device. The default VM (the host's root over NFS) and the bare initramfs
// VM have no blocker: the migration tests check that on the VMs they
// migrate.
func TestMigrationBlockers(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	spec := jobSpec(t, "#!/bin/sh\necho up\nsleep 30\n", 1, 256)
	spec.Share = vmimage.ShareVirtiofs
	v, err := r.start(context.Background(), spec, startOpts{accel: r.Accel(), hostRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(0); v.Wait() })
	waitFor(t, "the job's first output", 60*time.Second, func() bool { return strings.Contains(readFile(t, spec.Stdout), "up") })
	reasons, err := v.MigrationBlockers()
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) == 0 || !strings.Contains(strings.Join(reasons, " "), "vhost-user-fs") {
		t.Errorf("the virtiofs VM's blockers %v do not name vhost-user-fs", reasons)
	}
	t.Logf("virtiofs VM: blockers %q", reasons)
}

// assertMigratable fails t if QEMU names a reason not to migrate v.
func assertMigratable(t *testing.T, v *VM) {
	t.Helper()
	reasons, err := v.MigrationBlockers()
	if err != nil {
		t.Fatal(err)
	}
	if len(reasons) != 0 {
		t.Errorf("the VM is blocked from migrating: %v", reasons)
	}
}

// TestLiveMigrationKeepsTheSharedFile migrates a running default job VM on
// loopback (QEMU names no blocker for it) while it appends a line every
// 50 ms to a file on its shared path, to a destination with its own state
// directory, network namespace, tap device and file server (as on another
// node), started by StartIncoming. The job ends on the destination with
// nothing lost, duplicated or reordered, and no error: the destination's
// server takes the source's handle key from the prelude.
func TestLiveMigrationKeepsTheSharedFile(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	const n = 120
	spec := jobSpec(t, appendScript(n), 1, 256)
	spec.Args = []string{spec.Dir}
	spec.Stderr = filepath.Join(spec.Dir, "err.txt")
	log := filepath.Join(spec.Dir, "log.txt")
	src := start(t, r, spec)
	waitFor(t, "the first appends", 60*time.Second, func() bool { return lineCount(log) >= 15 })
	assertMigratable(t, src)

	h, err := r.StartIncoming(context.Background(), withDir(spec, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	dst := h.(*VM)
	t.Cleanup(func() { dst.Kill(0); <-dst.done })
	if dst.NFSServerPID() != 0 {
		t.Error("the destination's file server runs before the source's handle key arrived")
	}
	at := lineCount(log)
	stats, serr, rerr := migrate(t, src, dst, migrationParams)
	if serr != nil || rerr != nil {
		t.Fatalf("migration: source %v, destination %v", serr, rerr)
	}
	if !bytesEqual(dst.handleKey(), src.handleKey()) {
		t.Error("the destination's file server does not serve with the source's handle key")
	}
	switchOver(t, src, dst)
	res := waitResult(t, dst, 90*time.Second)
	out, errOut := readFile(t, spec.Stdout), readFile(t, spec.Stderr)
	if res.ExitCode != 0 || !strings.Contains(out, "appended") || errOut != "" {
		t.Fatalf("destination's result %+v, stdout %q, stderr %q; console: %s", res, out, errOut, tailFile(dst.f.console, 60, 6000))
	}
	checkLines(t, log, n)
	t.Logf("migrated after %d lines: total %s, downtime %s; all %d lines there", at, stats.Total, stats.Downtime, n)
}

// withDir returns spec with another state directory.
func withDir(spec noded.LaunchSpec, dir string) noded.LaunchSpec {
	spec.Dir = dir
	return spec
}

func bytesEqual(a, b []byte) bool { return len(a) > 0 && string(a) == string(b) }

// qmpRaw runs one QMP command given as JSON and returns its reply.
func qmpRaw(t *testing.T, sock, cmd string) []byte {
	t.Helper()
	mon, err := qmp.NewSocketMonitor("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Disconnect()
	if err := mon.Connect(); err != nil {
		t.Fatal(err)
	}
	b, err := mon.Run([]byte(cmd))
	if err != nil {
		t.Fatalf("QMP %s: %v", cmd, err)
	}
	return b
}
