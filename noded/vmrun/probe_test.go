package vmrun

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"corral/noded"
	"corral/vmimage"
)

func TestRestoredOutcome(t *testing.T) {
	tests := map[string]struct {
		found   string
		forced  string
		want    probeOutcome
		wantErr string
	}{
		"a tcg probe":             {found: `{"accel":"tcg","overhead_mb":40,"report":"accel tcg: x"}`, want: probeOutcome{Accel: "tcg", OverheadMB: 40}},
		"a kvm probe, kvm forced": {found: `{"accel":"kvm","overhead_mb":30}`, forced: "kvm", want: probeOutcome{Accel: "kvm", OverheadMB: 30}},
		"another forced accel":    {found: `{"accel":"kvm","overhead_mb":30}`, forced: "tcg", wantErr: "tcg is forced"},
		"no accelerator":          {found: `{"overhead_mb":30}`, wantErr: "not kvm or tcg"},
		"a negative overhead":     {found: `{"accel":"tcg","overhead_mb":-1}`, wantErr: "outside"},
		"not JSON":                {found: `accel tcg`, wantErr: "reading the recorded probe"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := restoredOutcome([]byte(tc.found), tc.forced)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || o.Accel != tc.want.Accel || o.OverheadMB != tc.want.OverheadMB || !strings.Contains(o.Report, "earlier daemon") {
				t.Errorf("restoredOutcome = %+v, %v; want %+v, its report saying it was recorded", o, err, tc.want)
			}
		})
	}
}

// TestLoadStartsNothingBeforeTheProbe loads the runner without probing: it
// starts no VM before a probe, Restore adopts a recorded probe (but not one
// a forced accelerator refutes), Probe then returns that probe rather than
// booting a test guest, and the probe key is stable and names what the
// probe depends on.
func TestLoadStartsNothingBeforeTheProbe(t *testing.T) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed")
	}
	if _, err := vmimage.Load(filepath.Join(imageRoot(), "default")); err != nil {
		t.Skipf("no guest image (run make image): %v", err)
	}
	r, err := Load(Config{ImageRoot: imageRoot(), Logger: discardLog()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Accel() != "" || r.OverheadMB() != 0 || !strings.HasPrefix(r.ProbeReport(), "not probed yet") {
		t.Errorf("an unprobed runner says accel %q overhead %d (%s)", r.Accel(), r.OverheadMB(), r.ProbeReport())
	}
	if _, err := r.Start(context.Background(), noded.LaunchSpec{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "probe") {
		t.Errorf("Start before the probe: %v, want an error naming the probe", err)
	}
	if k := r.ProbeKey(); k != r.ProbeKey() || !strings.Contains(k, "qemu-system-x86_64") || !strings.Contains(k, "vmlinu") {
		t.Errorf("probe key %q: want a stable one naming QEMU and the kernel", k)
	}
	forced, err := Load(Config{ImageRoot: imageRoot(), Logger: discardLog(), Accel: "tcg"})
	if err != nil {
		t.Fatal(err)
	}
	if forced.ProbeKey() == r.ProbeKey() {
		t.Error("forcing an accelerator does not change the probe key")
	}
	if err := forced.Restore([]byte(`{"accel":"kvm","overhead_mb":30}`)); err == nil {
		t.Error("a runner forced to tcg restored a kvm probe")
	}

	if err := r.Restore([]byte(`{"accel":"tcg","overhead_mb":37,"report":"accel tcg: recorded"}`)); err != nil {
		t.Fatal(err)
	}
	found, err := r.Probe(context.Background())
	var o probeOutcome
	if err == nil {
		err = json.Unmarshal(found, &o)
	}
	// A probe that booted would have measured its own overhead.
	if err != nil || o.Accel != "tcg" || o.OverheadMB != 37 || r.Accel() != "tcg" || r.OverheadMB() != 37 {
		t.Errorf("after Restore: Probe = %s, %v; Accel %q, OverheadMB %d; want the restored tcg and 37", found, err, r.Accel(), r.OverheadMB())
	}
	if err := r.Restore([]byte(`{"accel":"kvm","overhead_mb":1}`)); err != nil || r.Accel() != "tcg" {
		t.Errorf("a second Restore: %v, accel %q; want the first outcome kept", err, r.Accel())
	}
}
