package vmrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"corral/noded"
)

// saveFDName is the name a stream file gets in QEMU's monitor (getfd).
const saveFDName = "corral-stream"

// saveState writes the VM's migration stream to f, a file the node daemon
// opened for writing (QEMU's own id could not create one in the daemon's
// directories): the descriptor is handed to QEMU over the monitor socket
// (getfd, SCM_RIGHTS) and QEMU migrates to it. The stream is what a VM
// started with Incoming{File: ...} and the same device model loads.
//
// A running guest is saved live (its dirty pages sent again until the rest
// fits the downtime); stop it first (VM.Pause) for a stream of one
// instant without a second pass. Either way QEMU is left in
// "postmigrate": its guest must not run again (the stream would then be a
// copy of a guest that went on), and the caller ends it.
func (v *VM) saveState(ctx context.Context, f *os.File) (noded.MigrationStats, error) {
	c, err := dialQMP(ctx, v.st.QMP)
	if err != nil {
		return noded.MigrationStats{}, v.vmError("migrate", err)
	}
	defer c.close()
	if _, err := c.run(`{"execute":"getfd","arguments":{"fdname":"`+saveFDName+`"}}`, f); err != nil {
		return noded.MigrationStats{}, err
	}
	// QEMU 7.2 caps migration at 128 MiB/s by default; a stream to a
	// local file has no link to spare.
	if _, err := c.run(`{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":17179869184}}`, nil); err != nil {
		return noded.MigrationStats{}, err
	}
	if _, err := c.run(`{"execute":"migrate","arguments":{"uri":"fd:`+saveFDName+`"}}`, nil); err != nil {
		return noded.MigrationStats{}, err
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		b, err := c.run(`{"execute":"query-migrate"}`, nil)
		if err != nil {
			return noded.MigrationStats{}, err
		}
		m, err := parseMigrationStatus(b)
		if err != nil {
			return noded.MigrationStats{}, err
		}
		switch m.Return.Status {
		case "completed":
			return m.stats(), nil
		case "failed", "cancelled":
			return noded.MigrationStats{}, fmt.Errorf("QEMU's migration to the stream file %s: %s", m.Return.Status, m.Return.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			c.run(`{"execute":"migrate_cancel"}`, nil)
			return noded.MigrationStats{}, fmt.Errorf("QEMU's migration to the stream file: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// qmpConn is one QMP session held for a sequence of commands that must
// share it: a descriptor passed with getfd is known to that session's
// monitor only. go-qemu's monitor cannot pass descriptors, hence this
// small client of QMP's line protocol.
type qmpConn struct {
	c  *net.UnixConn
	rd *bufio.Reader
}

// dialQMP connects to the monitor socket and leaves capabilities
// negotiation mode. Every read and write is bounded by ctx's deadline, or
// by qmpTimeout per command.
func dialQMP(ctx context.Context, sock string) (*qmpConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("QMP connect %s: %w", sock, err)
	}
	c := &qmpConn{c: conn.(*net.UnixConn), rd: bufio.NewReader(conn)}
	context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Now()) })
	c.c.SetDeadline(time.Now().Add(qmpTimeout))
	if _, err := c.rd.ReadBytes('\n'); err != nil { // the greeting
		c.close()
		return nil, fmt.Errorf("QMP greeting on %s: %w", sock, err)
	}
	if _, err := c.run(`{"execute":"qmp_capabilities"}`, nil); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *qmpConn) close() { c.c.Close() }

// run sends one command, with f's descriptor attached when f is not nil,
// and returns its reply, skipping the events QEMU sends meanwhile. A reply
// with "error" is an error saying QEMU's words.
func (c *qmpConn) run(cmd string, f *os.File) (json.RawMessage, error) {
	c.c.SetDeadline(time.Now().Add(qmpTimeout))
	var oob []byte
	if f != nil {
		oob = unix.UnixRights(int(f.Fd()))
	}
	if _, _, err := c.c.WriteMsgUnix([]byte(cmd+"\n"), oob, nil); err != nil {
		return nil, fmt.Errorf("QMP %s: %w", cmd, err)
	}
	for {
		line, err := c.rd.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("QMP %s: %w", cmd, err)
		}
		var reply struct {
			Event  string                 `json:"event"`
			Error  *struct{ Desc string } `json:"error"`
			Return json.RawMessage        `json:"return"`
		}
		if err := json.Unmarshal(line, &reply); err != nil {
			return nil, fmt.Errorf("QMP %s: a reply that is not JSON: %w", cmd, err)
		}
		switch {
		case reply.Event != "":
			continue
		case reply.Error != nil:
			return nil, fmt.Errorf("QMP %s: %w", cmd, errors.New(reply.Error.Desc))
		}
		return line, nil
	}
}
