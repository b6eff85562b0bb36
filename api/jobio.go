package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// Reaching into a running job: exec, signals, files and output. The CLI
// sends these to a controller, which checks the job and its owner and
// proxies them to the job's node; the node checks them again. See
// docs/api.md.

// UserHeader carries the caller's user name on the job I/O routes, from
// the CLI to the controllers and from the controllers to the node. Until
// requests are authenticated (issue #12) it is what the caller says; the
// controllers then set it from the authenticated principal, and the node
// takes it only from a controller's signed assertion.
const UserHeader = "X-Corral-User"

// ExecUpgrade is the Upgrade protocol of POST /v1/jobs/{id}/exec: after the
// 101 answer the connection carries StreamFrames both ways.
const ExecUpgrade = "corral-exec/1"

// ExecRequest is the body of POST /v1/jobs/{id}/exec.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Env adds to (or overrides) the job's environment.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory; the job's when empty.
	Dir string `json:"dir,omitempty"`
	// Root runs the command as root: for admins only.
	Root bool   `json:"root,omitempty"`
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// Limits of an ExecRequest (the guest agent's, which the node enforces
// again).
const (
	MaxExecArgs  = 4096
	MaxExecEnv   = 4096
	MaxExecBytes = 128 << 10
	MaxPathBytes = 4096
)

// Validate checks an exec request; the error names the field.
func (r *ExecRequest) Validate() error {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return &FieldError{Field: "argv", Msg: "no command given: corral exec JOB -- COMMAND [ARGS...]"}
	}
	if len(r.Argv) > MaxExecArgs || len(r.Env) > MaxExecEnv {
		return &FieldError{Field: "argv", Msg: fmt.Sprintf("%d arguments and %d environment entries (at most %d and %d)", len(r.Argv), len(r.Env), MaxExecArgs, MaxExecEnv)}
	}
	total := len(r.Dir)
	for _, a := range r.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return &FieldError{Field: "argv", Msg: "an argument holds a NUL byte"}
		}
		total += len(a)
	}
	for _, kv := range r.Env {
		if i := strings.IndexByte(kv, '='); i <= 0 || strings.IndexByte(kv, 0) >= 0 {
			return &FieldError{Field: "env", Msg: fmt.Sprintf("%q is not NAME=VALUE", clipText(kv))}
		}
		total += len(kv)
	}
	if total > MaxExecBytes {
		return &FieldError{Field: "argv", Msg: fmt.Sprintf("arguments, environment and directory take %d bytes (at most %d)", total, MaxExecBytes)}
	}
	if r.Dir != "" {
		if err := CheckJobPath(r.Dir); err != nil {
			return &FieldError{Field: "dir", Msg: err.Error()}
		}
	}
	return nil
}

// SignalRequest is the body of POST /v1/jobs/{id}/signal.
type SignalRequest struct {
	// Signal is a name (USR1, SIGUSR1) or a number.
	Signal string `json:"signal"`
	// Batch signals only the batch script's process group (scancel -b);
	// otherwise every process of the job gets it.
	Batch bool `json:"batch,omitempty"`
}

// WarnSignal is a job's time-limit warning: Signal goes to the job's
// processes (only the batch script's process group with Batch) BeforeS
// seconds before its time limit.
type WarnSignal struct {
	Signal  int   `json:"signal"`
	BeforeS int64 `json:"before_s"`
	Batch   bool  `json:"batch,omitempty"`
}

// MaxWarnBefore bounds WarnSignal.BeforeS, as Slurm does.
const MaxWarnBefore = 65535

// FileInfo headers of GET /v1/jobs/{id}/file.
const (
	FileModeHeader = "X-Corral-Mode" // octal permission bits
	FileSizeHeader = "X-Corral-Size" // bytes when opened
)

// CheckJobPath checks a path inside a job (corral cp JOB:PATH, exec's
// directory): absolute, or relative to the job's working directory, with
// no NUL byte and no ".." element.
func CheckJobPath(p string) error {
	switch {
	case p == "":
		return errors.New("no path given")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("path of %d bytes (at most %d)", len(p), MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("the path holds a NUL byte")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("%q: a path in a job may not hold \"..\"", clipText(p))
		}
	}
	return nil
}

// JobPath resolves p (checked by CheckJobPath) against the job's working
// directory.
func JobPath(workDir, p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(workDir, p)
}

var signalNames = []string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL",
	10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 16: "STKFLT", 17: "CHLD", 18: "CONT",
	19: "STOP", 20: "TSTP", 21: "TTIN", 22: "TTOU", 23: "URG", 24: "XCPU", 25: "XFSZ", 26: "VTALRM", 27: "PROF",
	28: "WINCH", 29: "IO", 30: "PWR", 31: "SYS"}

// ParseSignal reads a signal as scancel --signal takes it: a name, with
// or without SIG, in any case, or a number from 1 to 64 (Linux's).
func ParseSignal(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("signal %d: give a number from 1 to 64, or a name such as USR1", n)
		}
		return n, nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	for n, v := range signalNames {
		if v != "" && v == name {
			return n, nil
		}
	}
	return 0, fmt.Errorf("signal %q: unknown (use a name such as USR1, TERM, INT, or a number)", clipText(s))
}

// SignalName names signal n as scancel prints it (USR1), or its number.
func SignalName(n int) string {
	if n > 0 && n < len(signalNames) && signalNames[n] != "" {
		return signalNames[n]
	}
	return strconv.Itoa(n)
}

func clipText(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// FieldError is a request field that does not validate.
type FieldError struct {
	Field, Msg string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// The exec stream. After POST /v1/jobs/{id}/exec answers 101, both ends
// send frames: a type byte, a 4-byte big-endian length, the payload.
// There is no window: TCP's own flow control holds a sender back.
type StreamType byte

// Stream frame types. Append only.
const (
	StreamStdin      StreamType = 1 // client → node: bytes for stdin
	StreamStdinClose StreamType = 2 // client → node: end of stdin
	StreamResize     StreamType = 3 // client → node: JSON StreamResizeMsg
	StreamSignal     StreamType = 4 // client → node: JSON SignalRequest for the command
	StreamStdout     StreamType = 5 // node → client
	StreamStderr     StreamType = 6 // node → client
	StreamExit       StreamType = 7 // node → client, last: JSON ExecExit
)

// MaxStreamPayload bounds a stream frame's payload.
const MaxStreamPayload = 1 << 20

// StreamResizeMsg is a StreamResize payload.
type StreamResizeMsg struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ExecExit is how an exec ended: Code, or Signal when a signal killed
// the command, or Error when it could not go on (the node lost the job's
// agent, say).
type ExecExit struct {
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
}

// WriteStreamFrame writes one frame.
func WriteStreamFrame(w io.Writer, t StreamType, payload []byte) error {
	if len(payload) > MaxStreamPayload {
		return fmt.Errorf("stream frame of %d bytes (at most %d)", len(payload), MaxStreamPayload)
	}
	var h [5]byte
	h[0] = byte(t)
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(append(h[:], payload...)); err != nil {
		return err
	}
	return nil
}

// ReadStreamFrame reads one frame; io.EOF at a clean end between frames.
func ReadStreamFrame(r io.Reader) (StreamType, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	t := StreamType(h[0])
	if t < StreamStdin || t > StreamExit {
		return 0, nil, fmt.Errorf("exec stream: unknown frame type %d", h[0])
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxStreamPayload {
		return 0, nil, fmt.Errorf("exec stream: frame of %d bytes (at most %d)", n, MaxStreamPayload)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return t, p, nil
}
