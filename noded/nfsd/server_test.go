package nfsd

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"corral/internal/ident"
)

// These tests run the server over real TCP on 127.0.0.1 against real
// directories, with the test client of client_test.go (this machine's
// kernel has no NFS client to mount with; the guest kernel's client is
// tested by noded/vmrun). They need root, as the server does.

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the file server needs root (open_by_handle_at, setfsuid)")
	}
}

// startServer serves cfg on a loopback port and returns its address.
func startServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	needRoot(t)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return s, l.Addr().String()
}

// tree returns a root directory holding share/ (the read-write export)
// and ro.txt, open to everyone to read, and the share's path.
func tree(t testing.TB) (root, share string) {
	t.Helper()
	root = t.TempDir()
	os.Chmod(filepath.Dir(root), 0o755)
	os.Chmod(root, 0o755)
	share = filepath.Join(root, "share")
	os.Mkdir(share, 0o777)
	os.Chmod(share, 0o777)
	os.WriteFile(filepath.Join(root, "ro.txt"), []byte("read only\n"), 0o644)
	return root, share
}

func self(t testing.TB) ident.User {
	u, err := ident.Self()
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func nobody(t testing.TB) ident.User {
	t.Helper()
	u, err := ident.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	return u
}

func TestMountExportsOnlyWhatWasGiven(t *testing.T) {
	root, share := tree(t)
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	for path, want := range map[string]uint32{root: 0, share: 0, share + "/": 0, filepath.Join(root, "other"): mountErrNoEnt, "/": mountErrNoEnt} {
		if _, st := c.mount(path); st != want {
			t.Errorf("MNT %s: status %d, want %d", path, st, want)
		}
	}
}

// TestWriteReadAndSync writes unstable and stable data, commits, reads it
// back and checks the host's file; every stable write and commit syncs.
func TestWriteReadAndSync(t *testing.T) {
	root, share := tree(t)
	syncs := countSyncs(t)
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	dir, _ := c.mount(share)
	fh, st := c.create(createArgs{Where: diropArgs{dir, "f"}, Mode: createGuarded, Attr: sattr{SetMode: true, Mode: 0o640}})
	if st != 0 {
		t.Fatalf("CREATE: %d", st)
	}
	st, n, stable, verf := c.write(fh, 0, []byte("hello "), unstable)
	if st != 0 || n != 6 || stable != unstable {
		t.Fatalf("unstable WRITE: status %d count %d stable %d", st, n, stable)
	}
	if got := syncs.take(); got != 0 {
		t.Errorf("an UNSTABLE write synced %d times", got)
	}
	st, _, stable, verf2 := c.write(fh, 6, []byte("world\n"), fileSync)
	if st != 0 || stable != fileSync || verf2 != verf {
		t.Fatalf("FILE_SYNC WRITE: status %d stable %d verifier %x then %x", st, stable, verf, verf2)
	}
	if got := syncs.take(); got != 1 {
		t.Errorf("a FILE_SYNC write synced %d times, want 1", got)
	}
	if st, _, _, _ := c.write(fh, 12, []byte("!"), dataSync); st != 0 || syncs.take() != 1 {
		t.Errorf("DATA_SYNC write: status %d, or no sync", st)
	}
	if st, cv := c.commit(fh); st != 0 || cv != verf {
		t.Fatalf("COMMIT: status %d verifier %x, want %x", st, cv, verf)
	}
	if got := syncs.take(); got != 1 {
		t.Errorf("COMMIT synced %d times, want 1", got)
	}
	data, eof, st := c.read(fh, 0, 100)
	if st != 0 || string(data) != "hello world\n!" || !eof {
		t.Fatalf("READ: %q eof %v status %d", data, eof, st)
	}
	b, _ := os.ReadFile(filepath.Join(share, "f"))
	fi, _ := os.Stat(filepath.Join(share, "f"))
	if string(b) != "hello world\n!" || fi.Mode().Perm() != 0o640 {
		t.Errorf("host file %q mode %v", b, fi.Mode())
	}
}

// TestExclusiveCreate checks EXCLUSIVE semantics: a retransmission with
// the same verifier succeeds on the same file, another verifier is EXIST.
func TestExclusiveCreate(t *testing.T) {
	root, share := tree(t)
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	dir, _ := c.mount(share)
	verf := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	a := createArgs{Where: diropArgs{dir, "x"}, Mode: createExclusive, Verf: verf}
	fh1, st := c.create(a)
	if st != 0 {
		t.Fatalf("first EXCLUSIVE CREATE: %d", st)
	}
	fh2, st := c.create(a)
	if st != 0 || !bytes.Equal(fh1, fh2) {
		t.Fatalf("retransmitted EXCLUSIVE CREATE: status %d, same handle %v", st, bytes.Equal(fh1, fh2))
	}
	a.Verf[0] = 9
	if _, st := c.create(a); st != errExist {
		t.Fatalf("EXCLUSIVE CREATE with another verifier: %d, want EXIST", st)
	}
	if _, st := c.create(createArgs{Where: diropArgs{dir, "x"}, Mode: createGuarded}); st != errExist {
		t.Fatalf("GUARDED CREATE of an existing file: %d, want EXIST", st)
	}
	if _, st := c.create(createArgs{Where: diropArgs{dir, "x"}, Mode: createUnchecked, Attr: sattr{SetSize: true}}); st != 0 {
		t.Fatalf("UNCHECKED CREATE of an existing file: %d, want OK", st)
	}
}

// TestActsAsTheJobsUser serves as nobody while the client claims to be
// root: files are created as nobody, root-only files and directories give
// ACCES, and the owner may still write a file it made read-only.
func TestActsAsTheJobsUser(t *testing.T) {
	root, share := tree(t)
	u := nobody(t)
	secret := filepath.Join(share, "secret")
	os.WriteFile(secret, []byte("root only"), 0o600)
	closed := filepath.Join(share, "closed")
	os.Mkdir(closed, 0o755)
	_, addr := startServer(t, Config{User: u, Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	c.UID, c.GID = 0, 0 // what AUTH_SYS claims: ignored
	dir, _ := c.mount(share)
	fh, st := c.create(createArgs{Where: diropArgs{dir, "mine"}, Mode: createGuarded, Attr: sattr{SetMode: true, Mode: 0o444}})
	if st != 0 {
		t.Fatalf("CREATE as %s: %d", u.Name, st)
	}
	var sys syscall.Stat_t
	syscall.Stat(filepath.Join(share, "mine"), &sys)
	if sys.Uid != u.UID || sys.Gid != u.GID {
		t.Errorf("created file is owned by %d:%d, want %s's %d:%d", sys.Uid, sys.Gid, u.Name, u.UID, u.GID)
	}
	if st, _, _, _ := c.write(fh, 0, []byte("owner"), fileSync); st != 0 {
		t.Errorf("the owner's WRITE to its read-only new file: %d, want OK (owner override)", st)
	}
	sfh, _ := c.lookup(dir, "secret")
	if _, _, st := c.read(sfh, 0, 10); st != errAcces {
		t.Errorf("READ of a root-only file: %d, want ACCES (%d)", st, errAcces)
	}
	if st, _, _, _ := c.write(sfh, 0, []byte("x"), fileSync); st != errAcces {
		t.Errorf("WRITE of a root-only file: %d, want ACCES", st)
	}
	cfh, _ := c.lookup(dir, "closed")
	if _, st := c.create(createArgs{Where: diropArgs{cfh, "x"}, Mode: createGuarded}); st != errAcces {
		t.Errorf("CREATE in a root-owned directory: %d, want ACCES", st)
	}
	if st := c.status(procSetattr, encodeSetattr(setattrArgs{Obj: fh, Attr: sattr{SetUID: true, UID: 0}})); st != errPerm {
		t.Errorf("chown to root as %s: %d, want PERM", u.Name, st)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only" {
		t.Errorf("root-only file changed: %q", b)
	}
}

// TestTheRootIsReadOnly checks that nothing can be changed through the
// host's tree, even what the user could write on the host.
func TestTheRootIsReadOnly(t *testing.T) {
	root, share := tree(t)
	os.Chmod(filepath.Join(root, "ro.txt"), 0o666)
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	rfh, _ := c.mount(root)
	fh, _ := c.lookup(rfh, "ro.txt")
	checks := map[string]uint32{
		"WRITE":   c.status(procWrite, encodeWrite(writeArgs{File: fh, Count: 1, Data: []byte("x")})),
		"CREATE":  c.status(procCreate, encodeCreate(createArgs{Where: diropArgs{rfh, "new"}})),
		"MKDIR":   c.status(procMkdir, encodeMkdir(mkdirArgs{Where: diropArgs{rfh, "d"}})),
		"REMOVE":  c.status(procRemove, encodeDirop(diropArgs{rfh, "ro.txt"})),
		"SETATTR": c.status(procSetattr, encodeSetattr(setattrArgs{Obj: fh, Attr: sattr{SetSize: true}})),
		"RENAME":  c.status(procRename, encodeRename(renameArgs{diropArgs{rfh, "ro.txt"}, diropArgs{rfh, "moved"}})),
	}
	for proc, st := range checks {
		if st != errROFS {
			t.Errorf("%s in the read-only root: %d, want ROFS (%d)", proc, st, errROFS)
		}
	}
	// Through the share's own export the same tree is writable.
	sfh, _ := c.lookup(rfh, "share")
	if _, st := c.create(createArgs{Where: diropArgs{sfh, "new"}}); st != errROFS {
		t.Errorf("CREATE in the share reached through the root export: %d, want ROFS", st)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "ro.txt")); string(b) != "read only\n" {
		t.Errorf("ro.txt changed: %q", b)
	}
}

// TestHandlesSurviveARestart takes handles from one server, closes it,
// and uses them with a new server on the same exports (a restarted file
// server, or the destination node's after a migration).
func TestHandlesSurviveARestart(t *testing.T) {
	root, share := tree(t)
	os.MkdirAll(filepath.Join(share, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(share, "a", "b", "f"), []byte("data"), 0o644)
	key := bytes.Repeat([]byte{7}, HandleKeyLen) // the job's, as every server of it gets
	cfg := Config{User: self(t), Root: root, Shares: []string{share}, HandleKey: key}
	s1, addr1 := startServer(t, cfg)
	c1 := dialTest(t, addr1)
	dir, _ := c1.mount(share)
	a, _ := c1.lookup(dir, "a")
	b, _ := c1.lookup(a, "b")
	f, _ := c1.lookup(b, "f")
	ro, _ := c1.mount(root)
	s1.Close()
	_, addr2 := startServer(t, cfg)
	c2 := dialTest(t, addr2)
	if data, _, st := c2.read(f, 0, 10); st != 0 || string(data) != "data" {
		t.Fatalf("READ with the first server's handle: %q status %d", data, st)
	}
	if up, st := c2.lookup(b, ".."); st != 0 || !bytes.Equal(up, a) {
		t.Errorf("LOOKUP .. with the first server's handle: status %d, same handle %v", st, bytes.Equal(up, a))
	}
	if _, st := c2.getattr(ro); st != 0 {
		t.Errorf("GETATTR of the first server's root handle: %d", st)
	}
	// A server without that export refuses its handles as stale.
	_, addr3 := startServer(t, Config{User: self(t), Root: root, HandleKey: key})
	c3 := dialTest(t, addr3)
	if _, st := c3.getattr(f); st != errStale {
		t.Errorf("a handle of an export the server lacks: %d, want STALE", st)
	}
	if _, st := c3.getattr([]byte("not a handle of ours")); st != errBadHandleStat {
		t.Errorf("a foreign handle: %d, want BADHANDLE", st)
	}
}

// TestForgedHandlesAreRefused makes handles up the way a guest could: a
// file's handle from the read-only root export with the id of the shared
// path's export written into it (which would let the guest write the
// file, outside every shared path), a handle of the same server with a
// byte of its kernel handle changed, and a handle of another job's server
// (another key). Each is BADHANDLE, and the file is not written.
func TestForgedHandlesAreRefused(t *testing.T) {
	root, share := tree(t)
	outside := filepath.Join(root, "outside.txt")
	os.WriteFile(outside, []byte("the node's\n"), 0o666)
	s, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	ro, _ := c.mount(root)
	f, st := c.lookup(ro, "outside.txt")
	if st != 0 {
		t.Fatalf("LOOKUP outside.txt: %d", st)
	}
	if st, _, _, _ := c.write(f, 0, []byte("x"), fileSync); st != errROFS {
		t.Fatalf("WRITE through the root export: %d, want ROFS", st)
	}
	moved := bytes.Clone(f)
	binary.BigEndian.PutUint32(moved[1:], s.byPath[share].id)
	flipped := bytes.Clone(f)
	flipped[len(flipped)-1] ^= 1
	_, other := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	oc := dialTest(t, other)
	oro, _ := oc.mount(root)
	foreign, _ := oc.lookup(oro, "outside.txt")
	for name, fh := range map[string][]byte{"moved to the share's export": moved, "kernel handle changed": flipped, "another job's key": foreign} {
		t.Run(name, func(t *testing.T) {
			if st, _, _, _ := c.write(fh, 0, []byte("forged"), fileSync); st != errBadHandleStat {
				t.Errorf("WRITE: %d, want BADHANDLE", st)
			}
			if _, st := c.getattr(fh); st != errBadHandleStat {
				t.Errorf("GETATTR: %d, want BADHANDLE", st)
			}
		})
	}
	if b, _ := os.ReadFile(outside); string(b) != "the node's\n" {
		t.Errorf("the file outside the shared paths holds %q", b)
	}
}

// TestRootHandleKeyOfItsOwn gives the root export a key of its own, as a
// warm start's VMs get their snapshot's: a root handle one job's server
// issued is good on the next job's server with the same root key and
// another job key, while the first job's shared path handles are not, and
// a root handle moved to the shared path's export, or a shared path's
// moved to the root's, is BADHANDLE.
func TestRootHandleKeyOfItsOwn(t *testing.T) {
	root, share := tree(t)
	os.WriteFile(filepath.Join(root, "bin"), []byte("a program\n"), 0o644)
	os.WriteFile(filepath.Join(share, "data"), []byte("the job's\n"), 0o644)
	rootKey := bytes.Repeat([]byte{1}, HandleKeyLen)
	s1, addr1 := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}, RootHandleKey: rootKey, HandleKey: bytes.Repeat([]byte{2}, HandleKeyLen)})
	c1 := dialTest(t, addr1)
	ro, _ := c1.mount(root)
	bin, st := c1.lookup(ro, "bin")
	if st != 0 {
		t.Fatalf("LOOKUP bin: %d", st)
	}
	sh, _ := c1.mount(share)
	data, _ := c1.lookup(sh, "data")
	s1.Close()
	s2, addr2 := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}, RootHandleKey: rootKey, HandleKey: bytes.Repeat([]byte{3}, HandleKeyLen)})
	c2 := dialTest(t, addr2)
	if b, _, st := c2.read(bin, 0, 100); st != 0 || string(b) != "a program\n" {
		t.Errorf("READ of the root handle on the next job's server: %q %d", b, st)
	}
	if _, st := c2.getattr(data); st != errBadHandleStat {
		t.Errorf("the first job's shared path handle on the next job's server: %d, want BADHANDLE", st)
	}
	toShare := bytes.Clone(bin)
	binary.BigEndian.PutUint32(toShare[1:], s2.byPath[share].id)
	sh2, _ := c2.mount(share)
	data2, _ := c2.lookup(sh2, "data")
	toRoot := bytes.Clone(data2)
	binary.BigEndian.PutUint32(toRoot[1:], s2.byPath[root].id)
	for name, fh := range map[string][]byte{"a root handle moved to the share": toShare, "a share handle moved to the root": toRoot} {
		if _, st := c2.getattr(fh); st != errBadHandleStat {
			t.Errorf("%s: %d, want BADHANDLE", name, st)
		}
	}
	if _, err := New(Config{User: self(t), Root: root, RootHandleKey: []byte("short")}); err == nil {
		t.Error("a root handle key of 5 bytes was taken")
	}
}

// TestErrorsAreTheHostsErrors checks the mapping of the host's errnos.
func TestErrorsAreTheHostsErrors(t *testing.T) {
	root, share := tree(t)
	os.WriteFile(filepath.Join(share, "file"), nil, 0o644)
	os.MkdirAll(filepath.Join(share, "full", "x"), 0o755)
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	dir, _ := c.mount(share)
	rfh, _ := c.mount(root)
	file, _ := c.lookup(dir, "file")
	cases := map[string]struct {
		proc uint32
		body []byte
		want uint32
	}{
		"lookup missing":          {procLookup, encodeDirop(diropArgs{dir, "missing"}), errNoEnt},
		"lookup in a file":        {procLookup, encodeDirop(diropArgs{file, "x"}), errNotDir},
		"name too long":           {procLookup, encodeDirop(diropArgs{dir, strings.Repeat("n", 300)}), errNameTooLong},
		"name with a slash":       {procLookup, encodeDirop(diropArgs{dir, "a/b"}), errInval},
		"mkdir existing":          {procMkdir, encodeMkdir(mkdirArgs{Where: diropArgs{dir, "full"}}), errExist},
		"rmdir not empty":         {procRmdir, encodeDirop(diropArgs{dir, "full"}), errNotEmpty},
		"rmdir a file":            {procRmdir, encodeDirop(diropArgs{dir, "file"}), errNotDir},
		"remove a directory":      {procRemove, encodeDirop(diropArgs{dir, "full"}), errIsDir},
		"read a directory":        {procRead, encodeRead(readArgs{File: dir, Count: 10}), errIsDir},
		"rename across exports":   {procRename, encodeRename(renameArgs{diropArgs{dir, "file"}, diropArgs{rfh, "file2"}}), errXDev},
		"readlink of a file":      {procReadlink, encodeFH(file), errInval},
		"mknod of a regular file": {procMknod, encodeMknod(mknodArgs{Where: diropArgs{dir, "r"}, Type: typeReg}), errBadType},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if st := c.status(tc.proc, tc.body); st != tc.want {
				t.Errorf("status %d, want %d", st, tc.want)
			}
		})
	}
}

// TestReaddirplusPagesThroughADirectory lists a directory of 300 entries
// in small pages: each name once, each with its handle.
func TestReaddirplusPagesThroughADirectory(t *testing.T) {
	root, share := tree(t)
	big := filepath.Join(share, "big")
	os.Mkdir(big, 0o755)
	for i := 0; i < 300; i++ {
		os.WriteFile(filepath.Join(big, "file-"+strings.Repeat("x", i%40)+string(rune('a'+i%26))+strconv.Itoa(i)), nil, 0o644)
	}
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	dir, _ := c.mount(share)
	bfh, _ := c.lookup(dir, "big")
	names, pages, st := c.readdirplus(bfh, 4096)
	if st != 0 {
		t.Fatalf("READDIRPLUS: %d", st)
	}
	if len(names) != 302 || pages < 5 {
		t.Fatalf("listed %d names (want 300 and . and ..) in %d pages", len(names), pages)
	}
	for n, hasFH := range names {
		if !hasFH {
			t.Errorf("%s came without a handle", n)
		}
	}
}

// TestRPCErrors checks the answers to calls the server cannot take.
func TestRPCErrors(t *testing.T) {
	root, share := tree(t)
	_, addr := startServer(t, Config{User: self(t), Root: root, Shares: []string{share}})
	c := dialTest(t, addr)
	cases := map[string]struct {
		prog, vers, proc uint32
		body             []byte
		want             rpcError
	}{
		"unknown program":   {100228, 3, 0, nil, rpcError{acceptStat: acceptProgUnavail}},
		"NFS version 4":     {progNFS, 4, 0, nil, rpcError{acceptStat: acceptProgMismatch}},
		"unknown procedure": {progNFS, 3, 22, nil, rpcError{acceptStat: acceptProcUnavail}},
		"garbage arguments": {progNFS, 3, procGetattr, []byte{0, 0, 1}, rpcError{acceptStat: acceptGarbageArgs}},
		"handle too long":   {progNFS, 3, procGetattr, encodeFH(make([]byte, 65)), rpcError{acceptStat: acceptGarbageArgs}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.callRaw(tc.prog, tc.vers, tc.proc, tc.body)
			if err != tc.want {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := c.callRaw(progNFS, 3, procNull, nil); err != nil {
		t.Errorf("NULL: %v", err)
	}
}

// syncCounter counts the server's syncs of file data.
type syncCounter struct{ n atomic.Int64 }

func (c *syncCounter) take() int64 { return c.n.Swap(0) }

// countSyncs makes the server count its syncs (they still happen): the
// disk's own state cannot tell a synced page from one written back later.
func countSyncs(t *testing.T) *syncCounter {
	c := &syncCounter{}
	orig := syncFile
	syncFile = func(fd int, dataOnly bool) error {
		c.n.Add(1)
		return orig(fd, dataOnly)
	}
	t.Cleanup(func() { syncFile = orig })
	return c
}
