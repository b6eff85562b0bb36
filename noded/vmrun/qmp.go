package vmrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// qmpTimeout bounds one QMP session when the caller has no deadline of its
// own: QEMU answers in milliseconds, paused or not.
const qmpTimeout = 5 * time.Second

// qmpExec runs commands, in order, in one QMP session on the monitor socket
// sock, and returns their raw replies.
//
// A session is opened per call and closed after, rather than one connection
// held per VM: QEMU serves one QMP client at a time, so a held connection
// would lock out a re-attaching daemon (whose predecessor's connection the
// kernel closes only when that process dies) and an operator with socat.
// Sessions are rare (start, pause, continue, kill) and cost about a
// millisecond.
//
// go-qemu's monitor has no deadlines (its connection is private), so the
// session runs in a goroutine that qmpExec stops waiting for when ctx ends.
// Such a goroutine ends when QEMU answers or exits, which Kill makes sure of.
func qmpExec(ctx context.Context, sock string, cmds ...string) ([]json.RawMessage, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, qmpTimeout)
		defer cancel()
	}
	type outcome struct {
		replies []json.RawMessage
		err     error
	}
	ch := make(chan outcome, 1)
	deadline, _ := ctx.Deadline()
	go func() {
		r, err := qmpSession(sock, time.Until(deadline), cmds)
		ch <- outcome{r, err}
	}()
	select {
	case o := <-ch:
		return o.replies, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("QMP %v on %s: %w", cmds, sock, ctx.Err())
	}
}

func qmpSession(sock string, dial time.Duration, cmds []string) ([]json.RawMessage, error) {
	if dial <= 0 {
		return nil, fmt.Errorf("QMP on %s: %w", sock, context.DeadlineExceeded)
	}
	mon, err := qmp.NewSocketMonitor("unix", sock, dial)
	if err != nil {
		return nil, fmt.Errorf("QMP connect %s: %w", sock, err)
	}
	defer mon.Disconnect()
	if err := mon.Connect(); err != nil {
		return nil, fmt.Errorf("QMP handshake on %s: %w", sock, err)
	}
	var replies []json.RawMessage
	for _, c := range cmds {
		// mon.Run rather than go-qemu's generated raw API: that API is
		// generated from an old QEMU schema (it lacks query-cpus-fast).
		cmd := []byte(`{"execute":"` + c + `"}`)
		if strings.HasPrefix(c, "{") {
			cmd = []byte(c) // a command with arguments, as JSON
		}
		b, err := mon.Run(cmd)
		if err != nil {
			return replies, fmt.Errorf("QMP %s: %w", c, err)
		}
		replies = append(replies, b)
	}
	return replies, nil
}

// vmStatus is the reply to query-status.
type vmStatus struct {
	Return struct {
		Running bool   `json:"running"`
		Status  string `json:"status"`
	} `json:"return"`
}

// queryStatus returns QEMU's run state ("running", "paused", ...).
func queryStatus(ctx context.Context, sock string) (vmStatus, error) {
	var st vmStatus
	r, err := qmpExec(ctx, sock, "query-status")
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(r[0], &st); err != nil {
		return st, fmt.Errorf("QMP query-status: %w", err)
	}
	return st, nil
}
