package vmrun

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"corral/internal/procref"
	"corral/noded"
	"corral/vmimage"
)

// warmJobWait bounds a restored guest's taking of its job: it answers in
// milliseconds, and one that does not is not a guest to give the job to.
const warmJobWait = 20 * time.Second

// startWarm starts the job's VM from its shape's snapshot, if the node
// has one, and returns nil when it does not or the restore failed: the
// caller then boots the VM. A job whose shape has no snapshot yet asks
// for one (made in the background, for the jobs after it). A snapshot
// that failed a restore (its file damaged or changed, QEMU refusing it, a
// guest that does not take its job) is removed, and the failure logged.
func (r *Runner) startWarm(ctx context.Context, spec noded.LaunchSpec, accel string) *VM {
	if r.warm == nil {
		return nil
	}
	sh, why := r.warmShapeOf(spec, accel)
	jobID := uint64(0)
	if spec.Job != nil {
		jobID = spec.Job.ID
	}
	if sh == nil {
		r.log.Debug("the job's VM boots: no warm start for it", "job", jobID, "why", why)
		return nil
	}
	s := r.warm.get(sh.key)
	if s == nil {
		r.warm.want(sh)
		return nil
	}
	v, err := r.restore(ctx, spec, s, accel, jobID)
	if err != nil {
		var bad *badSnapshot
		if errors.As(err, &bad) {
			r.warm.drop(s, err)
		}
		r.log.Warn("the job's VM could not start warm; booting it", "job", jobID, "shape", sh.desc, "err", err)
		return nil
	}
	return v
}

// badSnapshot is a restore's failure that is the snapshot's.
type badSnapshot struct{ err error }

func (e *badSnapshot) Error() string { return e.err.Error() }
func (e *badSnapshot) Unwrap() error { return e.err }

// restore starts the job's VM from snapshot s: the same job's VM, started
// with the snapshot's stream as its incoming migration (so with its
// devices, and fresh host sides of them: output files, sockets, network
// namespace, file server with the snapshot's root handle key and a fresh
// one for the job's shares), continued, and handed the job's payload over
// its agent with fresh randomness and the host's clock (sendJob). The
// guest then runs the job as a booted one does.
func (r *Runner) restore(ctx context.Context, spec noded.LaunchSpec, s *warmSnap, accel string, jobID uint64) (*VM, error) {
	began := time.Now()
	// The job's payload first: one the guest could not take is the job's
	// fault, which its boot would meet too, not the snapshot's.
	var payload bytes.Buffer
	if err := vmimage.WritePayload(&payload, jobPayload(spec, r.guestFS(spec), nil)); err != nil {
		return nil, err
	}
	f, err := os.Open(r.warm.statePath(s.Key))
	if err != nil {
		return nil, &badSnapshot{err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err == nil {
		err = s.sameFile(fi)
	}
	if err != nil {
		return nil, &badSnapshot{err}
	}
	keys, err := newHandleKeys()
	if err != nil {
		return nil, err
	}
	keys.root = s.RootHandleKey
	v, err := r.start(ctx, spec, startOpts{accel: accel, hostRoot: true, group: true, agent: true, keys: &keys,
		incoming: &Incoming{File: f}})
	if errors.Is(err, errQEMUExited) {
		// QEMU reads the stream as it starts: one it cannot load ends it.
		return nil, &badSnapshot{err}
	}
	if err != nil {
		return nil, err
	}
	launched := time.Since(began)
	v.markWarm(s.Key, false)
	fail := func(err error) (*VM, error) {
		v.Kill(0)
		<-v.done
		return nil, &badSnapshot{err}
	}
	state, err := v.waitIncoming(ctx)
	if err != nil {
		return fail(err)
	}
	loaded := time.Since(began)
	if state == "paused" {
		if err := v.Continue(); err != nil {
			return fail(err)
		}
	}
	if err := v.sendJob(ctx, payload.Bytes()); err != nil {
		return fail(fmt.Errorf("the restored guest did not take its job: %w (console: %s)", err, tailFile(v.f.console, 4, 500)))
	}
	v.markWarm(s.Key, true)
	r.log.Info("job VM started warm", "job", jobID, "snapshot", s.Key, "qemu_ms", launched.Milliseconds(),
		"loaded_ms", loaded.Milliseconds(), "job_in_ms", time.Since(began).Milliseconds())
	return v, nil
}

// sendJob hands a restored guest its job (vmimage.FrameJob): fresh
// randomness for its kernel, the host's wall clock, and the job's
// payload, the archive a booted VM's initrd carries (vmimage.WritePayload).
func (v *VM) sendJob(ctx context.Context, payload []byte) error {
	if v.agent == nil {
		return errors.New("the VM has no agent")
	}
	ctx, cancel := context.WithTimeout(ctx, warmJobWait)
	defer cancel()
	// The session first: the clock is read as the request leaves.
	if _, err := v.agent.session(ctx); err != nil {
		return err
	}
	seed := make([]byte, vmimage.SeedBytes)
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	msg := vmimage.JobStart{Seed: seed, TimeUnixNano: time.Now().UnixNano(), Size: int64(len(payload))}
	req, err := v.agent.start(ctx, vmimage.FrameJob, msg)
	if err != nil {
		return err
	}
	if _, err := req.write(payload); err != nil {
		return err
	}
	if err := req.closeStdin(); err != nil {
		return err
	}
	e, err := req.waitEnd(ctx)
	if err != nil {
		return err
	}
	return endError(e)
}

// markWarm records that the VM is restored from snapshot key, and whether
// its guest took its job, in vm.json too: a daemon that re-attaches to it
// knows it started warm, or that it must not run (abandonRestore).
func (v *VM) markWarm(key string, jobIn bool) {
	v.st.Warm, v.st.WarmJobIn = key, jobIn
	if err := procref.WriteJSON(v.f.state, v.st); err != nil {
		v.log.Warn("cannot record the VM's warm start", "err", err)
	}
}

// StartedWarm reports whether the VM was restored from a warm start's
// snapshot rather than booted.
func (v *VM) StartedWarm() bool { return v.st.Warm != "" }
