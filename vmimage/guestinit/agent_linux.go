//go:build linux

package guestinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// Agent is the guest agent: it serves the node's requests on the agent
// port (see vmimage, "The guest agent") and does nothing else. It starts
// no process and touches no file on its own: every action is a request's.
// The node is the only party on the port; the agent still checks every
// request, and keeps working while the job runs (each request has its own
// goroutines; the reader never blocks on one).
type Agent struct {
	port io.ReadWriter
	// root is the job's root ("" is init's own); rootFD an O_PATH
	// descriptor of it, which file requests resolve in. They are set once
	// (setRoot), before ready is closed: requests wait for it.
	root   string
	rootFD int
	ready  chan struct{}
	// onJob takes the job of a guest restored from a warm start's
	// snapshot (FrameJob); nil refuses it. jobTaken says it took one.
	onJob    func(vmimage.JobStart, []byte) error
	jobTaken atomic.Bool
	// hostSignal wakes Serve when the host connects (signalOnConnect);
	// nil: Serve looks again every 50 ms.
	hostSignal <-chan os.Signal
	reaper     *reaper
	logf       func(string, ...any)
	// signalAll delivers a SignalAll: kill(-1) from PID 1, which spares
	// only init.
	signalAll func(unix.Signal) error
	// exitOnEOF ends Serve when the port reports end of file (tests on a
	// socket); the guest's port reports it whenever the host disconnects,
	// and Serve waits for the next connection.
	exitOnEOF bool
	// jobPGID is the batch script's process group, 0 before it started.
	jobPGID atomic.Int32

	wmu sync.Mutex // one frame at a time on the port
	gen atomic.Uint64

	mu   sync.Mutex
	reqs map[uint32]*agentReq
}

func newAgent(port io.ReadWriter, root string, r *reaper, logf func(string, ...any)) (*Agent, error) {
	a := newWaitingAgent(port, r, logf)
	if err := a.setRoot(root); err != nil {
		return nil, err
	}
	return a, nil
}

// newWaitingAgent returns an agent whose job's root is not there yet: it
// answers Hello and FrameJob, and its other requests wait for setRoot.
func newWaitingAgent(port io.ReadWriter, r *reaper, logf func(string, ...any)) *Agent {
	return &Agent{port: port, rootFD: -1, ready: make(chan struct{}), reaper: r, logf: logf, reqs: map[uint32]*agentReq{},
		signalAll: func(s unix.Signal) error { return unix.Kill(-1, s) }}
}

// setRoot sets the job's root, once, and lets the requests waiting for it
// run.
func (a *Agent) setRoot(root string) error {
	dir := root
	if dir == "" {
		dir = "/"
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	a.root, a.rootFD = root, fd
	close(a.ready)
	return nil
}

// setJob records the batch script's process group, which SignalBatch
// reaches.
func (a *Agent) setJob(pgid int) { a.jobPGID.Store(int32(pgid)) }

// Serve reads requests from the port until it fails for good.
func (a *Agent) Serve() {
	var dec vmimage.FrameDecoder
	buf := make([]byte, 64<<10)
	for {
		n, err := a.port.Read(buf)
		if n > 0 {
			dec.Write(buf[:n])
			for {
				f, ok := dec.Next()
				if !ok {
					break
				}
				a.handle(f)
			}
		}
		if err == nil && n > 0 {
			continue
		}
		// End of file: the host closed its end (its daemon restarted, or
		// the VM migrated and the destination's host has not connected
		// yet). What it asked for is abandoned, and a frame half received
		// is garbage.
		dec.Reset()
		a.resetSession()
		if (errors.Is(err, io.EOF) || n == 0) && a.exitOnEOF {
			return
		}
		if err != nil && !errors.Is(err, io.EOF) {
			a.logf("agent port: %v", err)
			if errors.Is(err, os.ErrClosed) {
				return
			}
		}
		select {
		case <-a.hostSignal:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// signalOnConnect asks the kernel for a SIGIO when the host connects to
// the port (virtio_console signals a port's owner when its host side
// opens), so that Serve, which sees no host as the end of the port, wakes
// at once rather than at its next look: a restored guest's job waits on
// it.
func (a *Agent) signalOnConnect(port *os.File) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGIO)
	fd := int(port.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETOWN, unix.Getpid()); err != nil {
		return err
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_ASYNC)
	}
	if err != nil {
		return err
	}
	a.hostSignal = ch
	return nil
}

// resetSession abandons every request of the session that ended: their
// processes are killed, their files closed.
func (a *Agent) resetSession() {
	a.gen.Add(1)
	a.mu.Lock()
	reqs := a.reqs
	a.reqs = map[uint32]*agentReq{}
	a.mu.Unlock()
	for _, r := range reqs {
		r.cancel()
	}
}

// send writes one frame of session gen; a frame of an ended session is
// dropped. The port blocks writes while no host is connected.
func (a *Agent) send(gen uint64, f vmimage.Frame) bool {
	b := vmimage.AppendFrame(nil, f)
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if gen != a.gen.Load() {
		return false
	}
	_, err := a.port.Write(b)
	return err == nil
}

// handle acts on one frame; it never blocks.
func (a *Agent) handle(f vmimage.Frame) {
	switch f.Type {
	case vmimage.FrameHello:
		var h vmimage.Hello
		if err := vmimage.DecodeMessage(f.Payload, &h); err != nil || h.Validate() != nil {
			a.logf("agent: bad hello")
			return
		}
		a.resetSession()
		a.send(a.gen.Load(), vmimage.Frame{Type: vmimage.FrameHello,
			Payload: vmimage.EncodeMessage(vmimage.Hello{Version: vmimage.AgentVersion, Nonce: h.Nonce, Agent: "corral-init"})})
	case vmimage.FrameExec, vmimage.FrameReadFile, vmimage.FrameWriteFile, vmimage.FrameSignal, vmimage.FrameJob:
		a.startRequest(f)
	default:
		a.mu.Lock()
		r := a.reqs[f.ID]
		a.mu.Unlock()
		if r != nil {
			r.onFrame(f)
		}
	}
}

// startRequest checks a new request and runs it in goroutines of its own.
func (a *Agent) startRequest(f vmimage.Frame) {
	gen := a.gen.Load()
	fail := func(err error) {
		a.send(gen, endFrame(f.ID, vmimage.End{Errno: int(unix.EINVAL), Error: err.Error()}))
	}
	if f.ID == 0 {
		return
	}
	a.mu.Lock()
	_, dup := a.reqs[f.ID]
	a.mu.Unlock()
	if dup {
		fail(errors.New("request id in use"))
		return
	}
	r := newAgentReq(a, f.ID, gen)
	var run func()
	switch f.Type {
	case vmimage.FrameExec:
		var x vmimage.ExecRequest
		if err := decodeValid(f.Payload, &x); err != nil {
			fail(err)
			return
		}
		run = func() { a.exec(r, x) }
	case vmimage.FrameReadFile, vmimage.FrameWriteFile:
		var x vmimage.FileRequest
		if err := decodeValid(f.Payload, &x); err != nil {
			fail(err)
			return
		}
		if f.Type == vmimage.FrameReadFile {
			run = func() { a.readFile(r, x) }
		} else {
			run = func() { a.writeFile(r, x) }
		}
	case vmimage.FrameSignal:
		var x vmimage.SignalRequest
		if err := decodeValid(f.Payload, &x); err != nil {
			fail(err)
			return
		}
		run = func() { r.end(a.signal(x)) }
	case vmimage.FrameJob:
		var x vmimage.JobStart
		if err := decodeValid(f.Payload, &x); err != nil {
			fail(err)
			return
		}
		run = func() { r.end(a.takeJob(r, x)) }
	}
	a.mu.Lock()
	a.reqs[f.ID] = r
	a.mu.Unlock()
	go func() {
		// Everything but the job itself acts in the job's root: it waits
		// until the job has one (a warm start's guest gets its job first).
		if f.Type != vmimage.FrameJob {
			select {
			case <-a.ready:
			case <-r.done:
				return
			}
		}
		run()
	}()
}

// takeJob receives the job of a guest restored from a warm start's
// snapshot: the payload on stream 0, which onJob puts in place. A guest
// takes one job; one booted with its job refuses any.
func (a *Agent) takeJob(r *agentReq, x vmimage.JobStart) vmimage.End {
	if a.onJob == nil || !a.jobTaken.CompareAndSwap(false, true) {
		return vmimage.End{Errno: int(unix.EBUSY), Error: "this guest has its job already (only a guest restored from a warm start's snapshot takes one)"}
	}
	payload := make([]byte, 0, x.Size)
	for int64(len(payload)) < x.Size {
		b, ok := r.next()
		if !ok || b == nil || int64(len(payload)+len(b)) > x.Size {
			a.jobTaken.Store(false)
			return vmimage.End{Errno: int(unix.EINVAL), Error: fmt.Sprintf("job: the payload was cut off or longer than its %d bytes", x.Size)}
		}
		payload = append(payload, b...)
		r.grant(len(b))
	}
	if err := a.onJob(x, payload); err != nil {
		a.jobTaken.Store(false)
		return errEnd(err)
	}
	return vmimage.End{}
}

// decodeValid decodes a request and checks it.
func decodeValid[T any, P interface {
	*T
	Validate() error
}](payload []byte, v P) error {
	if err := vmimage.DecodeMessage(payload, v); err != nil {
		return err
	}
	return v.Validate()
}

func endFrame(id uint32, e vmimage.End) vmimage.Frame {
	if len(e.Error) > 1024 {
		e.Error = e.Error[:1024]
	}
	return vmimage.Frame{Type: vmimage.FrameEnd, ID: id, Payload: vmimage.EncodeMessage(e)}
}

// agentReq is one request in progress.
type agentReq struct {
	a   *Agent
	id  uint32
	gen uint64

	mu       sync.Mutex
	cond     *sync.Cond
	credit   [3]int // bytes this side may still send, per stream
	canceled bool
	ended    bool
	pgid     int      // an exec's process group
	tty      *os.File // an exec's terminal (master side)
	closers  []io.Closer
	// in carries stream 0 from the reader to the request (nil: closed);
	// inQueued counts its bytes, which the host's window bounds.
	in       chan []byte
	inQueued int
	// done is closed when the request is cancelled or has ended.
	done     chan struct{}
	doneOnce sync.Once
}

func newAgentReq(a *Agent, id uint32, gen uint64) *agentReq {
	r := &agentReq{a: a, id: id, gen: gen, in: make(chan []byte, 4096), done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	for i := range r.credit {
		r.credit[i] = vmimage.AgentWindow
	}
	return r
}

// onFrame takes a frame of the host for this request.
func (r *agentReq) onFrame(f vmimage.Frame) {
	switch f.Type {
	case vmimage.FrameData:
		s, data, err := vmimage.ParseData(f.Payload)
		if err != nil || s != vmimage.StreamStdin || len(data) == 0 {
			return
		}
		r.push(data)
	case vmimage.FrameClose:
		if s, err := vmimage.ParseClose(f.Payload); err == nil && s == vmimage.StreamStdin {
			r.push(nil)
		}
	case vmimage.FrameWindow:
		s, n, err := vmimage.ParseWindow(f.Payload)
		if err != nil || s == vmimage.StreamStdin {
			return
		}
		r.mu.Lock()
		r.credit[s] = min(r.credit[s]+int(n), vmimage.AgentWindow)
		r.cond.Broadcast()
		r.mu.Unlock()
	case vmimage.FrameResize:
		var z vmimage.Resize
		if vmimage.DecodeMessage(f.Payload, &z) != nil {
			return
		}
		r.mu.Lock()
		if r.tty != nil {
			unix.IoctlSetWinsize(int(r.tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: z.Rows, Col: z.Cols})
		}
		r.mu.Unlock()
	case vmimage.FrameCancel:
		r.cancel()
	}
}

// push queues stream 0's bytes. A host that sends more than its window
// breaks the protocol: the request is cancelled rather than the reader
// blocked.
func (r *agentReq) push(data []byte) {
	r.mu.Lock()
	over := data != nil && r.inQueued+len(data) > vmimage.AgentWindow
	if !over {
		r.inQueued += len(data)
		select {
		case r.in <- data:
		default:
			over = true
		}
	}
	r.mu.Unlock()
	if over {
		r.a.logf("agent: request %d: the host sent past its window", r.id)
		r.cancel()
	}
}

// next returns the next chunk of stream 0 (nil at its end), false when
// the request was cancelled. The caller grants the window back once it
// used the chunk (grant).
func (r *agentReq) next() ([]byte, bool) {
	select {
	case b := <-r.in:
		return b, true
	case <-r.done:
		return nil, false
	}
}

// grant gives the host back n bytes of stream 0's window.
func (r *agentReq) grant(n int) {
	r.mu.Lock()
	r.inQueued -= n
	r.mu.Unlock()
	r.a.send(r.gen, vmimage.Frame{Type: vmimage.FrameWindow, ID: r.id, Payload: vmimage.WindowPayload(vmimage.StreamStdin, uint32(n))})
}

// sendData sends bytes on stream s within the host's window, waiting for
// grants. It returns false once the request is cancelled.
func (r *agentReq) sendData(s byte, b []byte) bool {
	for len(b) > 0 {
		r.mu.Lock()
		for r.credit[s] == 0 && !r.canceled {
			r.cond.Wait()
		}
		if r.canceled {
			r.mu.Unlock()
			return false
		}
		n := min(len(b), r.credit[s], vmimage.MaxDataChunk)
		r.credit[s] -= n
		r.mu.Unlock()
		if !r.a.send(r.gen, vmimage.Frame{Type: vmimage.FrameData, ID: r.id, Payload: vmimage.DataPayload(s, b[:n])}) {
			return false
		}
		b = b[n:]
	}
	return true
}

func (r *agentReq) sendClose(s byte) {
	r.a.send(r.gen, vmimage.Frame{Type: vmimage.FrameClose, ID: r.id, Payload: []byte{s}})
}

func (r *agentReq) started(st vmimage.Started) {
	r.a.send(r.gen, vmimage.Frame{Type: vmimage.FrameStarted, ID: r.id, Payload: vmimage.EncodeMessage(st)})
}

// end sends the request's End and forgets it.
func (r *agentReq) end(e vmimage.End) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.ended = true
	r.pgid = 0 // the group is gone; its id may be reused
	r.mu.Unlock()
	r.doneOnce.Do(func() { close(r.done) })
	r.a.send(r.gen, endFrame(r.id, e))
	r.a.mu.Lock()
	if r.a.reqs[r.id] == r {
		delete(r.a.reqs, r.id)
	}
	r.a.mu.Unlock()
}

// onCancel registers what cancel closes.
func (r *agentReq) onCancel(c io.Closer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.canceled {
		c.Close()
		return
	}
	r.closers = append(r.closers, c)
}

// cancel abandons the request: its process group is killed and what it
// had open is closed. Idempotent.
func (r *agentReq) cancel() {
	r.mu.Lock()
	if r.canceled {
		r.mu.Unlock()
		return
	}
	r.canceled = true
	r.doneOnce.Do(func() { close(r.done) })
	r.cond.Broadcast()
	pgid, closers := r.pgid, r.closers
	r.closers = nil
	r.mu.Unlock()
	if pgid > 0 {
		unix.Kill(-pgid, unix.SIGKILL)
	}
	for _, c := range closers {
		c.Close()
	}
}

// errEnd turns an error into an End that carries its errno.
func errEnd(err error) vmimage.End {
	e := vmimage.End{Errno: int(unix.EIO), Error: err.Error()}
	var no syscall.Errno
	if errors.As(err, &no) {
		e.Errno = int(no)
	}
	return e
}

// findAgentPort returns the device of the virtio-serial port named name,
// waiting up to d: ports appear a moment after virtio_console loads, and
// their numbers vary.
func findAgentPort(name string, d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for {
		dirs, _ := filepath.Glob("/sys/class/virtio-ports/*")
		for _, dir := range dirs {
			b, err := os.ReadFile(filepath.Join(dir, "name"))
			if err == nil && strings.TrimSpace(string(b)) == name {
				dev := "/dev/" + filepath.Base(dir)
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", errors.New("no virtio-serial port named " + name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
