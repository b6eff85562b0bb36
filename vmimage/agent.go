package vmimage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"strings"
)

// The guest agent's channel: a virtio-serial port of this name (see the
// package documentation, "The guest agent").
const AgentPortName = "corral.agent"

// AgentVersion is the version of the agent's message set, exchanged in
// Hello. Version 1 is the first.
const AgentVersion = 1

// Frame format constants.
const (
	// frameVersion is byte 2 of every frame: the frame format itself. A
	// change there is incompatible both ways.
	frameVersion = 1
	// FrameHeaderSize is the size of a frame's header.
	FrameHeaderSize = 20
	// MaxFramePayload bounds a frame's payload; a header that claims more
	// is not a header. An exec carries the job's whole environment, which
	// a submission may make 1 MiB.
	MaxFramePayload = 4 << 20
	// MaxDataChunk is the most data a sender puts in one FrameData.
	MaxDataChunk = 64 << 10
	// AgentWindow is each stream's initial window: the bytes of data a
	// sender may have sent on a stream beyond what the receiver granted
	// back with FrameWindow.
	AgentWindow = 256 << 10
)

var frameMagic = [2]byte{0xC4, 0x7A}

// FrameType is byte 3 of a frame.
type FrameType uint8

// The frame types. Append only: a number is never reused.
const (
	// FrameHello (both ways, id 0, JSON Hello) opens a session.
	FrameHello FrameType = 1
	// FrameExec (host → guest, JSON ExecRequest) starts a process.
	FrameExec FrameType = 2
	// FrameSignal (host → guest, JSON SignalRequest) signals processes.
	FrameSignal FrameType = 3
	// FrameReadFile (host → guest, JSON FileRequest) reads a file.
	FrameReadFile FrameType = 4
	// FrameWriteFile (host → guest, JSON FileRequest) writes a file.
	FrameWriteFile FrameType = 5
	// FrameData (both ways) carries a stream's bytes: one byte of stream
	// number, then the data.
	FrameData FrameType = 6
	// FrameClose (both ways) ends a stream: one byte of stream number.
	FrameClose FrameType = 7
	// FrameWindow (both ways) grants the sender of a stream more bytes:
	// one byte of stream number, four of count (big-endian).
	FrameWindow FrameType = 8
	// FrameCancel (host → guest, empty) abandons a request: its process
	// is killed, its file closed.
	FrameCancel FrameType = 9
	// FrameResize (host → guest, JSON Resize) resizes an exec's terminal.
	FrameResize FrameType = 10
	// FrameStarted (guest → host, JSON Started) says a request began.
	FrameStarted FrameType = 11
	// FrameEnd (guest → host, JSON End) is the last frame of a request.
	FrameEnd FrameType = 12
)

func (t FrameType) String() string {
	names := map[FrameType]string{FrameHello: "hello", FrameExec: "exec", FrameSignal: "signal",
		FrameReadFile: "read-file", FrameWriteFile: "write-file", FrameData: "data", FrameClose: "close",
		FrameWindow: "window", FrameCancel: "cancel", FrameResize: "resize", FrameStarted: "started", FrameEnd: "end", FrameJob: "job"}
	if n, ok := names[t]; ok {
		return n
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// The streams of a request.
const (
	StreamStdin  = 0 // exec's stdin; a written file's bytes
	StreamStdout = 1 // exec's stdout (and, with a terminal, its stderr); a read file's bytes
	StreamStderr = 2 // exec's stderr
)

// Frame is one frame of the agent channel.
type Frame struct {
	Type FrameType
	// ID names the request the frame belongs to; 0 is the session's own
	// (Hello).
	ID      uint32
	Payload []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends f's wire form to dst. A payload over
// MaxFramePayload is a programming error: it panics.
func AppendFrame(dst []byte, f Frame) []byte {
	if len(f.Payload) > MaxFramePayload {
		panic(fmt.Sprintf("agent frame of %d bytes (at most %d)", len(f.Payload), MaxFramePayload))
	}
	var h [FrameHeaderSize]byte
	h[0], h[1], h[2], h[3] = frameMagic[0], frameMagic[1], frameVersion, byte(f.Type)
	binary.BigEndian.PutUint32(h[4:], f.ID)
	binary.BigEndian.PutUint32(h[8:], uint32(len(f.Payload)))
	binary.BigEndian.PutUint32(h[12:], crc32.Checksum(f.Payload, castagnoli))
	binary.BigEndian.PutUint32(h[16:], crc32.Checksum(h[:16], castagnoli))
	return append(append(dst, h[:]...), f.Payload...)
}

// FrameDecoder splits a byte stream into frames. It resynchronises after
// garbage: bytes that do not start a frame whose header and payload check
// out are skipped one at a time. That is how a session survives what a
// reconnection leaves on the channel (the tail of a frame sent to the
// previous connection, or the head of one it never finished). Feed it with
// Write, take frames with Next.
type FrameDecoder struct {
	buf []byte // buf[off:] is what is not decoded yet
	off int
	// Skipped counts the bytes dropped as garbage.
	Skipped int
}

// Write appends bytes read from the channel. It never fails.
func (d *FrameDecoder) Write(p []byte) (int, error) {
	if d.off > 0 && d.off >= len(d.buf)/2 {
		d.buf = d.buf[:copy(d.buf, d.buf[d.off:])]
		d.off = 0
	}
	d.buf = append(d.buf, p...)
	return len(p), nil
}

// Reset drops everything buffered: the channel was reconnected.
func (d *FrameDecoder) Reset() {
	d.Skipped += d.Buffered()
	d.buf, d.off = d.buf[:0], 0
}

// Resync gives up on the frame being received: its first byte is dropped
// and what follows is searched for a frame again. A reader calls it when a
// frame stays incomplete while it expects an answer (a header inside the
// tail of an earlier session's data may claim a long payload).
func (d *FrameDecoder) Resync() {
	if d.Buffered() > 0 {
		d.drop(1)
	}
}

// Buffered returns the number of bytes held that are not a frame yet.
func (d *FrameDecoder) Buffered() int { return len(d.buf) - d.off }

// Next returns the next complete frame, false when more bytes are needed.
// The frame's payload is its own copy.
func (d *FrameDecoder) Next() (Frame, bool) {
	for {
		d.drop(d.syncPoint())
		b := d.buf[d.off:]
		if len(b) < FrameHeaderSize {
			return Frame{}, false
		}
		h := b[:FrameHeaderSize]
		n := binary.BigEndian.Uint32(h[8:])
		if h[2] != frameVersion || binary.BigEndian.Uint32(h[16:]) != crc32.Checksum(h[:16], castagnoli) || n > MaxFramePayload {
			d.drop(1)
			continue
		}
		if len(b) < FrameHeaderSize+int(n) {
			return Frame{}, false
		}
		payload := b[FrameHeaderSize : FrameHeaderSize+int(n)]
		if binary.BigEndian.Uint32(h[12:]) != crc32.Checksum(payload, castagnoli) {
			d.drop(1)
			continue
		}
		f := Frame{Type: FrameType(h[3]), ID: binary.BigEndian.Uint32(h[4:]), Payload: append([]byte(nil), payload...)}
		d.off += FrameHeaderSize + int(n)
		return f, true
	}
}

// syncPoint returns how many bytes precede the first one that may start
// a frame: the first magic, or the last byte when it may be the magic's
// first half.
func (d *FrameDecoder) syncPoint() int {
	b := d.buf[d.off:]
	for i := 0; i < len(b); i++ {
		if b[i] != frameMagic[0] {
			continue
		}
		if i+1 == len(b) || b[i+1] == frameMagic[1] {
			return i
		}
	}
	return len(b)
}

func (d *FrameDecoder) drop(n int) {
	d.Skipped += n
	d.off += n
}

// DataPayload builds a FrameData payload.
func DataPayload(stream byte, data []byte) []byte {
	return append([]byte{stream}, data...)
}

// ParseData splits a FrameData payload into its stream and data.
func ParseData(p []byte) (stream byte, data []byte, err error) {
	if len(p) < 1 || p[0] > StreamStderr {
		return 0, nil, errors.New("data frame without a valid stream number")
	}
	return p[0], p[1:], nil
}

// ParseClose reads a FrameClose payload.
func ParseClose(p []byte) (byte, error) {
	if len(p) != 1 || p[0] > StreamStderr {
		return 0, errors.New("close frame without a valid stream number")
	}
	return p[0], nil
}

// WindowPayload builds a FrameWindow payload granting n more bytes.
func WindowPayload(stream byte, n uint32) []byte {
	b := []byte{stream, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

// ParseWindow reads a FrameWindow payload. A grant of 0 or of more than
// AgentWindow is refused: a receiver never grants more than it was sent.
func ParseWindow(p []byte) (stream byte, n uint32, err error) {
	if len(p) != 5 || p[0] > StreamStderr {
		return 0, 0, errors.New("window frame without a valid stream number")
	}
	n = binary.BigEndian.Uint32(p[1:])
	if n == 0 || n > AgentWindow {
		return 0, 0, fmt.Errorf("window frame grants %d bytes (1 to %d)", n, AgentWindow)
	}
	return p[0], n, nil
}

// Hello opens a session, each way. The host sends a fresh Nonce and takes
// as the guest's answer only a Hello carrying it back: anything the
// channel held before is from an earlier session.
type Hello struct {
	Version int    `json:"version"`
	Nonce   string `json:"nonce"`
	// Agent names the answering program (guest only).
	Agent string `json:"agent,omitempty"`
}

// AgentUser is whom an exec or a file operation acts as. UID 0 is root:
// the node sends it only for a job that runs as root or an admin's
// request.
type AgentUser struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// ExecRequest starts a process in the job's root. Argv[0] without a slash
// is looked up in the PATH of Env, inside the job's root.
type ExecRequest struct {
	Argv []string  `json:"argv"`
	Env  []string  `json:"env"`
	Dir  string    `json:"dir"`
	User AgentUser `json:"user"`
	// TTY gives the process a terminal of Rows × Cols as its stdin,
	// stdout and stderr; its output then comes on StreamStdout alone.
	TTY  bool   `json:"tty,omitempty"`
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
}

// Signal scopes.
const (
	// SignalAll signals every process of the job: everything in the guest
	// but init (the batch script, what it started, and exec sessions).
	SignalAll = "all"
	// SignalBatch signals the batch script's process group.
	SignalBatch = "batch"
	// SignalExec signals one exec session's process group (Exec).
	SignalExec = "exec"
)

// SignalRequest delivers a signal.
type SignalRequest struct {
	Signal int    `json:"signal"`
	Scope  string `json:"scope"`
	// Exec is the request id of the exec session, for SignalExec.
	Exec uint32 `json:"exec,omitempty"`
}

// FileRequest reads or writes a file in the job's root, as User: the
// guest kernel checks the user's permissions. Path is absolute and is
// resolved inside the job's root (symbolic links included). A write
// creates or truncates the file with Mode (umask 022 applies).
type FileRequest struct {
	Path string    `json:"path"`
	User AgentUser `json:"user"`
	Mode uint32    `json:"mode,omitempty"`
}

// Resize changes an exec's terminal size.
type Resize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Started says a request began: an exec's process id, a read file's size
// and mode.
type Started struct {
	PID  int    `json:"pid,omitempty"`
	Size int64  `json:"size,omitempty"`
	Mode uint32 `json:"mode,omitempty"`
}

// End is a request's last frame. Errno (a Linux errno) and Error say why
// a request failed; an exec that ran has Code, or Signal when a signal
// killed it.
type End struct {
	Code   int    `json:"code,omitempty"`
	Signal int    `json:"signal,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Limits of requests, checked on both sides.
const (
	MaxExecArgs    = 4096
	MaxExecEnv     = 16384
	MaxExecBytes   = 3 << 20 // argv, env and dir together
	MaxPathBytes   = 4096
	maxSignal      = 64
	maxNameBytes   = 256
	maxGroups      = 1024
	maxNonceBytes  = 64
	maxErrorBytes  = 4096
	maxAgentString = 256
)

// DecodeMessage decodes a JSON payload strictly (unknown fields refused)
// into v.
func DecodeMessage(p []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(p)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed agent message: %w", err)
	}
	if dec.More() {
		return errors.New("malformed agent message: data after the JSON value")
	}
	return nil
}

// EncodeMessage encodes a message as a frame payload.
func EncodeMessage(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the package's own types are encoded
	}
	return b
}

// Validate checks an exec request.
func (r *ExecRequest) Validate() error {
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return errors.New("exec: no command given")
	}
	if len(r.Argv) > MaxExecArgs || len(r.Env) > MaxExecEnv {
		return fmt.Errorf("exec: %d arguments and %d environment entries (at most %d and %d)", len(r.Argv), len(r.Env), MaxExecArgs, MaxExecEnv)
	}
	total := len(r.Dir)
	for _, a := range r.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return errors.New("exec: an argument holds a NUL byte")
		}
		total += len(a)
	}
	for _, kv := range r.Env {
		if i := strings.IndexByte(kv, '='); i <= 0 || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("exec: environment entry %q is not NAME=VALUE", clip(kv))
		}
		total += len(kv)
	}
	if total > MaxExecBytes {
		return fmt.Errorf("exec: arguments, environment and directory take %d bytes (at most %d)", total, MaxExecBytes)
	}
	if err := checkPath("exec: directory", r.Dir); err != nil {
		return err
	}
	return r.User.validate()
}

// Validate checks a signal request.
func (r *SignalRequest) Validate() error {
	if r.Signal < 1 || r.Signal > maxSignal {
		return fmt.Errorf("signal %d: give a signal number from 1 to %d", r.Signal, maxSignal)
	}
	switch r.Scope {
	case SignalAll, SignalBatch:
		if r.Exec != 0 {
			return fmt.Errorf("signal: scope %s takes no exec id", r.Scope)
		}
	case SignalExec:
		if r.Exec == 0 {
			return errors.New("signal: scope exec needs the exec's request id")
		}
	default:
		return fmt.Errorf("signal: scope %q: use all, batch or exec", clip(r.Scope))
	}
	return nil
}

// Validate checks a file request.
func (r *FileRequest) Validate() error {
	if err := checkPath("file", r.Path); err != nil {
		return err
	}
	if r.Path == "/" {
		return errors.New("file: / is a directory")
	}
	if r.Mode&^0o777 != 0 {
		return fmt.Errorf("file: mode %#o: only permission bits (0 to 0777) may be given", r.Mode)
	}
	return r.User.validate()
}

// Validate checks a Hello.
func (h *Hello) Validate() error {
	if h.Version < 1 {
		return fmt.Errorf("hello: version %d", h.Version)
	}
	if h.Nonce == "" || len(h.Nonce) > maxNonceBytes || len(h.Agent) > maxAgentString {
		return errors.New("hello: nonce missing or too long")
	}
	return nil
}

// Validate checks an End; the guest is the job's, so its answers are
// checked too.
func (e *End) Validate() error {
	if e.Code < 0 || e.Code > 255 || e.Signal < 0 || e.Signal > maxSignal || e.Errno < 0 || e.Errno > 4095 || len(e.Error) > maxErrorBytes {
		return fmt.Errorf("end: code %d, signal %d, errno %d out of range", e.Code, e.Signal, e.Errno)
	}
	return nil
}

// Validate checks a Started.
func (s *Started) Validate() error {
	if s.PID < 0 || s.Size < 0 {
		return fmt.Errorf("started: pid %d, size %d", s.PID, s.Size)
	}
	return nil
}

func (u *AgentUser) validate() error {
	if u.Name == "" || len(u.Name) > maxNameBytes || strings.ContainsAny(u.Name, "\x00\n:/") {
		return fmt.Errorf("user %q: not a user name", clip(u.Name))
	}
	if len(u.Groups) > maxGroups {
		return fmt.Errorf("user %s: %d groups (at most %d)", u.Name, len(u.Groups), maxGroups)
	}
	return nil
}

// checkPath refuses what is not a clean absolute path.
func checkPath(what, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s: no path given", what)
	case len(p) > MaxPathBytes:
		return fmt.Errorf("%s: path of %d bytes (at most %d)", what, len(p), MaxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%s: path holds a NUL byte", what)
	case !path.IsAbs(p) || path.Clean(p) != p:
		return fmt.Errorf("%s: %q is not a clean absolute path", what, clip(p))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
