package vmrun

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"corral/api"
	"corral/noded/vmnet"
)

// testJobNet is the network of a job of three nodes as node b gets it.
func testJobNet() *api.JobNet {
	return &api.JobNet{VNI: 7, Addr: netip.MustParsePrefix("10.214.0.2/16"), Members: []api.JobNetMember{
		{Node: "a", Addr: netip.MustParseAddr("10.214.0.1"), Endpoint: "192.0.2.1:4789"},
		{Node: "b", Addr: netip.MustParseAddr("10.214.0.2"), Endpoint: "192.0.2.2:4789"},
		{Node: "c_1", Addr: netip.MustParseAddr("10.214.0.3"), Endpoint: "192.0.2.3:4790"},
	}}
}

func TestJobNetOf(t *testing.T) {
	local := netip.MustParseAddrPort("192.0.2.2:4789")
	j, err := jobNetOf(testJobNet(), local)
	if err != nil {
		t.Fatal(err)
	}
	want := vmnet.JobNet{VNI: 7, Local: local, Card: netip.MustParseAddr("10.214.0.2"), Table: "corral-job-7-4789",
		Peers: []vmnet.Peer{
			{Endpoint: netip.MustParseAddrPort("192.0.2.1:4789"), Card: netip.MustParseAddr("10.214.0.1")},
			{Endpoint: netip.MustParseAddrPort("192.0.2.3:4790"), Card: netip.MustParseAddr("10.214.0.3")},
		}}
	if j.VNI != want.VNI || j.Local != want.Local || j.Card != want.Card || j.Table != want.Table || len(j.Peers) != 2 || j.Peers[0] != want.Peers[0] || j.Peers[1] != want.Peers[1] {
		t.Fatalf("jobNetOf = %+v, want %+v", j, want)
	}

	cases := map[string]struct {
		change func(*api.JobNet)
		local  netip.AddrPort
		want   string
	}{
		"a node without an overlay":    {func(*api.JobNet) {}, netip.AddrPort{}, "--overlay"},
		"a peer without an endpoint":   {func(n *api.JobNet) { n.Members[2].Endpoint = "" }, local, "node c_1 of the job"},
		"a peer's endpoint on 0.0.0.0": {func(n *api.JobNet) { n.Members[0].Endpoint = "0.0.0.0:4789" }, local, "node a of the job"},
		"not a member":                 {func(n *api.JobNet) { n.Addr = netip.MustParsePrefix("10.214.0.9/16") }, local, "not among the job's members"},
		"no vni":                       {func(n *api.JobNet) { n.VNI = 0 }, local, "vni 0"},
		"two members at one address":   {func(n *api.JobNet) { n.Members[2].Addr = n.Members[0].Addr }, local, "peer address 10.214.0.1"},
		"a /4":                         {func(n *api.JobNet) { n.Addr = netip.MustParsePrefix("10.214.0.2/4") }, local, "/8 or smaller"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := testJobNet()
			c.change(n)
			if _, err := jobNetOf(n, c.local); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("jobNetOf = %v, want an error naming %q", err, c.want)
			}
		})
	}
}

// TestGuestJobNet checks the guest's part: its card by MAC, its address
// with the network's prefix, the MTU, and the job's hosts by node name
// (a node whose name no resolver takes is left out).
func TestGuestJobNet(t *testing.T) {
	n := testJobNet()
	j, err := jobNetOf(n, netip.MustParseAddrPort("192.0.2.2:4789"))
	if err != nil {
		t.Fatal(err)
	}
	j.MTU = 1450
	g := guestJobNet(slog.Default(), n, j)
	if g.MAC.String() != "52:54:01:d6:00:02" || g.Addr != n.Addr || g.MTU != 1450 {
		t.Fatalf("guest's card %v %v %d", g.MAC, g.Addr, g.MTU)
	}
	if len(g.Hosts) != 2 || g.Hosts[0].Name != "a" || g.Hosts[1].Name != "b" || g.Hosts[1].Addr != n.Members[1].Addr {
		t.Fatalf("guest's hosts %+v", g.Hosts)
	}
	if err := g.Validate(); err != nil {
		t.Fatalf("the guest's part does not validate: %v", err)
	}
}

// TestJobNetArgs checks the second card on QEMU's command line: the tap
// it inherits and the MAC the guest finds it by, with the modern
// virtio-mmio transport set once.
func TestJobNetArgs(t *testing.T) {
	j := &vmnet.JobNet{Card: netip.MustParseAddr("10.214.0.2")}
	got := strings.Join(jobNetArgs(j, true), " ")
	want := "-netdev tap,id=job,fd=14,vhost=off -device virtio-net-device,netdev=job,mac=52:54:01:d6:00:02"
	if got != want {
		t.Fatalf("with the share's card: %s\nwant %s", got, want)
	}
	if got := strings.Join(jobNetArgs(j, false), " "); got != "-global virtio-mmio.force-legacy=false "+want {
		t.Fatalf("alone: %s", got)
	}
	if jobNetArgs(nil, true) != nil {
		t.Fatal("a VM without a job network gets a card")
	}
}
