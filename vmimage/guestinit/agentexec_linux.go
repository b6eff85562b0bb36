//go:build linux

package guestinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/ident"
	"corral/vmimage"
)

// outputGrace is how long an exec's End waits, once its process exited,
// for the rest of its output: a process it left in the background may
// hold its stdout open for ever.
const outputGrace = 2 * time.Second

// exec runs an ExecRequest: the process runs chrooted in the job's root,
// in a session of its own, as the request's user, with exactly the
// request's environment.
func (a *Agent) exec(r *agentReq, x vmimage.ExecRequest) {
	prog, err := a.lookPath(x.Argv[0], x.Env, x.User)
	if err != nil {
		r.end(errEnd(err))
		return
	}
	var mine, theirs []*os.File // our ends (stdin, stdout, stderr) and the child's
	if x.TTY {
		master, slave, err := a.openPTY(x)
		if err != nil {
			r.end(errEnd(fmt.Errorf("exec: a terminal: %w", err)))
			return
		}
		mine, theirs = []*os.File{master}, []*os.File{slave, slave, slave}
	} else {
		for i := 0; i < 3; i++ {
			pr, pw, err := os.Pipe()
			if err != nil {
				closeAll(mine, theirs)
				r.end(errEnd(err))
				return
			}
			if i == 0 {
				mine, theirs = append(mine, pw), append(theirs, pr)
			} else {
				mine, theirs = append(mine, pr), append(theirs, pw)
			}
		}
	}
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: x.TTY, Ctty: 0, Chroot: a.root}
	if x.User.UID != 0 {
		attr.Credential = &syscall.Credential{Uid: x.User.UID, Gid: x.User.GID, Groups: append([]uint32{}, x.User.Groups...)}
	}
	pid, wait, err := a.reaper.spawn(func() (int, error) {
		return syscall.ForkExec(prog, x.Argv, &syscall.ProcAttr{Dir: x.Dir, Env: x.Env,
			Files: []uintptr{theirs[0].Fd(), theirs[1].Fd(), theirs[2].Fd()}, Sys: attr})
	})
	closeAll(theirs)
	if err != nil {
		closeAll(mine)
		r.end(errEnd(fmt.Errorf("exec %s in %s as %s: %w", x.Argv[0], x.Dir, x.User.Name, err)))
		return
	}
	r.mu.Lock()
	r.pgid = pid
	if x.TTY {
		r.tty = mine[0]
	}
	canceled := r.canceled
	r.mu.Unlock()
	if canceled {
		unix.Kill(-pid, unix.SIGKILL)
	}
	r.started(vmimage.Started{PID: pid})
	outputs := mine[1:]
	if x.TTY {
		outputs = mine
	}
	pumped := make(chan struct{}, len(outputs))
	for i, f := range outputs {
		go func() { r.pump(f, byte(1+i)); pumped <- struct{}{} }()
	}
	go r.feed(mine[0], !x.TTY)
	ws := <-wait
	r.awaitOutput(pumped, len(outputs), outputs)
	closeAll(mine)
	e := vmimage.End{Code: ExitCode(ws.Exited(), ws.ExitStatus(), int(ws.Signal()))}
	if ws.Signaled() {
		e = vmimage.End{Signal: int(ws.Signal())}
	}
	r.end(e)
}

// awaitOutput waits for the output pumps to reach end of file, for at most
// outputGrace; then it closes the outputs, which ends the pumps.
func (r *agentReq) awaitOutput(pumped chan struct{}, n int, outputs []*os.File) {
	timer := time.NewTimer(outputGrace)
	defer timer.Stop()
	for i := 0; i < n; i++ {
		select {
		case <-pumped:
		case <-timer.C:
			closeAll(outputs)
			for ; i < n; i++ {
				<-pumped
			}
			return
		}
	}
}

func closeAll(lists ...[]*os.File) {
	seen := map[*os.File]bool{}
	for _, l := range lists {
		for _, f := range l {
			if f != nil && !seen[f] {
				seen[f] = true
				f.Close()
			}
		}
	}
}

// pump sends what f yields on stream s, then closes the stream. A
// terminal's master reports EIO once the last process holding it exited:
// that is its end of file.
func (r *agentReq) pump(f *os.File, s byte) {
	buf := make([]byte, vmimage.MaxDataChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 && !r.sendData(s, buf[:n]) {
			return
		}
		if err != nil {
			break
		}
	}
	r.sendClose(s)
}

// feed writes stream 0 to w (the process's stdin) and grants the window
// back as it goes. A process that stopped reading makes the writes fail:
// the rest is discarded, still granted. closeAtEnd closes w at the
// stream's end (a pipe; a terminal stays open).
func (r *agentReq) feed(w io.WriteCloser, closeAtEnd bool) {
	broken := false
	for {
		b, ok := r.next()
		if !ok {
			return
		}
		if b == nil {
			if closeAtEnd {
				w.Close()
			}
			return
		}
		if !broken {
			if _, err := w.Write(b); err != nil {
				broken = true
			}
		}
		r.grant(len(b))
	}
}

// openPTY opens a terminal in the job's root (its devpts instance): the
// master for the agent, the slave, owned by the user, for the process.
func (a *Agent) openPTY(x vmimage.ExecRequest) (master, slave *os.File, err error) {
	master, err = os.OpenFile(a.root+"/dev/pts/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
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
	const ttyGroup = 5 // the tty group of Debian's base-passwd
	unix.Fchown(int(sfd), int(x.User.UID), ttyGroup)
	unix.Fchmod(int(sfd), 0o620)
	if x.Rows > 0 && x.Cols > 0 {
		unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: x.Rows, Col: x.Cols})
	}
	return master, slave, nil
}

// lookPath finds a command in the job's root, as a shell would in the
// PATH of env (or /usr/local/bin:/usr/bin:/bin), and returns its path
// inside that root. A name with a slash is taken as it is.
func (a *Agent) lookPath(name string, env []string, u vmimage.AgentUser) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	search := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, dir := range strings.Split(search, ":") {
		if !path.IsAbs(dir) {
			continue
		}
		p := path.Join(dir, name)
		var st unix.Stat_t
		err := agentUser(u).Do(func() error {
			f, err := a.openInRoot(p, unix.O_PATH, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return unix.Fstat(int(f.Fd()), &st)
		})
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0 {
			return p, nil
		}
	}
	return "", &os.PathError{Op: "exec", Path: name, Err: fmt.Errorf("%w (not found in PATH %s)", unix.ENOENT, search)}
}

// openInRoot opens p inside the job's root: symbolic links and ".." cannot
// leave it. openat2 may ask for a retry when the tree changed meanwhile.
func (a *Agent) openInRoot(p string, flags int, mode uint32) (*os.File, error) {
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NOCTTY // openat2 refuses it with O_PATH
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(a.rootFD, p, &how)
		if err == nil {
			return os.NewFile(uintptr(fd), p), nil
		}
		if (err == unix.EAGAIN || err == unix.EINTR) && i < 100 {
			continue
		}
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
}

func agentUser(u vmimage.AgentUser) ident.User {
	return ident.User{Name: u.Name, UID: u.UID, GID: u.GID, Groups: u.Groups}
}

// openRegular opens a regular file as the request's user. O_NONBLOCK keeps
// a FIFO from blocking the open; only regular files are served.
func (a *Agent) openRegular(x vmimage.FileRequest, flags int) (*os.File, unix.Stat_t, error) {
	var f *os.File
	var st unix.Stat_t
	err := agentUser(x.User).Do(func() error {
		var err error
		f, err = a.openInRoot(x.Path, flags|unix.O_NONBLOCK, x.Mode)
		return err
	})
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		what := unix.EINVAL
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			what = unix.EISDIR
		}
		return nil, st, &os.PathError{Op: "open", Path: x.Path, Err: fmt.Errorf("%w (only regular files are copied)", what)}
	}
	flagsNow, _ := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	unix.FcntlInt(f.Fd(), unix.F_SETFL, flagsNow&^unix.O_NONBLOCK)
	return f, st, nil
}

// readFile sends a file's bytes on stream 1.
func (a *Agent) readFile(r *agentReq, x vmimage.FileRequest) {
	f, st, err := a.openRegular(x, unix.O_RDONLY)
	if err != nil {
		r.end(errEnd(err))
		return
	}
	r.onCancel(f)
	defer f.Close()
	r.started(vmimage.Started{Size: st.Size, Mode: st.Mode & 0o7777})
	buf := make([]byte, vmimage.MaxDataChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 && !r.sendData(vmimage.StreamStdout, buf[:n]) {
			return
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.end(errEnd(err))
			return
		}
	}
	r.sendClose(vmimage.StreamStdout)
	r.end(vmimage.End{})
}

// writeFile creates or truncates a file and writes stream 0 to it; the
// End comes once the data is on the file's storage (fsync).
func (a *Agent) writeFile(r *agentReq, x vmimage.FileRequest) {
	mode := x.Mode
	if mode == 0 {
		mode = 0o644
	}
	x.Mode = mode
	f, _, err := a.openRegular(x, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC)
	if err != nil {
		r.end(errEnd(err))
		return
	}
	r.onCancel(f)
	defer f.Close()
	r.started(vmimage.Started{})
	var werr error
	for {
		b, ok := r.next()
		if !ok {
			return
		}
		if b == nil {
			break
		}
		if werr == nil {
			_, werr = f.Write(b)
		}
		r.grant(len(b))
	}
	if werr == nil {
		werr = f.Sync()
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		r.end(errEnd(fmt.Errorf("writing %s: %w", x.Path, werr)))
		return
	}
	r.end(vmimage.End{})
}

// signal delivers a SignalRequest.
func (a *Agent) signal(x vmimage.SignalRequest) vmimage.End {
	sig := unix.Signal(x.Signal)
	var err error
	switch x.Scope {
	case vmimage.SignalAll:
		err = a.signalAll(sig)
	case vmimage.SignalBatch:
		pg := int(a.jobPGID.Load())
		if pg == 0 {
			return vmimage.End{Errno: int(unix.ESRCH), Error: "the job's script is not running"}
		}
		err = unix.Kill(-pg, sig)
	case vmimage.SignalExec:
		a.mu.Lock()
		target := a.reqs[x.Exec]
		a.mu.Unlock()
		pg := 0
		if target != nil {
			target.mu.Lock()
			pg = target.pgid
			target.mu.Unlock()
		}
		if pg == 0 {
			return vmimage.End{Errno: int(unix.ESRCH), Error: fmt.Sprintf("no exec session %d", x.Exec)}
		}
		err = unix.Kill(-pg, sig)
	}
	if err != nil {
		return errEnd(fmt.Errorf("signal %d to %s: %w", x.Signal, x.Scope, err))
	}
	return vmimage.End{}
}
