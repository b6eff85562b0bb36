//go:build linux

package guestinit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// Where init builds the job's root from the host's tree.
const (
	hostDir    = "/host"    // the host's tree, as the share delivers it
	overlayDir = "/overlay" // tmpfs: the overlay's upper and work directories
	newRoot    = "/newroot" // the job's root: host tree + overlay + shares
	modulesDir = "/etc/corral/modules"
)

// hostRoot makes the host's tree the job's root: it loads the modules the
// share needs, mounts the tree at /host, puts a read-only overlay with a
// tmpfs upper layer over it at /newroot (writes stay in the guest), mounts
// the guest's own /proc, /sys, /dev, /tmp, /var/tmp and /run there, and
// binds each shared path read-write at its own path. The job then runs
// chrooted into /newroot; init itself stays in the initramfs.
//
// Every mount the job sees is nosuid and nodev: the host's set-user-id
// programs must not make the job root in its guest.
//
// The steps that are the same for every job of the share (prepareRoot) may
// have been done already, by the guest a warm start's snapshot was taken
// of: they are then not done again, and the rest is what every job does.
func (g *guest) hostRoot(fs *vmimage.FS) error {
	if err := g.prepareRoot(fs, stageMounted); err != nil {
		return err
	}
	if fs.Gateway != "" {
		if err := routeOut(fs, g.shareNIC, newRoot); err != nil {
			return err
		}
		g.logf("default route via %s", fs.Gateway)
	}
	for _, p := range fs.Shares {
		if err := g.mountShare(fs, p); err != nil {
			return err
		}
	}
	g.root = newRoot
	return nil
}

// How far prepareRoot went.
const (
	stageNone    = iota
	stageNet     // the share's modules loaded, its card up (NFS)
	stageMounted // the host's tree mounted, the overlay and the guest's mounts in /newroot
)

// prepareRoot does, up to stage, what a job's root needs whatever the job:
// the share's, the overlay's and the agent's modules, the share's network
// card (stageNet), the host's tree at /host, the overlay at /newroot and
// the guest's own mounts in it (stageMounted). It remembers how far it
// went and for which share, and does nothing twice: a warm start's
// snapshot is taken of a guest prepared so far (warmUp), and the job that
// guest is restored for goes through hostRoot like every other. A job
// whose share is not the one prepared fails.
func (g *guest) prepareRoot(fs *vmimage.FS, stage int) error {
	if g.stage > stageNone && !g.prepared.SameShare(fs) {
		return fmt.Errorf("the job's share (%s) is not the one this guest was prepared for (%s): its snapshot is of another shape", fs.Kind, g.prepared.Kind)
	}
	if g.stage < stageNet && stage >= stageNet {
		features := []string{"virtio", "overlay"}
		switch fs.Kind {
		case vmimage.ShareVirtiofs:
			features = append(features, "virtiofs")
		case vmimage.ShareNFS:
			features = append(features, "nfs")
		}
		for _, f := range features {
			if err := g.loadModules(f); err != nil {
				return err
			}
		}
		g.logf("modules loaded")
		if fs.Kind == vmimage.ShareNFS {
			nic, err := g.networkUp(fs)
			if err != nil {
				return err
			}
			g.shareNIC = nic
			g.logf("network up")
		}
		g.stage, g.prepared = stageNet, fs
	}
	if g.stage < stageMounted && stage >= stageMounted {
		if err := g.mountRoot(fs); err != nil {
			return err
		}
		g.stage = stageMounted
	}
	return nil
}

// mountRoot mounts the host's tree at /host, the overlay at /newroot and
// the guest's own file systems in it.
func (g *guest) mountRoot(fs *vmimage.FS) error {
	for _, d := range []string{hostDir, overlayDir, newRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := g.mountHost(fs); err != nil {
		return err
	}
	g.logf("host tree mounted (%s)", fs.Kind)
	const safe = unix.MS_NOSUID | unix.MS_NODEV
	if err := unix.Mount("tmpfs", overlayDir, "tmpfs", safe, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs for the overlay: %w", err)
	}
	for _, d := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(overlayDir, d), 0o755); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + hostDir + ",upperdir=" + overlayDir + "/upper,workdir=" + overlayDir + "/work"
	if err := unix.Mount("overlay", newRoot, "overlay", safe, opts); err != nil {
		return fmt.Errorf("mount the overlay root (%s): %w", opts, err)
	}
	return guestMounts(newRoot)
}

// mountShare mounts the shared path p read-write at the same path of the
// job's root: a bind of the host's tree under virtiofs, an NFS mount of
// its own under NFS (the server serves each shared path as an export of
// its own; the host's tree is read-only).
func (g *guest) mountShare(fs *vmimage.FS, p string) error {
	if fs.Kind == vmimage.ShareNFS {
		return mountNFSShare(fs, p)
	}
	return bindShare(p)
}

// loadModules loads the modules of one feature of the image, in the order
// /etc/corral/modules/FEATURE lists them (dependencies first).
func (g *guest) loadModules(feature string) error {
	b, err := os.ReadFile(filepath.Join(modulesDir, feature))
	if err != nil {
		return fmt.Errorf("this image has no %s modules (%v): rebuild it with make image", feature, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		if path == "" {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("module %s: %w", path, err)
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load module %s: %w", path, err)
		}
	}
	return nil
}

// mountHost mounts the host's tree at /host. A device can appear a moment
// after its driver loaded: the mount is tried for up to 5 s.
func (g *guest) mountHost(fs *vmimage.FS) error {
	mount := func() error { return unix.Mount(fs.Tag, hostDir, "virtiofs", 0, "") }
	if fs.Kind == vmimage.ShareNFS {
		mount = func() error { return mountNFS(fs, fs.Export, hostDir, unix.MS_RDONLY, nfsRootOptions) }
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := mount()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mount the host's tree over %s: %w", fs.Kind, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// guestMounts gives the new root the guest's own kernel filesystems and
// private temporary directories: the host's /proc, /sys, /dev, /tmp and
// /run are the host's business.
func guestMounts(root string) error {
	const safe = unix.MS_NOSUID | unix.MS_NODEV
	mounts := []struct {
		fstype, target string
		flags          uintptr
		data           string
	}{
		{"proc", "/proc", safe | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", safe | unix.MS_NOEXEC, ""},
		{"devtmpfs", "/dev", unix.MS_NOSUID, "mode=0755"},
		{"devpts", "/dev/pts", unix.MS_NOSUID | unix.MS_NOEXEC, "gid=5,mode=620,ptmxmode=666,newinstance"},
		{"tmpfs", "/dev/shm", safe, "mode=1777"},
		{"tmpfs", "/tmp", safe, "mode=1777"},
		{"tmpfs", "/var/tmp", safe, "mode=1777"},
		{"tmpfs", "/run", safe, "mode=0755"},
	}
	for _, m := range mounts {
		dir := root + m.target
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("guest mount %s: %w", m.target, err)
		}
		if err := unix.Mount(m.fstype, dir, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// bindShare mounts the host's path p read-write at the same path of the
// job's root. A path under one of the guest's own temporary directories
// (a work directory in the host's /tmp, say) is created in that tmpfs
// first.
func bindShare(p string) error {
	src, dst := hostDir+p, newRoot+p
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("shared path %s: %w (it must exist on the host)", p, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("shared path %s is not a directory", p)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("shared path %s: %w", p, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the shared path %s: %w", p, err)
	}
	// A bind mount takes its flags at a remount.
	if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("shared path %s: remount nosuid: %w", p, err)
	}
	return nil
}
