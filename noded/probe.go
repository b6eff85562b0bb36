package noded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"corral/internal/procref"
)

// probeFile (in DataDir) records what the runner's probe found (see
// Prober), for the next daemon on the same boot.
const probeFile = "probe.json"

// probeRecord is probeFile's content.
type probeRecord struct {
	// BootID is the kernel's boot id when the probe ran: a reboot may
	// change what the host offers (a KVM module loaded, a kernel
	// upgraded), so a probe holds for one boot.
	BootID string `json:"boot_id"`
	// Key is the runner's ProbeKey then.
	Key string `json:"key"`
	// Found is what Probe returned.
	Found json.RawMessage `json:"found"`
}

// probeReusable says whether rec, read from probeFile, may stand in for a
// probe on the boot and with the key the daemon has now, and if not, why.
func probeReusable(rec probeRecord, boot, key string) (bool, string) {
	switch {
	case boot == "":
		return false, "the kernel's boot id is unknown"
	case rec.BootID != boot:
		return false, "it was recorded before the host last booted"
	case rec.Key != key:
		return false, "the runner changed since (its program, emulator or image)"
	case len(rec.Found) == 0:
		return false, "it records nothing"
	}
	return true, ""
}

// ready reports whether the runner may start jobs: it needs no probe, or its
// probe succeeded (or was restored).
func (d *Daemon) ready() bool { return d.prober == nil || d.probed.Load() }

// restoreProbe adopts the probe an earlier daemon recorded on this boot for
// a runner with the same key; it reports whether it did.
func (d *Daemon) restoreProbe() bool {
	path := filepath.Join(d.cfg.DataDir, probeFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	var rec probeRecord
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		d.log.Warn("cannot read the runner's recorded probe; probing again", "path", path, "err", err)
		return false
	}
	if ok, why := probeReusable(rec, procref.BootID(), d.prober.ProbeKey()); !ok {
		d.log.Info("not reusing the runner's recorded probe; probing again", "why", why)
		return false
	}
	if err := d.prober.Restore(rec.Found); err != nil {
		d.log.Warn("cannot reuse the runner's recorded probe; probing again", "path", path, "err", err)
		return false
	}
	d.log.Info("runner ready: reusing the probe an earlier daemon recorded on this boot", "path", path)
	return true
}

// probe runs the runner's probe once the node is registered (and its
// re-adopted jobs' lease renewed), records what it found, and tells the loop
// and the controllers. A probe that fails ends Run with its error, as a
// runner that cannot run jobs did when it was built.
func (d *Daemon) probe(ctx context.Context) {
	if !d.reg.waitPast(ctx, 0) {
		return
	}
	d.log.Info("probing the runner; the node takes no new job until it is done, and the jobs it runs keep running")
	t0 := time.Now()
	found, err := d.prober.Probe(ctx)
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		d.recordProbe(found)
		d.probed.Store(true)
		d.log.Info("runner probed; registering again to take new jobs", "took", time.Since(t0).Round(time.Millisecond))
		select {
		case d.reg.want <- struct{}{}:
		default:
		}
	} else {
		err = fmt.Errorf("noded: the %s runner cannot run jobs on this node: %w (the node takes no job; the jobs it ran are left to its lease keeper)", d.runner.Name(), err)
	}
	select {
	case d.probedCh <- err:
	case <-ctx.Done():
	}
}

// recordProbe writes what the probe found for the next daemon on this boot.
// A record that cannot be written only costs that daemon a probe.
func (d *Daemon) recordProbe(found []byte) {
	path := filepath.Join(d.cfg.DataDir, probeFile)
	b, err := json.Marshal(probeRecord{BootID: procref.BootID(), Key: d.prober.ProbeKey(), Found: found})
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, append(b, '\n'), 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		d.log.Warn("cannot record the runner's probe; the next daemon probes again", "path", path, "err", err)
	}
}

// onProbed takes the probe's outcome in the loop: runs the desired state
// holds start now; a failure ends the loop.
func (d *Daemon) onProbed(err error) bool {
	if err != nil {
		d.log.Error("the runner's probe failed; stopping", "err", err)
		d.runErr = err
		return false
	}
	if d.lastDesired != nil && !d.stopping {
		d.reconcile(d.lastDesired)
	}
	return true
}
