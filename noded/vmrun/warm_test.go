package vmrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/procref"
	"corral/noded"
	"corral/vmimage"
)

// logBuffer collects a runner's log for a test to read, and copies it to
// stderr.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	os.Stderr.Write(p)
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// warmRunner returns a runner with warm starts on, its snapshots in a
// directory of the test's, saved as soon as their guest is ready (no
// settling: the tests change none of the host's files a snapshot's guest
// cached), and its log. It takes the shared runner's probe rather than
// booting its own.
func warmRunner(tb testing.TB) (*Runner, *logBuffer) {
	tb.Helper()
	return warmRunnerSettled(tb, -1)
}

// warmRunnerSettled is warmRunner with Config.WarmSettle settle.
func warmRunnerSettled(tb testing.TB, settle time.Duration) (*Runner, *logBuffer) {
	tb.Helper()
	found, err := testRunner(tb).Probe(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	logs := &logBuffer{}
	var w io.Writer = logs
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := Load(Config{ImageRoot: imageRoot(), Logger: log, NFSServer: []string{os.Args[0], nfsdChild},
		WarmDir: filepath.Join(tb.TempDir(), "warm"), WarmSettle: settle, GuestDebug: os.Getenv(guestDebugEnv) != ""})
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Restore(found); err != nil {
		tb.Fatal(err)
	}
	return r, logs
}

// waitSnapshots waits until the runner holds n snapshots.
func waitSnapshots(tb testing.TB, r *Runner, n int) []WarmSnapshot {
	tb.Helper()
	waitFor(tb, "the warm start's snapshot", 4*time.Minute, func() bool { return len(r.WarmSnapshots()) >= n })
	return r.WarmSnapshots()
}

// TestWarmStart runs jobs of one shape on a runner with warm starts. The
// first boots, and the node makes the shape's snapshot meanwhile (a file
// of root's, 0600, in a directory of mode 0700). The next two are restored
// from it: each runs TestHostRootAsTheUser's bash script with the host's
// files, as the user, exactly as the booted one did, and prints random
// bytes (/dev/urandom, python's os.urandom), a machine id and a boot id
// that neither the other nor the booted job has, and the host's time (a
// copy whose clock stayed the snapshot's fails it; a copy not reseeded by
// the node does not, here: TCG's RDRAND is the host's randomness and a
// kernel this young reseeds from it within seconds, so the copies draw
// apart by themselves; guestinit's TestReseed checks the reseed). A
// snapshot whose stream was damaged fails its restore: the job boots
// instead, and the snapshot is removed and said so in the log. A VM whose
// daemon stopped between its restore and its job is ended by the next
// daemon (abandonRestore). (A job
// that opted out has no shape, TestWarmShapes; e2e's TestVMWarmStart
// boots one.)
func TestWarmStart(t *testing.T) {
	guestOnly(t)
	r, logs := warmRunner(t)
	type run struct {
		out      string
		from, to time.Time
	}
	job := func(warm bool) run {
		from := time.Now()
		out := hostRootAsTheUser(t, r, warm)
		return run{out, from, time.Now()}
	}
	cold := job(false)
	snaps := waitSnapshots(t, r, 1)
	s := snaps[0]
	t.Logf("snapshot %s (%s): %d MiB, made in %v, saved in %v", s.Key, s.Shape, s.Bytes>>20, s.Make, s.Save)
	for path, mode := range map[string]os.FileMode{r.warm.dir: 0o700 | os.ModeDir, r.warm.statePath(s.Key): 0o600, r.warm.metaPath(s.Key): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, mode)
		}
	}

	// A copy whose clock stayed the snapshot's would show it.
	time.Sleep(3 * time.Second)
	var ids []map[string]string
	for _, j := range []run{cold, job(true), job(true)} {
		m := identityLines(j.out)
		if len(m) != 5 || len(m["urandom"]) != 32 || len(m["python"]) != 32 || len(m["machine-id"]) != 32 {
			t.Fatalf("the job's identity lines are %v:\n%s", m, j.out)
		}
		// The snapshot's clock is the time it was saved, seconds before.
		if c, err := strconv.ParseInt(m["clock"], 10, 64); err != nil || time.Unix(c+1, 0).Before(j.from) || time.Unix(c, 0).After(j.to) {
			t.Errorf("the job's clock said %q, and it ran from %s to %s: not the host's time", m["clock"], j.from.Format(time.RFC3339), j.to.Format(time.RFC3339))
		}
		for _, other := range ids {
			for _, k := range []string{"urandom", "python", "machine-id", "boot-id"} {
				if m[k] == other[k] {
					t.Errorf("two jobs have the same %s %s", k, m[k])
				}
			}
		}
		ids = append(ids, m)
	}

	// A daemon that stopped between a restore and its job: the next one
	// ends the VM, whose guest would wait for a job nobody sends.
	spec := jobSpec(t, "#!/bin/bash\necho hi\n", 1, 256)
	f, err := os.Open(r.warm.statePath(s.Key))
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := newHandleKeys()
	keys.root = r.warm.get(s.Key).RootHandleKey
	half, err := r.start(context.Background(), spec, startOpts{accel: r.Accel(), hostRoot: true, agent: true, keys: &keys, incoming: &Incoming{File: f}})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	half.markWarm(s.Key, false)
	next, _ := warmRunner(t)
	if h, res, err := next.Recover(spec.Dir); h != nil || res == nil || !strings.Contains(res.Message, "did not run") || !errors.Is(err, noded.ErrGone) {
		t.Errorf("Recover of a restore left half done: %v, %+v, %v", h, res, err)
	}
	waitResult(t, half, 30*time.Second)

	// Damage the stream where QEMU reads it first, keeping its size and
	// time (so that only QEMU can tell).
	path := r.warm.statePath(s.Key)
	fi, _ := os.Stat(path)
	f, err = os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("not a QEMU stream"), 0)
	f.Close()
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	spec = jobSpec(t, "#!/bin/bash\necho hi\n", 1, 256)
	v := start(t, r, spec)
	if res := waitResult(t, v, 3*time.Minute); res != (noded.Result{}) || v.StartedWarm() || readFile(t, spec.Stdout) != "hi\n" {
		t.Errorf("a job whose snapshot is damaged: %+v, warm %v, output %q", res, v.StartedWarm(), readFile(t, spec.Stdout))
	}
	if _, err := os.Stat(path); err == nil || len(r.WarmSnapshots()) != 0 {
		t.Errorf("the damaged snapshot is still there (%v, %v)", err, r.WarmSnapshots())
	}
	if !strings.Contains(logs.String(), "removing a warm start's snapshot") {
		t.Errorf("the log does not say the damaged snapshot was removed")
	}
}

// BenchmarkWarmStages compares how far a snapshot's guest goes before it
// is saved, for the default VM (NFS share, network none) running
// #!/bin/bash echo hi: start → first output of a VM restored from a
// snapshot at stage net (modules and card only: the job's copy mounts the
// root and runs bash from the node's files), at stage root settled (the
// default: root mounted, bash and python warm in the page cache, their
// attributes expired so that the copy checks them with the node), and at
// stage root unsettled (the same, the attributes still fresh), and of a
// booted VM, in turn each round. It logs each snapshot's size and making
// time, and reports QEMU's CPU until the output as well.
func BenchmarkWarmStages(b *testing.B) {
	cold := testRunner(b)
	net, _ := warmRunnerSettled(b, -1)
	net.warmStage = vmimage.WarmNet
	settled, _ := warmRunnerSettled(b, 0)
	fresh, _ := warmRunnerSettled(b, -1)
	kinds := []struct {
		name string
		r    *Runner
	}{{"cold", cold}, {"warm-net", net}, {"warm-root-settled", settled}, {"warm-root-unsettled", fresh}}
	for _, k := range kinds[1:] {
		v, err := k.r.Start(context.Background(), jobSpec(b, "#!/bin/bash\necho hi\n", 1, 256))
		if err != nil {
			b.Fatal(err)
		}
		v.Wait()
	}
	for _, k := range kinds[1:] {
		for _, s := range waitSnapshots(b, k.r, 1) {
			b.Logf("%s: snapshot %.1f MiB, made in %v, saved in %v", k.name, float64(s.Bytes)/(1<<20), s.Make, s.Save)
		}
	}
	b.ResetTimer()
	took := map[string][]time.Duration{}
	cpu := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		for _, k := range kinds {
			spec := jobSpec(b, "#!/bin/bash\necho hi\n", 1, 256)
			t0 := time.Now()
			h, err := k.r.Start(context.Background(), spec)
			if err != nil {
				b.Fatal(err)
			}
			v := h.(*VM)
			if v.StartedWarm() != (k.r != cold) {
				b.Fatalf("%s: started warm %v", k.name, v.StartedWarm())
			}
			waitFor(b, "the first output", time.Minute, func() bool { fi, err := os.Stat(spec.Stdout); return err == nil && fi.Size() > 0 })
			took[k.name] = append(took[k.name], time.Since(t0))
			if st, err := procref.ReadStat(v.st.PID); err == nil {
				cpu[k.name] = append(cpu[k.name], time.Duration(st.CPUTicks)*10*time.Millisecond)
			}
			v.Wait()
		}
	}
	for _, k := range kinds {
		b.ReportMetric(float64(percentile(took[k.name], 0.5).Milliseconds()), k.name+"-p50-ms")
		b.ReportMetric(float64(percentile(cpu[k.name], 0.5).Milliseconds()), k.name+"-qemu-cpu-p50-ms")
		b.Logf("%s: start→first output over %d runs: p50 %v, p95 %v; QEMU's CPU until then: p50 %v", k.name, len(took[k.name]),
			percentile(took[k.name], 0.5), percentile(took[k.name], 0.95), percentile(cpu[k.name], 0.5))
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}
