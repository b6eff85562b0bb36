//go:build linux

package guestinit

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// Mount options of the NFS share beyond the server's address.
//   - hard: a server that restarts, or a VM that migrates to another
//     node, stalls the job instead of failing its calls.
//   - timeo=50 (5 s) with a high retrans: requests lost with a broken
//     connection are sent again on the next one, and the console is not
//     flooded with "not responding".
//   - nolock: there is no lock manager; locks stay in the guest, which
//     has the files' only writer of its job.
//   - ACLs stay on (no noacl): overlayfs asks the NFS lower layer for a
//     file's POSIX ACL on every permission check, and the server answers
//     with the node's.
//
// The host's tree, the read-only lower layer of the job's root, changes
// rarely and is looked up a lot (every exec, every python import):
// nocto and a long attribute cache spare the guest most GETATTRs.
const (
	nfsCommonOptions = "vers=3,proto=tcp,hard,timeo=50,retrans=100,nolock"
	nfsRootOptions   = nfsCommonOptions + ",nocto,actimeo=60"
	nfsShareOptions  = nfsCommonOptions
)

// networkUp brings the share's network card (MAC vmimage.ShareMAC) up
// with the guest's address (fs.GuestAddr). The server is on the same
// subnet: no route is needed, and the guest has no other way out. The
// card can appear a moment after its driver loaded.
func (g *guest) networkUp(fs *vmimage.FS) (string, error) {
	addr, err := netip.ParsePrefix(fs.GuestAddr)
	if err != nil || !addr.Addr().Is4() {
		return "", fmt.Errorf("guest address %q: want IPv4/prefix", fs.GuestAddr)
	}
	mac, _ := net.ParseMAC(vmimage.ShareMAC)
	nic, err := nicByMAC(mac, 3*time.Second)
	if err == nil {
		err = configureNIC(nic, addr, fs.MTU)
	}
	if err != nil {
		return "", fmt.Errorf("network card for the NFS share: %w", err)
	}
	return nic, nil
}

// configureNIC sets an interface's IPv4 address, netmask and MTU (0 keeps
// the driver's) and brings it up, with the ioctls ifconfig uses.
func configureNIC(name string, addr netip.Prefix, mtu int) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ip := addr.Addr().As4()
	var mask [4]byte
	for i := 0; i < addr.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	set := func(req uint, fill func(*unix.Ifreq) error) error {
		ifr, err := unix.NewIfreq(name)
		if err == nil {
			err = fill(ifr)
		}
		if err == nil {
			err = unix.IoctlIfreq(s, req, ifr)
		}
		return err
	}
	if err := set(unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(ip[:]) }); err != nil {
		return fmt.Errorf("set address: %w", err)
	}
	if err := set(unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask[:]) }); err != nil {
		return fmt.Errorf("set netmask: %w", err)
	}
	if mtu > 0 {
		if err := set(unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(mtu)); return nil }); err != nil {
			return fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}

// routeOut gives the guest its way out (a partition whose network is
// node): a default route via fs.Gateway on the share's card (nic), and, when
// the node named nameservers, a resolv.conf of the guest's own in root's
// overlay (the host's may name a resolver on the host's loopback, which
// the guest cannot reach).
func routeOut(fs *vmimage.FS, nic, root string) error {
	gw, err := netip.ParseAddr(fs.Gateway)
	if err != nil || !gw.Is4() {
		return fmt.Errorf("gateway %q: want an IPv4 address", fs.Gateway)
	}
	if err := addDefaultRoute(nic, gw); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	if len(fs.Nameservers) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("# The node's nameservers, written by corral's guest init (the partition's network is node).\n")
	for _, ns := range fs.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	conf := root + "/etc/resolv.conf"
	// The host's may be a link into its /run, which the guest has its own
	// of: replace the link, not what it points to.
	if err := os.Remove(conf); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replacing /etc/resolv.conf: %w", err)
	}
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing /etc/resolv.conf: %w", err)
	}
	return nil
}

// rtentry is struct rtentry of <net/route.h> on 64-bit Linux, for
// SIOCADDRT.
type rtentry struct {
	pad1    uint64
	dst     unix.RawSockaddrInet4
	gateway unix.RawSockaddrInet4
	genmask unix.RawSockaddrInet4
	flags   uint16
	pad2    int16
	pad3    uint64
	pad4    uintptr
	metric  int16
	dev     *byte
	mtu     uint64
	window  uint64
	irtt    uint16
}

// addDefaultRoute adds the IPv4 default route via gw on dev, as `route
// add default gw GW dev DEV` would (SIOCADDRT).
func addDefaultRoute(dev string, gw netip.Addr) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	name, err := unix.BytePtrFromString(dev)
	if err != nil {
		return err
	}
	rt := rtentry{flags: unix.RTF_UP | unix.RTF_GATEWAY, dev: name}
	rt.dst.Family, rt.genmask.Family = unix.AF_INET, unix.AF_INET
	rt.gateway.Family, rt.gateway.Addr = unix.AF_INET, gw.As4()
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s), unix.SIOCADDRT, uintptr(unsafe.Pointer(&rt))); e != 0 && e != unix.EEXIST {
		return e
	}
	runtime.KeepAlive(name)
	return nil
}

// mountNFS mounts export from the share's server at target. MOUNT and NFS
// share the server's port, so the guest needs no rpcbind; without
// mount.nfs, addr= must be given.
func mountNFS(fs *vmimage.FS, export, target string, flags uintptr, options string) error {
	data := fmt.Sprintf("%s,port=%d,mountport=%d,mountproto=tcp,addr=%s", options, fs.Port, fs.Port, fs.Addr)
	return unix.Mount(fs.Addr+":"+export, target, "nfs", flags, data)
}

// mountNFSShare mounts the server's export of shared path p read-write at
// the same path of the job's root, nosuid and nodev like every mount the
// job sees. A path under one of the guest's own temporary directories is
// created in that tmpfs first.
func mountNFSShare(fs *vmimage.FS, p string) error {
	dst := newRoot + p
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("shared path %s: %w", p, err)
	}
	if err := mountNFS(fs, p, dst, unix.MS_NOSUID|unix.MS_NODEV, nfsShareOptions); err != nil {
		return fmt.Errorf("mount the shared path %s over NFS: %w (it must exist on the host)", p, err)
	}
	return nil
}
