package vmrun

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"corral/noded"
)

// Incoming says where a VM's QEMU takes its guest from instead of booting
// the image's kernel: a QEMU migration stream, sent by another QEMU (the
// destination of a live migration) or read from a file (a warm start's
// snapshot, a checkpoint). Start such a VM with startOpts.incoming.
//
// The stream carries the guest's RAM and device state, not the devices
// themselves: the receiving QEMU must have the same device model as the
// QEMU that sent it (machine, CPU model, vCPUs, RAM size and backend, every
// -device, in the same order). That is what starting it from the same
// LaunchSpec gives: Runner.argv builds the same command line from the same
// job, image, accelerator and share on every node (descriptors at fixed
// numbers, no path of the node's in a device). What may differ is what is
// not migrated: the state directory in -name, the kernel command line,
// and the host's side of every device (output files, sockets, tap device,
// file server), which the receiving VM gets fresh. The initrd is the
// image's base initramfs: the guest booted long ago, and the job's payload
// of the VM that booted it must not be handed to another.
type Incoming struct {
	// URI is QEMU's -incoming for a stream that arrives over the network
	// ("tcp:HOST:PORT"), or "defer" for one that migrate-incoming starts
	// later. Empty when File is set.
	URI string
	// File is a stream the node daemon opened (a snapshot or checkpoint
	// file: root's, which QEMU's own id could not open). QEMU inherits it
	// as descriptor fdIncoming and reads it as fd:N.
	File *os.File
	// Appending opens the job's output files for appending instead of
	// truncating them: a live migration's destination goes on writing
	// what its source wrote.
	Appending bool
	// Paused keeps the guest's vCPUs stopped once the stream is in (-S),
	// until VM.Continue: a live migration's destination runs only when it
	// is told the source stopped for good. Otherwise the guest goes on in
	// the run state it was saved in: a stream saved from a running guest
	// runs as soon as it is loaded, one saved paused (a snapshot, a
	// checkpoint) waits for VM.Continue.
	Paused bool
	// HoldShare keeps the NFS share's file server from starting until the
	// source's handle keys arrive with the stream (VM.Receive's prelude):
	// a live migration's destination is started before the source's
	// daemon connects to it.
	HoldShare bool
}

// args are the QEMU arguments that make a VM wait for its stream.
func (in *Incoming) args() []string {
	if in == nil {
		return nil
	}
	uri := in.URI
	if in.File != nil {
		uri = "fd:" + strconv.Itoa(fdIncoming)
	}
	argv := []string{"-incoming", uri}
	if in.Paused {
		argv = append(argv, "-S")
	}
	return argv
}

// check refuses an Incoming that names no stream or two.
func (in *Incoming) check() error {
	if (in.URI == "") == (in.File == nil) {
		return fmt.Errorf("an incoming VM needs exactly one of a stream URI and a stream file (got %q and %v)", in.URI, in.File != nil)
	}
	return nil
}

// setIncoming puts a copy of in's stream file in q for QEMU (the
// caller keeps its own).
func (q *qemuFiles) setIncoming(in *Incoming) error {
	if in == nil || in.File == nil {
		return nil
	}
	fd, err := unix.FcntlInt(in.File.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the incoming migration stream: %w", err)
	}
	q.set(fdIncoming, os.NewFile(uintptr(fd), in.File.Name()))
	return nil
}

// incomingWait bounds how long waitIncoming waits for a stream to be in:
// a snapshot is read in well under a second, a live migration of a busy
// guest over a slow link takes longer.
const incomingWait = 10 * time.Minute

// waitIncoming waits until the VM's QEMU has loaded its incoming stream,
// and returns QEMU's run state then: "running", or "paused" for
// Incoming.Paused. A stream QEMU cannot load makes it exit (its log says
// why), which is the error.
func (v *VM) waitIncoming(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, incomingWait)
	defer cancel()
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		st, err := queryStatus(ctx, v.st.QMP)
		if err == nil && st.Return.Status != "inmigrate" {
			if st.Return.Status != "running" && st.Return.Status != "paused" {
				return st.Return.Status, fmt.Errorf("the VM is %q after its incoming migration (QEMU said: %s)", st.Return.Status, tailFile(v.f.qemuLog, 3, 600))
			}
			return st.Return.Status, nil
		}
		select {
		case <-v.done:
			return "", fmt.Errorf("QEMU could not load the incoming migration stream: %s", tailFile(v.f.qemuLog, 3, 600))
		case <-ctx.Done():
			return "", fmt.Errorf("the incoming migration stream was not in within %s: %w (QEMU said: %s)", incomingWait, ctx.Err(), tailFile(v.f.qemuLog, 3, 600))
		case <-time.After(wait):
		}
	}
}

// migrationStatus is the reply to query-migrate, as far as it is read:
// an outgoing migration's (or, on a destination, the incoming one's)
// status and figures, and whether QEMU would refuse to migrate the VM.
type migrationStatus struct {
	Return struct {
		Status    string `json:"status"`
		TotalTime int64  `json:"total-time"`
		Downtime  int64  `json:"downtime"`
		SetupTime int64  `json:"setup-time"`
		ErrorDesc string `json:"error-desc"`
		RAM       struct {
			Transferred int64 `json:"transferred"`
		} `json:"ram"`
		Blocked        bool     `json:"blocked"`
		BlockedReasons []string `json:"blocked-reasons"`
	} `json:"return"`
}

// stats are a finished migration's figures: its total time, the time the
// guest was stopped, the time before copying began, the bytes of RAM sent.
func (m migrationStatus) stats() noded.MigrationStats {
	r := m.Return
	return noded.MigrationStats{Total: time.Duration(r.TotalTime) * time.Millisecond,
		Downtime: time.Duration(r.Downtime) * time.Millisecond, Setup: time.Duration(r.SetupTime) * time.Millisecond,
		RAMBytes: r.RAM.Transferred}
}

// active reports whether the migration is under way, in any of QEMU's
// states between its start and its end.
func (m migrationStatus) active() bool {
	switch s := m.Return.Status; s {
	case "setup", "active", "pre-switchover", "device", "wait-unplug", "cancelling":
		return true
	default:
		return strings.HasPrefix(s, "postcopy")
	}
}

// parseMigrationStatus reads a query-migrate reply.
func parseMigrationStatus(b []byte) (migrationStatus, error) {
	var m migrationStatus
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("QMP query-migrate: %w", err)
	}
	return m, nil
}
