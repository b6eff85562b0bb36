package noded

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral/api"
	"corral/internal/procref"
)

// probingRunner is the process runner with a probe that ends when the test
// lets it, as slow as the vm runner's test guest on a loaded node may be.
// The daemon takes its runner from Config.Runner; the jobs themselves run as
// processes, for real.
type probingRunner struct {
	offeringRunner
	key string
	// release is closed when the probe may end; fail is what it then
	// ends with.
	release chan struct{}
	fail    error
	// probes and restores count the calls; restored is what Restore got.
	probes, restores atomic.Int32
	restored         atomic.Pointer[string]
}

func newProbingRunner(key string) *probingRunner {
	return &probingRunner{offeringRunner: offeringRunner{NewProcessRunner()}, key: key, release: make(chan struct{})}
}

func (p *probingRunner) ProbeKey() string { return p.key }

func (p *probingRunner) Probe(ctx context.Context) ([]byte, error) {
	p.probes.Add(1)
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.fail != nil {
		return nil, p.fail
	}
	return json.Marshal(map[string]string{"probed_by": p.key})
}

func (p *probingRunner) Restore(found []byte) error {
	p.restores.Add(1)
	s := string(found)
	p.restored.Store(&s)
	return nil
}

func TestProbeReusable(t *testing.T) {
	found := json.RawMessage(`{"accel":"tcg"}`)
	tests := map[string]struct {
		rec        probeRecord
		boot, key  string
		want       bool
		whyContain string
	}{
		"same boot and runner": {probeRecord{BootID: "b1", Key: "k1", Found: found}, "b1", "k1", true, ""},
		"host rebooted":        {probeRecord{BootID: "b0", Key: "k1", Found: found}, "b1", "k1", false, "booted"},
		"runner changed":       {probeRecord{BootID: "b1", Key: "k0", Found: found}, "b1", "k1", false, "runner changed"},
		"boot id unknown":      {probeRecord{BootID: "", Key: "k1", Found: found}, "", "k1", false, "boot id is unknown"},
		"nothing recorded":     {probeRecord{BootID: "b1", Key: "k1"}, "b1", "k1", false, "records nothing"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ok, why := probeReusable(tc.rec, tc.boot, tc.key)
			if ok != tc.want || !strings.Contains(why, tc.whyContain) {
				t.Errorf("probeReusable = %v %q, want %v and a reason with %q", ok, why, tc.want, tc.whyContain)
			}
		})
	}
}

// TestRestartRegistersBeforeSlowProbe restarts a daemon whose runner must
// probe again (another program than the one that recorded the probe): the
// new daemon registers at once, as probing, with the job the first one left
// running, and heartbeats for three leases while its probe hangs; the job
// keeps running, and a job placed meanwhile waits. When the probe ends the
// daemon registers again, ready, and runs the waiting job.
func TestRestartRegistersBeforeSlowProbe(t *testing.T) {
	f := newFakeCtl(t)
	lease := 300 * time.Millisecond
	withLease(f, lease)
	data, work := t.TempDir(), t.TempDir()
	w := mkdirs(t, work, "1", "2")
	r1 := newProbingRunner("build 1")
	close(r1.release)
	d1 := startDaemon(t, f, data, func(c *Config) { c.Runner = r1 })
	f.addJob("n1", shJob(1, w[0], blockingScript(0)))
	waitFile(t, filepath.Join(w[0], "started"), 10*time.Second)
	d1.stop(t)

	before := len(f.registrations())
	r2 := newProbingRunner("build 2")
	d2 := startDaemon(t, f, data, func(c *Config) { c.Runner = r2 })
	f.waitRegistrations(t, before+1)
	reg := f.registrations()[before]
	if reg.BootID != d2.BootID() || !reg.Probing || !slices.Equal(reg.Running, []uint64{1}) {
		t.Fatalf("the restarted daemon first registered boot %s probing=%v running=%v, want boot %s probing with job 1",
			reg.BootID, reg.Probing, reg.Running, d2.BootID())
	}
	if reg.Accel != "" || reg.OverheadMB != 0 || !slices.Equal(reg.Images, []string{"default", "big"}) {
		t.Errorf("a probing node reported accel %q and overhead %d MiB (images %v); want neither before the probe, and its images",
			reg.Accel, reg.OverheadMB, reg.Images)
	}
	f.addJob("n1", shJob(2, w[1], "touch started"))
	beats := f.heartbeats.Load()
	time.Sleep(3 * lease)
	if got := f.heartbeats.Load() - beats; got < 4 {
		t.Errorf("%d heartbeats in three leases while the probe ran, want several", got)
	}
	if reps := f.reportsFor(1); len(reps) != 0 {
		t.Fatalf("the re-adopted job was reported while the probe ran: %+v", reps)
	}
	if _, err := os.Stat(filepath.Join(w[1], "started")); err == nil {
		t.Fatal("a new job started before the runner's probe was done")
	}
	if n := len(f.registrations()); n != before+1 {
		t.Errorf("%d registrations while the probe ran, want 1", n-before)
	}

	close(r2.release)
	f.waitRegistrations(t, before+2)
	reg = f.registrations()[before+1]
	if reg.BootID != d2.BootID() || reg.Probing || reg.Accel != "tcg" || reg.OverheadMB != 42 {
		t.Errorf("after the probe the daemon registered boot %s probing=%v accel %q overhead %d, want boot %s ready with tcg and 42",
			reg.BootID, reg.Probing, reg.Accel, reg.OverheadMB, d2.BootID())
	}
	if r := f.waitReport(t, 2, 10*time.Second); r.State != api.StateCompleted {
		t.Errorf("job 2 report %+v, want COMPLETED once the probe was done", r)
	}
	os.WriteFile(filepath.Join(w[0], "go"), nil, 0o644)
	if r := f.waitReport(t, 1, 10*time.Second); r.State != api.StateCompleted {
		t.Errorf("re-adopted job 1 report %+v, want COMPLETED", r)
	}
	var rec probeRecord
	b, err := os.ReadFile(filepath.Join(data, probeFile))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.Key != "build 2" || rec.BootID != procref.BootID() || !strings.Contains(string(rec.Found), "build 2") {
		t.Errorf("recorded probe %+v (%v), want build 2's on this boot", rec, err)
	}
	if r1.probes.Load() != 1 || r2.probes.Load() != 1 || r2.restores.Load() != 0 {
		t.Errorf("probes %d and %d, restores %d; want one probe each and nothing restored", r1.probes.Load(), r2.probes.Load(), r2.restores.Load())
	}
}

// TestRestartReusesProbeOfSameBoot restarts a daemon whose runner is the
// same on the same boot: the probe the first daemon recorded stands in, the
// new daemon's first registration is ready, and a job runs although the
// runner's probe would never end.
func TestRestartReusesProbeOfSameBoot(t *testing.T) {
	if procref.BootID() == "" {
		t.Skip("the kernel tells no boot id here")
	}
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	r1 := newProbingRunner("build 1")
	close(r1.release)
	d1 := startDaemon(t, f, data, func(c *Config) { c.Runner = r1 })
	f.waitRegistrations(t, 2) // probing, then ready
	if reg := f.registrations()[1]; reg.Probing {
		t.Fatal("the first daemon's second registration still says probing")
	}
	waitContent(t, filepath.Join(data, probeFile), 5*time.Second)
	d1.stop(t)

	r2 := newProbingRunner("build 1") // its probe never ends
	startDaemon(t, f, data, func(c *Config) { c.Runner = r2 })
	f.waitRegistrations(t, 3)
	if reg := f.registrations()[2]; reg.Probing || reg.Accel != "tcg" || reg.OverheadMB != 42 {
		t.Errorf("the restarted daemon registered probing=%v accel %q overhead %d, want ready with tcg and 42", reg.Probing, reg.Accel, reg.OverheadMB)
	}
	f.addJob("n1", shJob(3, work, "exit 0"))
	if r := f.waitReport(t, 3, 10*time.Second); r.State != api.StateCompleted {
		t.Errorf("job 3 report %+v, want COMPLETED", r)
	}
	if r2.probes.Load() != 0 || r2.restores.Load() != 1 {
		t.Errorf("the restarted daemon probed %d times and restored %d, want no probe and one restore", r2.probes.Load(), r2.restores.Load())
	}
	if got := r2.restored.Load(); got == nil || !strings.Contains(*got, "build 1") {
		t.Errorf("restored %v, want what the first daemon's probe found", got)
	}
	if n := len(f.registrations()); n != 3 {
		t.Errorf("%d registrations, want 3 (the restarted daemon needs no second one)", n)
	}
}

// TestProbeFailureEndsRun checks that a runner whose probe fails ends Run
// with the probe's error, after the node registered, and starts no job.
func TestProbeFailureEndsRun(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	r := newProbingRunner("build 1")
	r.fail = errors.New("the test guest does not boot")
	d := startDaemon(t, f, data, func(c *Config) { c.Runner = r })
	f.waitRegistrations(t, 1)
	f.addJob("n1", shJob(4, work, "touch started"))
	close(r.release)
	var err error
	select {
	case err = <-d.done:
		d.done <- nil // the test's cleanup stops it again
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after the probe failed")
	}
	if err == nil || !strings.Contains(err.Error(), "the test guest does not boot") || !strings.Contains(err.Error(), "cannot run jobs") {
		t.Errorf("Run returned %v, want the probe's error", err)
	}
	if _, err := os.Stat(filepath.Join(work, "started")); err == nil {
		t.Error("a job started although the probe failed")
	}
	if _, err := os.Stat(filepath.Join(data, probeFile)); err == nil {
		t.Error("a failed probe was recorded")
	}
}
