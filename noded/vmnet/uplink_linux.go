package vmnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ipForward is IPv4 forwarding of the namespace of the thread that opens
// it.
const ipForward = "/proc/sys/net/ipv4/ip_forward"

// Connect gives the namespace its way out (o, a partition's network
// "node"): the veth pair, its addresses, the namespace's default route
// through the node, IPv4 forwarding in the namespace, and the rules on
// both sides (NSTable in the namespace, HostTable in the caller's, the
// node's). The rules are in place before the route: no packet of the
// guest's ever leaves unfiltered. When o.HostIf exists already (another
// VM's) it returns an error wrapping os.ErrExist and changes nothing;
// after any other failure nothing of o is left.
//
// The node must forward IPv4 (EnableForwarding).
func (n *Netns) Connect(o Outbound) error {
	if err := o.Check(); err != nil {
		return err
	}
	nsFd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", n.Path, err)
	}
	defer unix.Close(nsFd)
	host, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer host.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: o.HostIf}, PeerName: o.NSIf, PeerNamespace: netlink.NsFd(nsFd)}
	if err := host.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("veth %s: %w", o.HostIf, os.ErrExist)
		}
		return fmt.Errorf("creating veth %s for the VM's outbound network: %w", o.HostIf, err)
	}
	if err := n.connect(o, host, nsFd); err != nil {
		o.Remove()
		return err
	}
	return nil
}

// connect configures a new veth pair and sets the rules, in that order.
func (n *Netns) connect(o Outbound, host *netlink.Handle, nsFd int) error {
	hl, err := host.LinkByName(o.HostIf)
	if err == nil {
		err = host.AddrAdd(hl, &netlink.Addr{IPNet: ipNet(o.HostAddr)})
	}
	if err == nil {
		err = host.LinkSetUp(hl)
	}
	if err != nil {
		return fmt.Errorf("veth %s: %w", o.HostIf, err)
	}
	inside, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", n.Path, err)
	}
	defer inside.Close()
	nl, err := inside.LinkByName(o.NSIf)
	if err == nil {
		err = inside.AddrAdd(nl, &netlink.Addr{IPNet: ipNet(o.NSAddr)})
	}
	if err == nil {
		err = inside.LinkSetUp(nl)
	}
	if err != nil {
		return fmt.Errorf("veth %s in the VM's namespace: %w", o.NSIf, err)
	}
	if err := n.setRules(o, nsFd); err != nil {
		return err
	}
	return n.route(o, inside, nl)
}

// setRules sets both tables of o, the namespace's first.
func (n *Netns) setRules(o Outbound, nsFd int) error {
	c, err := nftConn(nsFd)
	if err == nil {
		err = applyTable(c, o.NSTable())
	}
	if err != nil {
		return fmt.Errorf("the VM namespace's rules: %w", err)
	}
	if c, err = nftConn(-1); err == nil {
		err = applyTable(c, o.HostTable())
	}
	if err != nil {
		return fmt.Errorf("the node's rules for the VM: %w", err)
	}
	return nil
}

// route turns on forwarding in the namespace and sets its default route
// through the node's end of the veth.
func (n *Netns) route(o Outbound, inside *netlink.Handle, nl netlink.Link) error {
	err := n.Do(func() error { return os.WriteFile(ipForward, []byte("1\n"), 0o644) })
	if err != nil {
		return fmt.Errorf("forwarding in the VM's namespace: %w", err)
	}
	gw := o.HostAddr.Addr().As4()
	r := &netlink.Route{LinkIndex: nl.Attrs().Index, Gw: net.IP(gw[:]), Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
	if err := inside.RouteReplace(r); err != nil {
		return fmt.Errorf("default route of the VM's namespace via %v: %w", o.HostAddr.Addr(), err)
	}
	return nil
}

// Restore sets o's rules again for a namespace connected by an earlier
// daemon (they are left as they were when nothing changed them), and
// connects it anew when its veth is gone.
func (n *Netns) Restore(o Outbound) error {
	if err := o.Check(); err != nil {
		return err
	}
	host, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer host.Close()
	if _, err := host.LinkByName(o.HostIf); err != nil {
		o.Remove()
		return n.Connect(o)
	}
	nsFd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", n.Path, err)
	}
	defer unix.Close(nsFd)
	return n.setRules(o, nsFd)
}

// Remove removes o's table from the node's namespace (the caller's) and
// its veth pair, if they are there. The namespace's own table ends with
// the namespace.
func (o Outbound) Remove() error {
	var errs []error
	if c, err := nftConn(-1); err != nil {
		errs = append(errs, err)
	} else if err := deleteTable(c, o.Table); err != nil {
		errs = append(errs, err)
	}
	if l, err := netlink.LinkByName(o.HostIf); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("removing veth %s: %w", o.HostIf, err))
		}
	}
	return errors.Join(errs...)
}

// HasLink reports whether the node's namespace (the caller's) has an
// interface named name.
func HasLink(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}

// EnableForwarding makes the node's namespace (the caller's) forward IPv4,
// which the VMs' outbound networks need. When forwarding was off, it
// first adds ForwardGuard(hostIfPrefix), so that the node forwards no
// other traffic than before; a node that forwarded already (a router, a
// container host) is left as it was. The guard stays until the node
// reboots, when forwarding is off again.
func EnableForwarding(hostIfPrefix string) error {
	b, err := os.ReadFile(ipForward)
	if err != nil {
		return fmt.Errorf("reading %s: %w", ipForward, err)
	}
	if strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	c, err := nftConn(-1)
	if err == nil {
		err = applyTable(c, ForwardGuard(hostIfPrefix))
	}
	if err != nil {
		return fmt.Errorf("guarding the node's forwarding: %w", err)
	}
	if err := os.WriteFile(ipForward, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("turning on IPv4 forwarding (%s): %w", ipForward, err)
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	a := p.Addr().As4()
	return &net.IPNet{IP: net.IP(a[:]), Mask: net.CIDRMask(p.Bits(), 32)}
}
