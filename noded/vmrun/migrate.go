package vmrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"corral/noded"
)

// The source of a live migration: MigrateOut streams a running VM through
// the daemon (QEMU writes to one end of a socket pair, the daemon copies
// the other end to the destination's daemon), ResumeAfterMigration undoes
// an aborted one. QEMU stops the guest's vCPUs for the last pass and
// leaves them stopped once the stream completed (postmigrate): from then
// on only the daemon, on the controllers' word, decides whether the
// destination continues (and this VM is quit) or the migration is aborted
// (and this VM continues).
//
// Under TCG the stream is stop-and-copy: the guest is stopped before the
// stream begins, so its downtime is the whole stream. QEMU 7.2's TCG loses
// guest writes between the passes of a long live stream: the guest's
// kernel died on the destination (its per-CPU area, rewritten at every
// timer tick, arrived zeroed: a NULL pointer in tick_periodic; or its
// stack arrived stale) in 3 of 4 streams of 40–50 s that auto-converge
// throttled, with or without a network card, and in one of 4.6 s, while
// stop-and-copy never did. KVM tracks dirty pages itself and keeps the
// live (pre-copy, auto-converge) stream.

// MigrationBlockers returns why QEMU would refuse to live-migrate the VM
// now, as QEMU itself says it (query-migrate's blocked-reasons): empty when
// nothing blocks a migration. A VM with the virtiofs share is blocked by
// its vhost-user-fs device on QEMU 7.2; the bare initramfs and the NFS
// share are not. A VM on a multi-node job's network is blocked too
// (jobnet.go), though QEMU would not know it.
func (v *VM) MigrationBlockers() ([]string, error) {
	st, err := v.migration()
	if err != nil {
		return nil, err
	}
	if hasJobNet(v.f.dir) {
		// QEMU could move the guest, but its job's other nodes would
		// keep sending its network to this one.
		return append(st.Return.BlockedReasons, "the VM is on its multi-node job's private network, which does not follow a migration"), nil
	}
	if st.Return.Blocked && len(st.Return.BlockedReasons) == 0 {
		return []string{"QEMU reports the migration blocked without a reason"}, nil
	}
	return st.Return.BlockedReasons, nil
}

// migration asks QEMU where the VM's migration (outgoing, or incoming on a
// destination) stands.
func (v *VM) migration() (migrationStatus, error) {
	r, err := qmpExec(context.Background(), v.st.QMP, "query-migrate")
	if err != nil {
		return migrationStatus{}, v.vmError("query-migrate", err)
	}
	return parseMigrationStatus(r[0])
}

// outgoingFD names a live migration's stream descriptor in QEMU (getfd).
const outgoingFD = "corral-migration-out"

// streamPair returns a connected pair of stream sockets: one end for QEMU
// (handed over with getfd, then closed here) and one for the daemon, which
// copies the migration stream between it and the other node.
func streamPair() (qemuEnd *os.File, ours net.Conn, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("a socket pair for the migration stream: %w", err)
	}
	qemuEnd = os.NewFile(uintptr(fds[0]), "migration-qemu")
	f := os.NewFile(uintptr(fds[1]), "migration-daemon")
	ours, err = net.FileConn(f)
	f.Close()
	if err != nil {
		qemuEnd.Close()
		return nil, nil, fmt.Errorf("the migration stream's socket: %w", err)
	}
	return qemuEnd, ours, nil
}

// passStream hands QEMU qemuEnd under the name fdname (getfd) and runs
// cmds in the same QMP session (a descriptor is known to the session that
// got it only).
func (v *VM) passStream(ctx context.Context, fdname string, qemuEnd *os.File, cmds ...string) error {
	c, err := dialQMP(ctx, v.st.QMP)
	if err != nil {
		return v.vmError("getfd", err)
	}
	defer c.close()
	if _, err := c.run(`{"execute":"getfd","arguments":{"fdname":"`+fdname+`"}}`, qemuEnd); err != nil {
		return v.vmError("getfd", err)
	}
	for _, cmd := range cmds {
		if _, err := c.run(cmd, nil); err != nil {
			return v.vmError("migrate", err)
		}
	}
	return nil
}

// MigrationPrelude implements noded.MigrationSource: the file server's
// handle keys, which the destination's server must use.
func (v *VM) MigrationPrelude() ([]byte, error) {
	return json.Marshal(prelude{HandleKey: v.handleKey()})
}

// migrateCommands are the QMP commands that set the stream's bounds and
// start it on the descriptor outgoingFD.
func migrateCommands(p noded.MigrationParams) []string {
	params := map[string]any{}
	if p.MaxBandwidth > 0 {
		params["max-bandwidth"] = p.MaxBandwidth
	}
	if p.Downtime > 0 {
		params["downtime-limit"] = max(p.Downtime.Milliseconds(), 1)
	}
	caps, _ := json.Marshal(map[string]any{"execute": "migrate-set-capabilities", "arguments": map[string]any{
		"capabilities": []map[string]any{{"capability": "auto-converge", "state": p.AutoConverge}}}})
	set, _ := json.Marshal(map[string]any{"execute": "migrate-set-parameters", "arguments": params})
	return []string{string(caps), string(set), `{"execute":"migrate","arguments":{"uri":"fd:` + outgoingFD + `"}}`}
}

// MigrateOut implements noded.MigrationSource. The stream ends when QEMU
// closes its end of the socket pair, having completed or failed; a cut
// on the other side closes the daemon's end, which fails QEMU's
// migration (the guest then runs on here: QEMU restarts it if it had
// stopped it for the last pass).
func (v *VM) MigrateOut(ctx context.Context, stream io.ReadWriter, p noded.MigrationParams) (noded.MigrationStats, error) {
	qemuEnd, ours, err := streamPair()
	if err != nil {
		return noded.MigrationStats{}, err
	}
	defer ours.Close()
	var stopped time.Time
	if v.st.Accel != "kvm" {
		if err := v.command("stop"); err != nil {
			qemuEnd.Close()
			return noded.MigrationStats{}, fmt.Errorf("stopping the guest for its stream: %w", err)
		}
		v.stoppedToMigrate.Store(true)
		stopped = time.Now()
	}
	err = v.passStream(ctx, outgoingFD, qemuEnd, migrateCommands(p)...)
	qemuEnd.Close() // QEMU holds its own copy
	if err != nil {
		return noded.MigrationStats{}, fmt.Errorf("starting the migration: %w", err)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		if _, err := io.Copy(stream, ours); err != nil {
			ours.Close() // QEMU's next write fails: the migration fails
			return
		}
		closeWrite(stream)
	}()
	// QEMU's precopy stream has no return path: this copy only ends with
	// the stream.
	go io.Copy(ours, stream)
	var bound <-chan time.Time
	if p.MaxTime > 0 {
		t := time.NewTimer(p.MaxTime)
		defer t.Stop()
		bound = t.C
	}
	why := ""
	select {
	case <-sent:
	case <-v.done:
		return noded.MigrationStats{}, fmt.Errorf("the job's VM ended during its migration")
	case <-ctx.Done():
		why = ctx.Err().Error()
	case <-bound:
		why = fmt.Sprintf("it did not complete within its bound of %s (the guest changes its memory faster than the stream copies it: raise the bandwidth or the downtime)", p.MaxTime)
	}
	if why != "" {
		v.cancelMigration()
	}
	stats, err := v.migrationOutcome(why)
	if err == nil && !stopped.IsZero() {
		// Stop-and-copy: the guest stood still from its stop on.
		stats.Downtime = max(stats.Downtime, time.Since(stopped))
	}
	return stats, err
}

// cancelMigration asks QEMU to cancel the VM's migration (the guest runs
// on, restarted if QEMU had stopped it for the last pass).
func (v *VM) cancelMigration() {
	if _, err := qmpExec(context.Background(), v.st.QMP, "migrate_cancel"); err != nil {
		v.log.Warn("cannot cancel the VM's migration", "err", err)
	}
}

// migrationOutcome waits (a few seconds at most) for QEMU's verdict on a
// migration whose stream ended: its figures when it completed, else an
// error saying why (cancelled says why it was).
func (v *VM) migrationOutcome(cancelled string) (noded.MigrationStats, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := v.migration()
		switch {
		case err != nil:
			return noded.MigrationStats{}, err
		case st.Return.Status == "completed":
			if cancelled != "" {
				// It completed before the cancel took: the guest is
				// stopped here, its state sent. The caller decides.
				v.log.Info("the migration completed as it was being cancelled", "why", cancelled)
			}
			return st.stats(), nil
		case !st.active():
			msg := "the migration " + st.Return.Status
			if st.Return.ErrorDesc != "" {
				msg += ": " + st.Return.ErrorDesc
			}
			if cancelled != "" {
				msg = "the migration was cancelled: " + cancelled
			}
			return noded.MigrationStats{}, fmt.Errorf("%s", msg)
		case time.Now().After(deadline):
			return noded.MigrationStats{}, fmt.Errorf("QEMU did not end its migration (it says %s)", st.Return.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// MigrationState implements noded.MigrationSource.
func (v *VM) MigrationState() (string, noded.MigrationStats, error) {
	st, err := v.migration()
	switch {
	case err != nil:
		return "", noded.MigrationStats{}, err
	case st.Return.Status == "completed":
		return "completed", st.stats(), nil
	case st.active():
		return "active", noded.MigrationStats{}, nil
	}
	return "", noded.MigrationStats{}, nil
}

// ResumeAfterMigration implements noded.MigrationSource: a migration under
// way is cancelled (QEMU restarts the guest itself), and a guest stopped
// after a completed stream (postmigrate) is continued. The guest has no
// disks, so nothing else had passed to the destination.
func (v *VM) ResumeAfterMigration() error {
	st, err := v.migration()
	if err != nil {
		return err
	}
	if st.active() {
		v.cancelMigration()
		if _, err := v.migrationOutcome("the migration was aborted"); err == nil {
			v.log.Info("the aborted migration had completed; continuing the VM here")
		}
	}
	status, err := queryStatus(context.Background(), v.st.QMP)
	if err != nil {
		return v.vmError("query-status", err)
	}
	switch {
	case status.Return.Status == "postmigrate":
	case status.Return.Status == "paused" && v.stoppedToMigrate.Load():
	default:
		return nil
	}
	if err := v.command("cont"); err != nil {
		return err
	}
	v.stoppedToMigrate.Store(false)
	v.log.Info("job VM continued at the source after its migration was aborted")
	return nil
}
