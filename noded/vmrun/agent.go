package vmrun

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"corral/noded"
	"corral/vmimage"
)

// agentClient is the node's end of a VM's agent channel (see vmimage,
// "The guest agent"): QEMU's chardev socket, which QEMU serves to one
// client at a time. It multiplexes requests over one session and opens a
// new session whenever the old one broke (QEMU gone, a daemon restarted,
// or the VM migrated and retarget named the destination's socket).
// Requests of a broken session fail with errAgentLost: bytes in flight
// are not replayed, and the guest abandons them too.
type agentClient struct {
	log *slog.Logger

	mu      sync.Mutex
	path    string
	sess    *agentSession
	dialing chan struct{} // closed when the connect in progress ends
	nextID  uint32
}

// errAgentLost is wrapped by the errors of requests whose session broke.
var errAgentLost = errors.New("the connection to the guest agent was lost (the VM ended, migrated, or its node daemon restarted)")

// agentHelloEvery is how often a connect repeats its Hello: a guest still
// booting reads the channel only once its agent runs.
const agentHelloEvery = 300 * time.Millisecond

func newAgentClient(log *slog.Logger, path string) *agentClient {
	var b [4]byte
	rand.Read(b[:])
	// Ids start at random so that frames of an earlier daemon's requests
	// still on the channel do not match this one's.
	return &agentClient{log: log, path: path, nextID: binary.BigEndian.Uint32(b[:]) | 1}
}

// retarget points the client at another socket (a migrated VM's
// destination) and drops the current session.
func (c *agentClient) retarget(path string) {
	c.mu.Lock()
	c.path = path
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	if s != nil {
		s.fail(errAgentLost)
	}
}

// movedFrom reports whether the client was retargeted away from path, the
// VM's own socket: to a migration's destination.
func (c *agentClient) movedFrom(path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path != path
}

// close ends the session; later requests open a new one.
func (c *agentClient) close() { c.retarget(c.currentPath()) }

func (c *agentClient) currentPath() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path
}

// session returns the live session, connecting when there is none. Only
// one caller connects; the others wait for it.
func (c *agentClient) session(ctx context.Context) (*agentSession, error) {
	for {
		c.mu.Lock()
		if c.sess != nil && !c.sess.broken() {
			s := c.sess
			c.mu.Unlock()
			return s, nil
		}
		if wait := c.dialing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.dialing = done
		path := c.path
		c.mu.Unlock()
		s, err := connectAgent(ctx, c.log, path)
		c.mu.Lock()
		c.dialing = nil
		if err == nil && c.path == path {
			c.sess = s
		} else if err == nil {
			s.fail(errAgentLost) // retargeted meanwhile
			err = errAgentLost
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// start sends a request's first frame and returns it, registered.
func (c *agentClient) start(ctx context.Context, typ vmimage.FrameType, msg any) (*agentReq, error) {
	payload := vmimage.EncodeMessage(msg)
	if len(payload) > vmimage.MaxFramePayload {
		return nil, fmt.Errorf("the request takes %d bytes encoded (at most %d): send less", len(payload), vmimage.MaxFramePayload)
	}
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	if c.nextID == 0 {
		c.nextID = 1
	}
	c.mu.Unlock()
	r := s.register(id)
	if err := s.send(vmimage.Frame{Type: typ, ID: id, Payload: payload}); err != nil {
		s.forget(id)
		return nil, err
	}
	return r, nil
}

// connectAgent dials the socket and opens a session: a Hello with a fresh
// nonce, repeated until the guest answers it or ctx ends. What arrives
// before that answer is an earlier session's and is dropped.
func connectAgent(ctx context.Context, log *slog.Logger, path string) (*agentSession, error) {
	var conn net.Conn
	var err error
	for {
		var d net.Dialer
		if conn, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: connecting to %s: %v", noded.ErrAgentUnavailable, path, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	var nb [12]byte
	rand.Read(nb[:])
	nonce := hex.EncodeToString(nb[:])
	hello := vmimage.AppendFrame(nil, vmimage.Frame{Type: vmimage.FrameHello,
		Payload: vmimage.EncodeMessage(vmimage.Hello{Version: vmimage.AgentVersion, Nonce: nonce})})
	var dec vmimage.FrameDecoder
	buf := make([]byte, 64<<10)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	for {
		if _, err := conn.Write(hello); err != nil {
			conn.Close()
			return nil, fmt.Errorf("%w: %s: %v", noded.ErrAgentUnavailable, path, err)
		}
		conn.SetReadDeadline(time.Now().Add(agentHelloEvery))
		for {
			n, err := conn.Read(buf)
			dec.Write(buf[:n])
			if h, ok := helloAnswer(&dec, nonce); ok {
				if h.Version != vmimage.AgentVersion {
					conn.Close()
					return nil, fmt.Errorf("%w: the guest's agent speaks version %d, this node %d: boot the job with an image of this corral (make image)",
						noded.ErrAgentUnavailable, h.Version, vmimage.AgentVersion)
				}
				conn.SetDeadline(time.Time{})
				return newAgentSession(log, conn, &dec), nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			if err != nil {
				conn.Close()
				if ctx.Err() != nil {
					return nil, fmt.Errorf("%w: the guest's agent did not answer on %s: %v", noded.ErrAgentUnavailable, path, ctx.Err())
				}
				return nil, fmt.Errorf("%w: %s: %v", noded.ErrAgentUnavailable, path, err)
			}
		}
		// A frame left half sent by an earlier session may hold up the
		// answer: give up on it.
		dec.Resync()
	}
}

// helloAnswer takes frames off dec until the Hello that answers nonce.
func helloAnswer(dec *vmimage.FrameDecoder, nonce string) (vmimage.Hello, bool) {
	for {
		f, ok := dec.Next()
		if !ok {
			return vmimage.Hello{}, false
		}
		var h vmimage.Hello
		if f.Type == vmimage.FrameHello && f.ID == 0 && vmimage.DecodeMessage(f.Payload, &h) == nil && h.Validate() == nil && h.Nonce == nonce {
			return h, true
		}
	}
}

// agentSession is one connection to the agent and its requests.
type agentSession struct {
	log  *slog.Logger
	conn net.Conn
	wmu  sync.Mutex

	mu   sync.Mutex
	reqs map[uint32]*agentReq
	err  error // set once broken
}

func newAgentSession(log *slog.Logger, conn net.Conn, dec *vmimage.FrameDecoder) *agentSession {
	s := &agentSession{log: log, conn: conn, reqs: map[uint32]*agentReq{}}
	go s.read(dec)
	return s
}

func (s *agentSession) broken() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// read dispatches frames to their requests until the connection fails.
func (s *agentSession) read(dec *vmimage.FrameDecoder) {
	buf := make([]byte, 64<<10)
	for {
		for {
			f, ok := dec.Next()
			if !ok {
				break
			}
			s.mu.Lock()
			r := s.reqs[f.ID]
			s.mu.Unlock()
			if r != nil {
				r.take(f)
			}
		}
		n, err := s.conn.Read(buf)
		if err != nil {
			s.fail(fmt.Errorf("%w: %v", errAgentLost, err))
			return
		}
		dec.Write(buf[:n])
	}
}

// fail breaks the session: every request fails with err.
func (s *agentSession) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	reqs := s.reqs
	s.reqs = nil
	s.mu.Unlock()
	s.conn.Close()
	for _, r := range reqs {
		r.lost(err)
	}
}

func (s *agentSession) send(f vmimage.Frame) error {
	b := vmimage.AppendFrame(nil, f)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.broken() {
		return errAgentLost
	}
	if _, err := s.conn.Write(b); err != nil {
		s.fail(fmt.Errorf("%w: %v", errAgentLost, err))
		return errAgentLost
	}
	return nil
}

func (s *agentSession) register(id uint32) *agentReq {
	r := newAgentReq(s, id)
	s.mu.Lock()
	if s.err != nil {
		r.lostLocked(s.err)
	} else {
		s.reqs[id] = r
	}
	s.mu.Unlock()
	return r
}

func (s *agentSession) forget(id uint32) {
	s.mu.Lock()
	delete(s.reqs, id)
	s.mu.Unlock()
}

// agentReq is the node's end of one request: what the guest sent for it,
// buffered per stream within the window this side grants.
type agentReq struct {
	s  *agentSession
	id uint32

	mu      sync.Mutex
	cond    *sync.Cond
	started *vmimage.Started
	end     *vmimage.End
	err     error // the session broke, or the guest broke the protocol
	in      [3]bytes.Buffer
	closed  [3]bool
	// unacked counts what was read of a stream and not granted back
	// yet; credit is what this side may still send on stream 0.
	unacked [3]int
	credit  int
}

func newAgentReq(s *agentSession, id uint32) *agentReq {
	r := &agentReq{s: s, id: id, credit: vmimage.AgentWindow}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// take records a frame of the guest's. It never blocks: the guest keeps
// within the window, and one that does not loses the request.
func (r *agentReq) take(f vmimage.Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.cond.Broadcast()
	if r.err != nil || r.end != nil {
		return
	}
	switch f.Type {
	case vmimage.FrameStarted:
		var st vmimage.Started
		if err := decodeChecked(f.Payload, &st); err != nil {
			r.violate(err)
			return
		}
		r.started = &st
	case vmimage.FrameData:
		s, data, err := vmimage.ParseData(f.Payload)
		if err != nil || s == vmimage.StreamStdin || r.closed[s] {
			r.violate(fmt.Errorf("bad data frame"))
			return
		}
		if r.in[s].Len()+len(data) > vmimage.AgentWindow {
			r.violate(fmt.Errorf("the guest sent past its window on stream %d", s))
			return
		}
		r.in[s].Write(data)
	case vmimage.FrameClose:
		if s, err := vmimage.ParseClose(f.Payload); err == nil {
			r.closed[s] = true
		}
	case vmimage.FrameWindow:
		s, n, err := vmimage.ParseWindow(f.Payload)
		if err != nil || s != vmimage.StreamStdin {
			r.violate(fmt.Errorf("bad window frame"))
			return
		}
		r.credit = min(r.credit+int(n), vmimage.AgentWindow)
	case vmimage.FrameEnd:
		var e vmimage.End
		if err := decodeChecked(f.Payload, &e); err != nil {
			r.violate(err)
			return
		}
		r.end = &e
		r.closed[1], r.closed[2] = true, true
		// No path holds the session's lock while it takes a request's.
		r.s.forget(r.id)
	}
}

func decodeChecked[T any, P interface {
	*T
	Validate() error
}](payload []byte, v P) error {
	if err := vmimage.DecodeMessage(payload, v); err != nil {
		return err
	}
	return v.Validate()
}

// violate fails a request whose guest broke the protocol, and cancels it
// there. r.mu is held.
func (r *agentReq) violate(err error) {
	r.err = fmt.Errorf("the guest agent broke the protocol: %w", err)
	r.s.log.Warn("guest agent protocol violation", "request", r.id, "err", err)
	go func() {
		r.s.send(vmimage.Frame{Type: vmimage.FrameCancel, ID: r.id})
		r.s.forget(r.id)
	}()
}

func (r *agentReq) lost(err error) {
	r.mu.Lock()
	r.lostLocked(err)
	r.mu.Unlock()
}

func (r *agentReq) lostLocked(err error) {
	if r.err == nil && r.end == nil {
		r.err = err
	}
	r.cond.Broadcast()
}

// waitStarted waits for the guest's Started, or for the End that refused
// the request.
func (r *agentReq) waitStarted(ctx context.Context) (vmimage.Started, error) {
	stop := context.AfterFunc(ctx, func() { r.lost(ctx.Err()) })
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.started == nil && r.end == nil && r.err == nil {
		r.cond.Wait()
	}
	switch {
	case r.started != nil:
		return *r.started, nil
	case r.end != nil:
		return vmimage.Started{}, endError(*r.end)
	}
	go r.cancel()
	return vmimage.Started{}, r.err
}

// waitEnd waits for the request's End.
func (r *agentReq) waitEnd(ctx context.Context) (vmimage.End, error) {
	stop := context.AfterFunc(ctx, func() { r.lost(ctx.Err()) })
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.end == nil && r.err == nil {
		r.cond.Wait()
	}
	if r.end != nil {
		return *r.end, nil
	}
	go r.cancel()
	return vmimage.End{}, r.err
}

// read reads stream s; io.EOF once the guest closed it and all was read.
// What is read is granted back to the guest in batches.
func (r *agentReq) read(s byte, p []byte) (int, error) {
	r.mu.Lock()
	for r.in[s].Len() == 0 && !r.closed[s] && r.err == nil {
		r.cond.Wait()
	}
	if r.in[s].Len() == 0 {
		err := r.err
		r.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	n, _ := r.in[s].Read(p)
	r.unacked[s] += n
	grant := 0
	if r.unacked[s] >= vmimage.AgentWindow/4 || r.in[s].Len() == 0 {
		grant, r.unacked[s] = r.unacked[s], 0
	}
	done := r.closed[s]
	r.mu.Unlock()
	if grant > 0 && !done {
		r.s.send(vmimage.Frame{Type: vmimage.FrameWindow, ID: r.id, Payload: vmimage.WindowPayload(s, uint32(grant))})
	}
	return n, nil
}

// write sends p on stream 0 within the guest's window.
func (r *agentReq) write(p []byte) (int, error) {
	sent := 0
	for len(p) > 0 {
		r.mu.Lock()
		for r.credit == 0 && r.err == nil && r.end == nil {
			r.cond.Wait()
		}
		if r.err != nil || r.end != nil {
			err := r.err
			r.mu.Unlock()
			if err == nil {
				err = syscall.EPIPE // the request ended: nobody reads stream 0
			}
			return sent, err
		}
		n := min(len(p), r.credit, vmimage.MaxDataChunk)
		r.credit -= n
		r.mu.Unlock()
		if err := r.s.send(vmimage.Frame{Type: vmimage.FrameData, ID: r.id, Payload: vmimage.DataPayload(vmimage.StreamStdin, p[:n])}); err != nil {
			return sent, err
		}
		sent += n
		p = p[n:]
	}
	return sent, nil
}

func (r *agentReq) closeStdin() error {
	return r.s.send(vmimage.Frame{Type: vmimage.FrameClose, ID: r.id, Payload: []byte{vmimage.StreamStdin}})
}

// cancel abandons the request; the guest kills its process or closes its
// file.
func (r *agentReq) cancel() {
	r.mu.Lock()
	ended := r.end != nil
	r.mu.Unlock()
	if !ended {
		r.s.send(vmimage.Frame{Type: vmimage.FrameCancel, ID: r.id})
	}
	r.s.forget(r.id)
	r.lost(errors.New("the request was cancelled"))
}

// endError turns a guest's End that reports a failure into an error that
// wraps its errno (errors.Is(err, fs.ErrPermission) holds for EACCES).
func endError(e vmimage.End) error {
	if e.Errno == 0 && e.Error == "" {
		return nil
	}
	return &agentError{msg: e.Error, errno: syscall.Errno(e.Errno)}
}

type agentError struct {
	msg   string
	errno syscall.Errno
}

func (e *agentError) Error() string {
	if e.msg == "" {
		return e.errno.Error()
	}
	return e.msg
}

func (e *agentError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}
