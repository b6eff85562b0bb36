package nfsd

import (
	"errors"

	"golang.org/x/sys/unix"
)

const (
	xattrACLAccess  = "system.posix_acl_access"
	xattrACLDefault = "system.posix_acl_default"
)

// An aclProc is one NFSACL procedure, as nfsProc.
type aclProc func(s *Server, args []byte, w *xdrWriter) bool

var aclProcs = [...]aclProc{
	aclProcNull:   func(*Server, []byte, *xdrWriter) bool { return true },
	aclProcGetacl: (*Server).getacl,
	aclProcSetacl: (*Server).setacl,
}

// readACL returns o's ACL of the given kind as the user reads it; none
// (nil) when it has none or its file system keeps none.
func readACL(o *object, name string) ([]aclEntry, error) {
	buf := make([]byte, 8+8*maxACLEntries)
	n, err := unix.Getxattr(procPath(o.fd), name, buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return xattrACL(buf[:n]), nil
}

func (s *Server) getacl(args []byte, w *xdrWriter) bool {
	a, err := decodeGetacl(args)
	if err != nil {
		return false
	}
	o := s.resolveFor(w, a.Obj, noAttrs)
	if o == nil {
		return true
	}
	defer o.close()
	at, err := s.attrsOf(o)
	var access, def []aclEntry
	if err == nil && a.Mask&(aclAccess|aclAccessCount) != 0 {
		access, err = readACL(o, xattrACLAccess)
	}
	if err == nil && a.Mask&(aclDefault|aclDefaultCnt) != 0 && at.st.Mode&unix.S_IFMT == unix.S_IFDIR {
		def, err = readACL(o, xattrACLDefault)
	}
	if w.status(err) != nfsOK {
		w.postOpAttr(at)
		return true
	}
	w.postOpAttr(at)
	w.uint32(a.Mask)
	w.acl(access, a.Mask&aclAccess != 0, at.st.Uid, at.st.Gid, 0)
	w.acl(def, a.Mask&aclDefault != 0, at.st.Uid, at.st.Gid, aclDefaultFlag)
	return true
}

// setacl sets the ACLs the client sends, as the user (only the owner
// may). The kernel turns an ACL that says no more than a mode into that
// mode.
func (s *Server) setacl(args []byte, w *xdrWriter) bool {
	a, err := decodeSetacl(args)
	if err != nil {
		return false
	}
	o := s.resolveFor(w, a.Obj, noAttrs)
	if o == nil {
		return true
	}
	defer o.close()
	err = writable(o)
	path := procPath(o.fd)
	if err == nil && a.Mask&aclAccess != 0 {
		err = unix.Setxattr(path, xattrACLAccess, aclXattr(a.Access), 0)
	}
	if err == nil && a.Mask&aclDefault != 0 {
		if len(a.Default) == 0 {
			if err = unix.Removexattr(path, xattrACLDefault); errors.Is(err, unix.ENODATA) {
				err = nil
			}
		} else {
			err = unix.Setxattr(path, xattrACLDefault, aclXattr(a.Default), 0)
		}
	}
	w.status(err)
	w.postOpAttr(s.attrsOrNil(o))
	return true
}
