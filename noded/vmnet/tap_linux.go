package vmnet

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Tap creates a tap device named name inside the namespace, gives it the
// host side's MAC and IP address (10.0.2.2/24, say) and MTU and sets it
// up. The MAC must be the same wherever the VM may run: a migrated guest
// keeps the server's MAC in its ARP cache, and a tap device drops frames
// sent to another MAC. It returns
// the device's descriptor for QEMU's -netdev tap,fd=N: the device exists as
// long as a descriptor of it is open, so it ends with its VM.
//
// The device carries virtio-net headers (IFF_VNET_HDR), which lets QEMU
// hand the guest's checksum and segmentation offloads to the host kernel.
func (n *Netns) Tap(name string, mac net.HardwareAddr, host netip.Prefix, mtu int) (*os.File, error) {
	if !host.Addr().Is4() {
		return nil, fmt.Errorf("tap %s: address %s is not IPv4", name, host)
	}
	var tap *os.File
	err := n.Do(func() error {
		f, err := openTap(name)
		if err != nil {
			return err
		}
		if err := configure(name, mac, host, mtu); err != nil {
			f.Close()
			return fmt.Errorf("tap %s: %w", name, err)
		}
		tap = f
		return nil
	})
	return tap, err
}

// openTap creates a tap device named name in the calling thread's
// namespace, with virtio-net headers, and returns its descriptor.
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	f := os.NewFile(uintptr(fd), "tap:"+name)
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	return f, nil
}

// configure sets an interface's IPv4 address, netmask and MTU and brings it
// up, with the ioctls ifconfig uses: the calling thread's namespace is the
// interface's.
func configure(name string, mac net.HardwareAddr, addr netip.Prefix, mtu int) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	if err := setMAC(s, name, mac); err != nil {
		return fmt.Errorf("set mac %s: %w", mac, err)
	}
	ip := addr.Addr().As4()
	var m [4]byte
	for i := 0; i < addr.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	steps := []struct {
		what string
		req  uint
		set  func(*unix.Ifreq) error
	}{
		{"address", unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(ip[:]) }},
		{"netmask", unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(m[:]) }},
		{"mtu", unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(mtu)); return nil }},
	}
	for _, st := range steps {
		if st.req == unix.SIOCSIFMTU && mtu == 0 {
			continue
		}
		ifr, err := unix.NewIfreq(name)
		if err == nil {
			err = st.set(ifr)
		}
		if err == nil {
			err = unix.IoctlIfreq(s, st.req, ifr)
		}
		if err != nil {
			return fmt.Errorf("set %s: %w", st.what, err)
		}
	}
	return up(s, name)
}

// ifreqHW is struct ifreq holding a hardware address (ifr_hwaddr).
type ifreqHW struct {
	Name   [unix.IFNAMSIZ]byte
	Family uint16
	Addr   [14]byte
	_      [8]byte
}

// setMAC sets an Ethernet interface's MAC address (SIOCSIFHWADDR).
func setMAC(s int, name string, mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("not an Ethernet address")
	}
	var req ifreqHW
	copy(req.Name[:], name)
	req.Family = unix.ARPHRD_ETHER
	copy(req.Addr[:], mac)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s), unix.SIOCSIFHWADDR, uintptr(unsafe.Pointer(&req))); e != 0 {
		return e
	}
	return nil
}

// up sets IFF_UP on an interface, as `ip link set NAME up` would.
func up(s int, name string) error {
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
