package nfsd

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// The procedures that add or remove directory entries. Each runs the
// kernel's *at system call in the directory's descriptor as the user, so
// the kernel checks the user's right to write and search the directory,
// sets the new object's owner to the user and group as the directory's
// rules say (set-group-id directories, default ACLs), and refuses what it
// would refuse on the node. The server's umask is 0: the client applied
// the job's own umask to the modes it sends.

// makeEntry runs make to create where.Name in its directory, then applies
// the attributes make returns (nil: none) to the new object, and writes
// the reply of CREATE, MKDIR, SYMLINK and MKNOD: the new object's handle
// and attributes, then the directory's wcc.
func (s *Server) makeEntry(where diropArgs, w *xdrWriter, make func(dirfd int, name string) (*sattr, error)) {
	dir := s.resolveFor(w, where.Dir, noWcc)
	if dir == nil {
		return
	}
	defer dir.close()
	before := s.attrsOrNil(dir)
	err := writable(dir)
	if err == nil {
		err = checkName(where.Name, false)
	}
	var attr *sattr
	if err == nil {
		attr, err = make(dir.fd, where.Name)
	}
	if err == nil && attr != nil {
		err = s.applyAfterCreate(dir, where.Name, *attr)
	}
	var fh []byte
	var oa *attrs
	if err == nil {
		fh, oa, err = s.child(dir, where.Name)
	}
	if w.status(err) == nfsOK {
		w.postOpFH(fh)
		w.postOpAttr(oa)
	}
	w.wcc(preOpOf(before), s.attrsOrNil(dir))
}

// applyAfterCreate applies the attributes the creating call did not
// already set (the mode went with it) to the new entry name of dir.
func (s *Server) applyAfterCreate(dir *object, name string, a sattr) error {
	a.SetMode = false
	if !a.SetUID && !a.SetGID && !a.SetSize && a.Atime == timeDontChange && a.Mtime == timeDontChange {
		return nil
	}
	fd, err := unix.Openat(dir.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	o := &object{fd: fd, exp: dir.exp}
	defer o.close()
	return s.setattr(o, a)
}

// modeOr returns the mode a asks for, or def.
func modeOr(a sattr, def uint32) uint32 {
	if a.SetMode {
		return a.Mode & 0o7777
	}
	return def
}

func (s *Server) create(args []byte, w *xdrWriter) bool {
	a, err := decodeCreate(args)
	if err != nil {
		return false
	}
	s.makeEntry(a.Where, w, func(dirfd int, name string) (*sattr, error) {
		mode := unix.S_IFREG | modeOr(a.Attr, 0o644)
		switch a.Mode {
		case createExclusive:
			return nil, createExclusively(dirfd, name, a.Verf)
		case createGuarded:
			return &a.Attr, unix.Mknodat(dirfd, name, mode, 0)
		}
		err := unix.Mknodat(dirfd, name, mode, 0)
		if !errors.Is(err, unix.EEXIST) {
			return &a.Attr, err
		}
		// UNCHECKED on an existing regular file: only a size (the
		// truncation of O_TRUNC) applies.
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, unix.EEXIST
		}
		return &sattr{SetSize: a.Attr.SetSize, Size: a.Attr.Size}, nil
	})
	return true
}

// createExclusively creates name with O_EXCL semantics and records the
// client's verifier in its times, as the kernel's server does, so that a
// retransmitted CREATE (its reply was lost) finds its own file and
// succeeds, while another client's finds EEXIST. The client then sets the
// real mode and times with SETATTR.
func createExclusively(dirfd int, name string, verf [8]byte) error {
	mtime := int64(binary.BigEndian.Uint32(verf[0:4]))
	atime := int64(binary.BigEndian.Uint32(verf[4:8]))
	err := unix.Mknodat(dirfd, name, unix.S_IFREG, 0)
	if errors.Is(err, unix.EEXIST) {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mtim.Sec == mtime && st.Atim.Sec == atime {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	ts := []unix.Timespec{{Sec: atime}, {Sec: mtime}}
	return unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func (s *Server) mkdir(args []byte, w *xdrWriter) bool {
	a, err := decodeMkdir(args)
	if err != nil {
		return false
	}
	s.makeEntry(a.Where, w, func(dirfd int, name string) (*sattr, error) {
		return &a.Attr, unix.Mkdirat(dirfd, name, modeOr(a.Attr, 0o755))
	})
	return true
}

func (s *Server) symlink(args []byte, w *xdrWriter) bool {
	a, err := decodeSymlink(args)
	if err != nil {
		return false
	}
	s.makeEntry(a.Where, w, func(dirfd int, name string) (*sattr, error) {
		if a.Target == "" {
			return nil, unix.ENOENT
		}
		return nil, unix.Symlinkat(a.Target, dirfd, name)
	})
	return true
}

func (s *Server) mknod(args []byte, w *xdrWriter) bool {
	a, err := decodeMknod(args)
	if err != nil {
		return false
	}
	var kind uint32
	switch a.Type {
	case typeFifo:
		kind = unix.S_IFIFO
	case typeSock:
		kind = unix.S_IFSOCK
	case typeChr:
		kind = unix.S_IFCHR
	case typeBlk:
		kind = unix.S_IFBLK
	default:
		w.uint32(errBadType)
		w.wcc(nil, nil)
		return true
	}
	s.makeEntry(a.Where, w, func(dirfd int, name string) (*sattr, error) {
		return &a.Attr, unix.Mknodat(dirfd, name, kind|modeOr(a.Attr, 0o644), int(unix.Mkdev(a.Major, a.Minor)))
	})
	return true
}

// removeEntry runs remove in the directory where names and writes the wcc
// reply of REMOVE and RMDIR.
func (s *Server) removeEntry(where diropArgs, w *xdrWriter, flags int) {
	dir := s.resolveFor(w, where.Dir, noWcc)
	if dir == nil {
		return
	}
	defer dir.close()
	before := s.attrsOrNil(dir)
	err := writable(dir)
	if err == nil {
		err = checkName(where.Name, true)
	}
	if err == nil && (where.Name == "." || where.Name == "..") {
		err = unix.EINVAL
	}
	if err == nil {
		err = unix.Unlinkat(dir.fd, where.Name, flags)
	}
	w.status(err)
	w.wcc(preOpOf(before), s.attrsOrNil(dir))
}

func (s *Server) remove(args []byte, w *xdrWriter) bool {
	a, err := decodeDirop(args)
	if err != nil {
		return false
	}
	s.removeEntry(a, w, 0)
	return true
}

func (s *Server) rmdir(args []byte, w *xdrWriter) bool {
	a, err := decodeDirop(args)
	if err != nil {
		return false
	}
	s.removeEntry(a, w, unix.AT_REMOVEDIR)
	return true
}

func (s *Server) rename(args []byte, w *xdrWriter) bool {
	a, err := decodeRename(args)
	if err != nil {
		return false
	}
	from, err := s.resolve(a.From.Dir)
	var to *object
	if err == nil {
		defer from.close()
		to, err = s.resolve(a.To.Dir)
	}
	if err == nil {
		defer to.close()
	}
	fromBefore, toBefore := preOpOf(s.attrsOrNil(from)), preOpOf(s.attrsOrNil(to))
	if err == nil {
		err = writable(from)
	}
	if err == nil && from.exp != to.exp {
		err = unix.EXDEV
	}
	for _, n := range []string{a.From.Name, a.To.Name} {
		if err == nil {
			err = checkName(n, false)
		}
	}
	if err == nil {
		err = unix.Renameat(from.fd, a.From.Name, to.fd, a.To.Name)
	}
	w.status(err)
	w.wcc(fromBefore, s.attrsOrNil(from))
	w.wcc(toBefore, s.attrsOrNil(to))
	return true
}

func (s *Server) link(args []byte, w *xdrWriter) bool {
	a, err := decodeLink(args)
	if err != nil {
		return false
	}
	file, err := s.resolve(a.File)
	var dir *object
	if err == nil {
		defer file.close()
		dir, err = s.resolve(a.Link.Dir)
	}
	if err == nil {
		defer dir.close()
	}
	before := preOpOf(s.attrsOrNil(dir))
	if err == nil {
		err = writable(dir)
	}
	if err == nil && file.exp != dir.exp {
		err = unix.EXDEV
	}
	if err == nil {
		err = checkName(a.Link.Name, false)
	}
	if err == nil {
		// Linking a descriptor by its /proc path needs no capability
		// (AT_EMPTY_PATH would); the kernel's hard-link rules apply.
		err = unix.Linkat(unix.AT_FDCWD, procPath(file.fd), dir.fd, a.Link.Name, unix.AT_SYMLINK_FOLLOW)
	}
	w.status(err)
	w.postOpAttr(s.attrsOrNil(file))
	w.wcc(before, s.attrsOrNil(dir))
	return true
}
