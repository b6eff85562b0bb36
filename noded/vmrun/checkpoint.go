package vmrun

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"corral/noded"
)

// Checkpoints: a VM's state in a file (noded.Checkpointer,
// noded.CheckpointRestorer). The file is the job's prelude (its file
// server's handle keys, as a live migration sends them), then QEMU's
// migration stream of the stopped guest (saveState):
//
//	"CORRAL-CHECKPOINT\n" | 4 bytes big-endian: prelude length | prelude | QEMU's stream
//
// QEMU writes and reads the stream from where the file's offset stands, so
// the header is written before the descriptor is handed to QEMU and read
// before it is handed to the restoring QEMU. The daemon writes the file
// under a temporary name and renames it once complete (and verifies its
// digest before a restore): a file a crash cut short is never taken.

var (
	_ noded.Checkpointer       = (*VM)(nil)
	_ noded.CheckpointRestorer = (*Runner)(nil)
)

// checkpointMagic begins every checkpoint file.
const checkpointMagic = "CORRAL-CHECKPOINT\n"

// maxCheckpointPrelude bounds the prelude a checkpoint's header holds.
const maxCheckpointPrelude = 1 << 20

// SaveCheckpoint implements noded.Checkpointer: it stops the guest and
// writes its state to f, positioned at its start. QEMU is left in
// postmigrate, its guest stopped; ResumeAfterMigration continues it when
// the checkpoint is not taken, otherwise the daemon quits it.
func (v *VM) SaveCheckpoint(ctx context.Context, f *os.File) (noded.MigrationStats, error) {
	pre, err := v.MigrationPrelude()
	if err != nil {
		return noded.MigrationStats{}, err
	}
	if err := writeCheckpointHeader(f, pre); err != nil {
		return noded.MigrationStats{}, fmt.Errorf("the checkpoint's header: %w", err)
	}
	// A stopped guest: one consistent instant, and no live stream (see
	// migrate.go on TCG's live streams).
	if err := v.command("stop"); err != nil {
		return noded.MigrationStats{}, err
	}
	v.stoppedToMigrate.Store(true)
	return v.saveState(ctx, f)
}

func writeCheckpointHeader(w io.Writer, pre []byte) error {
	if len(pre) > maxCheckpointPrelude {
		return fmt.Errorf("a prelude of %d bytes", len(pre))
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(pre)))
	_, err := w.Write(append(append([]byte(checkpointMagic), n[:]...), pre...))
	return err
}

// readCheckpointHeader reads a checkpoint's header from r and returns its
// prelude.
func readCheckpointHeader(r io.Reader) ([]byte, error) {
	magic := make([]byte, len(checkpointMagic)+4)
	if _, err := io.ReadFull(r, magic); err != nil {
		return nil, fmt.Errorf("not a checkpoint: %w", err)
	}
	if string(magic[:len(checkpointMagic)]) != checkpointMagic {
		return nil, errors.New("not a checkpoint: it lacks the header")
	}
	size := binary.BigEndian.Uint32(magic[len(checkpointMagic):])
	if size > maxCheckpointPrelude {
		return nil, fmt.Errorf("a checkpoint whose header claims a prelude of %d bytes", size)
	}
	pre := make([]byte, size)
	if _, err := io.ReadFull(r, pre); err != nil {
		return nil, fmt.Errorf("the checkpoint's header: %w", err)
	}
	return pre, nil
}

// StartFromCheckpoint implements noded.CheckpointRestorer: the job's VM
// with the device model Start gives it, its output files appended to, its
// file server with the checkpoint's handle keys, loading the state f holds
// (positioned at its start); it returns once the state is in, the guest
// stopped, waiting for Continue.
func (r *Runner) StartFromCheckpoint(ctx context.Context, spec noded.LaunchSpec, f *os.File) (noded.Handle, error) {
	accel := r.Accel()
	if accel == "" {
		return nil, errors.New("vm runner: no VM starts before the accelerator probe is done")
	}
	// Read exactly the header: QEMU reads the stream from the offset
	// it leaves.
	raw, err := readCheckpointHeader(f)
	if err != nil {
		return nil, err
	}
	var pre prelude
	if err := json.Unmarshal(raw, &pre); err != nil {
		return nil, fmt.Errorf("the checkpoint's prelude: %w", err)
	}
	o := startOpts{accel: accel, hostRoot: true, group: true, agent: true, incoming: &Incoming{File: f, Appending: true}}
	if len(pre.HandleKey) > 0 {
		o.keys = &handleKeys{job: pre.HandleKey}
	}
	v, err := r.start(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	if _, err := v.waitIncoming(ctx); err != nil {
		v.Kill(0)
		<-v.done
		return nil, err
	}
	return v, nil
}
