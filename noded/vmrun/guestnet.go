package vmrun

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"corral/noded"
	"corral/noded/vmnet"
)

// The guest's network, the same in every job VM: each VM has a network
// namespace of its own on the node (see vmnet), so the addresses never
// meet. The guest is 10.0.2.15, the node's side of the tap device (where
// the file server listens) 10.0.2.2.
var (
	guestAddr  = netip.MustParsePrefix("10.0.2.15/24")
	serverAddr = netip.MustParsePrefix("10.0.2.2/24")
	// serverMAC is the node's side of the tap device: the same in every
	// VM and on every node (see vmnet.Netns.Tap).
	serverMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0xc0, 0x44, 0x02}
)

const (
	// guestMAC is the guest card's address: fixed, so that a migrated VM's
	// card is the same on both sides.
	guestMAC = "52:54:00:c0:44:01"
	// tapName names the tap device inside the VM's namespace.
	tapName = "tap0"
	// netMTU is the MTU of both ends of the tap device. A larger MTU
	// means fewer packets, and under TCG each packet costs the guest
	// CPU time.
	netMTU = 65520
	// netnsFile is the bind mount that keeps the VM's namespace, in its
	// state directory.
	netnsFile = "netns"
)

// guestNet is a job VM's network: its namespace and the tap device QEMU
// gets as descriptor 3.
type guestNet struct {
	ns  *vmnet.Netns
	tap *os.File
	// out is the namespace's way out (a partition's network node), nil
	// when it has none; node is the node's namespace it goes through
	// (nil: the daemon's own).
	out  *vmnet.Outbound
	node *vmnet.Netns
}

// newGuestNet creates the namespace of the VM whose state directory is dir
// and its tap device.
func newGuestNet(dir string, node *vmnet.Netns) (*guestNet, error) {
	path := filepath.Join(dir, netnsFile)
	if ns, err := vmnet.Open(path); err == nil {
		ns.Remove() // left by an earlier run in a reused state directory
	}
	os.Remove(path)
	ns, err := vmnet.Create(path)
	if err != nil {
		return nil, err
	}
	tap, err := ns.Tap(tapName, serverMAC, serverAddr, netMTU)
	if err != nil {
		ns.Remove()
		return nil, fmt.Errorf("the VM's network: %w", err)
	}
	return &guestNet{ns: ns, tap: tap, node: node}, nil
}

// qemuArgs are the QEMU arguments of the guest's card, none without a
// network. vhost is off: it needs KVM's ioeventfds to help, and the same
// argv must start on every node. microvm's virtio-mmio runs non-legacy:
// with the legacy transport a migrated guest's card corrupted its memory
// (measured: a kernel panic in the destination within seconds, every
// time); with the modern one it migrates cleanly.
func (n *guestNet) qemuArgs() []string {
	if n == nil {
		return nil
	}
	return []string{
		"-global", "virtio-mmio.force-legacy=false",
		"-netdev", "tap,id=share,fd=" + strconv.Itoa(fdTap) + ",vhost=off",
		"-device", "virtio-net-device,netdev=share,mac=" + guestMAC,
	}
}

// tapFile is the tap device QEMU inherits as fdTap; nil without a
// network.
func (n *guestNet) tapFile() *os.File {
	if n == nil {
		return nil
	}
	return n.tap
}

// closeTap drops the daemon's descriptor of the tap device once QEMU holds
// its own.
func (n *guestNet) closeTap() {
	if n != nil && n.tap != nil {
		n.tap.Close()
		n.tap = nil
	}
}

// remove ends the namespace's bind mount: what is left of it goes with the
// last process and descriptor in it.
func (n *guestNet) remove() {
	if n == nil {
		return
	}
	n.closeTap()
	if err := removeOutbound(n.node, filepath.Dir(n.ns.Path), n.out); err != nil {
		slog.Warn("removing the VM's outbound network", "err", err)
	}
	n.ns.Remove()
}

// stepPort is where a guest reaches its node's step forwarder: srun in the
// job, on the node's side of the tap device (serverAddr).
const stepPort = 6818

// GuestStepURL is the step forwarder's address as every guest sees it.
func (r *Runner) GuestStepURL() string {
	return "http://" + netip.AddrPortFrom(serverAddr.Addr(), stepPort).String()
}

// ListenSteps opens the VM's step listener in its network namespace,
// where only its guest reaches it. A VM without a network (virtiofs) has
// none.
func (v *VM) ListenSteps() (net.Listener, error) {
	v.nfsMu.Lock()
	n := v.nfs
	if n == nil {
		n = v.heldNFS
	}
	v.nfsMu.Unlock()
	if n == nil || n.net == nil || n.net.ns == nil {
		return nil, errors.New("the VM has no network (its files are shared over virtiofs)")
	}
	return n.net.ns.Listen(netip.AddrPortFrom(serverAddr.Addr(), stepPort).String())
}

var (
	_ noded.GuestSteps = (*Runner)(nil)
	_ noded.StepServer = (*VM)(nil)
)
