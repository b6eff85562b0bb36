package noded

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"corral/api"
)

// handleExec runs a command in a running job: POST with the ExecRequest
// as body and Upgrade: api.ExecUpgrade; once the command runs the answer
// is 101 and the connection carries api stream frames both ways. A
// command that cannot start is refused with an ordinary error answer.
func (d *Daemon) handleExec(w http.ResponseWriter, r *http.Request) {
	run, ja, jc, caller, err := d.reach(r)
	var req api.ExecRequest
	if err == nil {
		err = decodeBody(w, r, &req)
	}
	step, inStep, serr := stepOf(r)
	if err == nil {
		err = serr
	}
	if err == nil {
		err = req.Validate()
	}
	u := jc.user
	if err == nil {
		u, err = execUser(jc, req, caller)
	}
	if err == nil && !upgradeTo(r, api.ExecUpgrade) {
		err = refuse(http.StatusBadRequest, "exec needs Connection: Upgrade and Upgrade: %s", api.ExecUpgrade)
	}
	var sess ExecSession
	if err == nil {
		dir := jc.workDir
		if req.Dir != "" {
			dir = api.JobPath(jc.workDir, req.Dir)
		}
		env := mergeEnv(userEnv(jc.env, u), req.Env)
		sess, err = ja.Exec(r.Context(), ExecRequest{Argv: req.Argv, Env: env, Dir: dir, User: u,
			TTY: req.TTY, Rows: req.Rows, Cols: req.Cols})
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		sess.Close()
		writeAPIError(w, err)
		return
	}
	d.log.Info("exec into a job", "job", run.job.ID, "caller", caller, "argv0", req.Argv[0], "root", req.Root, "tty", req.TTY)
	if inStep {
		k := stepKey{job: run.job.ID, step: step}
		d.steps.add(k, sess)
		defer d.steps.remove(k, sess)
	}
	conn.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + api.ExecUpgrade + "\r\n\r\n")
	brw.Flush()
	serveExecStream(conn, brw.Reader, sess)
}

func upgradeTo(r *http.Request, proto string) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), proto) &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// serveExecStream relays an exec session over the upgraded connection:
// the client's frames to the command, its output back, and the exit last.
// The client going away kills the command.
func serveExecStream(conn net.Conn, in *bufio.Reader, sess ExecSession) {
	defer conn.Close()
	defer sess.Close()
	var wmu sync.Mutex
	send := func(t api.StreamType, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return api.WriteStreamFrame(conn, t, p)
	}
	go relayClient(in, sess)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, src := range []io.Reader{sess.Stdout(), sess.Stderr()} {
		t := api.StreamStdout
		if i == 1 {
			t = api.StreamStderr
		}
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					if werr := send(t, buf[:n]); werr != nil {
						sess.Close()
						errs[i] = werr
						return
					}
				}
				if err != nil {
					if !errors.Is(err, io.EOF) {
						errs[i] = err
					}
					return
				}
			}
		})
	}
	wg.Wait()
	exit := api.ExecExit{}
	if err := errors.Join(errs...); err != nil {
		exit.Error = err.Error()
	} else if res, err := sess.Wait(); err != nil {
		exit.Error = err.Error()
	} else {
		exit.Code, exit.Signal = res.Code, res.Signal
	}
	b, _ := json.Marshal(exit)
	send(api.StreamExit, b)
}

// relayClient hands the client's frames to the command until the client
// stops; a client that goes away (or breaks the stream) ends the command.
func relayClient(in *bufio.Reader, sess ExecSession) {
	stdinOpen := true
	for {
		t, p, err := api.ReadStreamFrame(in)
		if err != nil {
			sess.Close()
			return
		}
		switch t {
		case api.StreamStdin:
			if stdinOpen {
				if _, err := sess.Stdin().Write(p); err != nil {
					stdinOpen = false
				}
			}
		case api.StreamStdinClose:
			if stdinOpen {
				sess.Stdin().Close()
				stdinOpen = false
			}
		case api.StreamResize:
			var m api.StreamResizeMsg
			if json.Unmarshal(p, &m) == nil {
				sess.Resize(m.Rows, m.Cols)
			}
		case api.StreamSignal:
			var m api.SignalRequest
			if json.Unmarshal(p, &m) == nil {
				if sig, err := api.ParseSignal(m.Signal); err == nil {
					sess.Signal(syscall.Signal(sig))
				}
			}
		default:
			sess.Close()
			return
		}
	}
}
