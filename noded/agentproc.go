package noded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/ident"
)

var _ JobAgent = (*procHandle)(nil)

// execOutputGrace is how long an exec's end waits, once its process
// exited, for the rest of its output (a process left in the background may
// hold the pipe open for ever): the guest agent's rule, on the host.
const execOutputGrace = 2 * time.Second

// Exec runs a command beside a process-runner job: on the host, as the
// request's user, in a session of its own.
func (h *procHandle) Exec(ctx context.Context, req ExecRequest) (ExecSession, error) {
	if h.ref.Exited() {
		return nil, errJobEnded
	}
	if err := checkWorkDir(req.Dir); err != nil {
		return nil, err
	}
	prog, err := lookPathIn(req.Argv[0], req.Env)
	if err != nil {
		return nil, err
	}
	x := &procExec{h: h, done: make(chan struct{})}
	var theirs []*os.File
	if req.TTY {
		master, slave, err := openHostPTY(req)
		if err != nil {
			return nil, fmt.Errorf("exec: a terminal: %w", err)
		}
		x.tty, theirs = master, []*os.File{slave, slave, slave}
		x.stdin, x.stdout, x.stderr = keepOpen{master}, &eofOnEIO{master}, eofReader{}
	} else {
		var ours [3]*os.File
		for i := 0; i < 3; i++ {
			pr, pw, err := os.Pipe()
			if err != nil {
				closeFiles(theirs...)
				closeFiles(ours[:]...)
				return nil, err
			}
			if i == 0 {
				ours[i], theirs = pw, append(theirs, pr)
			} else {
				ours[i], theirs = pr, append(theirs, pw)
			}
		}
		x.stdin, x.stdout, x.stderr = ours[0], ours[1], ours[2]
		x.outputs = []*os.File{ours[1], ours[2]}
	}
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: req.TTY, Ctty: 0}
	if os.Geteuid() == 0 && req.User.UID != 0 {
		attr.Credential = req.User.Credential()
	}
	x.cmd = &exec.Cmd{Path: prog, Args: req.Argv, Env: req.Env, Dir: req.Dir,
		Stdin: theirs[0], Stdout: theirs[1], Stderr: theirs[2], SysProcAttr: attr}
	err = x.cmd.Start()
	closeFiles(theirs...)
	if err != nil {
		x.closeOurs()
		return nil, fmt.Errorf("exec %s in %s as %s: %w", req.Argv[0], req.Dir, req.User.Name, err)
	}
	h.addExec(x)
	go x.wait()
	return x, nil
}

// Signal delivers sig to the job's processes on the host: every process of
// its session but the shim (which traps the common signals and must live
// to record the status), and with SignalAll the exec sessions too.
func (h *procHandle) Signal(_ context.Context, sig syscall.Signal, scope string) error {
	if h.ref.Exited() {
		return errJobEnded
	}
	n := signalSession(sessionFilter{sid: h.ref.PID(), minStart: h.ref.StartTicks(), except: h.ref.PID()}, sig)
	if scope == SignalAll {
		h.execMu.Lock()
		for x := range h.execs {
			if syscall.Kill(-x.cmd.Process.Pid, sig) == nil {
				n++
			}
		}
		h.execMu.Unlock()
	}
	if n == 0 {
		return fmt.Errorf("no process of the job to signal: %w", syscall.ESRCH)
	}
	return nil
}

// ReadFile opens a host file as u.
func (h *procHandle) ReadFile(_ context.Context, path string, u ident.User) (io.ReadCloser, FileInfo, error) {
	f, st, err := openRegularAs(u, path, os.O_RDONLY, 0)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return f, FileInfo{Size: st.Size(), Mode: st.Mode().Perm()}, nil
}

// WriteFile creates or truncates a host file as u; Close syncs it.
func (h *procHandle) WriteFile(_ context.Context, path string, mode fs.FileMode, u ident.User) (io.WriteCloser, error) {
	f, _, err := openRegularAs(u, path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode.Perm())
	if err != nil {
		return nil, err
	}
	return syncCloser{f}, nil
}

// openRegularAs opens a regular file with u's file-system credentials, so
// the kernel checks u's permissions. O_NONBLOCK keeps a FIFO from holding
// the open; only regular files are served.
func openRegularAs(u ident.User, path string, flags int, mode fs.FileMode) (*os.File, fs.FileInfo, error) {
	var f *os.File
	var err error
	u.Do(func() error {
		f, err = os.OpenFile(path, flags|syscall.O_NONBLOCK|syscall.O_NOCTTY, mode)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		what := syscall.EINVAL
		if st.IsDir() {
			what = syscall.EISDIR
		}
		err = &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (only regular files are copied)", what)}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if fl, ferr := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); ferr == nil {
		unix.FcntlInt(f.Fd(), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return f, st, nil
}

type syncCloser struct{ *os.File }

func (s syncCloser) Close() error {
	return errors.Join(s.File.Sync(), s.File.Close())
}

func (h *procHandle) addExec(x *procExec) {
	h.execMu.Lock()
	defer h.execMu.Unlock()
	if h.execs == nil {
		h.execs = map[*procExec]bool{}
	}
	h.execs[x] = true
}

func (h *procHandle) dropExec(x *procExec) {
	h.execMu.Lock()
	defer h.execMu.Unlock()
	delete(h.execs, x)
}

// procExec is a command run beside a process-runner job.
type procExec struct {
	h       *procHandle
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  io.Reader
	stderr  io.Reader
	tty     *os.File
	outputs []*os.File
	done    chan struct{} // closed when the process was reaped
	res     ExecResult
	once    sync.Once
}

func (x *procExec) wait() {
	x.cmd.Wait()
	ws := x.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		x.res = ExecResult{Signal: int(ws.Signal())}
	} else {
		x.res = ExecResult{Code: ws.ExitStatus()}
	}
	x.h.dropExec(x)
	close(x.done)
	// Output a background process keeps open is cut off after the grace.
	time.Sleep(execOutputGrace)
	closeFiles(x.outputs...)
}

func (x *procExec) Stdin() io.WriteCloser { return x.stdin }
func (x *procExec) Stdout() io.Reader     { return closedAsEOF{x.stdout} }
func (x *procExec) Stderr() io.Reader     { return closedAsEOF{x.stderr} }

func (x *procExec) Resize(rows, cols uint16) error {
	if x.tty == nil {
		return nil
	}
	return unix.IoctlSetWinsize(int(x.tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
}

func (x *procExec) Signal(sig syscall.Signal) error {
	select {
	case <-x.done:
		return fmt.Errorf("the command has ended: %w", syscall.ESRCH)
	default:
	}
	return syscall.Kill(-x.cmd.Process.Pid, sig)
}

func (x *procExec) Wait() (ExecResult, error) {
	<-x.done
	return x.res, nil
}

// Close kills the command's process group if it still runs.
func (x *procExec) Close() error {
	x.once.Do(func() {
		select {
		case <-x.done:
		default:
			syscall.Kill(-x.cmd.Process.Pid, syscall.SIGKILL)
		}
		go func() { <-x.done; x.closeOurs() }()
	})
	return nil
}

func (x *procExec) closeOurs() {
	if x.tty != nil {
		x.tty.Close()
		return
	}
	if f, ok := x.stdin.(*os.File); ok {
		f.Close()
	}
	closeFiles(x.outputs...)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// closedAsEOF reads a pipe whose read end the grace closed: that is its
// end.
type closedAsEOF struct{ r io.Reader }

func (c closedAsEOF) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	return n, err
}

// eofOnEIO reads a terminal's master, which reports EIO once the last
// process holding the terminal exited: that is its end of file.
type eofOnEIO struct{ f *os.File }

func (e *eofOnEIO) Read(p []byte) (int, error) {
	n, err := e.f.Read(p)
	if errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

// keepOpen is a terminal's input: its end of file does not close the
// terminal.
type keepOpen struct{ io.Writer }

func (keepOpen) Close() error { return nil }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// openHostPTY opens a terminal on the host: the master for the node, the
// slave, owned by the command's user, for the command.
func openHostPTY(req ExecRequest) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		master.Close()
		return nil, nil, fmt.Errorf("open the terminal's peer: %w", errno)
	}
	slave = os.NewFile(sfd, "pty")
	if os.Geteuid() == 0 {
		unix.Fchown(int(sfd), int(req.User.UID), -1)
		unix.Fchmod(int(sfd), 0o620)
	}
	if req.Rows > 0 && req.Cols > 0 {
		unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: req.Rows, Col: req.Cols})
	}
	return master, slave, nil
}

// lookPathIn finds a command in the PATH of env, as a shell would.
func lookPathIn(name string, env []string) (string, error) {
	search := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range strings.Split(search, ":") {
		if dir == "" || dir[0] != '/' {
			continue
		}
		p := dir + "/" + name
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &fs.PathError{Op: "exec", Path: name, Err: fmt.Errorf("%w (not found in PATH %s)", syscall.ENOENT, search)}
}
