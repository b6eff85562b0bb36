package nfsd

import (
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// export is one directory the guest mounts: the host's root (read-only) or
// one of the job's shared paths (read-write).
type export struct {
	id   uint32
	path string
	rw   bool
	root handle
	fh   []byte
	// key is the file system key of the export's root; fsid is the fsid
	// every object of the export shows.
	key  uint64
	fsid uint64
	// mac is the key the export's handles carry their MAC under
	// (Config.RootHandleKey for the root export); nil is the server's.
	mac handleKey
}

// object is a file, directory or other object a request names, open as
// an O_PATH descriptor (which grants no access by itself: every operation
// on it is checked again as the user).
type object struct {
	fd  int
	exp *export
	h   handle
}

func (o *object) close() {
	if o != nil && o.fd >= 0 {
		unix.Close(o.fd)
		o.fd = -1
	}
}

// procPath names an open descriptor as a path: opening it reopens the
// object with a fresh permission check against the calling thread's
// credentials.
func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// newExport opens path's root and derives its handle.
func (s *Server) newExport(path string, rw bool, mac handleKey) (*export, error) {
	clean := filepath.Clean(path)
	if !filepath.IsAbs(clean) {
		return nil, fmt.Errorf("export %q: not an absolute path", path)
	}
	e := &export{id: exportID(clean), path: clean, rw: rw, mac: mac}
	kh, mnt, err := unix.NameToHandleAt(unix.AT_FDCWD, clean, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		return nil, fmt.Errorf("export %s: name_to_handle_at: %w (its file system cannot be served over NFS)", clean, err)
	}
	if e.key, err = s.mounts.key(mnt); err != nil {
		return nil, fmt.Errorf("export %s: %w", clean, err)
	}
	e.root = handle{Export: e.id, FSKey: e.key, Type: kh.Type(), Kernel: kh.Bytes()}
	if e.fh, err = e.handleKey(s.key).encode(e.root); err != nil {
		return nil, fmt.Errorf("export %s: %w", clean, err)
	}
	f := fnv.New64a()
	f.Write([]byte(clean))
	e.fsid = f.Sum64()
	return e, nil
}

// handleKey is the key e's handles carry their MAC under.
func (e *export) handleKey(server handleKey) handleKey {
	if e.mac != nil {
		return e.mac
	}
	return server
}

// keyOf returns the key fh's MAC must be under: its export's. The export
// id it reads is not authenticated yet; a handle whose id was changed
// fails the MAC under the key it names, since every key is the export's
// own or the server's.
func (s *Server) keyOf(fh []byte) handleKey {
	if id, ok := exportOf(fh); ok {
		if e := s.byID[id]; e != nil {
			return e.handleKey(s.key)
		}
	}
	return s.key
}

// resolveFor resolves fh for a procedure: when fh names nothing it writes
// the procedure's failure reply to w, the status then empty (the
// procedure's noAttrs or noWcc), and returns nil.
func (s *Server) resolveFor(w *xdrWriter, fh []byte, empty func(*xdrWriter)) *object {
	o, err := s.resolve(fh)
	if err != nil {
		w.status(err)
		empty(w)
		return nil
	}
	return o
}

// What follows a failure status: empty post-op attributes (GETATTR-like
// replies) or an empty wcc (replies of procedures that change an object).
var (
	noAttrs = func(w *xdrWriter) { w.postOpAttr(nil) }
	noWcc   = func(w *xdrWriter) { w.wcc(nil, nil) }
)

// resolve opens the object a file handle names. It runs on a worker
// thread (see creds): decoding a kernel handle needs root's
// CAP_DAC_READ_SEARCH, which only asRoot has.
func (s *Server) resolve(fh []byte) (*object, error) {
	h, err := s.keyOf(fh).decode(fh)
	if err != nil {
		return nil, err
	}
	exp := s.byID[h.Export]
	if exp == nil {
		return nil, unix.ESTALE
	}
	kh := unix.NewFileHandle(h.Type, h.Kernel)
	var fd int
	err = s.creds.asRoot(func() error {
		mfd, err := s.mounts.fd(h.FSKey)
		if err != nil {
			return err
		}
		fd, err = unix.OpenByHandleAt(mfd, kh, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			err = unix.ESTALE // a kernel handle that decodes to nothing
		}
		return nil, err
	}
	return &object{fd: fd, exp: exp, h: h}, nil
}

// handleAt returns the handle of name in dirfd (of the object itself when
// name is ""), issued under exp, without following a final symlink. An
// object on a file system without kernel handles (/proc, say) is ENOENT:
// it cannot be served.
func (s *Server) handleAt(exp *export, dirfd int, name string) (handle, error) {
	flags := 0
	if name == "" {
		flags = unix.AT_EMPTY_PATH
	}
	kh, mnt, err := unix.NameToHandleAt(dirfd, name, flags)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EOVERFLOW) {
			return handle{}, unix.ENOENT
		}
		return handle{}, err
	}
	key, err := s.mounts.key(mnt)
	if err != nil {
		return handle{}, unix.ENOENT
	}
	return handle{Export: exp.id, FSKey: key, Type: kh.Type(), Kernel: kh.Bytes()}, nil
}

// attrsOf returns an open object's attributes.
func (s *Server) attrsOf(o *object) (*attrs, error) {
	a := &attrs{fsid: o.exp.fsid}
	if err := unix.Fstat(o.fd, &a.st); err != nil {
		return nil, err
	}
	a.fileid = fileID(a.st.Ino, o.h.FSKey, o.exp.key)
	return a, nil
}

// attrsOrNil is attrsOf for the optional attributes of a reply.
func (s *Server) attrsOrNil(o *object) *attrs {
	if o == nil {
		return nil
	}
	a, err := s.attrsOf(o)
	if err != nil {
		return nil
	}
	return a
}

// child looks name up in dir as the user and returns its handle and
// attributes. "." is dir itself; ".." of an export's root is the root.
func (s *Server) child(dir *object, name string) ([]byte, *attrs, error) {
	var h handle
	var err error
	switch {
	case name == ".":
		h = dir.h
	case name == ".." && dir.h.sameObject(dir.exp.root):
		h = dir.exp.root
	default:
		if h, err = s.handleAt(dir.exp, dir.fd, name); err != nil {
			return nil, nil, err
		}
	}
	a := &attrs{fsid: dir.exp.fsid}
	if h.sameObject(dir.h) {
		err = unix.Fstat(dir.fd, &a.st)
	} else {
		err = unix.Fstatat(dir.fd, name, &a.st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return nil, nil, err
	}
	if h.sameObject(dir.exp.root) {
		h = dir.exp.root
	}
	a.fileid = fileID(a.st.Ino, h.FSKey, dir.exp.key)
	fh, err := dir.exp.handleKey(s.key).encode(h)
	if err != nil {
		return nil, nil, unix.ENOENT
	}
	return fh, a, nil
}

// checkName refuses names a directory entry cannot have, and "." and ".."
// where an entry is created or removed.
func checkName(name string, dots bool) error {
	switch {
	case name == "" || strings.ContainsAny(name, "/\x00"):
		return unix.EINVAL
	case len(name) > maxName:
		return unix.ENAMETOOLONG
	case !dots && (name == "." || name == ".."):
		return unix.EEXIST
	}
	return nil
}

// openData opens o's file for reading or writing (flags O_RDONLY or
// O_WRONLY), as the user. Two exceptions follow the kernel's own NFS
// server: the file's owner may read and write it whatever its mode (a
// program that created a file read-only writes it through the descriptor
// POSIX gave it, which NFS cannot tell from a new open), and a user who
// may execute a file may read it (the guest must read a program to run
// it).
func (s *Server) openData(o *object, flags int) (int, error) {
	open := func() (fd int, err error) {
		return unix.Open(procPath(o.fd), flags|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	}
	fd, err := open()
	if !errors.Is(err, unix.EACCES) {
		return fd, err
	}
	var st unix.Stat_t
	if unix.Fstat(o.fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, err
	}
	override := st.Uid == s.creds.UID
	if !override && flags&unix.O_ACCMODE == unix.O_RDONLY {
		override = unix.Faccessat2(o.fd, "", unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH) == nil
	}
	if !override {
		return -1, err
	}
	err = s.creds.asRoot(func() (err error) { fd, err = open(); return err })
	return fd, err
}

// writable reports unix.EROFS for an object of the read-only export.
func writable(o *object) error {
	if !o.exp.rw {
		return unix.EROFS
	}
	return nil
}
