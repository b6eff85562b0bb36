package noded

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"syscall"

	"corral/internal/ident"
)

// JobAgent is implemented by a Handle whose runner can reach into its
// running job: run a command there (corral exec), signal the job's
// processes (corral cancel --signal) and read or write a file as the job's
// user would (corral cp). The vm runner's handle does it through the guest
// agent; the process runner's on the host. The daemon decides who may ask
// and with what; a JobAgent only does what it is asked, as the user it is
// given.
type JobAgent interface {
	// Exec starts a command in the job. The session ends when the command
	// exited and its output was read.
	Exec(ctx context.Context, req ExecRequest) (ExecSession, error)
	// Signal delivers sig to the job's processes: every one of them
	// (SignalAll), or the batch script's process group (SignalBatch).
	Signal(ctx context.Context, sig syscall.Signal, scope string) error
	// ReadFile opens a regular file of the job as u for reading.
	ReadFile(ctx context.Context, path string, u ident.User) (io.ReadCloser, FileInfo, error)
	// WriteFile creates or truncates a regular file of the job as u; the
	// writer's Close reports whether every byte reached the file.
	WriteFile(ctx context.Context, path string, mode fs.FileMode, u ident.User) (io.WriteCloser, error)
}

// The scopes of JobAgent.Signal.
const (
	SignalAll   = "all"
	SignalBatch = "batch"
)

// ExecRequest is a command to run inside a job.
type ExecRequest struct {
	Argv []string
	// Env is the command's whole environment.
	Env []string
	// Dir is the working directory, as the job sees the file system.
	Dir string
	// User is whom it runs as: the job's user, or root for an admin.
	User ident.User
	// TTY gives the command a terminal of Rows × Cols; its stdout then
	// carries everything and its stderr nothing.
	TTY        bool
	Rows, Cols uint16
}

// ExecSession is a command running inside a job.
type ExecSession interface {
	// Stdin is the command's standard input; closing it sends end of file
	// (with a terminal it does nothing).
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	Resize(rows, cols uint16) error
	// Signal delivers sig to the command's process group.
	Signal(sig syscall.Signal) error
	// Wait returns how the command ended, once it exited and Stdout and
	// Stderr were read to their end.
	Wait() (ExecResult, error)
	// Close kills the command if it still runs and frees the session.
	Close() error
}

// ExecResult is how a command ended: its exit code, or the signal that
// killed it.
type ExecResult struct {
	Code   int
	Signal int
}

// FileInfo describes a file ReadFile opened.
type FileInfo struct {
	Size int64
	Mode fs.FileMode
}

// ErrAgentUnavailable is wrapped by JobAgent errors that say the job
// cannot be reached (its VM has no agent, or the agent does not answer),
// rather than that the request failed.
var ErrAgentUnavailable = errors.New("the job's agent is not reachable")
