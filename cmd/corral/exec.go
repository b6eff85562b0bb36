package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"corral/api"
	"corral/internal/getopt"
)

// runExec runs a command in a running job, with stdin, stdout, stderr and
// the exit code: `corral exec JOB [--] CMD...`, what `srun --jobid=JOB
// --overlap CMD` does in Slurm.
func runExec(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "exec", getopt.StopAtNonOption, args,
		flag('t', "pty", "give the command a terminal (this one, in raw mode)"),
		flag(0, "root", "run as root rather than as the job's user (root only)"),
		valued('e', "env", "NAME=VALUE", "add to the job's environment (repeatable)"),
		valued('D', "chdir", "DIR", "working directory in the job (default: the job's)"),
	)
	if err != nil {
		return err
	}
	if len(o.args) < 1 {
		return fmt.Errorf("exec: give a job id and a command: corral exec JOB [--] CMD [ARGS...]")
	}
	id, err := parseOneJobID(o.args[0])
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	argv := o.args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	req := api.ExecRequest{Argv: argv, Env: o.all["env"], Dir: o.get("chdir"), Root: o.has("root"), TTY: o.has("pty")}
	return execInto(ctx, env, id, req)
}

func parseOneJobID(s string) (uint64, error) {
	ids, err := parseJobIDs([]string{s})
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("%q: give one job id", s)
	}
	return ids[0], nil
}

// execInto runs req in job id and returns the command's exit status as
// this process's: its code, or 128+N when signal N killed it.
func execInto(ctx context.Context, env *cliEnv, id uint64, req api.ExecRequest) error {
	if err := req.Validate(); err != nil {
		return fmt.Errorf("exec into job %d: %w", id, err)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	var term *rawTerminal
	if req.TTY {
		if t := os.Getenv("TERM"); t != "" {
			req.Env = append(req.Env, "TERM="+t)
		}
		if term, err = makeRawTerminal(os.Stdin); err == nil {
			req.Rows, req.Cols = term.size()
			defer term.restore()
		}
	}
	// Signals go to the command, not to this stream: the stream outlives
	// the caller's ^C.
	ctx = context.WithoutCancel(ctx)
	s, err := cl.Exec(ctx, id, req)
	if err != nil {
		return execError(id, req.Argv[0], err)
	}
	defer s.Close()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGWINCH {
				if term != nil {
					s.Resize(term.size())
				}
				continue
			}
			s.Signal(api.SignalName(int(sig.(syscall.Signal))))
		}
	}()
	go func() {
		io.Copy(s, env.stdin)
		s.CloseStdin()
	}()
	return relayOutput(env, s)
}

// relayOutput copies the command's output here until its exit frame.
func relayOutput(env *cliEnv, s *api.ExecStream) error {
	for {
		t, p, err := s.Next()
		if err != nil {
			return fmt.Errorf("exec: the stream broke: %w", err)
		}
		switch t {
		case api.StreamStdout:
			env.stdout.Write(p)
		case api.StreamStderr:
			env.stderr.Write(p)
		case api.StreamExit:
			var x api.ExecExit
			if err := json.Unmarshal(p, &x); err != nil {
				return fmt.Errorf("exec: a bad exit frame: %w", err)
			}
			switch {
			case x.Error != "":
				return errors.New("exec: " + x.Error)
			case x.Signal > 0:
				return exitStatus(128 + x.Signal)
			case x.Code != 0:
				return exitStatus(x.Code)
			}
			return nil
		}
	}
}

// execError says why a command could not start; a command that is not
// there or cannot run exits 127 or 126, as from a shell.
func execError(id uint64, cmd string, err error) error {
	var ae *api.APIError
	if errors.As(err, &ae) {
		switch ae.Errno {
		case "ENOENT":
			return &cmdError{code: 127, msg: ae.Message}
		case "EACCES", "ENOEXEC":
			return &cmdError{code: 126, msg: ae.Message}
		}
	}
	return fmt.Errorf("exec into job %d: %w", id, err)
}

// cmdError is an error printed like any other that exits with code.
type cmdError struct {
	code int
	msg  string
}

func (e *cmdError) Error() string { return e.msg }

// rawTerminal is this process's terminal in raw mode, for --pty.
type rawTerminal struct {
	fd   int
	prev unix.Termios
}

func makeRawTerminal(f *os.File) (*rawTerminal, error) {
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	rt := &rawTerminal{fd: fd, prev: *t}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return nil, err
	}
	return rt, nil
}

func (t *rawTerminal) size() (uint16, uint16) {
	ws, err := unix.IoctlGetWinsize(t.fd, unix.TIOCGWINSZ)
	if err != nil {
		return 24, 80
	}
	return ws.Row, ws.Col
}

func (t *rawTerminal) restore() { unix.IoctlSetTermios(t.fd, unix.TCSETS, &t.prev) }
