package vmrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"corral/noded"
)

// The destination of a live migration, on the incoming primitive
// (incoming.go): StartIncoming starts the job's VM with exactly the
// command line Start gives it on this node (the same devices, descriptors
// and memory backend, which QEMU checks against the stream) plus
// -incoming defer and -S, and Receive feeds it the source's stream.
// The guest's vCPUs stay stopped after the state arrived until the daemon
// continues the VM on the controllers' word, so that a guest never runs on
// two nodes at once.
//
// What the destination has of its own: its state directory, sockets,
// console and control files; QEMU's id; its network namespace and tap
// device and a file server of its own, which starts with the source's
// handle key (the prelude) so that the handles the guest holds keep naming
// the same files; the job's output files, opened as the job's user for
// appending, so that what the guest writes after the switch follows what
// it wrote before, once, in order (the guest's serial ports carry on from
// where the source stopped: bytes not yet written there are part of the
// migrated state).

var (
	_ noded.LiveMigrator         = (*Runner)(nil)
	_ noded.MigrationDestination = (*VM)(nil)
	_ noded.MigrationSource      = (*VM)(nil)
)

// incomingFD names a live migration's stream descriptor in the
// destination's QEMU (getfd).
const incomingFD = "corral-migration-in"

// prelude is what a migration's source sends its destination before the
// stream (MigrationPrelude).
type prelude struct {
	// HandleKey is the key the source's file server derives the guest's
	// file handles with (none without the NFS share).
	HandleKey []byte `json:"handle_key,omitempty"`
}

// StartIncoming starts the destination VM of a live migration of the job
// spec describes, waiting for its state (Receive). See the file's comment.
func (r *Runner) StartIncoming(ctx context.Context, spec noded.LaunchSpec) (noded.Handle, error) {
	accel := r.Accel()
	if accel == "" {
		return nil, errors.New("vm runner: no VM starts before the accelerator probe is done")
	}
	return r.startIncoming(ctx, spec, startOpts{accel: accel, hostRoot: true, group: true, agent: true})
}

// startIncoming is StartIncoming with Start's options o (the tests' bare
// guests have fewer).
func (r *Runner) startIncoming(ctx context.Context, spec noded.LaunchSpec, o startOpts) (*VM, error) {
	o.incoming = &Incoming{URI: "defer", Appending: true, Paused: true, HoldShare: true}
	v, err := r.start(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	if err := v.listenIncoming(ctx); err != nil {
		v.Kill(0)
		<-v.done
		return nil, err
	}
	return v, nil
}

// listenIncoming hands QEMU its end of the stream's socket pair and starts
// its incoming migration on it; the daemon's end waits for Receive.
func (v *VM) listenIncoming(ctx context.Context) error {
	qemuEnd, ours, err := streamPair()
	if err != nil {
		return err
	}
	defer qemuEnd.Close() // QEMU holds its own copy
	err = v.passStream(ctx, incomingFD, qemuEnd, `{"execute":"migrate-incoming","arguments":{"uri":"fd:`+incomingFD+`"}}`)
	if err != nil {
		ours.Close()
		return fmt.Errorf("the migration's destination: %w", err)
	}
	v.inMu.Lock()
	v.in = ours
	v.inMu.Unlock()
	return nil
}

// Receive implements noded.MigrationDestination: it starts the held file
// server with the prelude's handle key, copies the stream into QEMU and
// returns once QEMU loaded the whole state (its end of the stream closes
// then) or could not. QEMU exits when a load fails.
func (v *VM) Receive(ctx context.Context, pre []byte, stream io.ReadWriter) error {
	v.inMu.Lock()
	in := v.in
	v.in = nil
	v.inMu.Unlock()
	if in == nil {
		return errors.New("this VM waits for no migration stream, or took one already")
	}
	defer in.Close()
	var p prelude
	if len(pre) > 0 {
		if err := json.Unmarshal(pre, &p); err != nil {
			return fmt.Errorf("the migration's prelude: %w", err)
		}
	}
	if err := v.startHeldNFS(p.HandleKey); err != nil {
		return err
	}
	loaded := make(chan struct{})
	go func() {
		_, err := io.Copy(in, stream)
		if err != nil {
			// A cut stream: QEMU sees its end close and fails the load.
			in.Close()
			return
		}
		closeWrite(in)
	}()
	go func() {
		// QEMU closes its end once it loaded the state (or failed to).
		io.Copy(stream, in)
		close(loaded)
	}()
	select {
	case <-loaded:
	case <-v.done:
	case <-ctx.Done():
		return fmt.Errorf("the migration's stream: %w", ctx.Err())
	}
	_, err := v.waitIncoming(ctx)
	return err
}

// Loaded implements noded.MigrationDestination: QEMU's incoming migration
// completed and the VM is stopped, waiting to be continued.
func (v *VM) Loaded() (bool, error) {
	if v.ended() {
		return false, v.vmError("query-migrate", nil)
	}
	st, err := v.migration()
	if err != nil {
		return false, err
	}
	if st.Return.Status == "failed" {
		return false, fmt.Errorf("QEMU could not load the job's state: %s", st.Return.ErrorDesc)
	}
	return st.Return.Status == "completed", nil
}

// closeWrite ends the writing half of c, where it has one, so that the
// reader sees the end of the stream.
func closeWrite(c any) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}
