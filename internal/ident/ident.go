package ident

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// User is a user as the node knows it.
type User struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"` // supplementary groups, sorted, the primary one included
	Home   string   `json:"home,omitempty"`
	Shell  string   `json:"shell,omitempty"`
}

// ErrUnknownUser is wrapped by Lookup's error for a name the node does not
// know.
var ErrUnknownUser = errors.New("unknown user")

// Lookup resolves name in the node's passwd and group databases.
func Lookup(name string) (User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return User{}, fmt.Errorf("%w %q", ErrUnknownUser, name)
		}
		return User{}, fmt.Errorf("looking up user %q: %w", name, err)
	}
	return fromOS(u)
}

// LookupID resolves a uid in the node's passwd and group databases (the
// host's agent learns the uid of its caller from the kernel and needs the
// name and groups).
func LookupID(uid uint32) (User, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		var unknown user.UnknownUserIdError
		if errors.As(err, &unknown) {
			return User{}, fmt.Errorf("%w: uid %d has no passwd entry", ErrUnknownUser, uid)
		}
		return User{}, fmt.Errorf("looking up uid %d: %w", uid, err)
	}
	return fromOS(u)
}

// Self returns the user the process runs as.
func Self() (User, error) {
	u, err := user.Current()
	if err != nil {
		uid := uint32(os.Getuid())
		return User{Name: strconv.Itoa(int(uid)), UID: uid, GID: uint32(os.Getgid()), Home: "/"}, nil
	}
	return fromOS(u)
}

func fromOS(u *user.User) (User, error) {
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return User{}, fmt.Errorf("user %q: uid %q or gid %q is not a number", u.Username, u.Uid, u.Gid)
	}
	out := User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir, Shell: shellOf(u.Username)}
	ids, err := u.GroupIds()
	if err != nil {
		ids = []string{u.Gid}
	}
	seen := map[uint32]bool{}
	for _, s := range append(ids, u.Gid) {
		g, err := strconv.ParseUint(s, 10, 32)
		if err == nil && !seen[uint32(g)] {
			seen[uint32(g)] = true
			out.Groups = append(out.Groups, uint32(g))
		}
	}
	sort.Slice(out.Groups, func(i, j int) bool { return out.Groups[i] < out.Groups[j] })
	return out, nil
}

// shellOf reads the login shell from /etc/passwd, which os/user does not
// report; "" when it cannot be found.
func shellOf(name string) string {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, ":"); len(f) >= 7 && f[0] == name {
			return f[6]
		}
	}
	return ""
}

// IsRoot reports whether u is the superuser.
func (u User) IsRoot() bool { return u.UID == 0 }

// Credential returns u as the credential of a process to start
// (exec.Cmd.SysProcAttr.Credential).
func (u User) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: append([]uint32(nil), u.Groups...)}
}

// Do runs fn with u's file-system credentials on a locked OS thread (see
// the package documentation). For the user the process already is, or when
// the process is not root (it could not switch), fn runs as it is.
func (u User) Do(fn func() error) error {
	if os.Geteuid() != 0 || u.UID == 0 {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := threadGroups()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("acting as %s: %w", u.Name, err)
	}
	if err := u.enter(); err != nil {
		if leave(orig) == nil {
			runtime.UnlockOSThread()
		}
		return fmt.Errorf("acting as %s: %w", u.Name, err)
	}
	ferr := fn()
	if err := leave(orig); err != nil {
		// The thread keeps the user's credentials: leave it locked, so
		// that it ends with this goroutine.
		return errors.Join(ferr, fmt.Errorf("restoring root after acting as %s: %w", u.Name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

func (u User) enter() error {
	if err := setThreadGroups(u.Groups); err != nil {
		return err
	}
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(u.GID), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(u.UID), 0, 0)
	// setfs[ug]id return the previous id and no error: read back.
	if fsuid() != u.UID || fsgid() != u.GID {
		return errors.New("setfsuid/setfsgid did not take")
	}
	return nil
}

func leave(groups []uint32) error {
	syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSGID, 0, 0, 0)
	if fsuid() != 0 || fsgid() != 0 {
		return errors.New("setfsuid(0) did not take")
	}
	return setThreadGroups(groups)
}

// fsuid returns the thread's fsuid: setfsuid(-1) fails and returns it.
func fsuid() uint32 {
	r, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	return uint32(r)
}

func fsgid() uint32 {
	r, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
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

func threadGroups() ([]uint32, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_GETGROUPS, 0, 0, 0)
	if e != 0 {
		return nil, fmt.Errorf("getgroups: %w", e)
	}
	if n == 0 {
		return nil, nil
	}
	g := make([]uint32, n)
	n, _, e = syscall.RawSyscall(syscall.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&g[0])), 0)
	if e != 0 {
		return nil, fmt.Errorf("getgroups: %w", e)
	}
	return g[:n], nil
}
