package nfsd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/ident"
)

// Config says what a Server serves and as whom.
type Config struct {
	// User is whom every operation acts as, whatever credentials the
	// client sends: the job's user, with the groups the node gives them.
	User ident.User
	// Root is the read-only export, the host's tree ("/"); empty for
	// none.
	Root string
	// Shares are the read-write exports: the job's shared paths.
	Shares []string
	// HandleKey authenticates the file handles the server issues
	// (HandleKeyLen bytes; see handle): a guest cannot make a handle up or
	// move one to another export. Every server of one job must have the
	// same key, a restarted one and the one on the node a VM migrates to,
	// for the guest's handles to stay valid. Empty makes a random key, for
	// a server whose handles need not outlive it.
	HandleKey []byte
	// RootHandleKey, when set, is the root export's own handle key: a
	// warm start's VM was restored from a guest that mounted the root
	// before its job existed, with the snapshot's key, and its shared
	// paths get the job's HandleKey. A handle cannot be moved between
	// exports of different keys either.
	RootHandleKey []byte
	// Workers is how many threads serve requests; 8 when 0.
	Workers int
	// Logger receives connection and failure messages; slog's default
	// when nil.
	Logger *slog.Logger
}

// Server is an NFSv3 and MOUNT v3 server for one job's guest. Its
// listeners are given to Serve; it is safe for concurrent use.
type Server struct {
	log     *slog.Logger
	creds   creds
	mounts  *mountTable
	exports []*export
	byID    map[uint32]*export
	byPath  map[string]*export
	// verf is the write verifier: it changes with every server process,
	// so that a client sends again what it wrote UNSTABLE and had not
	// committed when the server it wrote to went away.
	verf uint64
	key  handleKey
	work chan request

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{}
	readers   sync.WaitGroup
}

// request is one RPC message read from a connection.
type request struct {
	msg  []byte
	conn *replyConn
}

// replyConn serialises the replies that workers write to one connection.
type replyConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (rc *replyConn) send(b []byte) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	_, err := rc.c.Write(b)
	return err
}

// New prepares a server: it reads the node's mounts, derives each
// export's root handle and starts the worker threads with the user's
// credentials. The process must be root (open_by_handle_at needs
// CAP_DAC_READ_SEARCH, and setfsuid needs CAP_SETUID); its umask becomes
// 0, since clients send the modes their own umask made.
func New(cfg Config) (*Server, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the NFS file server must run as root: it decodes the kernel's file handles and acts as the job's user")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	unix.Umask(0)
	s := &Server{
		log:   cfg.Logger,
		creds: creds{UID: cfg.User.UID, GID: cfg.User.GID, Groups: cfg.User.Groups},
		byID:  map[uint32]*export{}, byPath: map[string]*export{},
		verf:      uint64(time.Now().UnixNano()),
		work:      make(chan request, cfg.Workers),
		listeners: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
	}
	if len(s.creds.Groups) == 0 {
		s.creds.Groups = []uint32{s.creds.GID}
	}
	var err error
	switch {
	case len(cfg.HandleKey) == 0:
		if s.key, err = newHandleKey(); err != nil {
			return nil, fmt.Errorf("a handle key: %w", err)
		}
	case len(cfg.HandleKey) != HandleKeyLen:
		return nil, fmt.Errorf("handle key of %d bytes: want %d (random, the same for every server of the job)", len(cfg.HandleKey), HandleKeyLen)
	default:
		s.key = handleKey(cfg.HandleKey)
	}
	if s.mounts, err = newMountTable(); err != nil {
		return nil, err
	}
	if n := len(cfg.RootHandleKey); n != 0 && n != HandleKeyLen {
		return nil, fmt.Errorf("root handle key of %d bytes: want %d", n, HandleKeyLen)
	}
	if err := s.addExports(cfg.Root, cfg.Shares, handleKey(cfg.RootHandleKey)); err != nil {
		return nil, err
	}
	if err := s.startWorkers(cfg.Workers); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) addExports(root string, shares []string, rootKey handleKey) error {
	add := func(p string, rw bool) error {
		var mac handleKey
		if !rw && len(rootKey) > 0 {
			mac = rootKey
		}
		e, err := s.newExport(p, rw, mac)
		if err != nil {
			return err
		}
		if s.byID[e.id] != nil {
			return fmt.Errorf("export %s: its id collides with %s's: rename one", e.path, s.byID[e.id].path)
		}
		s.exports = append(s.exports, e)
		s.byID[e.id], s.byPath[e.path] = e, e
		return nil
	}
	if root != "" {
		if err := add(root, false); err != nil {
			return err
		}
	}
	sorted := append([]string(nil), shares...)
	sort.Strings(sorted)
	for _, p := range sorted {
		if s.byPath[filepath.Clean(p)] != nil {
			continue
		}
		if err := add(p, true); err != nil {
			return err
		}
	}
	return nil
}

// startWorkers starts the threads that run requests. Each locks its OS
// thread and takes the user's credentials once; the thread ends with the
// worker (the runtime never reuses a thread left locked), so no other
// goroutine ever runs with them.
func (s *Server) startWorkers(n int) error {
	errc := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			runtime.LockOSThread()
			if err := s.creds.become(); err != nil {
				errc <- err
				return
			}
			errc <- nil
			for req := range s.work {
				s.serve(req)
			}
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			s.Close()
			return fmt.Errorf("taking the job's user's credentials: %w", err)
		}
	}
	return nil
}

// Serve accepts connections on l until l fails or the server is closed.
// Every connection is served; who may connect is decided by where l
// listens (see the package documentation).
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			delete(s.listeners, l)
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		if !s.track(c) {
			c.Close()
			return nil
		}
		go s.readConn(c)
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.readers.Add(1)
	return true
}

// readConn reads a connection's records and hands them to the workers; the
// workers' queue holding only a few keeps a fast client from piling up
// memory.
func (s *Server) readConn(c net.Conn) {
	defer s.readers.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	s.log.Debug("nfs client connected", "remote", c.RemoteAddr())
	rc := &replyConn{c: c}
	br := bufio.NewReaderSize(c, 256<<10)
	for {
		msg, err := readRecord(br, getBuf(), maxRecord)
		if err != nil {
			putBuf(msg)
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("nfs connection ended", "remote", c.RemoteAddr(), "err", err)
			}
			return
		}
		s.work <- request{msg: msg, conn: rc}
	}
}

// serve answers one request on a worker thread.
func (s *Server) serve(req request) {
	reply := s.answer(req.msg, getBuf())
	putBuf(req.msg)
	if reply != nil {
		if err := req.conn.send(reply); err != nil {
			s.log.Debug("nfs reply not sent", "err", err)
		}
	}
	putBuf(reply)
}

// Close stops the server: its listeners and connections close, and its
// workers end once the requests read so far are answered (or dropped).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.readers.Wait()
	close(s.work)
	return nil
}

// Exports returns the exported paths and whether each is writable.
func (s *Server) Exports() map[string]bool {
	out := map[string]bool{}
	for _, e := range s.exports {
		out[e.path] = e.rw
	}
	return out
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func getBuf() []byte { return (*bufs.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if b == nil || cap(b) > 4<<20 {
		return
	}
	b = b[:0]
	bufs.Put(&b)
}
