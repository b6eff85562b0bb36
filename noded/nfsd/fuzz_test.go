package nfsd

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"corral/internal/ident"
)

// Every decoder of what a guest sends has a fuzz target: XDR itself, the
// record marking, the RPC call header, the file handle, and each
// procedure's arguments (one target per argument type; the procedures
// that share one are named). A decoder must never panic, and what it
// accepts must encode back to arguments that decode the same. FuzzServe
// sends whole calls through the server to real files.

// fuzzRoundTrip is the body of the argument targets.
func fuzzRoundTrip[T any](f *testing.F, dec func([]byte) (T, error), enc func(T) []byte, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0xff, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := dec(b)
		if err != nil {
			return
		}
		again, err := dec(enc(a))
		if err != nil {
			t.Fatalf("%#v encodes to arguments that do not decode: %v", a, err)
		}
		if !reflect.DeepEqual(a, again) {
			t.Fatalf("round trip changed the arguments:\n%#v\n%#v", a, again)
		}
	})
}

var (
	seedFH  = []byte{1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd}
	seedOp  = diropArgs{Dir: seedFH, Name: "file.txt"}
	seedSet = sattr{SetMode: true, Mode: 0o644, SetSize: true, Size: 7, Atime: timeServer, Mtime: timeClient, MtimeV: nfstime{1, 2}}
)

func FuzzXDR(f *testing.F) {
	w := &xdrWriter{}
	w.uint32(7)
	w.opaque([]byte("abc"))
	w.string("name")
	w.uint64(1 << 40)
	w.bool(true)
	w.fixed([]byte("12345678"))
	f.Add(w.b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newReader(b)
		u, o, s, l, bo, fx := r.uint32(), r.opaque(fhMax), r.string(maxName), r.uint64(), r.bool(), r.fixed(8)
		if r.err != nil {
			return
		}
		w := &xdrWriter{}
		w.uint32(u)
		w.opaque(o)
		w.string(s)
		w.uint64(l)
		w.bool(bo)
		w.fixed(fx)
		used := len(b) - len(r.rest())
		// Padding bytes need not be zero on the wire; compare the rest.
		r2 := newReader(w.b)
		if r2.uint32() != u || string(r2.opaque(fhMax)) != string(o) || r2.string(maxName) != s || r2.uint64() != l || r2.bool() != bo || string(r2.fixed(8)) != string(fx) {
			t.Fatalf("re-encoding %x changed it", b[:used])
		}
		if len(w.b) != used {
			t.Fatalf("re-encoded %d bytes, decoded %d", len(w.b), used)
		}
	})
}

func FuzzRecordMarking(f *testing.F) {
	h := recordHeader(5)
	f.Add(append(h[:], "hello"...), 100)
	f.Add([]byte{0, 0, 0, 2, 'a', 'b', 0x80, 0, 0, 1, 'c'}, 100)
	f.Add([]byte{0x80, 0, 0, 200}, 10)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		rec, err := readRecord(bytes.NewReader(b), nil, limit)
		if err != nil {
			return
		}
		if len(rec) > limit {
			t.Fatalf("record of %d bytes over the limit %d", len(rec), limit)
		}
		h := recordHeader(len(rec))
		again, err := readRecord(bytes.NewReader(append(h[:], rec...)), nil, limit)
		if err != nil || !bytes.Equal(again, rec) {
			t.Fatalf("a record written back does not read the same: %v", err)
		}
	})
}

func FuzzCallHeader(f *testing.F) {
	f.Add(callBytes(42, progNFS, procGetattr, encodeFH(seedFH)))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, args, err := parseCall(b)
		if err != nil {
			return
		}
		again, args2, err := parseCall(callBytes(h.XID, h.Prog, h.Proc, args, h.RPCVers, h.Vers, h.CredFlavor))
		if err != nil || again != h || !bytes.Equal(args, args2) {
			t.Fatalf("call %+v re-encoded reads as %+v (%v)", h, again, err)
		}
	})
}

// callBytes encodes a call: xid, program, procedure, arguments, then
// optionally the RPC version, the program version and the credential
// flavor (2, 3, AUTH_SYS by default).
func callBytes(xid, prog, proc uint32, args []byte, more ...uint32) []byte {
	rpcv, vers, flavor := uint32(2), uint32(3), uint32(authSys)
	if len(more) == 3 {
		rpcv, vers, flavor = more[0], more[1], more[2]
	}
	w := &xdrWriter{}
	for _, v := range []uint32{xid, msgCall, rpcv, prog, vers, proc, flavor} {
		w.uint32(v)
	}
	w.opaque([]byte("credential"))
	w.uint32(authNone)
	w.uint32(0)
	return append(w.b, args...)
}

// fuzzKey is the handle key of the fuzz targets: fixed, so that handles in
// the corpus stay valid from one run to the next.
var fuzzKey = handleKey([]byte("corral-nfsd-fuzz-handle-key-0032"))

// FuzzHandle checks that a handle decodes only as the server issued it: a
// valid one re-encodes to the same bytes, and a changed byte anywhere (the
// export id, the file system, the kernel handle, the MAC) is refused.
func FuzzHandle(f *testing.F) {
	valid, err := fuzzKey.encode(handle{Export: 0x01020304, FSKey: 0x0506070809000000, Type: 1, Kernel: []byte{0xaa, 0xbb, 0xcc, 0xdd}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(seedFH)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := fuzzKey.decode(b)
		if err != nil {
			return
		}
		again, err := fuzzKey.encode(h)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("handle %x encodes to %x (%v)", b, again, err)
		}
	})
}

// GETATTR, READLINK, FSSTAT, FSINFO, PATHCONF.
func FuzzArgsFH(f *testing.F) { fuzzRoundTrip(f, decodeFH, encodeFH, encodeFH(seedFH)) }

// LOOKUP, REMOVE, RMDIR.
func FuzzArgsDirop(f *testing.F) { fuzzRoundTrip(f, decodeDirop, encodeDirop, encodeDirop(seedOp)) }

func FuzzArgsSetattr(f *testing.F) {
	fuzzRoundTrip(f, decodeSetattr, encodeSetattr, encodeSetattr(setattrArgs{Obj: seedFH, Attr: seedSet, Guard: true}))
}

func FuzzArgsAccess(f *testing.F) {
	fuzzRoundTrip(f, decodeAccess, encodeAccess, encodeAccess(accessArgs{Obj: seedFH, Access: 0x3f}))
}

func FuzzArgsRead(f *testing.F) {
	fuzzRoundTrip(f, decodeRead, encodeRead, encodeRead(readArgs{File: seedFH, Offset: 4096, Count: 1 << 20}))
}

func FuzzArgsWrite(f *testing.F) {
	fuzzRoundTrip(f, decodeWrite, encodeWrite, encodeWrite(writeArgs{File: seedFH, Offset: 9, Count: 3, Stable: fileSync, Data: []byte("abc")}))
}

func FuzzArgsCreate(f *testing.F) {
	fuzzRoundTrip(f, decodeCreate, encodeCreate,
		encodeCreate(createArgs{Where: seedOp, Mode: createGuarded, Attr: seedSet}),
		encodeCreate(createArgs{Where: seedOp, Mode: createExclusive, Verf: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}}))
}

func FuzzArgsMkdir(f *testing.F) {
	fuzzRoundTrip(f, decodeMkdir, encodeMkdir, encodeMkdir(mkdirArgs{Where: seedOp, Attr: seedSet}))
}

func FuzzArgsSymlink(f *testing.F) {
	fuzzRoundTrip(f, decodeSymlink, encodeSymlink, encodeSymlink(symlinkArgs{Where: seedOp, Target: "../x"}))
}

func FuzzArgsMknod(f *testing.F) {
	fuzzRoundTrip(f, decodeMknod, encodeMknod,
		encodeMknod(mknodArgs{Where: seedOp, Type: typeChr, Attr: seedSet, Major: 1, Minor: 3}),
		encodeMknod(mknodArgs{Where: seedOp, Type: typeFifo}))
}

func FuzzArgsRename(f *testing.F) {
	fuzzRoundTrip(f, decodeRename, encodeRename, encodeRename(renameArgs{From: seedOp, To: diropArgs{seedFH, "b"}}))
}

func FuzzArgsLink(f *testing.F) {
	fuzzRoundTrip(f, decodeLink, encodeLink, encodeLink(linkArgs{File: seedFH, Link: seedOp}))
}

func FuzzArgsReaddir(f *testing.F) {
	fuzzRoundTrip(f, decodeReaddir, encodeReaddir, encodeReaddir(readdirArgs{Dir: seedFH, Cookie: 99, Count: 4096}))
}

func FuzzArgsReaddirplus(f *testing.F) {
	fuzzRoundTrip(f, decodeReaddirplus, encodeReaddirplus, encodeReaddirplus(readdirArgs{Dir: seedFH, Count: 4096, MaxCount: 32768}))
}

func FuzzArgsCommit(f *testing.F) {
	fuzzRoundTrip(f, decodeCommit, encodeCommit, encodeCommit(commitArgs{File: seedFH, Offset: 1, Count: 2}))
}

// MOUNT's MNT and UMNT.
func FuzzArgsDirpath(f *testing.F) {
	enc := func(p string) []byte { w := &xdrWriter{}; w.string(p); return w.b }
	fuzzRoundTrip(f, decodeDirpath, enc, enc("/home/alice"))
}

func FuzzArgsGetacl(f *testing.F) {
	fuzzRoundTrip(f, decodeGetacl, encodeGetacl, encodeGetacl(getaclArgs{Obj: seedFH, Mask: aclMaskAll}))
}

func FuzzArgsSetacl(f *testing.F) {
	fuzzRoundTrip(f, decodeSetacl, encodeSetacl, encodeSetacl(setaclArgs{Obj: seedFH, Mask: aclAccess,
		Access: []aclEntry{{Tag: aclUserObj, Perm: 6}, {Tag: aclUser, ID: 1000, Perm: 4}, {Tag: aclGroupObj, Perm: 4}, {Tag: aclMask, Perm: 4}, {Tag: aclOther}}}))
}

// FuzzServe sends whole calls, for any program and procedure, through a
// server exporting a small tree as nobody: it must answer (or drop) every
// one without panicking, with a reply of the request's XID.
func FuzzServe(f *testing.F) {
	if os.Geteuid() != 0 {
		f.Skip("the file server needs root")
	}
	root := f.TempDir()
	share := filepath.Join(root, "share")
	os.MkdirAll(filepath.Join(share, "d"), 0o755)
	os.WriteFile(filepath.Join(share, "f"), []byte("data"), 0o644)
	u, err := ident.Lookup("nobody")
	if err != nil {
		f.Skip("no user nobody")
	}
	os.Chmod(root, 0o755)
	os.Chmod(share, 0o777)
	s, err := New(Config{User: u, Root: root, Shares: []string{share}, HandleKey: fuzzKey, Workers: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	shareFH := s.byPath[share].fh
	call := func(prog, proc uint32, args []byte) []byte { return callBytes(7, prog, proc, args) }
	f.Add(call(progNFS, procLookup, encodeDirop(diropArgs{shareFH, "f"})))
	f.Add(call(progNFS, procReaddirplus, encodeReaddirplus(readdirArgs{Dir: shareFH, Count: 512, MaxCount: 4096})))
	f.Add(call(progNFS, procCreate, encodeCreate(createArgs{Where: diropArgs{shareFH, "new"}, Mode: createGuarded})))
	f.Add(call(progNFS, procWrite, encodeWrite(writeArgs{File: shareFH, Count: 1, Data: []byte("x")})))
	f.Add(call(progNFSACL, aclProcGetacl, encodeGetacl(getaclArgs{Obj: shareFH, Mask: aclMaskAll})))
	f.Add(call(progMount, mountProcMnt, func() []byte { w := &xdrWriter{}; w.string(share); return w.b }()))
	// Calls are answered on a thread of the job's user (nobody), as the
	// workers answer them, but every call gets its reply or nil back.
	in, out := make(chan []byte), make(chan []byte)
	go func() {
		runtime.LockOSThread()
		if err := s.creds.become(); err != nil {
			panic(err)
		}
		for msg := range in {
			out <- s.answer(msg, nil)
		}
	}()
	f.Cleanup(func() { close(in) })
	f.Fuzz(func(t *testing.T, msg []byte) {
		in <- msg
		reply := <-out
		if reply == nil {
			return
		}
		if len(reply) < 16 || binary.BigEndian.Uint32(reply[4:]) != binary.BigEndian.Uint32(msg) {
			t.Fatalf("reply %x to call %x", reply, msg)
		}
	})
}
