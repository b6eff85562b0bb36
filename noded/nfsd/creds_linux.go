package nfsd

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// creds are the job's user: every file operation runs with them as the
// calling thread's file-system ids and groups.
//
// Linux keeps credentials per thread; the setfsuid, setfsgid and setgroups
// system calls made directly (not through syscall.Setgroups, which changes
// every thread of the process) change only the calling thread. The server
// therefore runs its file operations on worker goroutines locked to their
// threads, each of which takes the user's credentials once and keeps them.
//
// Changing the fsuid from 0 to another id clears the thread's effective
// file capabilities (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, …);
// changing it back to 0 restores them from the permitted set. The server
// uses that for the few steps that need root: open_by_handle_at (it needs
// CAP_DAC_READ_SEARCH) and the owner's override of a file's mode that NFS
// servers grant (see openData).
type creds struct {
	UID, GID uint32
	Groups   []uint32
}

// become gives the calling thread, which must be locked to its goroutine,
// the user's credentials.
func (c creds) become() error {
	if err := setThreadGroups(c.Groups); err != nil {
		return err
	}
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	// setfs[ug]id return the previous id, never an error: read them back.
	if fsid(syscall.SYS_SETFSUID) != c.UID || fsid(syscall.SYS_SETFSGID) != c.GID {
		return errors.New("setfsuid/setfsgid did not take (the file server must run as root)")
	}
	return nil
}

// asRoot runs fn with the thread's fsuid 0, and so with the process's
// capabilities, then returns to the user's fsuid. The groups stay the
// user's: root's access does not depend on them.
func (c creds) asRoot(fn func() error) error {
	if c.UID == 0 {
		return fn()
	}
	syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
	err := fn()
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	return err
}

// fsid returns the thread's fsuid or fsgid: setfs[ug]id(-1) fails and
// returns the current one.
func fsid(call uintptr) uint32 {
	r, _, _ := syscall.RawSyscall(call, ^uintptr(0), 0, 0)
	return uint32(r)
}

// setThreadGroups is setgroups(2) for the calling thread only.
func setThreadGroups(groups []uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	return nil
}
