package noded

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"corral/api"
)

// Checkpoints on the node (docs/migration.md). A run whose desired
// allocation says Save is saved by its runner (Checkpointer) to a file in
// the node's checkpoint directory, written under a temporary name, synced,
// hashed and renamed, then reported saved with its size and SHA-256; its
// allocation then leaves the desired state and the run is killed as any
// other (its guest stopped after the save). A failed save continues the
// guest and is reported failed. A run whose desired allocation names a
// checkpoint to restore starts from that file (CheckpointRestorer), once
// its size and SHA-256 are what was reported, and continues at once (the
// restore was the controllers' word); it is reported restored. The node
// removes the files of its own (named NODE-JOB-ALLOC.ckpt) that its desired
// state no longer lists.

// checkpointExt ends every checkpoint file's name.
const checkpointExt = ".ckpt"

// unlistedGrace is how long a saved checkpoint may be missing from the
// desired state before the node takes it for one nobody wants: the report
// of its save needs a moment to be committed.
const unlistedGrace = 5 * time.Minute

// runCheckpoint is a save under way or done for a run.
type runCheckpoint struct {
	alloc uint64
}

// ckSaved is the end of a save.
type ckSaved struct {
	key       jobKey
	alloc     uint64
	path, sha string
	size      int64
	took      time.Duration
	err       error
	resume    MigrationSource
}

// desiredCheckpoints returns the checkpoint part of each desired run.
func desiredCheckpoints(des *api.Desired) map[jobKey]*api.AllocCheckpoint {
	out := map[jobKey]*api.AllocCheckpoint{}
	for i := range des.Allocations {
		a := &des.Allocations[i]
		if a.Checkpoint != nil {
			out[jobKey{a.Job.ID, a.Job.StartIndex}] = a.Checkpoint
		}
	}
	return out
}

// checkpointDir is where the node writes its checkpoints.
func (d *Daemon) checkpointDir() string {
	if d.cfg.CheckpointDir != "" {
		return d.cfg.CheckpointDir
	}
	return filepath.Join(d.cfg.DataDir, "checkpoints")
}

// sharedCheckpointDir is the checkpoint directory the node registers:
// its own when it is shared with other nodes, "" when it is not.
func (d *Daemon) sharedCheckpointDir() string {
	if d.cfg.CheckpointShared {
		return d.checkpointDir()
	}
	return ""
}

// starter returns how run lj starts: from its script, as a live
// migration's destination (m), or from a checkpoint (ck).
func (d *Daemon) starter(lj *localJob, m *api.AllocMigration, ck *api.AllocCheckpoint) (func(context.Context, LaunchSpec) (Handle, error), error) {
	switch {
	case isDestination(m):
		lj.rec.Incoming = m.ID
		lj.mig = &runMigration{id: m.ID, role: api.MigrationDestination, token: m.Token, peer: m.Peer, claimed: new(sync.Once)}
		lm, ok := d.runner.(LiveMigrator)
		if !ok {
			return nil, fmt.Errorf("node %s's runner cannot be a live migration's destination", d.cfg.Name)
		}
		return lm.StartIncoming, nil
	case ck != nil && ck.Restore != nil:
		cr, ok := d.runner.(CheckpointRestorer)
		if !ok {
			return nil, fmt.Errorf("node %s's runner cannot restore checkpoints", d.cfg.Name)
		}
		// The time limit counts on from what the job had run.
		lj.rec.Started = lj.rec.Started.Add(-time.Duration(ck.RanS * float64(time.Second)))
		lj.restore = true
		file := *ck.Restore
		return func(ctx context.Context, spec LaunchSpec) (Handle, error) {
			return d.startFromCheckpoint(ctx, cr, spec, file)
		}, nil
	}
	return d.runner.Start, nil
}

// startFromCheckpoint checks the file against what its save reported and
// starts the run from it, continued at once.
func (d *Daemon) startFromCheckpoint(ctx context.Context, cr CheckpointRestorer, spec LaunchSpec, file api.CheckpointFile) (Handle, error) {
	f, err := os.Open(file.Path)
	if err != nil {
		return nil, fmt.Errorf("the job's checkpoint %s: %w (is the checkpoint directory shared with node it was saved on?)", file.Path, err)
	}
	defer f.Close()
	size, sum, err := fileDigest(f)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the job's checkpoint %s: %w", file.Path, err)
	case size != file.Size || sum != file.SHA256:
		return nil, fmt.Errorf("the job's checkpoint %s is not the one saved (%d bytes, SHA-256 %s; saved: %d bytes, %s)", file.Path, size, sum, file.Size, file.SHA256)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h, err := cr.StartFromCheckpoint(ctx, spec, f)
	if err != nil {
		return nil, fmt.Errorf("restoring the job from %s: %w", file.Path, err)
	}
	if p, ok := h.(Pausable); ok {
		if err := p.Continue(); err != nil {
			h.Kill(0)
			h.Wait()
			return nil, fmt.Errorf("continuing the restored job: %w", err)
		}
	}
	return h, nil
}

// fileDigest reads f whole: its size and SHA-256 (hex).
func fileDigest(f *os.File) (int64, string, error) {
	h := sha256.New()
	n, err := io.Copy(h, f)
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// followCheckpoint saves a running run whose desired allocation asks for
// it, once.
func (d *Daemon) followCheckpoint(lj *localJob, ck *api.AllocCheckpoint) {
	if ck == nil || !ck.Save || lj.handle == nil || lj.rec.Kill != nil || lj.ck != nil || lj.rec.paused() {
		return
	}
	src, ok := lj.handle.(Checkpointer)
	if !ok {
		d.ckRep(api.CheckpointReport{Job: lj.key.ID, Alloc: lj.rec.Alloc, Event: "failed", Message: "its runner cannot save checkpoints"})
		lj.ck = &runCheckpoint{alloc: lj.rec.Alloc}
		return
	}
	lj.ck = &runCheckpoint{alloc: lj.rec.Alloc}
	resume, _ := lj.handle.(MigrationSource)
	base := d.cfg.Name + "-" + strconv.FormatUint(lj.key.ID, 10) + "-" + strconv.FormatUint(lj.rec.Alloc, 10) + checkpointExt
	k, alloc := lj.key, lj.rec.Alloc
	d.log.Info("saving a job to a checkpoint", "job", k.ID, "file", filepath.Join(d.checkpointDir(), base))
	go func() {
		began := time.Now()
		ev := d.saveCheckpoint(src, base)
		ev.key, ev.alloc, ev.took, ev.resume = k, alloc, time.Since(began), resume
		select {
		case d.migCh <- ev:
		case <-d.loopDone:
		}
	}()
}

// saveCheckpoint writes the run's checkpoint as base in the checkpoint
// directory: under a temporary name, synced, hashed, then renamed.
func (d *Daemon) saveCheckpoint(src Checkpointer, base string) ckSaved {
	dir := d.checkpointDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ckSaved{err: err}
	}
	tmp, path := filepath.Join(dir, "."+base+".tmp"), filepath.Join(dir, base)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return ckSaved{err: err}
	}
	_, err = src.SaveCheckpoint(context.Background(), f)
	if err == nil {
		err = f.Sync()
	}
	var size int64
	var sum string
	if err == nil {
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			size, sum, err = fileDigest(f)
		}
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.Remove(tmp)
		return ckSaved{err: err}
	}
	return ckSaved{path: path, size: size, sha: sum}
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// onCheckpointSaved takes a save's end: reported saved, or the guest
// continued and the save reported failed.
func (d *Daemon) onCheckpointSaved(ev ckSaved) {
	r := api.CheckpointReport{Job: ev.key.ID, Alloc: ev.alloc, TookMS: ev.took.Milliseconds()}
	if ev.err != nil {
		d.log.Warn("saving a job to a checkpoint failed; it runs on", "job", ev.key.ID, "err", ev.err)
		if ev.resume != nil {
			go func() {
				if err := ev.resume.ResumeAfterMigration(); err != nil {
					d.log.Error("cannot continue the job after its failed checkpoint", "job", ev.key.ID, "err", err)
				}
			}()
		}
		r.Event, r.Message = "failed", ev.err.Error()
		if lj := d.jobs[ev.key]; lj != nil {
			lj.ck = nil // a later ask may try again
		}
	} else {
		d.log.Info("the job is saved to its checkpoint; its run ends here", "job", ev.key.ID, "file", ev.path, "bytes", ev.size, "took", ev.took)
		r.Event, r.Path, r.Size, r.SHA256 = "saved", ev.path, ev.size, ev.sha
	}
	d.ckRep(r)
}

// ckRep queues a checkpoint report.
func (d *Daemon) ckRep(r api.CheckpointReport) {
	r.Message = clipMessage(r.Message)
	d.migRep.addCheckpoint(r)
}

// sweepCheckpoints removes the node's own checkpoint files its desired
// state does not list: those it listed before at once (their jobs ended),
// the others once they are older than unlistedGrace.
func (d *Daemon) sweepCheckpoints(keep []api.CheckpointFile) {
	listed := map[string]bool{}
	for _, f := range keep {
		listed[filepath.Base(f.Path)] = true
		d.ckListed[filepath.Base(f.Path)] = true
	}
	entries, err := os.ReadDir(d.checkpointDir())
	if err != nil {
		return
	}
	mine := d.cfg.Name + "-"
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, mine) || !strings.HasSuffix(name, checkpointExt) || listed[name] {
			continue
		}
		info, err := e.Info()
		if err != nil || !d.ckListed[name] && time.Since(info.ModTime()) < unlistedGrace {
			continue
		}
		if err := os.Remove(filepath.Join(d.checkpointDir(), name)); err == nil {
			d.log.Info("removed a checkpoint no job needs any more", "file", name)
		}
		delete(d.ckListed, name)
	}
}
