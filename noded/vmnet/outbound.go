package vmnet

import (
	"fmt"
	"net/netip"
	"strings"
)

// Outbound is the way out of one job VM's namespace, for a partition whose
// network is "node": a veth pair from the VM's namespace (NSIf, NSAddr) to
// the node's own (HostIf, HostAddr), both ends on one small subnet of the
// node's transit range, with the guest's traffic translated twice: to
// NSAddr as it leaves the VM's namespace (every guest has the same
// address, so the node could not route back to it) and to the node's own
// address as it leaves the node (masquerade).
//
// Everything is decided by the caller (the vm runner); Outbound only
// says which rules follow (HostTable, NSTable) and sets them up
// (Netns.Connect, Outbound.Remove).
type Outbound struct {
	// Table is the name of the VM's table in the node's namespace: a
	// table of its own, so that adding and removing it touches no other
	// rule of the node.
	Table string `json:"table"`
	// HostIf and NSIf name the veth ends in the node's namespace and in
	// the VM's.
	HostIf string `json:"host_if"`
	NSIf   string `json:"ns_if"`
	// Tap is the tap device of the guest's card, in the VM's namespace.
	Tap string `json:"tap"`
	// Guest is the guest's own address.
	Guest netip.Addr `json:"guest"`
	// HostAddr and NSAddr are the veth ends' addresses, with the prefix
	// of their subnet.
	HostAddr netip.Prefix `json:"host_addr"`
	NSAddr   netip.Prefix `json:"ns_addr"`
	// Blocked are the destinations outside the node that the guest must
	// never reach: the controllers, the transit range (other VMs'
	// namespaces), link-local addresses (a cloud's metadata service). The
	// node's own addresses need no entry: the input chain drops all that
	// comes from HostIf.
	Blocked []netip.Prefix `json:"blocked"`
}

// Verdict is what a rule does with a packet it matches.
type Verdict string

// The verdicts rules use.
const (
	Accept     Verdict = "accept"
	Drop       Verdict = "drop"
	Masquerade Verdict = "masquerade"
	SNAT       Verdict = "snat"
)

// Rule is one netfilter rule over IPv4: every field set must match (an
// empty name or a zero prefix matches anything), and Verdict follows.
type Rule struct {
	IIF, OIF string
	// NotIIF and NotOIF match packets that come in or leave by any
	// interface but this one. A name ending in * (in NotIIF and NotOIF
	// only) stands for every name that begins with what precedes it.
	NotIIF, NotOIF string
	SAddr          netip.Prefix
	// NotSAddr inverts the SAddr match.
	NotSAddr bool
	DAddr    netip.Prefix
	// Established matches packets of connections already accepted (ct
	// state established,related).
	Established bool
	// UDPDport matches UDP datagrams to this port; 0 matches any packet.
	UDPDport uint16
	// VNI, with UDPDport, matches VXLAN packets of one segment: the
	// 24-bit network identifier at bytes 4-6 of the VXLAN header, which
	// follows the 8-byte UDP header. 0 matches any.
	VNI     uint32
	Verdict Verdict
	// To is the new source address of an SNAT rule.
	To netip.Addr
}

// Chain is a base chain of a table: its hook, whether it is a NAT chain,
// its policy (drop when Drop) and its rules, in order.
type Chain struct {
	Name  string
	Hook  string // "input", "forward" or "postrouting"
	NAT   bool
	Drop  bool
	Rules []Rule
}

// Table is a table of chains: an IPv4 one, or, with Bridge set, one of
// the bridge family, which sees the frames a bridge switches and those it
// hands to (or takes from) its own namespace.
type Table struct {
	Name   string
	Bridge bool
	Chains []Chain
}

// The tables' chains, named after their hooks.
const (
	hookInput       = "input"
	hookForward     = "forward"
	hookOutput      = "output"
	hookPostrouting = "postrouting"
)

// Check reports the first thing about o that could not make sound rules.
func (o Outbound) Check() error {
	for _, n := range []struct{ what, v string }{{"table", o.Table}, {"host interface", o.HostIf}, {"namespace interface", o.NSIf}, {"tap", o.Tap}} {
		if n.v == "" || len(n.v) > 15 || strings.ContainsAny(n.v, " \"*/") {
			return fmt.Errorf("outbound network: %s %q: give a name of 1 to 15 characters without spaces, quotes, * or /", n.what, n.v)
		}
	}
	for _, a := range []struct {
		what string
		p    netip.Prefix
	}{{"host address", o.HostAddr}, {"namespace address", o.NSAddr}} {
		if !a.p.IsValid() || !a.p.Addr().Is4() {
			return fmt.Errorf("outbound network: %s %v: give an IPv4 address with its prefix", a.what, a.p)
		}
	}
	if o.HostAddr.Masked() != o.NSAddr.Masked() || o.HostAddr.Addr() == o.NSAddr.Addr() {
		return fmt.Errorf("outbound network: %v and %v must be two addresses of one subnet", o.HostAddr, o.NSAddr)
	}
	if !o.Guest.Is4() {
		return fmt.Errorf("outbound network: guest address %v: give an IPv4 address", o.Guest)
	}
	for _, b := range o.Blocked {
		if !b.IsValid() || !b.Addr().Is4() {
			return fmt.Errorf("outbound network: blocked destination %v: give an IPv4 prefix", b)
		}
	}
	return nil
}

// HostTable returns the VM's table in the node's namespace:
//   - input: nothing from the VM's veth reaches the node itself, on any of
//     its addresses (loopback services, the node's own address, its other
//     interfaces');
//   - forward: what comes from the VM must carry NSAddr (the VM's
//     namespace translated it) and go to none of Blocked; nothing new
//     goes into the VM (another VM, the site), only replies;
//   - postrouting: what leaves the node from NSAddr takes the node's
//     address (masquerade).
//
// The chains accept by default: a packet that matches none of their rules
// is left to the node's other tables, which this table never changes.
func (o Outbound) HostTable() Table {
	fwd := []Rule{{IIF: o.HostIf, SAddr: netip.PrefixFrom(o.NSAddr.Addr(), 32), NotSAddr: true, Verdict: Drop}}
	for _, b := range o.Blocked {
		fwd = append(fwd, Rule{IIF: o.HostIf, DAddr: b, Verdict: Drop})
	}
	fwd = append(fwd,
		Rule{OIF: o.HostIf, Established: true, Verdict: Accept},
		Rule{OIF: o.HostIf, Verdict: Drop},
	)
	return Table{Name: o.Table, Chains: []Chain{
		{Name: hookInput, Hook: hookInput, Rules: []Rule{{IIF: o.HostIf, Verdict: Drop}}},
		{Name: hookForward, Hook: hookForward, Rules: fwd},
		{Name: hookPostrouting, Hook: hookPostrouting, NAT: true, Rules: []Rule{
			{NotOIF: o.HostIf, SAddr: netip.PrefixFrom(o.NSAddr.Addr(), 32), Verdict: Masquerade},
		}},
	}}
}

// NSTable returns the table in the VM's own namespace, where the node has
// no other rules, so its chains drop by default:
//   - forward: only the guest's own address, from its tap device to the
//     veth, and the replies back;
//   - input: nothing new from the veth reaches the namespace's sockets
//     (the file server listens on the tap's side only);
//   - postrouting: the guest's traffic takes NSAddr.
func (o Outbound) NSTable() Table {
	guest := netip.PrefixFrom(o.Guest, 32)
	return Table{Name: nsTable, Chains: []Chain{
		{Name: hookInput, Hook: hookInput, Rules: []Rule{
			{IIF: o.NSIf, Established: true, Verdict: Accept},
			{IIF: o.NSIf, Verdict: Drop},
		}},
		{Name: hookForward, Hook: hookForward, Drop: true, Rules: []Rule{
			{IIF: o.Tap, OIF: o.NSIf, SAddr: guest, Verdict: Accept},
			{IIF: o.NSIf, OIF: o.Tap, Established: true, Verdict: Accept},
		}},
		{Name: hookPostrouting, Hook: hookPostrouting, NAT: true, Rules: []Rule{
			{OIF: o.NSIf, SAddr: guest, Verdict: SNAT, To: o.NSAddr.Addr()},
		}},
	}}
}

// nsTable names the table in a VM's namespace.
const nsTable = "corral"

// GuardTable names the table that keeps a node from forwarding anything
// but its VMs' traffic, made when the node did not forward before.
const GuardTable = "corral-forward"

// ForwardGuard returns GuardTable for the VMs' veth ends named
// hostIfPrefix*: it drops every forwarded packet that neither comes from
// nor goes to one of them. IPv4 forwarding is one switch for the whole
// namespace; a node that did not forward before the first outbound VM
// keeps forwarding nothing else.
func ForwardGuard(hostIfPrefix string) Table {
	any := hostIfPrefix + "*"
	return Table{Name: GuardTable, Chains: []Chain{
		{Name: hookForward, Hook: hookForward, Rules: []Rule{{NotIIF: any, NotOIF: any, Verdict: Drop}}},
	}}
}

// String writes the rule as nft(8) would list it.
func (r Rule) String() string {
	var w []string
	if r.IIF != "" {
		w = append(w, fmt.Sprintf("iifname %q", r.IIF))
	}
	if r.OIF != "" {
		w = append(w, fmt.Sprintf("oifname %q", r.OIF))
	}
	if r.NotIIF != "" {
		w = append(w, fmt.Sprintf("iifname != %q", r.NotIIF))
	}
	if r.NotOIF != "" {
		w = append(w, fmt.Sprintf("oifname != %q", r.NotOIF))
	}
	if r.SAddr.IsValid() {
		op := ""
		if r.NotSAddr {
			op = "!= "
		}
		w = append(w, "ip saddr "+op+prefixString(r.SAddr))
	}
	if r.DAddr.IsValid() {
		w = append(w, "ip daddr "+prefixString(r.DAddr))
	}
	if r.Established {
		w = append(w, "ct state established,related")
	}
	if r.UDPDport != 0 {
		w = append(w, fmt.Sprintf("udp dport %d", r.UDPDport))
	}
	if r.VNI != 0 {
		w = append(w, fmt.Sprintf("@th,96,24 %d", r.VNI))
	}
	v := string(r.Verdict)
	if r.Verdict == SNAT {
		v = "snat to " + r.To.String()
	}
	return strings.Join(append(w, v), " ")
}

// String writes the table as `nft list table ip NAME` would.
func (t Table) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", t.family(), t.Name)
	for _, c := range t.Chains {
		kind, prio, policy := "filter", "filter", "accept"
		if c.NAT {
			kind, prio = "nat", "srcnat"
		}
		if c.Drop {
			policy = "drop"
		}
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype %s hook %s priority %s; policy %s;\n", c.Name, kind, c.Hook, prio, policy)
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "\t\t%s\n", r)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// family names the table's family as nft(8) does.
func (t Table) family() string {
	if t.Bridge {
		return "bridge"
	}
	return "ip"
}

func prefixString(p netip.Prefix) string {
	if p.Bits() == 32 {
		return p.Addr().String()
	}
	return p.String()
}
