package vmrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"corral/noded"
	"corral/noded/cgroup"
	"corral/noded/vmnet"

	"corral/internal/procref"
)

// Recover re-attaches to the VM an earlier daemon started in dir. A VM
// whose QEMU still runs (same pid and start time, same boot) gets a new
// handle; QMP is reached with a new connection per command, as always. A VM
// that is gone yields an error wrapping noded.ErrGone, with its Result
// when its files tell one: the guest's EXIT line, or the kill recorded by
// Kill. Its socket and initrd are removed.
func (r *Runner) Recover(dir string) (noded.Handle, *noded.Result, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	f := filesIn(abs)
	var st vmState
	if err := procref.ReadJSON(f.state, &st); err != nil {
		res, err := r.recoverUnrecorded(f, err)
		return nil, res, err
	}
	if st.BootID == procref.BootID() {
		p, err := procref.Open(st.PID, st.Start, false)
		switch {
		case err == nil && st.Warm != "" && !st.WarmJobIn:
			return r.abandonRestore(f, st, p)
		case err == nil:
			v := r.reattach(f, st, p)
			r.recoverJobNet(abs, true)
			if n, held := r.recoverNFS(abs, true); held {
				v.holdNFS(n)
			} else {
				v.attachNFS(n)
			}
			return v, nil, nil
		case !errors.Is(err, os.ErrProcessDone):
			// Not known to be gone (out of descriptors, say): not ErrGone.
			return nil, nil, fmt.Errorf("%s: watching the job's VM: %w", dir, err)
		}
	}
	removeLeftovers(r.log, f)
	revokeVFIO(st.As.VFIO)
	r.recoverJobNet(abs, false)
	r.recoverNFS(abs, false)
	r.recoverOutbound(abs, nil, false)
	if st.Cgroup != "" && r.cg != nil {
		r.cg.Open(st.Cgroup).Remove()
	}
	if res, ok := finalResult(f); ok {
		return nil, &res, fmt.Errorf("%s: the job's VM ended while no daemon watched: %w", dir, noded.ErrGone)
	}
	if st.BootID != procref.BootID() {
		return nil, nil, fmt.Errorf("%s: the node rebooted while the job's VM ran: %w", dir, noded.ErrGone)
	}
	return nil, nil, fmt.Errorf("%s: %s: %w", dir, lostMessage(f), noded.ErrGone)
}

// reattach returns the handle of a VM found running. It asks QEMU for the
// VM's state only to log it: a monitor that does not answer does not keep
// the daemon from watching the process and killing it.
func (r *Runner) reattach(f vmFiles, st vmState, p *procref.Ref) *VM {
	var grp *cgroup.Group
	if st.Cgroup != "" && r.cg != nil {
		grp = r.cg.Open(st.Cgroup)
	}
	r.holdID(st.As.UID, f.dir)
	v := r.newVM(f, st, p, nil, grp)
	status := "unknown"
	if s, err := queryStatus(context.Background(), st.QMP); err != nil {
		v.log.Warn("re-attached job VM's monitor does not answer; it can still be killed", "err", err)
	} else {
		status = s.Return.Status
	}
	v.log.Info("re-attached job VM", "status", status, "accel", st.Accel, "image", st.Image)
	return v
}

// recoverUnrecorded handles a directory without a usable vm.json. Start
// writes vm.json right after QEMU started, so a daemon that died in
// between leaves a QEMU nobody knows of: it is found by the socket path in
// its command line and killed, since nothing could re-attach to it.
func (r *Runner) recoverUnrecorded(f vmFiles, readErr error) (*noded.Result, error) {
	for _, pid := range strayQEMU(nameArg(f.dir)) {
		r.log.Warn("killing an unrecorded job VM", "pid", pid, "dir", f.dir)
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	removeLeftovers(r.log, f)
	r.recoverJobNet(f.dir, false)
	r.recoverOutbound(f.dir, nil, false)
	if ns, err := vmnet.Open(filepath.Join(f.dir, netnsFile)); err == nil {
		ns.Remove()
	}
	if res, ok := finalResult(f); ok {
		return &res, fmt.Errorf("%s: the job's VM ended while no daemon watched: %w", f.dir, noded.ErrGone)
	}
	if errors.Is(readErr, fs.ErrNotExist) || errors.Is(readErr, procref.ErrIncomplete) {
		return nil, fmt.Errorf("%s: the job's VM was never started: %w", f.dir, noded.ErrGone)
	}
	return nil, fmt.Errorf("%s: %v: %w", f.dir, readErr, noded.ErrGone)
}

// abandonRestore ends a VM an earlier daemon was restoring from a warm
// start's snapshot when it stopped, before it handed the guest its job:
// that guest would wait for a job nobody sends. The job never ran.
func (r *Runner) abandonRestore(f vmFiles, st vmState, p *procref.Ref) (noded.Handle, *noded.Result, error) {
	v := r.reattach(f, st, p)
	if n, _ := r.recoverNFS(f.dir, true); n != nil {
		v.attachNFS(n)
	}
	v.Kill(0)
	<-v.done
	res := noded.Result{ExitCode: 1, Message: "the node daemon stopped while the job's VM was being restored from a warm start's snapshot, before the job was handed to it: the job did not run"}
	return nil, &res, fmt.Errorf("%s: %s: %w", f.dir, res.Message, noded.ErrGone)
}
