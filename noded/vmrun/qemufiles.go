package vmrun

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// The descriptors a VM's QEMU inherits, at fixed numbers so that its
// command line is the same for every VM of a shape (and on both sides of a
// migration). QEMU runs as an unprivileged id of its own (identity.go)
// that can open nothing of the daemon's: the state directory stays the
// daemon's (root's, 0700), the output files the job's user's, and QEMU
// gets each file and socket it needs already open. An absent one is a
// hole (closed in QEMU).
const (
	fdTap      = 3 + iota // the NFS share's tap device (guestnet.go)
	fdKernel              // IMAGE/vmlinux, read-only
	fdInitrd              // DIR/job.initrd, read-only
	fdConsole             // DIR/console.log, appended
	fdStdout              // the job's stdout file, opened as the user
	fdStderr              // the job's stderr file, opened as the user
	fdControl             // DIR/control, appended
	fdQMP                 // DIR/qmp.sock, a listening socket
	fdAgent               // DIR/agent.sock, a listening socket
	fdVirtiofs            // a connection to virtiofsd's socket
	fdIncoming            // a migration stream to load (incoming.go)
	fdJobTap              // the job network's tap device (jobnet.go)
	fdEnd
)

// qemuFiles holds the descriptors QEMU inherits (index fd-3).
type qemuFiles [fdEnd - 3]*os.File

func (q *qemuFiles) set(fd int, f *os.File) { q[fd-3] = f }

// extra returns them as exec.Cmd.ExtraFiles.
func (q *qemuFiles) extra() []*os.File { return q[:] }

// close closes the daemon's copies once QEMU holds its own (or did not
// start).
func (q *qemuFiles) close() {
	for i, f := range q {
		if f != nil {
			f.Close()
			q[i] = nil
		}
	}
}

// fdPath names an inherited descriptor as a file QEMU opens by path
// (-kernel, -initrd): the kernel reopens the open file, so the
// directories above it need not be open to QEMU's id, only the file
// itself.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// fdChardev returns the arguments of a file chardev writing to an
// inherited descriptor: QEMU takes it from an fd set (-add-fd) rather than
// opening the path, so the file's permissions are never checked against
// QEMU's id.
func fdChardev(id string, fd int) []string {
	n := strconv.Itoa(fd)
	return []string{"-add-fd", "fd=" + n + ",set=" + n,
		"-chardev", "file,id=" + id + ",path=/dev/fdset/" + n + ",append=on"}
}

// socketChardev returns a -chardev value of a listening socket QEMU
// inherits: the daemon binds it, so the socket file is the daemon's and
// only the daemon connects.
func socketChardev(id string, fd int) string {
	return "socket,id=" + id + ",fd=" + strconv.Itoa(fd) + ",server=on,wait=off"
}

// openQEMUFiles opens what a's QEMU inherits, but the output files (which
// the caller opened as the job's user) and the tap device. The kernel must
// be readable by everyone (QEMU reopens it as its own id); the initrd,
// which holds the job's script and environment, is given to the VM's id
// alone (writeInitrd).
func openQEMUFiles(q *qemuFiles, a vmArgs) error {
	k, err := os.Open(a.img.Kernel)
	if err != nil {
		return fmt.Errorf("guest image %s: %w", a.img.Name, err)
	}
	q.set(fdKernel, k)
	if fi, err := k.Stat(); err == nil && os.Geteuid() == 0 && fi.Mode().Perm()&0o004 == 0 {
		return fmt.Errorf("guest image %s: its kernel %s (mode %o) is not readable by everyone, and the VM's QEMU runs as an unprivileged uid of its own: chmod a+r it", a.img.Name, a.img.Kernel, fi.Mode().Perm())
	}
	if a.baseInitrd {
		if fi, err := os.Stat(a.img.Initrd); err == nil && os.Geteuid() == 0 && fi.Mode().Perm()&0o004 == 0 {
			return fmt.Errorf("guest image %s: its initramfs %s (mode %o) is not readable by everyone, and the VM's QEMU runs as an unprivileged uid of its own: chmod a+r it", a.img.Name, a.img.Initrd, fi.Mode().Perm())
		}
	}
	files := []struct {
		fd   int
		path string
		flag int
	}{
		{fdInitrd, a.initrdPath(), os.O_RDONLY},
		{fdConsole, a.f.console, os.O_WRONLY | os.O_CREATE | os.O_APPEND},
		{fdControl, a.f.control, os.O_WRONLY | os.O_CREATE | os.O_APPEND},
	}
	for _, x := range files {
		fh, err := os.OpenFile(x.path, x.flag, 0o600)
		if err != nil {
			return fmt.Errorf("opening the VM's %s: %w", x.path, err)
		}
		q.set(x.fd, fh)
	}
	qmp, err := listenSocket(a.f.qmp)
	if err != nil {
		return err
	}
	q.set(fdQMP, qmp)
	if a.agent {
		ag, err := listenSocket(a.f.agentSock)
		if err != nil {
			return err
		}
		q.set(fdAgent, ag)
	}
	if a.virtiofs {
		c, err := dialWhenListening(a.f.vfsSock, 5*time.Second)
		if err != nil {
			return fmt.Errorf("connecting to virtiofsd: %w", err)
		}
		q.set(fdVirtiofs, c)
	}
	return nil
}

// listenSocket binds a Unix socket at path (mode 0600, the daemon's) and
// returns its listening descriptor. The socket file stays when the
// daemon's listener is closed: QEMU keeps listening on it.
func listenSocket(path string) (*os.File, error) {
	os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the VM's socket %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("the VM's socket %s: %w", path, err)
	}
	f, err := l.File()
	if err != nil {
		return nil, fmt.Errorf("the VM's socket %s: %w", path, err)
	}
	return f, nil
}

// dialSocket connects to a Unix socket and returns the connection's
// descriptor.
func dialSocket(path string) (*os.File, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.File()
}

// dialWhenListening is dialSocket for a server that creates its socket
// file (bind) a moment before it listens: a refused connection is tried
// again until wait has passed. virtiofsd is such a server, and it takes
// only one connection, so its readiness cannot be probed by connecting.
func dialWhenListening(path string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		f, err := dialSocket(path)
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return f, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
