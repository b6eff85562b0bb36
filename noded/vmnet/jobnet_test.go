package vmnet

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// testJobNet is VM 1 of a job of three on segment 4097, whose other VMs'
// nodes are 192.0.2.2 and 192.0.2.3.
func testJobNet() JobNet {
	return JobNet{
		VNI: 4097, Local: netip.MustParseAddrPort("192.0.2.1:4789"), Card: netip.MustParseAddr("10.214.0.1"),
		Table: JobNetTable(4097, 4789),
		Peers: []Peer{
			{Endpoint: netip.MustParseAddrPort("192.0.2.2:4789"), Card: netip.MustParseAddr("10.214.0.2")},
			{Endpoint: netip.MustParseAddrPort("192.0.2.3:4790"), Card: netip.MustParseAddr("10.214.0.3")},
		},
	}
}

// TestJobNetNodeTable checks the node's rules for a segment, as nft would
// list them: its datagrams are accepted from the peers' nodes and dropped
// from anyone else; nothing else is touched.
func TestJobNetNodeTable(t *testing.T) {
	want := `table ip corral-job-4097-4789 {
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr 192.0.2.2 udp dport 4789 @th,96,24 4097 accept
		ip saddr 192.0.2.3 udp dport 4789 @th,96,24 4097 accept
		udp dport 4789 @th,96,24 4097 drop
	}
}
`
	if got := testJobNet().NodeTable().String(); got != want {
		t.Fatalf("node table:\n%s\nwant:\n%s", got, want)
	}
	// Every rule compiles to netfilter's expressions.
	for _, r := range testJobNet().NodeTable().Chains[0].Rules {
		if _, err := ruleExprs(r); err != nil {
			t.Errorf("rule %q: %v", r, err)
		}
	}
	if _, err := ruleExprs(Rule{VNI: 5, Verdict: Drop}); err == nil {
		t.Error("a VNI match without the UDP port compiled")
	}
}

// TestJobNetVMTable checks the bridge table in the VM's namespace:
// nothing from the bridge into the namespace, nothing out of it onto the
// bridge.
func TestJobNetVMTable(t *testing.T) {
	want := `table bridge corral-jobnet {
	chain input {
		type filter hook input priority filter; policy drop;
	}
	chain output {
		type filter hook output priority filter; policy drop;
	}
}
`
	if got := VMTable().String(); got != want {
		t.Fatalf("VM table:\n%s\nwant:\n%s", got, want)
	}
}

func TestJobNetCheck(t *testing.T) {
	ok := testJobNet()
	if err := ok.Check(); err != nil {
		t.Fatalf("a sound job network: %v", err)
	}
	cases := map[string]struct {
		change func(*JobNet)
		want   string
	}{
		"no vni":        {func(j *JobNet) { j.VNI = 0 }, "vni 0"},
		"vni too large": {func(j *JobNet) { j.VNI = 1 << 24 }, "vni 16777216"},
		"no endpoint":   {func(j *JobNet) { j.Local = netip.AddrPort{} }, "endpoint"},
		"no port":       {func(j *JobNet) { j.Local = netip.MustParseAddrPort("192.0.2.1:0") }, "endpoint"},
		"any address":   {func(j *JobNet) { j.Local = netip.MustParseAddrPort("0.0.0.0:4789") }, "endpoint"},
		"small mtu":     {func(j *JobNet) { j.MTU = 100 }, "mtu 100"},
		"no card":       {func(j *JobNet) { j.Card = netip.Addr{} }, "guest's address"},
		"no table":      {func(j *JobNet) { j.Table = "" }, "table"},
		"peer twice":    {func(j *JobNet) { j.Peers[1].Card = j.Peers[0].Card }, "peer address 10.214.0.2"},
		"peer is self":  {func(j *JobNet) { j.Peers[0].Card = j.Card }, "peer address 10.214.0.1"},
		"peer no port":  {func(j *JobNet) { j.Peers[0].Endpoint = netip.MustParseAddrPort("192.0.2.2:0") }, "peer endpoint"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			j := testJobNet()
			j.Peers = append([]Peer(nil), j.Peers...)
			c.change(&j)
			err := j.Check()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check = %v, want an error naming %q", err, c.want)
			}
		})
	}
}

func TestCardMAC(t *testing.T) {
	got := CardMAC(netip.MustParseAddr("10.214.1.2"))
	if want := (net.HardwareAddr{0x52, 0x54, 0x01, 0xd6, 0x01, 0x02}); !bytes.Equal(got, want) {
		t.Fatalf("CardMAC = %v, want %v", got, want)
	}
	if got[0]&2 == 0 || got[0]&1 != 0 {
		t.Fatalf("CardMAC %v is not a locally administered unicast address", got)
	}
}
