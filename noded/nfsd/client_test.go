package nfsd

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// testClient is a minimal NFSv3 client over one TCP connection, for these
// tests only: the guest's kernel client is tested in noded/vmrun. It sends
// AUTH_SYS credentials of its choosing, which the server must ignore.
type testClient struct {
	t   testing.TB
	c   net.Conn
	br  *bufio.Reader
	mu  sync.Mutex
	xid uint32
	// UID and GID are what the credential claims.
	UID, GID uint32
}

func dialTest(t testing.TB, addr string) *testClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &testClient{t: t, c: c, br: bufio.NewReader(c), xid: 1000}
}

// rpcError is a reply that was not an accepted SUCCESS.
type rpcError struct {
	replyStat, acceptStat uint32
}

func (e rpcError) Error() string {
	return fmt.Sprintf("rpc reply_stat %d accept_stat %d", e.replyStat, e.acceptStat)
}

// callRaw sends one call with body as its arguments and returns the
// results of an accepted SUCCESS reply.
func (c *testClient) callRaw(prog, vers, proc uint32, body []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.xid++
	w := &xdrWriter{}
	w.uint32(c.xid)
	w.uint32(msgCall)
	w.uint32(2)
	w.uint32(prog)
	w.uint32(vers)
	w.uint32(proc)
	cred := &xdrWriter{}
	cred.uint32(0)
	cred.string("guest")
	cred.uint32(c.UID)
	cred.uint32(c.GID)
	cred.uint32(1)
	cred.uint32(c.GID)
	w.uint32(authSys)
	w.opaque(cred.b)
	w.uint32(authNone)
	w.uint32(0)
	w.b = append(w.b, body...)
	h := recordHeader(len(w.b))
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.c.Write(append(h[:], w.b...)); err != nil {
		return nil, err
	}
	msg, err := readRecord(c.br, nil, maxRecord)
	if err != nil {
		return nil, err
	}
	r := newReader(msg)
	if xid := r.uint32(); xid != c.xid {
		return nil, fmt.Errorf("reply xid %d, want %d", xid, c.xid)
	}
	if r.uint32() != msgReply {
		return nil, errors.New("not a reply")
	}
	if st := r.uint32(); st != replyAccepted {
		return nil, rpcError{replyStat: st}
	}
	r.uint32()
	r.opaque(maxAuthBody)
	if st := r.uint32(); st != acceptSuccess {
		return nil, rpcError{acceptStat: st}
	}
	return r.rest(), r.err
}

// call is callRaw for NFSv3; it fails the test on an RPC-level error.
func (c *testClient) call(proc uint32, body []byte) *xdrReader {
	c.t.Helper()
	res, err := c.callRaw(progNFS, nfsVers, proc, body)
	if err != nil {
		c.t.Fatalf("NFS procedure %d: %v", proc, err)
	}
	return newReader(res)
}

func (c *testClient) mount(path string) ([]byte, uint32) {
	c.t.Helper()
	w := &xdrWriter{}
	w.string(path)
	res, err := c.callRaw(progMount, mountVers, mountProcMnt, w.b)
	if err != nil {
		c.t.Fatalf("MNT %s: %v", path, err)
	}
	r := newReader(res)
	if st := r.uint32(); st != 0 {
		return nil, st
	}
	return r.fh(), 0
}

// fattr3 as the client reads it.
type testAttr struct {
	Type, Mode, Nlink, UID, GID uint32
	Size, Used                  uint64
	Fsid, Fileid                uint64
	Mtime, Atime                nfstime
}

func (r *xdrReader) testFattr() testAttr {
	var a testAttr
	a.Type, a.Mode, a.Nlink, a.UID, a.GID = r.uint32(), r.uint32(), r.uint32(), r.uint32(), r.uint32()
	a.Size, a.Used = r.uint64(), r.uint64()
	r.uint64() // rdev
	a.Fsid, a.Fileid = r.uint64(), r.uint64()
	a.Atime, a.Mtime = r.time(), r.time()
	r.time()
	return a
}

func (r *xdrReader) testPostOp() *testAttr {
	if !r.bool() {
		return nil
	}
	a := r.testFattr()
	return &a
}

func (r *xdrReader) testWcc() {
	if r.bool() {
		r.uint64()
		r.time()
		r.time()
	}
	r.testPostOp()
}

func (c *testClient) getattr(fh []byte) (testAttr, uint32) {
	w := &xdrWriter{}
	w.opaque(fh)
	r := c.call(procGetattr, w.b)
	if st := r.uint32(); st != 0 {
		return testAttr{}, st
	}
	return r.testFattr(), 0
}

func (c *testClient) lookup(dir []byte, name string) ([]byte, uint32) {
	r := c.call(procLookup, encodeDirop(diropArgs{Dir: dir, Name: name}))
	st := r.uint32()
	if st != 0 {
		return nil, st
	}
	fh := r.fh()
	r.testPostOp()
	r.testPostOp()
	c.t.Helper()
	if r.err != nil {
		c.t.Fatalf("LOOKUP reply: %v", r.err)
	}
	return fh, 0
}

// created reads the reply of CREATE, MKDIR, SYMLINK and MKNOD.
func (c *testClient) created(r *xdrReader) ([]byte, uint32) {
	st := r.uint32()
	if st != 0 {
		r.testWcc()
		return nil, st
	}
	var fh []byte
	if r.bool() {
		fh = r.fh()
	}
	r.testPostOp()
	r.testWcc()
	c.t.Helper()
	if r.err != nil {
		c.t.Fatalf("reply: %v", r.err)
	}
	return fh, 0
}

func (c *testClient) create(a createArgs) ([]byte, uint32) {
	return c.created(c.call(procCreate, encodeCreate(a)))
}

func (c *testClient) mkdir(dir []byte, name string, mode uint32) ([]byte, uint32) {
	return c.created(c.call(procMkdir, encodeMkdir(mkdirArgs{Where: diropArgs{dir, name}, Attr: sattr{SetMode: true, Mode: mode}})))
}

// write returns the status, the count, the stability and the verifier.
func (c *testClient) write(fh []byte, off uint64, data []byte, stable uint32) (uint32, uint32, uint32, uint64) {
	r := c.call(procWrite, encodeWrite(writeArgs{File: fh, Offset: off, Count: uint32(len(data)), Stable: stable, Data: data}))
	st := r.uint32()
	r.testWcc()
	if st != 0 {
		return st, 0, 0, 0
	}
	return 0, r.uint32(), r.uint32(), r.uint64()
}

func (c *testClient) commit(fh []byte) (uint32, uint64) {
	r := c.call(procCommit, encodeCommit(commitArgs{File: fh}))
	st := r.uint32()
	r.testWcc()
	if st != 0 {
		return st, 0
	}
	return 0, r.uint64()
}

func (c *testClient) read(fh []byte, off uint64, n uint32) ([]byte, bool, uint32) {
	r := c.call(procRead, encodeRead(readArgs{File: fh, Offset: off, Count: n}))
	st := r.uint32()
	r.testPostOp()
	if st != 0 {
		return nil, false, st
	}
	r.uint32()
	eof := r.bool()
	return r.opaque(maxIO), eof, 0
}

func (c *testClient) status(proc uint32, body []byte) uint32 {
	return c.call(proc, body).uint32()
}

// readdirplus lists a whole directory in pages of at most maxcount bytes
// and returns each name with whether it came with a handle.
func (c *testClient) readdirplus(dir []byte, maxcount uint32) (map[string]bool, int, uint32) {
	names := map[string]bool{}
	var cookie uint64
	pages := 0
	for {
		r := c.call(procReaddirplus, encodeReaddirplus(readdirArgs{Dir: dir, Cookie: cookie, Count: maxcount, MaxCount: maxcount}))
		st := r.uint32()
		r.testPostOp()
		if st != 0 {
			return names, pages, st
		}
		pages++
		r.fixed(8)
		for r.bool() {
			r.uint64()
			name := r.string(maxName)
			cookie = r.uint64()
			r.testPostOp()
			hasFH := r.bool()
			if hasFH {
				r.fh()
			}
			if _, dup := names[name]; dup {
				c.t.Fatalf("READDIRPLUS listed %q twice", name)
			}
			names[name] = hasFH
		}
		eof := r.bool()
		if r.err != nil {
			c.t.Fatalf("READDIRPLUS reply: %v", r.err)
		}
		if eof {
			return names, pages, 0
		}
	}
}
