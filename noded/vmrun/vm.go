package vmrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral/noded"
	"corral/noded/cgroup"
	"corral/noded/vmnet"
	"corral/vmimage"

	"corral/internal/procref"
)

// VM is a running job VM: the handle Start and Recover return. Besides
// noded.Handle it offers Pause, Continue and Paused for suspend/resume, and
// VCPUThreads for pinning.
type VM struct {
	log      *slog.Logger
	f        vmFiles
	st       vmState
	proc     *procref.Ref
	cmd      *exec.Cmd // set when this daemon started QEMU, nil when recovered
	killOnce sync.Once
	done     chan struct{}
	res      noded.Result
	// grp is the VM's cgroup (nil: none); usage is what it used, read
	// when QEMU ended.
	grp     *cgroup.Group
	usage   cgroup.Usage
	usageOK bool
	// nfs is the VM's NFS file server (nil: none), stopped when QEMU
	// exits; gone says QEMU has.
	nfsMu sync.Mutex
	nfs   *nfsServer
	gone  bool
	// heldNFS is a migration destination's file server, prepared but
	// not started until the source's handle key arrives (Receive); nil
	// otherwise. It is guarded by nfsMu too.
	heldNFS *nfsServer
	// in is the daemon's end of a migration destination's stream, until
	// Receive takes it (destination.go); nil otherwise.
	inMu sync.Mutex
	in   net.Conn
	// stoppedToMigrate is set while MigrateOut has stopped the guest for
	// a stop-and-copy stream (migrate.go): an aborted migration continues
	// it.
	stoppedToMigrate atomic.Bool
	// agent reaches the guest agent; nil when the VM has none.
	agent *agentClient
	// release frees QEMU's id (identity.go) once QEMU is gone.
	release func()
	// nodeNS is the runner's Config.NodeNetns (nil: the daemon's own),
	// where the VM's job network has its node's side (jobnet.go).
	nodeNS *vmnet.Netns
}

var (
	_ noded.Handle        = (*VM)(nil)
	_ noded.ProcessGroup  = (*VM)(nil)
	_ noded.UsageReporter = (*VM)(nil)
)

func (r *Runner) newVM(f vmFiles, st vmState, p *procref.Ref, cmd *exec.Cmd, grp *cgroup.Group) *VM {
	v := &VM{log: r.log.With("pid", st.PID, "dir", f.dir, "uid", st.As.UID), f: f, st: st, proc: p, cmd: cmd, grp: grp,
		done: make(chan struct{}), release: func() { revokeVFIO(st.As.VFIO); releaseID(st.As.UID, f.dir) }, nodeNS: r.nodeNS}
	if st.Agent != "" {
		v.agent = newAgentClient(v.log, st.Agent)
	}
	go v.watch()
	return v
}

// Wait blocks until the VM is gone and returns how the job ended.
func (v *VM) Wait() noded.Result {
	<-v.done
	return v.res
}

// Done is closed when the VM is gone.
func (v *VM) Done() <-chan struct{} { return v.done }

// PID returns the QEMU process's id.
func (v *VM) PID() int { return v.st.PID }

// ProcessGroup names QEMU, which leads a session and process group of its
// own, for the node's lease keeper: SIGTERM ends a VM as QMP quit does.
func (v *VM) ProcessGroup() (int, uint64) { return v.st.PID, v.st.Start }

// watch waits for QEMU to exit, reads how the job ended and removes the
// VM's socket and initrd.
func (v *VM) watch() {
	if v.cmd != nil {
		v.cmd.Wait() // reaps; QEMU's exit status says nothing of the job's
	} else {
		v.proc.Wait()
	}
	v.proc.Close()
	// Before the share's namespace goes: the job network's devices are
	// removed from it, which frees the segment on the node at once.
	leaveJobNet(v.log, v.nodeNS, v.f.dir)
	v.stopNFS()
	v.inMu.Lock()
	if v.in != nil {
		v.in.Close()
		v.in = nil
	}
	v.inMu.Unlock()
	res, ok := finalResult(v.f)
	if !ok {
		// The daemon logs and reports the message; the probe expects it.
		res = noded.Result{Message: lostMessage(v.f), OOM: readControl(v.f.control).oom}
	}
	if v.agent != nil {
		v.agent.close()
	}
	removeLeftovers(v.log, v.f)
	v.closeGroup()
	v.release()
	v.res = res
	close(v.done)
}

// closeGroup reads what the VM's cgroup used and removes the group, which
// virtiofsd may take a moment longer to leave than QEMU.
func (v *VM) closeGroup() {
	if v.grp == nil {
		return
	}
	u, err := v.grp.Usage()
	if err != nil {
		v.log.Warn("cannot read the job VM's cgroup usage", "err", err)
	} else {
		v.usage, v.usageOK = u, true
	}
	for i := 0; ; i++ {
		err := v.grp.Remove()
		if err == nil {
			return
		}
		if i == 100 {
			v.log.Warn("cannot remove the job VM's cgroup", "err", err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Usage returns the CPU time and peak memory of the VM's cgroup (QEMU and
// virtiofsd), once the VM is gone; false when it had no group.
func (v *VM) Usage() (time.Duration, int64, bool) {
	<-v.done
	return v.usage.CPU, v.usage.PeakBytes, v.usageOK
}

// ended reports whether the VM is gone.
func (v *VM) ended() bool {
	select {
	case <-v.done:
		return true
	default:
		return false
	}
}

// Kill stops the VM: QMP quit, which ends QEMU at once (the guest has no
// channel that could deliver a SIGTERM to the job first), then SIGKILL if
// QEMU is still there after grace. It returns at once and is idempotent;
// Wait tells when the VM is gone. A killed job's Result is Signal 9: the
// whole machine stopped under it. The kill is recorded in the state
// directory first, so a recovering daemon derives the same Result.
func (v *VM) Kill(grace time.Duration) {
	v.killOnce.Do(func() {
		if v.ended() {
			return
		}
		if err := procref.WriteInPlace(v.f.killed, []byte("1\n"), 0o600); err != nil {
			v.log.Warn("cannot record the VM's kill", "err", err)
		}
		go v.stop(grace)
	})
}

func (v *VM) stop(grace time.Duration) {
	deadline := time.Now().Add(grace)
	if grace > 0 {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		// The reply may be lost when QEMU closes the socket as it quits:
		// only the process's end counts.
		_, err := qmpExec(ctx, v.st.QMP, "quit")
		cancel()
		select {
		case <-v.done:
			return
		case <-time.After(time.Until(deadline)):
		}
		v.log.Warn("job VM still running after QMP quit and its grace; sending SIGKILL", "grace", grace, "quit_err", err)
	}
	if err := killProc(v.proc); err != nil {
		v.log.Error("cannot SIGKILL the job's VM", "err", err)
	}
}

// Pause stops the VM's vCPUs (QMP stop). Its memory stays allocated; the
// guest's clock stops with it, so the job sees no time pass.
func (v *VM) Pause() error { return v.command("stop") }

// Continue resumes a paused VM (QMP cont).
func (v *VM) Continue() error { return v.command("cont") }

// Paused reports whether the VM is paused, as QEMU says: a daemon that
// re-attached to a VM needs this to know the job is suspended.
func (v *VM) Paused() (bool, error) {
	st, err := queryStatus(context.Background(), v.st.QMP)
	if err != nil {
		return false, v.vmError("query-status", err)
	}
	return !st.Return.Running && st.Return.Status == "paused", nil
}

// VCPUThreads returns the host thread id of each vCPU, in vCPU order
// (QMP query-cpus-fast), for a daemon that pins vCPUs to its CPUs. Under
// single-threaded TCG all vCPUs share one thread.
func (v *VM) VCPUThreads() ([]int, error) {
	r, err := qmpExec(context.Background(), v.st.QMP, "query-cpus-fast")
	if err != nil {
		return nil, v.vmError("query-cpus-fast", err)
	}
	var reply struct {
		Return []struct {
			Index  int `json:"cpu-index"`
			Thread int `json:"thread-id"`
		} `json:"return"`
	}
	if err := json.Unmarshal(r[0], &reply); err != nil {
		return nil, fmt.Errorf("QMP query-cpus-fast: %w", err)
	}
	sort.Slice(reply.Return, func(i, j int) bool { return reply.Return[i].Index < reply.Return[j].Index })
	ids := make([]int, len(reply.Return))
	for i, c := range reply.Return {
		ids[i] = c.Thread
	}
	return ids, nil
}

func (v *VM) command(c string) error {
	if v.ended() {
		return v.vmError(c, nil)
	}
	_, err := qmpExec(context.Background(), v.st.QMP, c)
	if err != nil {
		return v.vmError(c, err)
	}
	v.log.Info("job VM QMP command", "command", c)
	return nil
}

// errVMEnded is wrapped by Pause, Continue and Paused when the VM is gone.
var errVMEnded = errors.New("the job's VM has ended")

func (v *VM) vmError(c string, err error) error {
	if v.ended() || !v.proc.Alive() {
		return fmt.Errorf("QMP %s: %w", c, errVMEnded)
	}
	return err
}

// errQEMUExited is wrapped by the error of a VM whose QEMU exited before
// its monitor answered.
var errQEMUExited = errors.New("QEMU exited as it started")

// awaitMonitor waits until QEMU's monitor answers, which means QEMU has
// set up the machine and runs it. A QEMU that cannot (KVM refusing the
// CPU model, say) exits first; its own message is then the error.
func (v *VM) awaitMonitor(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, monitorWait)
	defer cancel()
	for {
		_, err := queryStatus(ctx, v.st.QMP)
		if err == nil {
			return nil
		}
		select {
		case <-v.done:
			return fmt.Errorf("%w: %s", errQEMUExited, tailFile(v.f.qemuLog, 3, 600))
		case <-ctx.Done():
			return fmt.Errorf("QEMU's monitor did not answer: %w (QEMU said: %s)", err, tailFile(v.f.qemuLog, 3, 600))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// control is what the guest's init reported on the control port.
type control struct {
	exited  bool
	code    int
	oom     bool
	errText string
}

func readControl(path string) control {
	var c control
	fh, err := os.Open(path)
	if err != nil {
		return c
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		ev, ok := vmimage.ParseControl(sc.Text())
		if !ok {
			continue
		}
		switch ev.Kind {
		case vmimage.EventOOM:
			c.oom = true
		case vmimage.EventError:
			c.errText = ev.Text
		case vmimage.EventExit:
			c.exited, c.code = true, ev.Code
		}
	}
	return c
}

// finalResult derives how a job ended from its files alone, so that
// watch and Recover agree: the guest's EXIT line, else a recorded kill.
func finalResult(f vmFiles) (noded.Result, bool) {
	c := readControl(f.control)
	if c.exited {
		res := decodeStatus(c.code)
		res.OOM = c.oom
		if c.errText != "" {
			res.Message = "the guest could not start the job: " + c.errText
		}
		return res, true
	}
	if b, err := os.ReadFile(f.killed); err == nil && len(b) > 0 {
		return noded.Result{Signal: 9, OOM: c.oom}, true
	}
	return noded.Result{}, false
}

// decodeStatus turns the guest shell's $? into a Result, as the process
// runner does: 128+S is how a shell reports a child killed by signal S, and
// statuses 129..192 (signals 1..64) are taken as signals.
func decodeStatus(st int) noded.Result {
	if st > 128 && st <= 128+64 {
		return noded.Result{Signal: st - 128}
	}
	return noded.Result{ExitCode: st}
}

// lostMessage explains a VM that ended without an EXIT line, with the last
// words of QEMU and of the guest kernel.
func lostMessage(f vmFiles) string {
	msg := "the job's VM ended without reporting the job's exit status (QEMU crashed or was killed, or the guest panicked)"
	if q := tailFile(f.qemuLog, 2, 300); q != "" {
		msg += "; QEMU said: " + q
	}
	if c := tailFile(f.console, 4, 500); c != "" {
		msg += "; guest console: " + c
	}
	return msg
}

// tailFile returns the last lines (at most max bytes) of a text file,
// joined with " | ".
func tailFile(path string, lines, max int) string {
	fh, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fh.Close()
	const window = 8 << 10
	if fi, err := fh.Stat(); err == nil && fi.Size() > window {
		fh.Seek(fi.Size()-window, 0)
	}
	var keep []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > lines {
		keep = keep[len(keep)-lines:]
	}
	s := strings.Join(keep, " | ")
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return s
}

// removeLeftovers removes what must not outlive the VM: the monitor socket
// (QEMU removes it itself only when it exits cleanly) and the initrd.
func removeLeftovers(log *slog.Logger, f vmFiles) {
	for _, p := range []string{f.qmp, f.initrd, f.vfsSock, f.agentSock} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot remove a job VM's file", "path", p, "err", err)
		}
	}
}
