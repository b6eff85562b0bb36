package vmrun

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestMigrationBlockers asks QEMU whether it would migrate a running VM:
// the bare initramfs VM has no blocker, the VM with the virtiofs share of
// the host's root names its vhost-user-fs device.
func TestMigrationBlockers(t *testing.T) {
	r := testRunner(t)
	for name, hostRoot := range map[string]bool{"initramfs root": false, "virtiofs root": true} {
		t.Run(name, func(t *testing.T) {
			spec := jobSpec(t, "#!/bin/sh\necho up\nsleep 30\n", 1, 256)
			v, err := r.start(context.Background(), spec, startOpts{accel: r.accel, hostRoot: hostRoot})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { v.Kill(0); v.Wait() })
			waitFor(t, "the job's first output", 60*time.Second, func() bool { return strings.Contains(readFile(t, spec.Stdout), "up") })
			reasons, err := v.MigrationBlockers()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !hostRoot && len(reasons) != 0:
				t.Errorf("the bare VM is blocked from migrating: %v", reasons)
			case hostRoot && (len(reasons) == 0 || !strings.Contains(strings.Join(reasons, " "), "vhost-user-fs")):
				t.Errorf("the virtiofs VM's blockers %v do not name vhost-user-fs", reasons)
			}
			t.Logf("%s: blockers %q", name, reasons)
		})
	}
}
