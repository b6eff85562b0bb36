package noded

import (
	"context"
	"io"
	"os"
	"time"
)

// LiveMigrator is implemented by a Runner whose jobs can move to another
// node while they run: the vm runner, with QEMU's migration stream. The
// daemon drives a migration (migration.go); the runner and its handles do
// the node's part of it.
type LiveMigrator interface {
	// StartIncoming starts the destination of a live migration: the job's
	// VM with the device model Start would give it on this node, its
	// vCPUs stopped, its output files opened for appending (not
	// truncated: the destination carries on what the source wrote), and
	// waiting for the state the source streams (MigrationDestination's
	// Receive). It returns once the VM waits.
	StartIncoming(ctx context.Context, spec LaunchSpec) (Handle, error)
}

// MigrationSource is implemented by a Handle whose job can be streamed to
// another node.
type MigrationSource interface {
	// MigrationPrelude returns what the destination needs before the
	// stream, opaque to the daemon (the vm runner's: the key its file
	// server derives file handles with, so that the guest's handles stay
	// valid on the destination's server). It travels over the daemons'
	// authenticated connection only.
	MigrationPrelude() ([]byte, error)
	// MigrateOut streams the running job to stream until the stream is
	// complete, the job's vCPUs then stopped for good (it returns nil and
	// the figures), or until the migration failed or ctx ended (it
	// cancels the migration and returns the error; the job runs on here).
	MigrateOut(ctx context.Context, stream io.ReadWriter, p MigrationParams) (MigrationStats, error)
	// MigrationState says where the job's last migration stands, for a
	// daemon restarted while one ran: "completed" (the job is stopped
	// here, its state sent), "active" or "" (none, or one that failed:
	// the job runs here), with the figures of a completed one.
	MigrationState() (string, MigrationStats, error)
	// ResumeAfterMigration makes the job run here again after its
	// migration was aborted: it cancels one still under way and continues
	// a job whose stream had completed. It does nothing to a job that
	// runs. It must never be called once the destination may continue.
	ResumeAfterMigration() error
}

// MigrationDestination is implemented by the Handle StartIncoming returns.
// Its job starts with Pausable's Continue, once the controllers said so.
type MigrationDestination interface {
	// Receive takes the source's prelude and then its stream, and returns
	// once the job's state arrived whole (nil: the job waits, stopped,
	// for Continue) or could not (the handle's job then ends).
	Receive(ctx context.Context, prelude []byte, stream io.ReadWriter) error
	// Loaded reports whether the job's whole state arrived and it waits
	// for Continue: what a restarted daemon asks.
	Loaded() (bool, error)
}

// MigrationParams bound one live migration.
type MigrationParams struct {
	// Downtime is the longest the job may stand still at the switch
	// (QEMU's downtime-limit); the stream keeps copying until what is
	// left fits in it.
	Downtime time.Duration
	// MaxBandwidth is the stream's limit in bytes a second (QEMU caps it
	// at 128 MiB/s unless told).
	MaxBandwidth int64
	// MaxTime bounds the whole stream: a migration that has not completed
	// by then is cancelled and the job runs on at the source.
	MaxTime time.Duration
	// AutoConverge slows a guest that dirties its memory faster than the
	// stream copies it, until the stream catches up.
	AutoConverge bool
}

// MigrationStats are a completed migration's figures, as QEMU measured
// them at the source.
type MigrationStats struct {
	// Total is the stream's time from start to completion, Downtime the
	// time the job's vCPUs stood still at its end (at the source: the
	// destination's wait for the word to continue comes on top), Setup
	// the time before copying began.
	Total, Downtime, Setup time.Duration
	// RAMBytes are the bytes of guest memory sent.
	RAMBytes int64
}

// Checkpointer is implemented by a Handle whose job can be parked in a
// file: its VM's state, written to f (positioned at its start), its guest
// stopped for good unless the checkpoint is not taken (MigrationSource's
// ResumeAfterMigration then continues it).
type Checkpointer interface {
	SaveCheckpoint(ctx context.Context, f *os.File) (MigrationStats, error)
}

// CheckpointRestorer is implemented by a Runner that can start a job from
// its checkpoint: the job's VM, loading the state f holds (positioned at
// its start), returned stopped, to be continued (Pausable).
type CheckpointRestorer interface {
	StartFromCheckpoint(ctx context.Context, spec LaunchSpec, f *os.File) (Handle, error)
}
