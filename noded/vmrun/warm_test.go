package vmrun

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/noded"
)

// warmRunner returns a runner with warm starts on, its snapshots in a
// directory of the test's, saved as soon as their guest is ready (no
// settling: the tests do not change the host's files under a snapshot).
// It takes the shared runner's probe rather than booting its own.
func warmRunner(t *testing.T) *Runner {
	t.Helper()
	found, err := testRunner(t).Probe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := Load(Config{ImageRoot: imageRoot(), Logger: log, NFSServer: []string{os.Args[0], nfsdChild},
		WarmDir: filepath.Join(t.TempDir(), "warm"), WarmSettle: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(found); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitSnapshots waits until the runner holds n snapshots.
func waitSnapshots(t *testing.T, r *Runner, n int) []WarmSnapshot {
	t.Helper()
	waitFor(t, "the warm start's snapshot", 4*time.Minute, func() bool { return len(r.WarmSnapshots()) >= n })
	return r.WarmSnapshots()
}

func TestWarmScratch(t *testing.T) {
	r := warmRunner(t)
	spec := jobSpec(t, "#!/bin/bash\necho hi\n", 1, 256)
	v := start(t, r, spec)
	res := waitResult(t, v, 60*time.Second)
	t.Logf("cold: %+v %q warm=%v", res, readFile(t, spec.Stdout), v.StartedWarm())
	snaps := waitSnapshots(t, r, 1)
	t.Logf("snapshot: %+v", snaps)
	for i := 0; i < 2; i++ {
		spec := jobSpec(t, "#!/bin/bash\necho hi; head -c 8 /dev/urandom | od -An -tx1; cat /etc/machine-id /proc/sys/kernel/random/boot_id; date +%s.%N; python3 -c 'import os; print(os.urandom(8).hex())'\n", 1, 256)
		t0 := time.Now()
		v := start(t, r, spec)
		waitFor(t, "output", time.Minute, func() bool { b, _ := os.ReadFile(spec.Stdout); return len(b) > 0 })
		first := time.Since(t0)
		res := waitResult(t, v, 60*time.Second)
		t.Logf("warm=%v first output %v: %+v %q (host %d); console %s", v.StartedWarm(), first, res, readFile(t, spec.Stdout), time.Now().Unix(), tailFile(v.f.console, 5, 800))
	}
	_ = context.Background
	_ = strings.Contains
	_ = noded.Result{}
}
