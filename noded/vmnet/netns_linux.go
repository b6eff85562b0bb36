package vmnet

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Netns is a network namespace of one job VM, kept alive by a bind mount of
// its nsfs file at Path: it outlives the processes in it (the file server
// may be restarted) and the daemon that made it (a restarted daemon opens
// it again by path).
type Netns struct {
	Path string
}

// Create makes a new, empty network namespace (only its loopback device, up)
// and keeps it at path, which must not exist yet. It needs CAP_SYS_ADMIN.
func Create(path string) (*Netns, error) {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	fh.Close()
	err = onNewThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s to %s: %w", src, path, err)
		}
		// Traffic to the namespace's own addresses goes through its
		// loopback, which starts down.
		s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(s)
		if err := up(s, "lo"); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
		return nil
	})
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("creating the VM's network namespace: %w (the node daemon must run as root)", err)
	}
	return &Netns{Path: path}, nil
}

// Open returns the namespace kept at path by an earlier Create, perhaps of
// another daemon.
func Open(path string) (*Netns, error) {
	var st, self unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	if err := unix.Statfs("/proc/self/ns/net", &self); err == nil && st.Type != self.Type {
		return nil, fmt.Errorf("network namespace %s: not a namespace file (it is no longer mounted)", path)
	}
	return &Netns{Path: path}, nil
}

// Remove unmounts the namespace's file and removes it. The namespace itself
// ends when nothing else holds it: the tap device dies with the last
// descriptor of it (QEMU's), sockets with their processes.
func (n *Netns) Remove() error {
	err := unix.Unmount(n.Path, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", n.Path, err)
	}
	if err := os.Remove(n.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Do runs fn on an OS thread inside the namespace. Sockets and devices fn
// creates belong to the namespace whichever thread uses them later. The
// thread is discarded afterwards, never handed back to other goroutines.
func (n *Netns) Do(fn func() error) error {
	return onNewThread(func() error {
		fd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("network namespace %s: %w", n.Path, err)
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("entering network namespace %s: %w", n.Path, err)
		}
		return fn()
	})
}

// Listen opens a TCP listener on addr inside the namespace.
func (n *Netns) Listen(addr string) (*net.TCPListener, error) {
	var l net.Listener
	err := n.Do(func() (err error) {
		l, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return l.(*net.TCPListener), nil
}

// onNewThread runs fn on a goroutine locked to its OS thread and never
// unlocks it, so that the runtime ends the thread with the goroutine: a
// thread whose namespaces fn changed is never reused.
func onNewThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}
