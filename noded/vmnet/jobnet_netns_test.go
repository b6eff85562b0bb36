package vmnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// vnetHdrLen is the virtio-net header a tap device with IFF_VNET_HDR
// puts before each frame (struct virtio_net_hdr).
const vnetHdrLen = 10

// arpRequest is an Ethernet broadcast asking who has target, from the card
// whose address is from.
func arpRequest(from, target netip.Addr) []byte {
	f := make([]byte, 0, 42)
	f = append(f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	f = append(f, CardMAC(from)...)
	f = append(f, 0x08, 0x06)       // ARP
	f = append(f, 0, 1, 8, 0, 6, 4) // Ethernet, IPv4, sizes
	f = append(f, 0, 1)             // request
	f = append(f, CardMAC(from)...)
	f = append(f, from.AsSlice()...)
	f = append(f, 0, 0, 0, 0, 0, 0)
	return append(f, target.AsSlice()...)
}

// sendFrame writes an Ethernet frame to a tap device, as the guest's card
// would.
func sendFrame(t *testing.T, tap *os.File, frame []byte) {
	t.Helper()
	if _, err := unix.Write(int(tap.Fd()), append(make([]byte, vnetHdrLen), frame...)); err != nil {
		t.Fatalf("writing a frame to %s: %v", tap.Name(), err)
	}
}

// sees reports whether the tap device delivers to its card, within wait,
// an ARP packet about target: a request, or a reply when reply is set.
// It returns as soon as it sees one.
func sees(tap *os.File, target netip.Addr, reply bool, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	fd := int(tap.Fd())
	buf := make([]byte, 65536)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, int(left.Milliseconds())+1); err != nil || n == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err != nil || n <= vnetHdrLen {
			continue
		}
		if isARP(buf[vnetHdrLen:n], target, reply) {
			return true
		}
	}
}

// isARP reports whether frame is an ARP request about target (a reply
// from target when reply is set).
func isARP(f []byte, target netip.Addr, reply bool) bool {
	if len(f) < 42 || f[12] != 0x08 || f[13] != 0x06 {
		return false
	}
	op := binary.BigEndian.Uint16(f[20:22])
	if reply {
		return op == 2 && bytes.Equal(f[28:32], target.AsSlice())
	}
	return op == 1 && bytes.Equal(f[38:42], target.AsSlice())
}

// testVM is a VM's namespace on a job's network, with the tap device its
// guest's card would have.
type testVM struct {
	ns  *Netns
	j   JobNet
	tap *os.File
}

// underlayNode makes a node's namespace joined to the test's underlay
// bridge ul0 (in the test's own namespace) by a veth, with address addr.
func underlayNode(t *testing.T, dir, name string, addr netip.Prefix) *Netns {
	t.Helper()
	ns, err := Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Remove() })
	linkNS(t, nil, "ul-"+name, netip.MustParsePrefix("169.254.1.1/32"), ns, "eth0", addr, false)
	l, err := netlink.LinkByName("ul-" + name)
	if err == nil {
		err = netlink.LinkSetMaster(l, &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ul0"}})
	}
	if err == nil {
		err = netlink.AddrDel(l, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("169.254.1.1/32"))})
	}
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestJobNetCarriesOnlyItsJob builds two nodes on an underlay (each a
// namespace with a veth to a bridge in the test's namespace), and on them
// two jobs of two VMs each (VM namespaces with tap devices; the test
// writes and reads the guests' frames). A broadcast of a job's VM reaches
// its sibling on the other node and no VM of the other job, on either
// node; nothing on the job's network reaches a VM namespace's own stack;
// a VXLAN datagram of the segment from a host of the underlay that is not
// a peer is dropped (and, once the node's table is gone, delivered: the
// table is what drops it). Peers change; leaving frees the segment.
func TestJobNetCarriesOnlyItsJob(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	dir := t.TempDir()
	if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ul0"}}); err != nil {
		t.Fatal(err)
	}
	ul, _ := netlink.LinkByName("ul0")
	netlink.AddrAdd(ul, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("192.0.2.9/24"))})
	netlink.LinkSetUp(ul)
	nodeA := underlayNode(t, dir, "a", netip.MustParsePrefix("192.0.2.1/24"))
	nodeB := underlayNode(t, dir, "b", netip.MustParsePrefix("192.0.2.2/24"))
	a, b := netip.MustParseAddrPort("192.0.2.1:4789"), netip.MustParseAddrPort("192.0.2.2:4790")
	card := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 214, 0, byte(i)}) }

	join := func(name string, node *Netns, local, peer netip.AddrPort, vni uint32, own, other int) *testVM {
		t.Helper()
		ns, err := Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Remove() })
		// The VM's namespace holds its file server's address, as the
		// share's tap device gives it.
		if err := ns.Do(func() error {
			l, _ := netlink.LinkByName("lo")
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.214.0.100/32"))})
		}); err != nil {
			t.Fatal(err)
		}
		j := JobNet{VNI: vni, Local: local, Card: card(own), Table: JobNetTable(vni, local.Port()),
			Peers: []Peer{{Endpoint: peer, Card: card(other)}}}
		tap, j, err := ns.JoinJobNet(node, j)
		if err != nil {
			t.Fatalf("%s joins: %v", name, err)
		}
		t.Cleanup(func() { tap.Close() })
		if j.MTU != 1500-VXLANOverhead {
			t.Errorf("%s: MTU %d, want the underlay's 1500 less %d", name, j.MTU, VXLANOverhead)
		}
		return &testVM{ns: ns, j: j, tap: tap}
	}
	a1 := join("vm-a1", nodeA, a, b, 101, 1, 2)
	b1 := join("vm-b1", nodeB, b, a, 101, 2, 1)
	a2 := join("vm-a2", nodeA, a, b, 102, 3, 4)
	b2 := join("vm-b2", nodeB, b, a, 102, 4, 3)

	if _, _, err := a2.ns.JoinJobNet(nodeA, a1.j); err == nil || !strings.Contains(err.Error(), "another VM of this node") {
		t.Errorf("a second VM on segment 101 of node a: %v, want refused", err)
	}

	// A broadcast (ARP) of each job reaches its sibling only.
	for _, c := range []struct {
		from, sibling *testVM
		others        []*testVM
	}{{a1, b1, []*testVM{a2, b2}}, {b2, a2, []*testVM{a1, b1}}} {
		target := c.sibling.j.Card
		sendFrame(t, c.from.tap, arpRequest(c.from.j.Card, target))
		if !sees(c.sibling.tap, target, false, 5*time.Second) {
			t.Errorf("segment %d: the broadcast of %v did not reach its sibling %v", c.from.j.VNI, c.from.j.Card, target)
		}
		for _, o := range c.others {
			if sees(o.tap, target, false, 300*time.Millisecond) {
				t.Errorf("segment %d's broadcast reached %v of segment %d", c.from.j.VNI, o.j.Card, o.j.VNI)
			}
		}
	}

	// The VM namespace's own addresses do not answer on the job's
	// network: no ARP reply for them, from the sibling's side or its own.
	nsAddr := netip.MustParseAddr("10.214.0.100")
	sendFrame(t, b1.tap, arpRequest(b1.j.Card, nsAddr))
	sendFrame(t, a1.tap, arpRequest(a1.j.Card, nsAddr))
	for _, v := range []*testVM{a1, b1} {
		if sees(v.tap, nsAddr, true, 500*time.Millisecond) {
			t.Errorf("a VM namespace answered ARP for its own %v on the job's network", nsAddr)
		}
	}
	// Without the bridge table it would have: the table is what keeps
	// the namespace off the bridge.
	if err := a1.ns.Do(func() error {
		c, err := nftConn(-1)
		if err != nil {
			return err
		}
		c.DelTable(&nftables.Table{Name: vmTable, Family: nftables.TableFamilyBridge})
		return c.Flush()
	}); err != nil {
		t.Fatal(err)
	}
	sendFrame(t, b1.tap, arpRequest(b1.j.Card, nsAddr))
	if !sees(b1.tap, nsAddr, true, 5*time.Second) {
		t.Error("without its bridge table a VM namespace still did not answer: the check proves nothing")
	}

	// A datagram of segment 101 from the underlay's 192.0.2.9, no peer.
	spoof := func(wait time.Duration) bool {
		t.Helper()
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(192, 0, 2, 9)}, net.UDPAddrFromAddrPort(a))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hdr := []byte{0x08, 0, 0, 0, 0, 0, 101, 0}
		c.Write(append(hdr, arpRequest(card(9), card(1))...))
		return sees(a1.tap, card(1), false, wait)
	}
	if spoof(time.Second) {
		t.Error("a VXLAN datagram of the segment from a host that is no peer reached the VM")
	}
	if err := RemoveJobNetTable(nodeA, a1.j.Table); err != nil {
		t.Fatal(err)
	}
	if !spoof(5 * time.Second) {
		t.Error("without the node's table the spoofed datagram was dropped anyway: the check proves nothing")
	}

	// The peer moves to another port: the entries follow.
	moved := b1.j
	moved.Peers = []Peer{{Endpoint: netip.MustParseAddrPort("192.0.2.1:4791"), Card: card(1)}}
	if err := b1.ns.SetJobNetPeers(nodeB, b1.j, moved); err != nil {
		t.Fatal(err)
	}
	dsts := fdbDests(t, b1.ns)
	slices.Sort(dsts)
	if strings.Join(dsts, " ") != "00:00:00:00:00:00>192.0.2.1 52:54:01:d6:00:01>192.0.2.1" {
		t.Errorf("forwarding entries after the peer moved: %v", dsts)
	}

	// Leaving removes the devices and the table and frees the segment.
	if err := a2.ns.LeaveJobNet(nodeA, a2.j); err != nil {
		t.Fatal(err)
	}
	err := nodeA.Do(func() error {
		c, err := nftConn(-1)
		if err != nil {
			return err
		}
		if _, err := c.ListTableOfFamily(a2.j.Table, nftables.TableFamilyIPv4); err == nil {
			return fmt.Errorf("table %s is left", a2.j.Table)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if err := a2.ns.Do(func() error {
		if _, err := netlink.LinkByName(JobNetVXLAN); err == nil {
			return errors.New("the VXLAN device is left")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	a2.tap.Close()
	again := join("vm-a3", nodeA, a, b, 102, 3, 4)
	if err := again.ns.LeaveJobNet(nodeA, again.j); err != nil {
		t.Fatal(err)
	}
	if err := again.ns.LeaveJobNet(nodeA, again.j); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
}

// fdbDests lists the VXLAN device's forwarding entries in ns as MAC>dst.
func fdbDests(t *testing.T, ns *Netns) []string {
	t.Helper()
	var out []string
	err := ns.Do(func() error {
		l, err := netlink.LinkByName(JobNetVXLAN)
		if err != nil {
			return err
		}
		ns, err := netlink.NeighList(l.Attrs().Index, unix.AF_BRIDGE)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if n.IP != nil {
				out = append(out, n.HardwareAddr.String()+">"+n.IP.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJobNetBetweenNodesOfOneHost runs a job's two VMs on two nodes that
// share one network namespace (as corral dev's nodes do), their endpoints
// on loopback with a port each: the segment crosses between them, and a
// second job's segment on the same ports stays apart.
func TestJobNetBetweenNodesOfOneHost(t *testing.T) {
	if !inOwnNetns(t) {
		return
	}
	dir := t.TempDir()
	a, b := netip.MustParseAddrPort("127.0.0.1:4789"), netip.MustParseAddrPort("127.0.0.1:4790")
	card := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 214, 0, byte(i)}) }
	join := func(name string, local, peer netip.AddrPort, vni uint32, own, other int) *testVM {
		t.Helper()
		ns, err := Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Remove() })
		j := JobNet{VNI: vni, Local: local, Card: card(own), Table: JobNetTable(vni, local.Port()),
			Peers: []Peer{{Endpoint: peer, Card: card(other)}}}
		tap, j, err := ns.JoinJobNet(nil, j)
		if err != nil {
			t.Fatalf("%s joins: %v", name, err)
		}
		t.Cleanup(func() { tap.Close(); ns.LeaveJobNet(nil, j) })
		return &testVM{ns: ns, j: j, tap: tap}
	}
	a1, b1 := join("a1", a, b, 5, 1, 2), join("b1", b, a, 5, 2, 1)
	if err := a1.j.Check(); err != nil || a1.j.MTU != 65535-VXLANOverhead {
		t.Errorf("on loopback: MTU %d (%v), want %d", a1.j.MTU, err, 65535-VXLANOverhead)
	}
	a2 := join("a2", a, b, 6, 3, 4)
	sendFrame(t, a1.tap, arpRequest(a1.j.Card, b1.j.Card))
	if !sees(b1.tap, b1.j.Card, false, 5*time.Second) {
		t.Error("the broadcast did not cross between the two nodes of one host")
	}
	sendFrame(t, a2.tap, arpRequest(a2.j.Card, b1.j.Card))
	if sees(b1.tap, b1.j.Card, false, 500*time.Millisecond) {
		t.Error("another job's broadcast reached the first job's VM")
	}
}
