package vmnet

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// BenchmarkJoinJobNet measures what a multi-node job's VM start and end
// add on its node: a VM namespace put on a segment with 8 peers
// (JoinJobNet: the VXLAN device, the node's table, the bridge, the tap,
// the forwarding entries; join-ms) and taken off it again (LeaveJobNet;
// leave-ms), in a node namespace of its own (nothing of the machine's
// network is touched). ns/op includes making and removing the VM's
// namespace, which every VM with the NFS share pays anyway.
func BenchmarkJoinJobNet(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("network namespaces need root")
	}
	dir := b.TempDir()
	node, err := Create(filepath.Join(dir, "node"))
	if err != nil {
		b.Fatal(err)
	}
	defer node.Remove()
	err = node.Do(func() error {
		// A veth pair with both ends here: the underlay's interface.
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ul0", MTU: 1500}, PeerName: "ul1"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("ul0")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("192.0.2.1/24"))}); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		b.Fatal(err)
	}
	j := JobNet{VNI: 77, Local: netip.MustParseAddrPort("192.0.2.1:4789"), Card: netip.MustParseAddr("10.214.0.1"), Table: JobNetTable(77, 4789)}
	for i := 2; i <= 9; i++ {
		j.Peers = append(j.Peers, Peer{Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 4789),
			Card: netip.AddrFrom4([4]byte{10, 214, 0, byte(i)})})
	}
	var join, leave time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		ns, err := Create(filepath.Join(dir, fmt.Sprintf("vm%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		tap, joined, err := ns.JoinJobNet(node, j)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		tap.Close()
		if err := ns.LeaveJobNet(node, joined); err != nil {
			b.Fatal(err)
		}
		join, leave, n = join+t1.Sub(t0), leave+time.Since(t1), n+1
		ns.Remove()
	}
	b.ReportMetric(float64(join.Milliseconds())/float64(n), "join-ms")
	b.ReportMetric(float64(leave.Milliseconds())/float64(n), "leave-ms")
}
