package vmrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"time"

	"corral/internal/ident"
	"corral/noded"
	"corral/vmimage"
)

var _ noded.JobAgent = (*VM)(nil)

// agentConnectWait bounds how long a request waits for the guest's agent
// when the caller set no deadline: a VM just started is still booting
// (about a second under TCG).
const agentConnectWait = 60 * time.Second

// agentArgs are the QEMU arguments of the agent's channel: a
// virtio-serial port named vmimage.AgentPortName on a socket QEMU serves
// (DIR/agent.sock, bound by the daemon and inherited as fdAgent). The port
// migrates with the VM; the socket is the host's and is not part of the
// migration stream.
func agentArgs() []string {
	return []string{
		"-device", "virtio-serial-device",
		"-chardev", socketChardev("agent", fdAgent),
		"-device", "virtserialport,chardev=agent,name=" + vmimage.AgentPortName,
	}
}

func (v *VM) agentOrErr() (*agentClient, error) {
	if v.agent == nil {
		return nil, fmt.Errorf("%w: this job's VM has no guest agent (its image was built before agent protocol 3: rebuild it with make image)", noded.ErrAgentUnavailable)
	}
	if v.ended() && !v.agent.movedFrom(v.f.agentSock) {
		// Nothing serves its socket any more: a request would wait out its
		// whole deadline redialling it.
		return nil, fmt.Errorf("%w: the job's VM has ended", noded.ErrAgentUnavailable)
	}
	return v.agent, nil
}

func withAgentDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, agentConnectWait)
}

func agentUserOf(u ident.User) vmimage.AgentUser {
	return vmimage.AgentUser{Name: u.Name, UID: u.UID, GID: u.GID, Groups: u.Groups}
}

// Exec runs a command in the guest through its agent.
func (v *VM) Exec(ctx context.Context, req noded.ExecRequest) (noded.ExecSession, error) {
	c, err := v.agentOrErr()
	if err != nil {
		return nil, err
	}
	msg := vmimage.ExecRequest{Argv: req.Argv, Env: req.Env, Dir: req.Dir, User: agentUserOf(req.User),
		TTY: req.TTY, Rows: req.Rows, Cols: req.Cols}
	if err := msg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := withAgentDeadline(ctx)
	defer cancel()
	r, err := c.start(ctx, vmimage.FrameExec, msg)
	if err != nil {
		return nil, err
	}
	if _, err := r.waitStarted(ctx); err != nil {
		return nil, err
	}
	return &vmExec{c: c, r: r}, nil
}

// Signal delivers sig to the job's processes in the guest.
func (v *VM) Signal(ctx context.Context, sig syscall.Signal, scope string) error {
	c, err := v.agentOrErr()
	if err != nil {
		return err
	}
	return signalRequest(ctx, c, vmimage.SignalRequest{Signal: int(sig), Scope: scope})
}

func signalRequest(ctx context.Context, c *agentClient, msg vmimage.SignalRequest) error {
	if err := msg.Validate(); err != nil {
		return err
	}
	ctx, cancel := withAgentDeadline(ctx)
	defer cancel()
	r, err := c.start(ctx, vmimage.FrameSignal, msg)
	if err != nil {
		return err
	}
	e, err := r.waitEnd(ctx)
	if err != nil {
		return err
	}
	return endError(e)
}

// ReadFile opens a file of the guest as u.
func (v *VM) ReadFile(ctx context.Context, path string, u ident.User) (io.ReadCloser, noded.FileInfo, error) {
	r, st, err := v.fileRequest(ctx, vmimage.FrameReadFile, vmimage.FileRequest{Path: path, User: agentUserOf(u)})
	if err != nil {
		return nil, noded.FileInfo{}, err
	}
	return &vmFileReader{r: r}, noded.FileInfo{Size: st.Size, Mode: fs.FileMode(st.Mode) & fs.ModePerm}, nil
}

// WriteFile creates or truncates a file of the guest as u.
func (v *VM) WriteFile(ctx context.Context, path string, mode fs.FileMode, u ident.User) (io.WriteCloser, error) {
	r, _, err := v.fileRequest(ctx, vmimage.FrameWriteFile, vmimage.FileRequest{Path: path, User: agentUserOf(u), Mode: uint32(mode.Perm())})
	if err != nil {
		return nil, err
	}
	return &vmFileWriter{r: r}, nil
}

func (v *VM) fileRequest(ctx context.Context, typ vmimage.FrameType, msg vmimage.FileRequest) (*agentReq, vmimage.Started, error) {
	c, err := v.agentOrErr()
	if err != nil {
		return nil, vmimage.Started{}, err
	}
	if err := msg.Validate(); err != nil {
		return nil, vmimage.Started{}, err
	}
	ctx, cancel := withAgentDeadline(ctx)
	defer cancel()
	r, err := c.start(ctx, typ, msg)
	if err != nil {
		return nil, vmimage.Started{}, err
	}
	st, err := r.waitStarted(ctx)
	if err != nil {
		return nil, vmimage.Started{}, err
	}
	return r, st, nil
}

// vmExec is an exec session in the guest.
type vmExec struct {
	c *agentClient
	r *agentReq
}

func (x *vmExec) Stdin() io.WriteCloser { return stdinWriter{x.r} }
func (x *vmExec) Stdout() io.Reader     { return streamReader{x.r, vmimage.StreamStdout} }
func (x *vmExec) Stderr() io.Reader     { return streamReader{x.r, vmimage.StreamStderr} }

func (x *vmExec) Resize(rows, cols uint16) error {
	return x.r.s.send(vmimage.Frame{Type: vmimage.FrameResize, ID: x.r.id, Payload: vmimage.EncodeMessage(vmimage.Resize{Rows: rows, Cols: cols})})
}

func (x *vmExec) Signal(sig syscall.Signal) error {
	return signalRequest(context.Background(), x.c, vmimage.SignalRequest{Signal: int(sig), Scope: vmimage.SignalExec, Exec: x.r.id})
}

func (x *vmExec) Wait() (noded.ExecResult, error) {
	e, err := x.r.waitEnd(context.Background())
	if err != nil {
		return noded.ExecResult{}, err
	}
	if err := endError(e); err != nil {
		return noded.ExecResult{}, err
	}
	return noded.ExecResult{Code: e.Code, Signal: e.Signal}, nil
}

func (x *vmExec) Close() error {
	x.r.cancel()
	return nil
}

type stdinWriter struct{ r *agentReq }

func (w stdinWriter) Write(p []byte) (int, error) { return w.r.write(p) }
func (w stdinWriter) Close() error                { return w.r.closeStdin() }

type streamReader struct {
	r *agentReq
	s byte
}

func (sr streamReader) Read(p []byte) (int, error) { return sr.r.read(sr.s, p) }

// vmFileReader reads a guest file; a failure the guest reports after some
// of the bytes (an I/O error) is the error at the end instead of io.EOF.
type vmFileReader struct{ r *agentReq }

func (f *vmFileReader) Read(p []byte) (int, error) {
	n, err := f.r.read(vmimage.StreamStdout, p)
	if errors.Is(err, io.EOF) {
		e, werr := f.r.waitEnd(context.Background())
		if werr != nil {
			return n, werr
		}
		if eerr := endError(e); eerr != nil {
			return n, eerr
		}
	}
	return n, err
}

func (f *vmFileReader) Close() error {
	f.r.cancel()
	return nil
}

// vmFileWriter writes a guest file; Close waits for the guest to have
// written and synced it.
type vmFileWriter struct{ r *agentReq }

func (f *vmFileWriter) Write(p []byte) (int, error) { return f.r.write(p) }

func (f *vmFileWriter) Close() error {
	if err := f.r.closeStdin(); err != nil {
		return err
	}
	e, err := f.r.waitEnd(context.Background())
	if err != nil {
		return err
	}
	return endError(e)
}
