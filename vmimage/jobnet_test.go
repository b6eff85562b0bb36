package vmimage

import (
	"bytes"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func testNet() Net {
	return Net{
		MAC: net.HardwareAddr{0x52, 0x54, 0x01, 0xd6, 0, 1}, Addr: netip.MustParsePrefix("10.214.0.1/16"), MTU: 1450,
		Hosts: []Host{{Name: "node1", Addr: netip.MustParseAddr("10.214.0.1")}, {Name: "node2.cluster", Addr: netip.MustParseAddr("10.214.0.2")}},
	}
}

func TestNetRoundTrip(t *testing.T) {
	n := testNet()
	b := n.encode()
	want := "card 52:54:01:d6:00:01 10.214.0.1/16 1450\nhost 10.214.0.1 node1\nhost 10.214.0.2 node2.cluster\n"
	if string(b) != want {
		t.Fatalf("encode = %q, want %q", b, want)
	}
	got, err := ParseNet(b)
	if err != nil || !reflect.DeepEqual(got, n) {
		t.Fatalf("ParseNet = %+v, %v; want %+v", got, err, n)
	}
}

func TestNetValidate(t *testing.T) {
	cases := map[string]struct {
		change func(*Net)
		want   string
	}{
		"no mac":              {func(n *Net) { n.MAC = nil }, "unicast Ethernet"},
		"multicast mac":       {func(n *Net) { n.MAC = net.HardwareAddr{1, 0, 0x5e, 0, 0, 1} }, "unicast Ethernet"},
		"no address":          {func(n *Net) { n.Addr = netip.Prefix{} }, "address invalid Prefix"},
		"ipv6":                {func(n *Net) { n.Addr = netip.MustParsePrefix("fd00::1/64") }, "IPv4"},
		"host route":          {func(n *Net) { n.Addr = netip.MustParsePrefix("10.214.0.1/32") }, "/8 to /30"},
		"small mtu":           {func(n *Net) { n.MTU = 100 }, "mtu 100"},
		"bad name":            {func(n *Net) { n.Hosts[0].Name = "no de" }, `"no de"`},
		"name with a hyphen":  {func(n *Net) { n.Hosts[0].Name = "-node" }, `"-node"`},
		"empty label":         {func(n *Net) { n.Hosts[0].Name = "a..b" }, `"a..b"`},
		"host off the subnet": {func(n *Net) { n.Hosts[1].Addr = netip.MustParseAddr("10.215.0.2") }, "not on the job's network 10.214.0.0/16"},
		"host twice":          {func(n *Net) { n.Hosts[1].Name = "NODE1" }, "listed twice"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := testNet()
			n.Hosts = append([]Host(nil), n.Hosts...)
			c.change(&n)
			err := n.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want an error naming %q", err, c.want)
			}
			if err := WritePayload(&bytes.Buffer{}, Payload{Script: []byte("x"), Net: &n}); err == nil {
				t.Fatal("WritePayload took a payload whose net Validate refuses")
			}
		})
	}
	n := testNet()
	if err := n.Validate(); err != nil {
		t.Fatalf("a sound net: %v", err)
	}
}

func TestParseNetRefuses(t *testing.T) {
	for name, b := range map[string]string{
		"empty":      "",
		"no card":    "host 10.214.0.1 node1\n",
		"two cards":  "card 52:54:01:d6:00:01 10.214.0.1/16 1450\ncard 52:54:01:d6:00:02 10.214.0.2/16 1450\n",
		"bad mtu":    "card 52:54:01:d6:00:01 10.214.0.1/16 x\n",
		"bad host":   "card 52:54:01:d6:00:01 10.214.0.1/16 1450\nhost node1 10.214.0.1\n",
		"other word": "card 52:54:01:d6:00:01 10.214.0.1/16 1450\nroute default\n",
		"long mac":   "card 52:54:01:d6:00:01:02:03 10.214.0.1/16 1450\n",
	} {
		if n, err := ParseNet([]byte(b)); err == nil {
			t.Errorf("%s: ParseNet(%q) = %+v, want an error", name, b, n)
		}
	}
}

// TestRenderHosts checks the guest's /etc/hosts: the job's hosts first,
// the node's own lines after them without the job's names (a node's
// entry for its own name would otherwise send the job to the node's
// address), everything else kept.
func TestRenderHosts(t *testing.T) {
	hosts := []Host{{Name: "node1", Addr: netip.MustParseAddr("10.214.0.1")}, {Name: "node2", Addr: netip.MustParseAddr("10.214.0.2")}}
	cases := map[string]struct{ base, want string }{
		"no base": {"", "# The nodes of this job on its private network (corral).\n10.214.0.1\tnode1\n10.214.0.2\tnode2\n"},
		"the cluster's file": {
			"127.0.0.1\tlocalhost\n# cluster\n192.168.1.1 node1 node1.cluster # head\n192.168.1.2\tNODE2\n192.168.1.3 node3\n\n::1 localhost ip6-localhost\r\n",
			"# The nodes of this job on its private network (corral).\n10.214.0.1\tnode1\n10.214.0.2\tnode2\n" +
				"# The node's own entries for other names.\n127.0.0.1\tlocalhost\n# cluster\n192.168.1.1\tnode1.cluster\t# head\n" +
				"192.168.1.3 node3\n\n::1 localhost ip6-localhost\n",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := string(RenderHosts([]byte(c.base), hosts)); got != c.want {
				t.Fatalf("RenderHosts:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// FuzzParseNet checks the guest's reader of job/net: what it accepts is
// valid and reads back the same from its encoding.
func FuzzParseNet(f *testing.F) {
	n := testNet()
	f.Add(n.encode())
	f.Add([]byte("card 52:54:01:d6:00:01 10.214.0.1/16 0\n"))
	f.Add([]byte("card 52:54:01:d6:00:01 10.214.0.1/16 1450\nhost 10.214.0.9 a-b.c\nhost 10.214.0.9 x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseNet(b)
		if err != nil {
			return
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("ParseNet(%q) accepted %+v, which Validate refuses: %v", b, n, err)
		}
		again, err := ParseNet(n.encode())
		if err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("ParseNet(%q) = %+v, whose encoding reads back as %+v, %v", b, n, again, err)
		}
	})
}

// FuzzRenderHosts checks RenderHosts over any host file: the job's hosts
// come first, and no later entry line names one of them.
func FuzzRenderHosts(f *testing.F) {
	f.Add([]byte("127.0.0.1 localhost\n192.168.1.1 node1 n1 # c\n"))
	f.Add([]byte("node1\n#node1\n 1.2.3.4 NODE1\tnode1\r\n"))
	hosts := []Host{{Name: "node1", Addr: netip.MustParseAddr("10.214.0.1")}, {Name: "node2", Addr: netip.MustParseAddr("10.214.0.2")}}
	f.Fuzz(func(t *testing.T, base []byte) {
		out := string(RenderHosts(base, hosts))
		lines := strings.Split(out, "\n")
		if len(lines) < 3 || lines[1] != "10.214.0.1\tnode1" || lines[2] != "10.214.0.2\tnode2" {
			t.Fatalf("RenderHosts(%q) does not begin with the job's hosts:\n%s", base, out)
		}
		for _, line := range lines[3:] {
			entry, _, _ := strings.Cut(line, "#")
			f := strings.Fields(entry)
			for i := 1; i < len(f); i++ {
				if strings.EqualFold(f[i], "node1") || strings.EqualFold(f[i], "node2") {
					t.Fatalf("RenderHosts(%q) kept the job's name in %q:\n%s", base, line, out)
				}
			}
		}
	})
}
