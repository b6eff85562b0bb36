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
)

// qmpPassFD runs, in one QMP session on the monitor socket sock, getfd with
// the descriptor fd (QEMU takes it from the message that carries the
// command, as SCM_RIGHTS) under the name fdname, then cmds, in order, and
// returns the replies of cmds.
//
// go-qemu's monitor cannot send a descriptor, so this session speaks QMP's
// line protocol itself: a greeting, qmp_capabilities, then one JSON
// command per line, each answered by a line with "return" or "error";
// event lines in between are skipped. A migration stream reaches QEMU
// this way as one end of a socket pair the daemon holds the other end of:
// QEMU, which runs as an id of its own, neither listens on an address nor
// opens a file for it.
func qmpPassFD(ctx context.Context, sock, fdname string, fd *os.File, cmds ...string) ([]json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, qmpTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	c, err := net.DialTimeout("unix", sock, time.Until(deadline))
	if err != nil {
		return nil, fmt.Errorf("QMP connect %s: %w", sock, err)
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	uc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	rd := bufio.NewReader(uc)
	if _, err := qmpLine(rd, true); err != nil {
		return nil, fmt.Errorf("QMP greeting on %s: %w", sock, err)
	}
	send := func(cmd string, rights []byte) (json.RawMessage, error) {
		if _, _, err := uc.WriteMsgUnix([]byte(cmd+"\n"), rights, nil); err != nil {
			return nil, err
		}
		return qmpLine(rd, false)
	}
	if _, err := send(`{"execute":"qmp_capabilities"}`, nil); err != nil {
		return nil, fmt.Errorf("QMP handshake on %s: %w", sock, err)
	}
	getfd := fmt.Sprintf(`{"execute":"getfd","arguments":{"fdname":%q}}`, fdname)
	if _, err := send(getfd, unix.UnixRights(int(fd.Fd()))); err != nil {
		return nil, fmt.Errorf("QMP getfd on %s: %w", sock, err)
	}
	var replies []json.RawMessage
	for _, cmd := range cmds {
		r, err := send(cmd, nil)
		if err != nil {
			return replies, fmt.Errorf("QMP %s: %w", cmd, err)
		}
		replies = append(replies, r)
	}
	return replies, nil
}

// qmpLine reads QMP lines until the greeting (greeting set) or a command's
// answer, skipping events, and returns the answer's whole line; an "error"
// answer is returned as an error.
func qmpLine(rd *bufio.Reader, greeting bool) (json.RawMessage, error) {
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var m struct {
			QMP    json.RawMessage `json:"QMP"`
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("QMP sent %q: %w", line, err)
		}
		switch {
		case greeting && m.QMP != nil:
			return line, nil
		case m.Error != nil:
			return nil, errors.New(m.Error.Desc)
		case m.Return != nil:
			return line, nil
		}
	}
}

// streamPair returns a connected pair of stream sockets: one end for QEMU
// (handed over with qmpPassFD, then closed here) and one for the daemon,
// which copies the migration stream between it and the other node.
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
