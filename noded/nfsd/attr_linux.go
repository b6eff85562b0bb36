package nfsd

import (
	"golang.org/x/sys/unix"
)

// attrs are an object's attributes as the reply encodes them (fattr3),
// with the fsid and fileid the export presents.
type attrs struct {
	st     unix.Stat_t
	fsid   uint64
	fileid uint64
}

// fileType returns the ftype3 of a st_mode.
func fileType(mode uint32) uint32 {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return typeDir
	case unix.S_IFBLK:
		return typeBlk
	case unix.S_IFCHR:
		return typeChr
	case unix.S_IFLNK:
		return typeLnk
	case unix.S_IFSOCK:
		return typeSock
	case unix.S_IFIFO:
		return typeFifo
	default:
		return typeReg
	}
}

// fattr writes fattr3.
func (w *xdrWriter) fattr(a *attrs) {
	st := &a.st
	w.uint32(fileType(st.Mode))
	w.uint32(st.Mode & 0o7777)
	w.uint32(uint32(st.Nlink))
	w.uint32(st.Uid)
	w.uint32(st.Gid)
	w.uint64(uint64(st.Size))
	w.uint64(uint64(st.Blocks) * 512)
	w.uint32(unix.Major(st.Rdev))
	w.uint32(unix.Minor(st.Rdev))
	w.uint64(a.fsid)
	w.uint64(a.fileid)
	w.timespec(st.Atim)
	w.timespec(st.Mtim)
	w.timespec(st.Ctim)
}

func (w *xdrWriter) timespec(t unix.Timespec) {
	w.uint32(uint32(t.Sec))
	w.uint32(uint32(t.Nsec))
}

// postOpAttr writes post_op_attr: the attributes when a is set.
func (w *xdrWriter) postOpAttr(a *attrs) {
	w.bool(a != nil)
	if a != nil {
		w.fattr(a)
	}
}

// preOp is pre_op_attr's content: what wcc_data compares.
type preOp struct {
	size         uint64
	mtime, ctime unix.Timespec
}

func preOpOf(a *attrs) *preOp {
	if a == nil {
		return nil
	}
	return &preOp{size: uint64(a.st.Size), mtime: a.st.Mtim, ctime: a.st.Ctim}
}

// wcc writes wcc_data: the attributes before and after an operation.
func (w *xdrWriter) wcc(before *preOp, after *attrs) {
	w.bool(before != nil)
	if before != nil {
		w.uint64(before.size)
		w.timespec(before.mtime)
		w.timespec(before.ctime)
	}
	w.postOpAttr(after)
}

// postOpFH writes post_op_fh3.
func (w *xdrWriter) postOpFH(fh []byte) {
	w.bool(fh != nil)
	if fh != nil {
		w.opaque(fh)
	}
}
