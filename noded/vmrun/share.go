package vmrun

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"corral/api"
	"corral/noded"
	"corral/vmimage"
)

// virtiofsdPath is the virtiofs daemon Debian's QEMU 7.2 ships (package
// qemu-system-common).
const virtiofsdPath = "/usr/lib/qemu/virtiofsd"

// hostTag is the virtiofs tag of the host's tree.
const hostTag = "corral-host"

// guestFS returns the job's file system for the guest (vmimage.FS): the
// host's tree with the job's shared paths, over the share the job gets
// (see shareKind).
func (r *Runner) guestFS(spec noded.LaunchSpec) *vmimage.FS {
	if shareKind(spec) == vmimage.ShareNFS {
		fs := nfsFS(spec.Root, spec.Shares)
		if spec.Network == api.NetworkNode {
			// The guest's default route is its file server's side of
			// the tap, the way out of its namespace.
			fs.Gateway = serverAddr.Addr().String()
			fs.Nameservers = nodeNameservers(append([]netip.Prefix{r.transit()}, alwaysBlocked...))
		}
		return fs
	}
	return &vmimage.FS{Kind: vmimage.ShareVirtiofs, Tag: hostTag, Shares: spec.Shares}
}

// shareKind is the share a job's VM gets: the one the daemon chose
// (LaunchSpec.Share: the job's --no-migrate or its partition's share), by
// default NFS, which QEMU can migrate.
func shareKind(spec noded.LaunchSpec) string {
	if spec.Share == vmimage.ShareVirtiofs {
		return vmimage.ShareVirtiofs
	}
	return vmimage.ShareNFS
}

// startVirtiofsd starts the virtiofs daemon that serves the host's tree to
// one VM, in a session of its own like QEMU (it must outlive a restarting
// node daemon), and waits for its socket. It exits by itself when its VM
// disconnects, so nothing else has to stop it once QEMU runs.
//
// It exports / with sandbox=chroot (the namespace sandbox cannot pivot_root
// into /) and keeps the guest's uids and gids, so the host checks and
// records every access as the guest's user; the guest mounts the tree
// read-only as its overlay's lower layer and binds only the shared paths
// read-write. What stops a job's user from writing elsewhere is therefore
// the guest kernel (the user is not root there and every mount is nosuid),
// not virtiofsd: see docs/vm.md for this trade-off against the NFS share,
// whose server enforces it on the host.
func startVirtiofsd(f vmFiles) (*exec.Cmd, error) {
	if _, err := os.Stat(virtiofsdPath); err != nil {
		return nil, fmt.Errorf("the virtiofs share needs %s (install qemu-system-x86, or use the nfs share): %w", virtiofsdPath, err)
	}
	logf, err := os.OpenFile(f.virtiofsdLog, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	os.Remove(f.vfsSock)
	cmd := &exec.Cmd{
		Path: virtiofsdPath,
		Args: []string{virtiofsdPath, "--socket-path=" + f.vfsSock, "-o", "source=/", "-o", "cache=auto",
			"-o", "sandbox=chroot", "-o", "log_level=warn"},
		Dir: f.dir, Stdout: logf, Stderr: logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting virtiofsd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(f.vfsSock); err == nil {
			// The socket file is there (virtiofsd may listen on it a
			// moment later: the daemon's dial waits for that). virtiofsd
			// is reaped by the goroutine when it exits with its VM.
			return cmd, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("virtiofsd exited as it started (%v): %s", err, tailFile(f.virtiofsdLog, 3, 400))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, errors.New("virtiofsd did not create its socket within 10 s: " + tailFile(f.virtiofsdLog, 3, 400))
		}
	}
}

// virtiofsArgs are the QEMU arguments of the virtiofs device. Its guest RAM
// must be shared with virtiofsd (see memoryBackend), and microvm's
// virtio-mmio must not be legacy: virtiofsd refuses legacy devices, and the
// guest's mount then "succeeds" and its first access hangs. The daemon
// connects to virtiofsd's socket (root's) and QEMU inherits the
// connection (fdVirtiofs).
func virtiofsArgs() []string {
	return []string{
		"-global", "virtio-mmio.force-legacy=false",
		"-chardev", "socket,id=vfs,fd=" + strconv.Itoa(fdVirtiofs),
		"-device", "vhost-user-fs-device,chardev=vfs,tag=" + hostTag,
	}
}
