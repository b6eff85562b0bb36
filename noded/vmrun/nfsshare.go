package vmrun

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"corral/api"
	"corral/internal/ident"
	"corral/internal/procref"
	"corral/noded"
	"corral/noded/cgroup"
	"corral/noded/nfsd"
	"corral/noded/vmnet"
	"corral/vmimage"
)

// Files of the NFS share in a VM's state directory.
const (
	nfsConfFile  = "nfsd.conf" // the server's configuration (nfsd.ProcessConfig)
	nfsStateFile = "nfsd.json" // the running server's pid and start time
	nfsLogFile   = "nfsd.log"  // the server's log, appended across restarts
	// nfsPort is where the server listens, for both MOUNT and NFS.
	nfsPort = 2049
)

// nfsState is nfsd.json: what Recover needs to find the server again.
type nfsState struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_ticks"`
}

// nfsServer is the file server of one VM's NFS share: a process of its
// own (`corral nfsd`), in a session of its own so that it outlives a
// restarting daemon, serving on a listener in the VM's network namespace.
// The daemon restarts it when it dies while the VM runs; the guest sees a
// stall (its connection breaks, the hard mount retries on a new one) and
// no error. It exits by itself when its VM's QEMU does.
type nfsServer struct {
	log  *slog.Logger
	argv []string // the server's command, without its configuration file
	dir  string
	net  *guestNet
	grp  *cgroup.Group
	conf nfsd.ProcessConfig

	mu      sync.Mutex
	ln      *os.File // the listener, kept open across server restarts
	proc    *procref.Ref
	cmd     *exec.Cmd
	stopped bool
	exited  chan struct{} // closed when the current process has exited
}

// nfsFS returns the job's file system over NFS for the guest: its root
// (the host's /, or the partition's root directory) and each outermost
// shared path (an inner one is already inside the outer one's export).
func nfsFS(root string, shares []string) *vmimage.FS {
	if root == "" {
		root = "/"
	}
	return &vmimage.FS{Kind: vmimage.ShareNFS, Addr: serverAddr.Addr().String(), Port: nfsPort, Export: root,
		GuestAddr: guestAddr.String(), MTU: netMTU, Shares: outermost(shares)}
}

// outermost drops the paths that lie inside another of paths.
func outermost(paths []string) []string {
	sorted := append([]string(nil), paths...)
	sort.Strings(sorted)
	var out []string
	for _, p := range sorted {
		if n := len(out); n > 0 && (p == out[n-1] || strings.HasPrefix(p, strings.TrimSuffix(out[n-1], "/")+"/")) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// prepareNFS creates the VM's network namespace, its tap device and the
// server's listener; the server starts once QEMU runs (startNFS).
func (r *Runner) prepareNFS(dir string, spec noded.LaunchSpec, gfs *vmimage.FS, o startOpts) (*nfsServer, error) {
	gn, err := newGuestNet(dir, r.nodeNS)
	if err != nil {
		return nil, err
	}
	if spec.Network == api.NetworkNode {
		if err := r.connectOutbound(dir, gn); err != nil {
			gn.remove()
			return nil, err
		}
	}
	ln, err := listenerFile(gn.ns)
	if err != nil {
		gn.remove()
		return nil, fmt.Errorf("the VM's file server: %w", err)
	}
	u := spec.User
	switch {
	case o.warm != "":
		u = warmUser()
	case u.Name == "":
		u = ident.User{Name: "root", Groups: []uint32{0}}
	}
	keys := o.keys
	if keys == nil {
		k, err := newHandleKeys()
		if err != nil {
			ln.Close()
			gn.remove()
			return nil, err
		}
		keys = &k
	}
	return &nfsServer{
		log: r.log.With("dir", dir), argv: r.nfsArgv(), dir: dir, net: gn, ln: ln,
		conf: nfsd.ProcessConfig{User: u, Root: gfs.Export, Shares: gfs.Shares, HandleKey: keys.job, RootHandleKey: keys.root},
	}, nil
}

// handleKeys are the handle keys of a VM's file servers (nfsd.Config).
// Every server of the job (a restarted one, the one on the node the VM
// migrates to) gets the same.
type handleKeys struct {
	job []byte
	// root, when set, is the root export's own key: a warm start's
	// snapshot's, whose guest mounted the root before its job existed.
	root []byte
}

// newHandleKeys makes a job's keys.
func newHandleKeys() (handleKeys, error) {
	key := make([]byte, nfsd.HandleKeyLen)
	if _, err := rand.Read(key); err != nil {
		return handleKeys{}, fmt.Errorf("the VM's file server: a handle key: %w", err)
	}
	return handleKeys{job: key}, nil
}

// nfsArgv is the file server's command: Config.NFSServer, or this
// program's own `nfsd` subcommand.
func (r *Runner) nfsArgv() []string {
	if len(r.cfg.NFSServer) > 0 {
		return r.cfg.NFSServer
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "corral"
	}
	return []string{exe, "nfsd"}
}

// listenerFile opens the server's listener in the namespace and returns
// its descriptor.
func listenerFile(ns *vmnet.Netns) (*os.File, error) {
	l, err := ns.Listen(netip.AddrPortFrom(serverAddr.Addr(), nfsPort).String())
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.File()
}

// start starts the server for the QEMU process pid (started at start
// ticks), and then keeps it running until stop.
func (n *nfsServer) start(pid int, start uint64, grp *cgroup.Group) error {
	n.conf.VMPID, n.conf.VMStart, n.grp = pid, start, grp
	b, err := json.Marshal(n.conf)
	if err == nil {
		err = procref.WriteJSON(filepath.Join(n.dir, nfsConfFile), json.RawMessage(b))
	}
	if err != nil {
		return fmt.Errorf("writing the file server's configuration: %w", err)
	}
	if err := n.spawn(); err != nil {
		return err
	}
	go n.supervise()
	return nil
}

// spawn starts one server process and records it.
func (n *nfsServer) spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return errors.New("stopped")
	}
	if n.ln == nil {
		ln, err := listenerFile(n.net.ns)
		if err != nil {
			return err
		}
		n.ln = ln
	}
	logf, err := os.OpenFile(filepath.Join(n.dir, nfsLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	argv := append(append([]string(nil), n.argv...), filepath.Join(n.dir, nfsConfFile))
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: n.dir, Stdout: logf, Stderr: logf,
		ExtraFiles: []*os.File{n.ln}, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the VM's file server %s: %w", argv[0], err)
	}
	st, err := procref.ReadStat(cmd.Process.Pid)
	var p *procref.Ref
	if err == nil {
		p, err = procref.Open(cmd.Process.Pid, st.Start, true)
	}
	if err == nil {
		err = procref.WriteJSON(filepath.Join(n.dir, nfsStateFile), nfsState{PID: cmd.Process.Pid, Start: st.Start})
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("recording the VM's file server: %w", err)
	}
	if n.grp != nil {
		if err := n.grp.Add(cmd.Process.Pid); err != nil {
			n.log.Warn("cannot put the VM's file server in its cgroup", "err", err)
		}
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	n.cmd, n.proc, n.exited = cmd, p, exited
	return nil
}

// adopt takes over a server process an earlier daemon started.
func (n *nfsServer) adopt(p *procref.Ref) {
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	n.proc, n.exited = p, exited
	go n.supervise()
}

// supervise restarts the server whenever it exits before stop, waiting a
// little longer after each quick failure.
func (n *nfsServer) supervise() {
	wait := 20 * time.Millisecond
	for {
		n.mu.Lock()
		exited := n.exited
		n.mu.Unlock()
		<-exited
		n.mu.Lock()
		stopped := n.stopped
		if n.proc != nil {
			n.proc.Close()
		}
		n.mu.Unlock()
		if stopped || !n.vmAlive() {
			return
		}
		n.log.Warn("the job VM's file server exited; restarting it (the guest waits meanwhile)",
			"log", tailFile(filepath.Join(n.dir, nfsLogFile), 2, 300))
		for {
			time.Sleep(wait)
			wait = min(2*wait, 2*time.Second)
			err := n.spawn()
			if err == nil {
				break
			}
			if n.isStopped() {
				return
			}
			n.log.Error("cannot restart the job VM's file server", "err", err)
		}
	}
}

// vmAlive reports whether the QEMU process the server serves still runs
// (the server exits by itself when it ends, before stop is called).
func (n *nfsServer) vmAlive() bool {
	p, err := procref.Open(n.conf.VMPID, n.conf.VMStart, false)
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Alive()
}

func (n *nfsServer) isStopped() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopped
}

// stop ends the server for good (its VM is gone) and removes the VM's
// network.
func (n *nfsServer) stop() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.stopped = true
	p, exited := n.proc, n.exited
	if n.ln != nil {
		n.ln.Close()
		n.ln = nil
	}
	n.mu.Unlock()
	if p != nil {
		p.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			p.Signal(syscall.SIGKILL)
			<-exited
		}
	}
	n.net.remove()
	os.Remove(filepath.Join(n.dir, nfsStateFile))
}

// PID returns the running server process's pid, 0 when none runs.
func (n *nfsServer) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.Exited() {
		return 0
	}
	return n.proc.PID()
}

// recoverNFS finds the file server of a VM an earlier daemon started in
// dir: nil when the VM has none. When the VM still runs (vmAlive) the
// server is adopted, or restarted if it died meanwhile; otherwise what is
// left of it is stopped and removed.
//
// A migration's destination whose server was held back (holdNFS: no
// server record yet, but its namespace) comes back held (held set) while
// the VM runs, and is removed otherwise.
func (r *Runner) recoverNFS(dir string, vmAlive bool) (n *nfsServer, held bool) {
	var st nfsState
	err := procref.ReadJSON(filepath.Join(dir, nfsStateFile), &st)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("cannot read the VM's file server record", "dir", dir, "err", err)
		return nil, false
	}
	noServer := err != nil
	n = &nfsServer{log: r.log.With("dir", dir), argv: r.nfsArgv(), dir: dir}
	if ns, err := vmnet.Open(filepath.Join(dir, netnsFile)); err == nil {
		n.net = &guestNet{ns: ns, out: r.recoverOutbound(dir, ns, vmAlive), node: r.nodeNS}
	} else if noServer {
		return nil, false
	}
	var conf nfsd.ProcessConfig
	if err := procref.ReadJSON(filepath.Join(dir, nfsConfFile), &conf); err == nil {
		n.conf = conf
	}
	if noServer {
		if !vmAlive {
			n.stop()
			return nil, false
		}
		return n, true
	}
	p, err := procref.Open(st.PID, st.Start, false)
	if !vmAlive {
		if err == nil {
			n.proc, n.exited = p, make(chan struct{})
			go func() { p.Wait(); close(n.exited) }()
		}
		n.stop()
		return nil, false
	}
	if n.net == nil {
		r.log.Error("the VM's network namespace is gone: its file server cannot be restarted", "dir", dir)
		return n, false
	}
	if err != nil {
		// Died while no daemon watched: start it again at once.
		n.exited = make(chan struct{})
		close(n.exited)
		go n.supervise()
		return n, false
	}
	n.adopt(p)
	return n, false
}

// startNFS starts the VM's file server and ties it to the VM: it is
// stopped when QEMU exits.
func (v *VM) startNFS(n *nfsServer, grp *cgroup.Group) error {
	if err := n.start(v.st.PID, v.st.Start, grp); err != nil {
		return err
	}
	v.attachNFS(n)
	return nil
}

// attachNFS makes n the VM's file server; when QEMU has exited already,
// it stops n at once.
func (v *VM) attachNFS(n *nfsServer) {
	if n == nil {
		return
	}
	v.nfsMu.Lock()
	gone := v.gone
	if !gone {
		v.nfs = n
	}
	v.nfsMu.Unlock()
	if gone {
		n.stop()
	}
}

// stopNFS stops the VM's file server, once QEMU has exited, or removes
// the one a migration destination held back (its namespace).
func (v *VM) stopNFS() {
	v.nfsMu.Lock()
	v.gone = true
	n, held := v.nfs, v.heldNFS
	v.heldNFS = nil
	v.nfsMu.Unlock()
	n.stop()
	held.stop()
}

// holdNFS keeps a migration destination's file server, prepared (its
// namespace, tap and listener exist) but not started: it must serve with
// the source's handle key (startHeldNFS). Its configuration is written
// now, without the key, so that a daemon restarted meanwhile finds the
// namespace to remove.
func (v *VM) holdNFS(n *nfsServer) {
	n.conf.VMPID, n.conf.VMStart = v.st.PID, v.st.Start
	conf := n.conf
	conf.HandleKey = nil
	if err := procref.WriteJSON(filepath.Join(n.dir, nfsConfFile), conf); err != nil {
		v.log.Warn("cannot record the held file server's configuration", "err", err)
	}
	v.nfsMu.Lock()
	gone := v.gone
	if !gone {
		v.heldNFS = n
	}
	v.nfsMu.Unlock()
	if gone {
		n.stop()
	}
}

// startHeldNFS starts a migration destination's held file server with the
// source's handle key, so that the file handles the guest holds keep
// naming the same files. A VM without a held server has nothing to start.
func (v *VM) startHeldNFS(key []byte) error {
	v.nfsMu.Lock()
	n := v.heldNFS
	v.heldNFS = nil
	v.nfsMu.Unlock()
	if n == nil {
		return nil
	}
	if len(key) != nfsd.HandleKeyLen {
		n.stop()
		return fmt.Errorf("the migration's source sent a file handle key of %d bytes, want %d: its file server and this one would not agree on the guest's files", len(key), nfsd.HandleKeyLen)
	}
	n.conf.HandleKey = key
	return v.startNFS(n, v.grp)
}

// handleKey returns the key the VM's file server derives file handles
// with, nil when it has none: a migration's destination serves with it.
func (v *VM) handleKey() []byte {
	v.nfsMu.Lock()
	defer v.nfsMu.Unlock()
	if v.nfs == nil {
		return nil
	}
	return v.nfs.conf.HandleKey
}

// NFSServerPID returns the pid of the VM's running file server, 0 when it
// has none (or none runs this moment).
func (v *VM) NFSServerPID() int {
	v.nfsMu.Lock()
	n := v.nfs
	v.nfsMu.Unlock()
	if n == nil {
		return 0
	}
	return n.PID()
}
