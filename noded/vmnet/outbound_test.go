package vmnet

import (
	"net/netip"
	"strings"
	"testing"
)

// testOutbound is the way out of VM 1 as the vm runner would lay it.
func testOutbound() Outbound {
	return Outbound{
		Table: "corral-vm-1", HostIf: "crl1", NSIf: "uplink0", Tap: "tap0",
		Guest:    netip.MustParseAddr("10.0.2.15"),
		HostAddr: netip.MustParsePrefix("10.213.0.5/30"), NSAddr: netip.MustParsePrefix("10.213.0.6/30"),
		Blocked: []netip.Prefix{netip.MustParsePrefix("10.213.0.0/16"), netip.MustParsePrefix("169.254.0.0/16"),
			netip.MustParsePrefix("192.0.2.10/32")},
	}
}

// TestHostTable checks the node's rules for one VM, as nft would list
// them: the input chain drops all from the VM's veth (every address of
// the node), the forward chain drops spoofed sources and the blocked
// destinations and lets only replies in, and the NAT chain masquerades
// the VM's namespace address.
func TestHostTable(t *testing.T) {
	want := `table ip corral-vm-1 {
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "crl1" drop
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		iifname "crl1" ip saddr != 10.213.0.6 drop
		iifname "crl1" ip daddr 10.213.0.0/16 drop
		iifname "crl1" ip daddr 169.254.0.0/16 drop
		iifname "crl1" ip daddr 192.0.2.10 drop
		oifname "crl1" ct state established,related accept
		oifname "crl1" drop
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname != "crl1" ip saddr 10.213.0.6 masquerade
	}
}
`
	if got := testOutbound().HostTable().String(); got != want {
		t.Fatalf("host table:\n%s\nwant:\n%s", got, want)
	}
}

// TestNSTable checks the rules inside the VM's namespace: forwarding only
// the guest's own address out and replies back, nothing new from the
// veth into the namespace, and the guest's address translated to the
// namespace's end of the veth.
func TestNSTable(t *testing.T) {
	want := `table ip corral {
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "uplink0" ct state established,related accept
		iifname "uplink0" drop
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		iifname "tap0" oifname "uplink0" ip saddr 10.0.2.15 accept
		iifname "uplink0" oifname "tap0" ct state established,related accept
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "uplink0" ip saddr 10.0.2.15 snat to 10.213.0.6
	}
}
`
	if got := testOutbound().NSTable().String(); got != want {
		t.Fatalf("namespace table:\n%s\nwant:\n%s", got, want)
	}
}

// TestForwardGuard checks the table that keeps a node that did not
// forward from forwarding anything but its VMs' traffic.
func TestForwardGuard(t *testing.T) {
	got := ForwardGuard("crl").String()
	if !strings.Contains(got, `iifname != "crl*" oifname != "crl*" drop`) || !strings.Contains(got, "hook forward") {
		t.Fatalf("guard table:\n%s", got)
	}
}

// TestOutboundCheck checks that settings that would make unsound rules
// are refused, naming the field.
func TestOutboundCheck(t *testing.T) {
	cases := map[string]struct {
		change func(*Outbound)
		want   string
	}{
		"sound":                    {func(*Outbound) {}, ""},
		"a wildcard interface":     {func(o *Outbound) { o.HostIf = "crl*" }, "host interface"},
		"a long interface name":    {func(o *Outbound) { o.NSIf = "averyveryverylongname" }, "namespace interface"},
		"no table":                 {func(o *Outbound) { o.Table = "" }, "table"},
		"ends on two subnets":      {func(o *Outbound) { o.NSAddr = netip.MustParsePrefix("10.213.0.10/30") }, "one subnet"},
		"one address for both":     {func(o *Outbound) { o.NSAddr = o.HostAddr }, "one subnet"},
		"an IPv6 guest":            {func(o *Outbound) { o.Guest = netip.MustParseAddr("fd00::15") }, "guest address"},
		"an IPv6 blocked prefix":   {func(o *Outbound) { o.Blocked = append(o.Blocked, netip.MustParsePrefix("fd00::/8")) }, "blocked"},
		"no namespace address":     {func(o *Outbound) { o.NSAddr = netip.Prefix{} }, "namespace address"},
		"an IPv6 host address":     {func(o *Outbound) { o.HostAddr = netip.MustParsePrefix("fd00::1/64") }, "host address"},
		"a tap name with a quote":  {func(o *Outbound) { o.Tap = `ta"p` }, "tap"},
		"a table name with spaces": {func(o *Outbound) { o.Table = "a b" }, "table"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := testOutbound()
			c.change(&o)
			err := o.Check()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check() = %v, want an error about %s", err, c.want)
			}
		})
	}
}

// TestRuleExprs checks that every rule of both tables translates into
// netfilter expressions, ending in its verdict.
func TestRuleExprs(t *testing.T) {
	o := testOutbound()
	for _, tb := range []Table{o.HostTable(), o.NSTable(), ForwardGuard("crl")} {
		for _, c := range tb.Chains {
			for _, r := range c.Rules {
				e, err := ruleExprs(r)
				if err != nil {
					t.Fatalf("%s: %v", r, err)
				}
				if len(e) < 2 {
					t.Fatalf("%s: %d expressions", r, len(e))
				}
			}
		}
	}
	if _, err := ruleExprs(Rule{Verdict: SNAT}); err == nil {
		t.Fatal("an SNAT rule without an address translated")
	}
}
