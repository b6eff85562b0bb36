package vmnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// JoinJobNet puts the VM of namespace n on its job's network j: made from
// the node's namespace (node: nil for the caller's) and placed in n, the
// VXLAN device; the node's table for the segment (NodeTable) in the
// node's namespace; then in n the bridge, the bridge table (VMTable) and
// the tap device, and the peers' forwarding entries. The VXLAN device
// opens its UDP socket when it comes up, after the rules are in place. It
// returns the tap's descriptor for QEMU's second -netdev tap (the device
// ends with the last descriptor of it) and j with its MTU set. After a
// failure nothing of j is left; when another VM of the node has the
// segment already, nothing of that VM's is touched.
func (n *Netns) JoinJobNet(node *Netns, j JobNet) (*os.File, JobNet, error) {
	if err := j.Check(); err != nil {
		return nil, j, err
	}
	nsFd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, j, fmt.Errorf("network namespace %s: %w", n.Path, err)
	}
	defer unix.Close(nsFd)
	made := false
	err = node.onNode(func() error {
		if j.MTU == 0 {
			mtu, err := underlayMTU(j.Local.Addr())
			if err != nil {
				return err
			}
			j.MTU = mtu - VXLANOverhead
		}
		vx := &netlink.Vxlan{
			LinkAttrs: netlink.LinkAttrs{Name: JobNetVXLAN, MTU: j.MTU, Namespace: netlink.NsFd(nsFd)},
			VxlanId:   int(j.VNI), SrcAddr: net.IP(j.Local.Addr().AsSlice()), Port: int(j.Local.Port()),
			// Peers are known in advance (forwarding entries); learning
			// from the wire would let a frame's source decide.
			Learning: false,
		}
		if err := netlink.LinkAdd(vx); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("the job's VXLAN segment %d on port %d: another VM of this node has it (%w): a segment belongs to one job", j.VNI, j.Local.Port(), err)
			}
			return fmt.Errorf("creating the job network's VXLAN device (segment %d, %v): %w", j.VNI, j.Local, err)
		}
		made = true
		c, err := nftConn(-1)
		if err == nil {
			err = applyTable(c, j.NodeTable())
		}
		if err != nil {
			return fmt.Errorf("the node's rules for the job's network: %w", err)
		}
		return nil
	})
	var tap *os.File
	if err == nil {
		tap, err = n.bridgeJobNet(nsFd, j)
	}
	if err != nil {
		if made {
			n.LeaveJobNet(node, j)
		}
		return nil, j, err
	}
	return tap, j, nil
}

// bridgeJobNet makes the bridge and the tap device in the namespace,
// joins them and the VXLAN device, sets the bridge table and the peers'
// forwarding entries, and brings everything up.
func (n *Netns) bridgeJobNet(nsFd int, j JobNet) (*os.File, error) {
	h, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", n.Path, err)
	}
	defer h.Close()
	c, err := nftConn(nsFd)
	if err == nil {
		err = applyTable(c, VMTable())
	}
	if err != nil {
		return nil, fmt.Errorf("the VM namespace's bridge rules: %w", err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: JobNetBridge, MTU: j.MTU}}
	if err := h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("bridge %s of the job's network: %w", JobNetBridge, err)
	}
	var tap *os.File
	err = n.Do(func() error {
		// Bridged frames must not cross the namespace's IPv4 tables
		// (br_netfilter would send them through the way out's forward
		// chain, which drops them), and nothing on the job's network
		// needs IPv6 from the namespace.
		for _, p := range []string{"/proc/sys/net/bridge/bridge-nf-call-iptables", "/proc/sys/net/bridge/bridge-nf-call-ip6tables", "/proc/sys/net/bridge/bridge-nf-call-arptables"} {
			if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		f, err := openTap(JobNetTap)
		tap = f
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the job network's tap device: %w", err)
	}
	for _, name := range []string{JobNetVXLAN, JobNetTap} {
		l, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetMTU(l, j.MTU)
		}
		if err == nil {
			err = h.LinkSetMaster(l, br)
		}
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			tap.Close()
			return nil, fmt.Errorf("%s of the job's network: %w", name, err)
		}
	}
	if err := n.setFDB(h, nil, j.Peers); err != nil {
		tap.Close()
		return nil, err
	}
	if err := h.LinkSetUp(br); err != nil {
		tap.Close()
		return nil, fmt.Errorf("bridge %s of the job's network: %w", JobNetBridge, err)
	}
	return tap, nil
}

// SetJobNetPeers changes the peers of a VM on its job's network from
// old's to j's (a peer's node moved, or a daemon restarted and sets what
// it recorded again): the node's table and the forwarding entries of the
// VXLAN device. Entries already there are left as they are.
func (n *Netns) SetJobNetPeers(node *Netns, old, j JobNet) error {
	if err := j.Check(); err != nil {
		return err
	}
	err := node.onNode(func() error {
		c, err := nftConn(-1)
		if err == nil {
			err = applyTable(c, j.NodeTable())
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("the node's rules for the job's network: %w", err)
	}
	nsFd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", n.Path, err)
	}
	defer unix.Close(nsFd)
	h, err := netlink.NewHandleAt(netns.NsHandle(nsFd))
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", n.Path, err)
	}
	defer h.Close()
	if _, err := h.LinkByName(JobNetVXLAN); err != nil {
		return fmt.Errorf("the job network's VXLAN device in %s: %w", n.Path, err)
	}
	return n.setFDB(h, old.Peers, j.Peers)
}

// setFDB removes the forwarding entries of the peers in old but not in
// peers and adds those of peers: for each peer, its card's MAC at its
// node's endpoint, and the all-zero MAC there too, which sends broadcasts
// (ARP) and frames to unknown MACs to every peer.
func (n *Netns) setFDB(h *netlink.Handle, old, peers []Peer) error {
	vx, err := h.LinkByName(JobNetVXLAN)
	if err != nil {
		return fmt.Errorf("the job network's VXLAN device: %w", err)
	}
	keep := map[Peer]bool{}
	for _, p := range peers {
		keep[p] = true
	}
	return n.Do(func() error {
		for _, p := range old {
			if keep[p] {
				continue
			}
			for _, mac := range []net.HardwareAddr{CardMAC(p.Card), make(net.HardwareAddr, 6)} {
				if err := fdb(unix.RTM_DELNEIGH, 0, vx.Attrs().Index, mac, p.Endpoint); err != nil && !errors.Is(err, unix.ENOENT) {
					return fmt.Errorf("removing the job network's peer %v: %w", p.Endpoint, err)
				}
			}
		}
		for _, p := range peers {
			// The all-zero entries accumulate one destination per peer
			// (append); a card's MAC has one destination (replace).
			if err := fdb(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_APPEND, vx.Attrs().Index, make(net.HardwareAddr, 6), p.Endpoint); err != nil {
				return fmt.Errorf("the job network's peer %v: %w", p.Endpoint, err)
			}
			if err := fdb(unix.RTM_NEWNEIGH, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, vx.Attrs().Index, CardMAC(p.Card), p.Endpoint); err != nil {
				return fmt.Errorf("the job network's peer %v (%v): %w", p.Endpoint, p.Card, err)
			}
		}
		return nil
	})
}

// fdb adds or removes one forwarding entry of a VXLAN device, as `bridge
// fdb append|replace|del MAC dev DEV dst ADDR port PORT self permanent`
// would, in the calling thread's namespace. vishvananda/netlink's Neigh
// has no destination port (NDA_PORT), which peers whose endpoints listen
// on different ports need.
func fdb(msgType, flags, index int, mac net.HardwareAddr, dst netip.AddrPort) error {
	req := nl.NewNetlinkRequest(msgType, flags|unix.NLM_F_ACK)
	req.AddData(&netlink.Ndmsg{
		Family: unix.AF_BRIDGE, Index: uint32(index),
		State: unix.NUD_PERMANENT | unix.NUD_NOARP, Flags: unix.NTF_SELF,
	})
	req.AddData(nl.NewRtAttr(unix.NDA_LLADDR, mac))
	req.AddData(nl.NewRtAttr(unix.NDA_DST, dst.Addr().AsSlice()))
	port := dst.Port()
	req.AddData(nl.NewRtAttr(unix.NDA_PORT, []byte{byte(port >> 8), byte(port)}))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// LeaveJobNet takes the VM of namespace n off its job's network: it
// removes the node's table for the segment and, while n is still there,
// the VXLAN device (the bridge goes with the namespace, the tap device
// with QEMU's descriptor). It frees the segment on the node at once, whenever the
// namespace itself ends. What is already gone is no error.
func (n *Netns) LeaveJobNet(node *Netns, j JobNet) error {
	var errs []error
	if n != nil {
		if err := n.Do(func() error {
			// The VXLAN device holds the segment on the node's socket;
			// the bridge goes with the namespace (each deletion waits
			// for the kernel's grace periods, ~50 ms).
			if l, err := netlink.LinkByName(JobNetVXLAN); err == nil {
				if err := netlink.LinkDel(l); err != nil {
					return fmt.Errorf("removing %s: %w", JobNetVXLAN, err)
				}
			}
			return nil
		}); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, RemoveJobNetTable(node, j.Table))
	return errors.Join(errs...)
}

// RemoveJobNetTable removes the node's table name of a job's segment, if
// it is there, from node's namespace (nil for the caller's).
func RemoveJobNetTable(node *Netns, name string) error {
	return node.onNode(func() error {
		c, err := nftConn(-1)
		if err == nil {
			err = deleteTable(c, name)
		}
		return err
	})
}

// JobNetMTU returns the MTU of a job's network whose endpoint on this
// node is addr: that of the node's interface holding addr (in node's
// namespace, nil for the caller's) less VXLANOverhead.
func JobNetMTU(node *Netns, addr netip.Addr) (int, error) {
	var mtu int
	err := node.onNode(func() (err error) {
		mtu, err = underlayMTU(addr)
		return err
	})
	return mtu - VXLANOverhead, err
}

// onNode runs fn in the node's namespace: n's, on a thread of its own
// (Do), or the caller's own when n is nil.
func (n *Netns) onNode(fn func() error) error {
	if n == nil {
		return fn()
	}
	return n.Do(fn)
}

// underlayMTU returns the MTU of the node's interface that holds addr, in
// the calling thread's namespace, at most 65535.
func underlayMTU(addr netip.Addr) (int, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return 0, fmt.Errorf("the node's addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
			l, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return 0, fmt.Errorf("the interface of %v: %w", addr, err)
			}
			if l.Attrs().MTU <= VXLANOverhead+576 {
				return 0, fmt.Errorf("the job network's underlay %s (%v) has MTU %d: too small for VXLAN", l.Attrs().Name, addr, l.Attrs().MTU)
			}
			// Loopback's is 65536; no IPv4 datagram is larger than 65535.
			return min(l.Attrs().MTU, 65535), nil
		}
	}
	return 0, fmt.Errorf("the job network's endpoint %v is not an address of this node (set the node's overlay address to one of its own)", addr)
}
