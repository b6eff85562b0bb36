package nfsd

import (
	"errors"

	"golang.org/x/sys/unix"
)

// An nfsProc is one NFSv3 procedure. It decodes its arguments and writes
// its results (status first) to w; false means the arguments did not
// decode, and the call is answered GARBAGE_ARGS. It runs on a worker
// thread with the job's user's credentials (see creds).
type nfsProc func(s *Server, args []byte, w *xdrWriter) bool

var nfsProcs = [...]nfsProc{
	procNull:        func(*Server, []byte, *xdrWriter) bool { return true },
	procGetattr:     (*Server).getattr,
	procSetattr:     (*Server).setattrProc,
	procLookup:      (*Server).lookup,
	procAccess:      (*Server).access,
	procReadlink:    (*Server).readlink,
	procRead:        (*Server).read,
	procWrite:       (*Server).write,
	procCreate:      (*Server).create,
	procMkdir:       (*Server).mkdir,
	procSymlink:     (*Server).symlink,
	procMknod:       (*Server).mknod,
	procRemove:      (*Server).remove,
	procRmdir:       (*Server).rmdir,
	procRename:      (*Server).rename,
	procLink:        (*Server).link,
	procReaddir:     (*Server).readdir,
	procReaddirplus: (*Server).readdirplus,
	procFsstat:      (*Server).fsstat,
	procFsinfo:      (*Server).fsinfo,
	procPathconf:    (*Server).pathconf,
	procCommit:      (*Server).commit,
}

// status writes the status of err.
func (w *xdrWriter) status(err error) uint32 {
	st := statusOf(err)
	w.uint32(st)
	return st
}

func (s *Server) getattr(args []byte, w *xdrWriter) bool {
	fh, err := decodeFH(args)
	if err != nil {
		return false
	}
	var a *attrs
	o, err := s.resolve(fh)
	if err == nil {
		defer o.close()
		a, err = s.attrsOf(o)
	}
	if w.status(err) == nfsOK {
		w.fattr(a)
	}
	return true
}

func (s *Server) setattrProc(args []byte, w *xdrWriter) bool {
	a, err := decodeSetattr(args)
	if err != nil {
		return false
	}
	o := s.resolveFor(w, a.Obj, noWcc)
	if o == nil {
		return true
	}
	defer o.close()
	before := s.attrsOrNil(o)
	err = writable(o)
	if err == nil && a.Guard && (before == nil ||
		uint32(before.st.Ctim.Sec) != a.GuardCtime.Sec || uint32(before.st.Ctim.Nsec) != a.GuardCtime.Nsec) {
		w.uint32(errNotSync)
		w.wcc(preOpOf(before), before)
		return true
	}
	if err == nil {
		err = s.setattr(o, a.Attr)
	}
	w.status(err)
	w.wcc(preOpOf(before), s.attrsOrNil(o))
	return true
}

// setattr applies what a SETATTR (or the attributes of a CREATE, MKDIR,
// ...) asks, as the user: the size first, as the kernel's server does,
// then the mode, the owner and the times.
func (s *Server) setattr(o *object, a sattr) error {
	if a.SetSize {
		fd, err := s.openData(o, unix.O_WRONLY)
		if err != nil {
			return err
		}
		err = unix.Ftruncate(fd, int64(a.Size))
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	if a.SetMode {
		if err := unix.Fchmodat(unix.AT_FDCWD, procPath(o.fd), a.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	if a.SetUID || a.SetGID {
		uid, gid := -1, -1
		if a.SetUID {
			uid = int(a.UID)
		}
		if a.SetGID {
			gid = int(a.GID)
		}
		if err := unix.Fchownat(o.fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
	}
	if a.Atime == timeDontChange && a.Mtime == timeDontChange {
		return nil
	}
	ts := []unix.Timespec{timeSpec(a.Atime, a.AtimeV), timeSpec(a.Mtime, a.MtimeV)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, procPath(o.fd), ts, 0)
}

func timeSpec(how uint32, v nfstime) unix.Timespec {
	switch how {
	case timeServer:
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	case timeClient:
		return unix.Timespec{Sec: int64(v.Sec), Nsec: int64(v.Nsec)}
	default:
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
}

func (s *Server) lookup(args []byte, w *xdrWriter) bool {
	a, err := decodeDirop(args)
	if err != nil {
		return false
	}
	dir := s.resolveFor(w, a.Dir, noAttrs)
	if dir == nil {
		return true
	}
	defer dir.close()
	dattr := s.attrsOrNil(dir)
	if err = checkName(a.Name, true); err == nil && dattr != nil && dattr.st.Mode&unix.S_IFMT != unix.S_IFDIR {
		err = unix.ENOTDIR
	}
	var fh []byte
	var oattr *attrs
	if err == nil {
		fh, oattr, err = s.child(dir, a.Name)
	}
	if w.status(err) == nfsOK {
		w.opaque(fh)
		w.postOpAttr(oattr)
	}
	w.postOpAttr(dattr)
	return true
}

// ACCESS3 bits.
const (
	accessRead    = 0x01
	accessLookup  = 0x02
	accessModify  = 0x04
	accessExtend  = 0x08
	accessDelete  = 0x10
	accessExecute = 0x20
)

func (s *Server) access(args []byte, w *xdrWriter) bool {
	a, err := decodeAccess(args)
	if err != nil {
		return false
	}
	o := s.resolveFor(w, a.Obj, noAttrs)
	if o == nil {
		return true
	}
	defer o.close()
	at, err := s.attrsOf(o)
	if w.status(err) != nfsOK {
		w.postOpAttr(nil)
		return true
	}
	isDir := at.st.Mode&unix.S_IFMT == unix.S_IFDIR
	may := func(mode uint32) bool {
		return unix.Faccessat2(o.fd, "", mode, unix.AT_EACCESS|unix.AT_EMPTY_PATH) == nil
	}
	var granted uint32
	if a.Access&accessRead != 0 && may(unix.R_OK) {
		granted |= accessRead
	}
	if a.Access&(accessModify|accessExtend|accessDelete) != 0 && o.exp.rw && may(unix.W_OK) {
		granted |= a.Access & (accessModify | accessExtend)
		if isDir {
			granted |= a.Access & accessDelete
		}
	}
	if a.Access&(accessLookup|accessExecute) != 0 && may(unix.X_OK) {
		if isDir {
			granted |= a.Access & accessLookup
		} else {
			granted |= a.Access & accessExecute
		}
	}
	w.postOpAttr(at)
	w.uint32(granted)
	return true
}

func (s *Server) readlink(args []byte, w *xdrWriter) bool {
	fh, err := decodeFH(args)
	if err != nil {
		return false
	}
	o := s.resolveFor(w, fh, noAttrs)
	if o == nil {
		return true
	}
	defer o.close()
	buf := make([]byte, maxPath)
	n, err := unix.Readlinkat(o.fd, "", buf)
	if errors.Is(err, unix.ENOENT) {
		err = unix.EINVAL // not a symlink
	}
	st := w.status(err)
	w.postOpAttr(s.attrsOrNil(o))
	if st == nfsOK {
		w.opaque(buf[:n])
	}
	return true
}
