package vmimage

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// ShareMAC is the MAC address of the guest's card on its file server's
// network (the NFS share's): the same in every VM, so that a migrated
// guest keeps its card. The guest's init tells its cards apart by MAC,
// since the order in which the kernel names them is not fixed.
const ShareMAC = "52:54:00:c0:44:01"

// Net is a multi-node job's private network as the guest sees it
// (job/net): its second card, found by MAC, with its address and MTU, and
// the job's hosts (each node of the job by name, with its VM's address),
// which init writes to the guest's /etc/hosts so that the job reaches its
// other VMs by their nodes' names.
type Net struct {
	MAC   net.HardwareAddr
	Addr  netip.Prefix
	MTU   int
	Hosts []Host
}

// Host is one name of /etc/hosts and its address.
type Host struct {
	Name string
	Addr netip.Addr
}

// maxHostName is the longest host name resolvers accept.
const maxHostName = 253

// ValidHostName reports whether s is a host name /etc/hosts can hold:
// labels of letters, digits and hyphens, not beginning or ending with a
// hyphen, joined by dots.
func ValidHostName(s string) bool {
	if s == "" || len(s) > maxHostName {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Validate reports the first thing about n the guest could not set up.
func (n *Net) Validate() error {
	if len(n.MAC) != 6 || n.MAC[0]&1 != 0 {
		return fmt.Errorf("payload net: card %v: give a unicast Ethernet address", n.MAC)
	}
	if !n.Addr.IsValid() || !n.Addr.Addr().Is4() || n.Addr.Bits() < 8 || n.Addr.Bits() > 30 {
		return fmt.Errorf("payload net: address %v: give an IPv4 address with a prefix of /8 to /30", n.Addr)
	}
	if n.MTU != 0 && (n.MTU < 576 || n.MTU > 65535) {
		return fmt.Errorf("payload net: mtu %d: give 576 to 65535, or 0 for the driver's", n.MTU)
	}
	seen := map[string]bool{}
	for _, h := range n.Hosts {
		if !ValidHostName(h.Name) {
			return fmt.Errorf("payload net: host name %q: give letters, digits, hyphens and dots", h.Name)
		}
		if !h.Addr.Is4() || !n.Addr.Masked().Contains(h.Addr) {
			return fmt.Errorf("payload net: host %s: address %v is not on the job's network %v", h.Name, h.Addr, n.Addr.Masked())
		}
		if seen[strings.ToLower(h.Name)] {
			return fmt.Errorf("payload net: host %s is listed twice", h.Name)
		}
		seen[strings.ToLower(h.Name)] = true
	}
	return nil
}

// encode returns job/net: "card MAC ADDR/BITS MTU", then "host ADDR NAME"
// per host, in order.
func (n *Net) encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "card %s %s %d\n", n.MAC, n.Addr, n.MTU)
	for _, h := range n.Hosts {
		fmt.Fprintf(&b, "host %s %s\n", h.Addr, h.Name)
	}
	return []byte(b.String())
}

// ParseNet reads job/net as encode writes it.
func ParseNet(b []byte) (Net, error) {
	var n Net
	card := false
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "card" && len(f) == 4 && !card:
			mac, err1 := net.ParseMAC(f[1])
			addr, err2 := netip.ParsePrefix(f[2])
			mtu, err3 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || err3 != nil || len(mac) != 6 {
				return Net{}, fmt.Errorf("job net line %d: %q: want card MAC ADDR/BITS MTU", i+1, line)
			}
			n.MAC, n.Addr, n.MTU, card = mac, addr, mtu, true
		case f[0] == "host" && len(f) == 3:
			a, err := netip.ParseAddr(f[1])
			if err != nil {
				return Net{}, fmt.Errorf("job net line %d: host address %q", i+1, f[1])
			}
			n.Hosts = append(n.Hosts, Host{Name: f[2], Addr: a})
		default:
			return Net{}, fmt.Errorf("job net line %d: %q is not a card or host line", i+1, line)
		}
	}
	if !card {
		return Net{}, fmt.Errorf("job net: no card line")
	}
	if err := n.Validate(); err != nil {
		return Net{}, err
	}
	return n, nil
}

// RenderHosts returns the guest's /etc/hosts: the job's hosts first, then
// the host's file (base) without those names, so that a name of the job
// resolves to its VM's address on the job's network, never to the node's
// own address that the host's file may give it (nsswitch reads the file
// in order and takes the first match). A line of base left with no name
// is dropped; comments and other lines stay as they are.
func RenderHosts(base []byte, hosts []Host) []byte {
	var b bytes.Buffer
	b.WriteString("# The nodes of this job on its private network (corral).\n")
	ours := map[string]bool{}
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s\t%s\n", h.Addr, h.Name)
		ours[strings.ToLower(h.Name)] = true
	}
	if len(base) == 0 {
		return b.Bytes()
	}
	b.WriteString("# The node's own entries for other names.\n")
	for _, line := range strings.SplitAfter(string(base), "\n") {
		if line == "" {
			continue
		}
		entry, comment, hasComment := strings.Cut(strings.TrimRight(line, "\r\n"), "#")
		f := strings.Fields(entry)
		if len(f) < 2 {
			b.WriteString(strings.TrimRight(line, "\r\n") + "\n")
			continue
		}
		kept := []string{f[0]}
		for _, name := range f[1:] {
			if !ours[strings.ToLower(name)] {
				kept = append(kept, name)
			}
		}
		if len(kept) == len(f) {
			b.WriteString(strings.TrimRight(line, "\r\n") + "\n")
			continue
		}
		if len(kept) == 1 {
			continue
		}
		out := strings.Join(kept, "\t")
		if hasComment {
			out += "\t#" + comment
		}
		b.WriteString(out + "\n")
	}
	return b.Bytes()
}
