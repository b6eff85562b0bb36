package vmrun

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/noded"
	"corral/vmimage"

	"corral/internal/procref"
)

// The tests boot real VMs (TCG wherever KVM does not work) from the image
// `make image` builds. They skip, saying why, where QEMU or the image is
// missing; CI installs both.

var (
	runnerOnce sync.Once
	sharedR    *Runner
	sharedErr  error
)

func imageRoot() string {
	if d := os.Getenv("CORRAL_IMAGE_ROOT"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "build", "images")
}

// guestDebugEnv, set, has the tests' guests trace their init's steps on
// their consoles (Config.GuestDebug).
const guestDebugEnv = "CORRAL_TEST_GUEST_DEBUG"

// probeEnv carries a probe's outcome to a child test binary (inOwnNetns),
// whose runner then restores it instead of booting the probe guest again,
// as a daemon restarted on the same boot does.
const probeEnv = "CORRAL_TEST_PROBE"

// testRunner returns the runner all tests share: New's probe boots one or
// two VMs, which is worth doing once.
func testRunner(tb testing.TB) *Runner {
	tb.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		tb.Skip("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86): the vm runner tests boot real VMs")
	}
	if _, err := vmimage.Load(filepath.Join(imageRoot(), "default")); err != nil {
		tb.Skipf("no guest image (run make image, or set CORRAL_IMAGE_ROOT): %v", err)
	}
	runnerOnce.Do(func() {
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg := Config{ImageRoot: imageRoot(), Logger: log, NFSServer: []string{os.Args[0], nfsdChild}, GuestDebug: os.Getenv(guestDebugEnv) != ""}
		found := os.Getenv(probeEnv)
		if found == "" {
			sharedR, sharedErr = New(context.Background(), cfg)
			return
		}
		if sharedR, sharedErr = Load(cfg); sharedErr == nil {
			sharedErr = sharedR.Restore([]byte(found))
		}
	})
	if sharedErr != nil {
		tb.Fatalf("New: %v", sharedErr)
	}
	return sharedR
}

// guestOnly skips tb under the race detector: the test checks what a guest
// sees (its files, identity, network, QEMU's view of the VM), which the
// race detector cannot look into, since it instruments only the daemon's
// Go code, and that code runs here the way the tests kept under -race run
// it. Such a test runs in the plain go test step; under -race its VMs
// would only boot a second time. The tests of the daemon's own concurrency
// (the agent channel, exec, recovery after a daemon's kill, the file
// server's restart, kill and grace) run in both.
func guestOnly(tb testing.TB) {
	tb.Helper()
	if raceEnabled {
		tb.Skip("checks what the guest sees, not the daemon's concurrency: it runs in the plain go test step, not under -race")
	}
}

// jobSpec returns a job in a fresh state directory, stdout in out.txt; it
// runs as root in that directory, which is shared with the guest.
func jobSpec(tb testing.TB, script string, cpus int, memMB int64) noded.LaunchSpec {
	dir := tb.TempDir()
	return noded.LaunchSpec{
		Job:     &api.Job{ID: 42, Node: "node1", CPUs: cpus, MemMB: memMB},
		Dir:     dir,
		Env:     []string{"PATH=/usr/bin:/bin", "CORRAL_JOB_ID=42"},
		Stdout:  filepath.Join(dir, "out.txt"),
		Script:  script,
		WorkDir: dir,
		Shares:  []string{dir},
	}
}

func start(tb testing.TB, r *Runner, spec noded.LaunchSpec) *VM {
	tb.Helper()
	h, err := r.Start(context.Background(), spec)
	if err != nil {
		tb.Fatalf("Start: %v", err)
	}
	v := h.(*VM)
	tb.Cleanup(func() { v.Kill(0); <-v.done })
	return v
}

// waitResult waits for the VM with a bound, so a hung VM fails the test
// instead of the whole run.
func waitResult(tb testing.TB, v *VM, limit time.Duration) noded.Result {
	tb.Helper()
	select {
	case <-v.Done():
		return v.Wait()
	case <-time.After(limit):
		tb.Fatalf("VM still running after %s; console: %s", limit, tailFile(v.f.console, 5, 800))
	}
	return noded.Result{}
}

// waitFor polls cond until it holds or limit passes.
func waitFor(tb testing.TB, what string, limit time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// assertGone checks that nothing of the VM outlives it.
func assertGone(t *testing.T, v *VM) {
	t.Helper()
	if st, err := procref.ReadStat(v.st.PID); err == nil && st.Start == v.st.Start && !st.Ended() {
		t.Errorf("QEMU (pid %d) is still running", v.st.PID)
	}
	for _, p := range []string{v.f.qmp, v.f.initrd} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s outlives the VM (stat: %v)", filepath.Base(p), err)
		}
	}
}

func TestProbeExplainsItsChoiceAndTheChoiceBoots(t *testing.T) {
	r := testRunner(t)
	t.Logf("probe: %s", r.ProbeReport())
	if r.Accel() != "kvm" && r.Accel() != "tcg" {
		t.Fatalf("Accel() = %q", r.Accel())
	}
	rep := r.ProbeReport()
	if !strings.HasPrefix(rep, "accel "+r.Accel()+":") || !strings.Contains(rep, r.Accel()+" booted the test guest in") {
		t.Errorf("the report does not say which accelerator booted: %s", rep)
	}
	if r.Accel() == "tcg" && !strings.Contains(rep, "kvm not tried") && !strings.Contains(rep, "kvm failed") {
		t.Errorf("TCG chosen but the report does not say why KVM was not: %s", rep)
	}
	if mb := r.OverheadMB(); mb < 1 || mb > 1024 {
		t.Errorf("OverheadMB() = %d, want a plausible QEMU overhead", mb)
	}
	if imgs := r.Images(); !contains(imgs, "default") {
		t.Errorf("Images() = %v, want default among them", imgs)
	}
	if r.Name() != "vm" {
		t.Errorf("Name() = %q", r.Name())
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestJobSeesItsVCPUsMemoryAndKernel runs a job that prints what its guest
// has and exits 3; a daemon restarted afterwards derives the same Result
// from the job's state directory.
func TestJobSeesItsVCPUsMemoryAndKernel(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	spec := jobSpec(t, "#!/bin/sh\nnproc\nfree -m\nuname -r\necho \"id=$CORRAL_JOB_ID pwd=$(pwd) host=$(hostname)\"\necho oops >&2\nexit 3\n", 2, 256)
	spec.Stderr = filepath.Join(spec.Dir, "err.txt")
	v := start(t, r, spec)
	if ids, err := v.VCPUThreads(); err != nil || len(ids) != 2 || ids[0] <= 0 {
		t.Errorf("VCPUThreads() = %v, %v; want two thread ids", ids, err)
	}
	res := waitResult(t, v, 60*time.Second)
	if res != (noded.Result{ExitCode: 3}) {
		t.Errorf("Result = %+v, want ExitCode 3", res)
	}
	out := readFile(t, spec.Stdout)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 5 || lines[0] != "2" {
		t.Fatalf("nproc: want 2 first; output:\n%s", out)
	}
	total := memTotal(lines)
	if total < 160 || total > 256 {
		t.Errorf("free -m total = %d MiB, want close to 256; output:\n%s", total, out)
	}
	img, _ := r.image("")
	if !contains(lines, img.KernelVersion) || !strings.Contains(img.KernelVersion, "cloud") {
		t.Errorf("uname -r: want the cloud kernel %s; output:\n%s", img.KernelVersion, out)
	}
	if !contains(lines, "id=42 pwd="+spec.WorkDir+" host=node1") {
		t.Errorf("environment, workdir or hostname missing; output:\n%s", out)
	}
	if got := readFile(t, spec.Stderr); got != "oops\n" {
		t.Errorf("stderr file = %q, want %q", got, "oops\n")
	}
	assertGone(t, v)
	h, got, err := r.Recover(spec.Dir)
	if h != nil || !errors.Is(err, noded.ErrGone) || got == nil || *got != res {
		t.Errorf("Recover of the finished job = %v, %+v, %v; want ErrGone with %+v", h, got, err, res)
	}
}

// memTotal returns the "Mem:" total of free -m's output.
func memTotal(lines []string) int {
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Mem:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

func TestKillEndsTheVMWithinGraceAndLeavesNothing(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "echo sleeping\nsleep 60\n", 1, 256)
	v := start(t, r, spec)
	waitFor(t, "the job to start", 60*time.Second, func() bool {
		return strings.Contains(readFile(t, spec.Stdout), "sleeping")
	})
	const grace = 3 * time.Second
	t0 := time.Now()
	v.Kill(grace)
	v.Kill(grace) // idempotent
	res := waitResult(t, v, grace+time.Second)
	t.Logf("VM gone %v after Kill", time.Since(t0).Round(time.Millisecond))
	if res != (noded.Result{Signal: 9}) {
		t.Errorf("Result = %+v, want Signal 9", res)
	}
	assertGone(t, v)
	// A daemon restarted now derives the same Result from the files.
	h, got, err := r.Recover(spec.Dir)
	if h != nil || !errors.Is(err, noded.ErrGone) || got == nil || *got != res {
		t.Errorf("Recover = %v, %+v, %v; want ErrGone with %+v", h, got, err, res)
	}
}

func TestAVMThatDiesWithoutExitIsReportedAsSuch(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "echo sleeping\nsleep 60\n", 1, 256)
	v := start(t, r, spec)
	waitFor(t, "the job to start", 60*time.Second, func() bool {
		return strings.Contains(readFile(t, spec.Stdout), "sleeping")
	})
	syscall.Kill(v.PID(), syscall.SIGKILL) // not through Kill: a crash
	res := waitResult(t, v, 10*time.Second)
	if res.ExitCode != 0 || res.Signal != 0 || !strings.Contains(res.Message, "without reporting the job's exit status") {
		t.Errorf("Result = %+v, want a message saying the exit status is lost", res)
	}
	assertGone(t, v)
	if h, got, err := r.Recover(spec.Dir); h != nil || got != nil || !errors.Is(err, noded.ErrGone) {
		t.Errorf("Recover = %v, %+v, %v; want ErrGone and no result", h, got, err)
	}
}

func TestGuestOOMIsReported(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	// awk doubles a string until it holds 512 MB, far past the guest's RAM.
	spec := jobSpec(t, "awk 'BEGIN { s = \"x\"; for (i = 0; i < 29; i++) s = s s; print length(s) }'\necho survived\n", 1, 128)
	v := start(t, r, spec)
	res := waitResult(t, v, 120*time.Second)
	if !res.OOM {
		t.Errorf("Result = %+v, want OOM; output: %s", res, readFile(t, spec.Stdout))
	}
	t.Logf("OOM result: %+v", res)
}

// TestPauseStopsTheJobAndContinueResumesIt pauses a VM over QMP while its
// job streams output, and continues it. It runs under -race too: it is the
// VM side of a suspend, whose daemon side noded's TestDaemonSuspendResume
// checks there with the process runner.
func TestPauseStopsTheJobAndContinueResumesIt(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "i=0\nwhile [ $i -lt 30 ]; do echo $i; i=$((i+1)); sleep 0.1; done\n", 1, 256)
	v := start(t, r, spec)
	lines := func() int { return strings.Count(readFile(t, spec.Stdout), "\n") }
	waitFor(t, "output to stream", 60*time.Second, func() bool { return lines() >= 5 })
	if err := v.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if p, err := v.Paused(); err != nil || !p {
		t.Errorf("Paused() = %v, %v after Pause", p, err)
	}
	time.Sleep(200 * time.Millisecond) // bytes already in QEMU's hands
	before := lines()
	time.Sleep(2 * time.Second)
	during := lines()
	if err := v.Continue(); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	if during != before {
		t.Errorf("output grew from %d to %d lines while paused", before, during)
	}
	if p, err := v.Paused(); err != nil || p {
		t.Errorf("Paused() = %v, %v after Continue", p, err)
	}
	res := waitResult(t, v, 60*time.Second)
	if res != (noded.Result{}) || lines() != 30 {
		t.Errorf("Result = %+v with %d lines, want exit 0 after 30 lines", res, lines())
	}
	if err := v.Pause(); !errors.Is(err, errVMEnded) {
		t.Errorf("Pause after the end = %v, want errVMEnded", err)
	}
}

func TestRecoverReattachesToARunningVM(t *testing.T) {
	r := testRunner(t)
	spec := jobSpec(t, "echo begun\nsleep 2\necho done\nexit 7\n", 1, 256)
	old := start(t, r, spec)
	waitFor(t, "the job to start", 60*time.Second, func() bool {
		return strings.Contains(readFile(t, spec.Stdout), "begun")
	})
	// The daemon dies: its handle is dropped (QMP holds no connection to
	// lose), and a new one re-attaches from the state directory alone.
	h, res, err := r.Recover(spec.Dir)
	if err != nil || res != nil || h == nil {
		t.Fatalf("Recover = %v, %+v, %v; want a handle", h, res, err)
	}
	v := h.(*VM)
	if v.cmd != nil || v.st.PID != old.st.PID {
		t.Errorf("recovered handle is not the re-attached VM (pid %d, want %d)", v.st.PID, old.st.PID)
	}
	if p, err := v.Paused(); err != nil || p {
		t.Errorf("recovered VM's monitor: Paused() = %v, %v", p, err)
	}
	got := waitResult(t, v, 60*time.Second)
	if got != (noded.Result{ExitCode: 7}) || !strings.Contains(readFile(t, spec.Stdout), "done") {
		t.Errorf("Result = %+v, output %q; want ExitCode 7 after done", got, readFile(t, spec.Stdout))
	}
	<-old.Done()
	assertGone(t, v)
}

func TestRecoverOfAnEmptyDirectoryIsGone(t *testing.T) {
	r := testRunner(t)
	h, res, err := r.Recover(t.TempDir())
	if h != nil || res != nil || !errors.Is(err, noded.ErrGone) {
		t.Errorf("Recover = %v, %+v, %v; want ErrGone and no result", h, res, err)
	}
}

func TestStartRefusesWhatCannotRun(t *testing.T) {
	r := testRunner(t)
	cases := map[string]struct {
		mutate func(*noded.LaunchSpec)
		want   string
	}{
		"unknown image":            {func(s *noded.LaunchSpec) { s.Job.Spec.Image = "nope" }, `"nope": this node has default`},
		"too little memory":        {func(s *noded.LaunchSpec) { s.Job.MemMB = 32 }, "at least 96M"},
		"missing output directory": {func(s *noded.LaunchSpec) { s.Stdout = "/nonexistent/dir/out" }, "it is not created"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := jobSpec(t, "exit 0\n", 1, 256)
			tc.mutate(&spec)
			_, err := r.Start(context.Background(), spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start error = %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(spec.Dir, initrdFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused job left its initrd (stat: %v)", err)
			}
		})
	}
}

// BenchmarkStartToFirstOutput measures Start until the job's first byte is
// in its stdout file, for #!/bin/bash echo hi: the VM's share of
// submit-to-first-output. Each round boots, one after the other, the
// default VM (the host's root over NFS), the --no-migrate VM (virtiofs) and
// the bare initramfs guest (busybox, no host files: the guest of issue
// #3), so that all three meet the same load; on a machine shared with other
// work the ratio to the bare guest says more than the wall times. Besides
// the wall time it reports the CPU time QEMU used until the output (its
// vCPU, the TCG translator, its I/O threads), which such a machine inflates
// much less: under TCG the guest's boot is QEMU's CPU. The fourth kind,
// nfs-warm, is the default VM restored from a warm start's snapshot (made
// first, with the runner's default settling, and reported: its time and
// size), its job handed over by the agent.
func BenchmarkStartToFirstOutput(b *testing.B) {
	r := testRunner(b)
	wr, _ := warmRunnerSettled(b, 0)
	first, err := wr.Start(context.Background(), jobSpec(b, "#!/bin/bash\necho hi\n", 1, 256))
	if err != nil {
		b.Fatal(err)
	}
	first.Wait()
	for _, s := range waitSnapshots(b, wr, 1) {
		b.Logf("snapshot %s: %.1f MiB, made in %v (boot, preparation and %v of settling), saved in %v", s.Shape, float64(s.Bytes)/(1<<20), s.Make, DefaultWarmSettle, s.Save)
	}
	b.ResetTimer()
	kinds := []struct {
		name, share    string
		hostRoot, warm bool
	}{{"nfs", vmimage.ShareNFS, true, false}, {"virtiofs", vmimage.ShareVirtiofs, true, false}, {"initramfs", "", false, false},
		{"nfs-warm", vmimage.ShareNFS, true, true}}
	took := map[string][]time.Duration{}
	cpu := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for _, k := range kinds {
			spec := jobSpec(b, "#!/bin/bash\necho hi\n", 1, 256)
			spec.Share = k.share
			t0 := time.Now()
			var v *VM
			var err error
			if k.warm {
				var h noded.Handle
				if h, err = wr.Start(context.Background(), spec); err == nil {
					if v = h.(*VM); !v.StartedWarm() {
						b.Fatalf("%s: the VM booted", k.name)
					}
				}
			} else {
				v, err = r.start(context.Background(), spec, startOpts{accel: r.Accel(), hostRoot: k.hostRoot, group: true, agent: true})
			}
			if err != nil {
				b.Fatal(err)
			}
			for {
				if fi, err := os.Stat(spec.Stdout); err == nil && fi.Size() > 0 {
					break
				}
				if time.Since(t0) > time.Minute {
					b.Fatalf("%s: no output within a minute", k.name)
				}
				time.Sleep(time.Millisecond)
			}
			took[k.name] = append(took[k.name], time.Since(t0))
			if st, err := procref.ReadStat(v.st.PID); err == nil {
				cpu[k.name] = append(cpu[k.name], time.Duration(st.CPUTicks)*10*time.Millisecond)
			}
			if res := v.Wait(); res != (noded.Result{}) {
				b.Fatalf("%s: Result = %+v", k.name, res)
			}
		}
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1)+0.5)]
	}
	for _, k := range kinds {
		b.ReportMetric(float64(pct(took[k.name], 0.5).Milliseconds()), k.name+"-p50-ms")
		b.ReportMetric(float64(pct(cpu[k.name], 0.5).Milliseconds()), k.name+"-qemu-cpu-p50-ms")
		b.Logf("%s: start→first output over %d runs (%s): p50 %v, p95 %v; QEMU's CPU until then: p50 %v", k.name, len(took[k.name]), r.Accel(),
			pct(took[k.name], 0.5), pct(took[k.name], 0.95), pct(cpu[k.name], 0.5))
	}
}
