package nfsd

import (
	"errors"
	"syscall"
)

// nfsstat3 values (RFC 1813 section 2.6).
const (
	nfsOK             = 0
	errPerm           = 1
	errNoEnt          = 2
	errIO             = 5
	errNXIO           = 6
	errAcces          = 13
	errExist          = 17
	errXDev           = 18
	errNoDev          = 19
	errNotDir         = 20
	errIsDir          = 21
	errInval          = 22
	errFBig           = 27
	errNoSpc          = 28
	errROFS           = 30
	errMLink          = 31
	errNameTooLong    = 63
	errNotEmpty       = 66
	errDQuot          = 69
	errStale          = 70
	errBadHandleStat  = 10001
	errNotSync        = 10002
	errBadCookie      = 10003
	errNotSupp        = 10004
	errTooSmall       = 10005
	errServerFault    = 10006
	errBadType        = 10007
	errJukebox        = 10008
	mountErrNoEnt     = 2
	mountErrAcces     = 13
	mountErrNotDir    = 20
	mountErrServFault = 10006
)

// statusOf maps an error of a file operation to the NFS status the client
// turns back into the same errno: what the host's kernel said is what the
// job sees. An errno NFSv3 has no status for becomes NFS3ERR_IO, as with
// the kernel's own server; EAGAIN and ENOMEM become NFS3ERR_JUKEBOX, which
// makes the client retry later instead of failing.
func statusOf(err error) uint32 {
	if err == nil {
		return nfsOK
	}
	if errors.Is(err, errBadHandle) {
		return errBadHandleStat
	}
	var en syscall.Errno
	if !errors.As(err, &en) {
		return errServerFault
	}
	switch en {
	case syscall.EPERM:
		return errPerm
	case syscall.ENOENT:
		return errNoEnt
	case syscall.ENXIO:
		return errNXIO
	case syscall.EACCES:
		return errAcces
	case syscall.EEXIST:
		return errExist
	case syscall.EXDEV:
		return errXDev
	case syscall.ENODEV:
		return errNoDev
	case syscall.ENOTDIR:
		return errNotDir
	case syscall.EISDIR:
		return errIsDir
	case syscall.EINVAL, syscall.ELOOP:
		return errInval
	case syscall.EFBIG:
		return errFBig
	case syscall.ENOSPC:
		return errNoSpc
	case syscall.EROFS:
		return errROFS
	case syscall.EMLINK:
		return errMLink
	case syscall.ENAMETOOLONG:
		return errNameTooLong
	case syscall.ENOTEMPTY:
		return errNotEmpty
	case syscall.EDQUOT:
		return errDQuot
	case syscall.ESTALE:
		return errStale
	case syscall.EOPNOTSUPP:
		return errNotSupp
	case syscall.EAGAIN, syscall.ENOMEM:
		return errJukebox
	case syscall.EBADF:
		return errBadHandleStat
	default:
		return errIO
	}
}
