package vmnet

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// JobNet is one VM's part of its job's private network, a multi-node
// job's overlay: a VXLAN segment of the job's own (VNI) between the nodes
// of the job's VMs, with unicast peers only (no multicast: the underlay
// need not route it), switched by a bridge to a second tap device, whose
// other end is the guest's second network card.
//
// Everything of it that carries the guest's frames lives in the VM's own
// namespace (JobNetVXLAN, JobNetBridge, JobNetTap); only the VXLAN
// device's UDP socket is the node's, since it is made from the node's
// namespace, where the underlay is. So the guest's frames go to the
// job's other nodes, encapsulated, and nowhere else: the namespace still
// routes nothing of them, and a bridge table (VMTable) drops what the
// bridge would hand to the namespace's own stack (its file server, its
// way out) or take from it. On the node, NodeTable accepts the segment's
// datagrams from the job's peers only.
//
// The caller (the vm runner) decides the VNI, the addresses and the
// names; JobNet only says which rules follow and sets them up
// (Netns.JoinJobNet, Netns.SetJobNetPeers, Netns.LeaveJobNet).
type JobNet struct {
	// VNI is the job's segment, 1 to 2^24-1, chosen by the controllers.
	VNI uint32 `json:"vni"`
	// Local is the node's underlay address and the UDP port its VXLAN
	// endpoint listens on. The address must be one of the node's.
	Local netip.AddrPort `json:"local"`
	// MTU is the MTU of the guest's card and of the devices between it
	// and the VXLAN device: the underlay's less the encapsulation
	// (VXLANOverhead). 0 derives it from the underlay's interface.
	MTU int `json:"mtu,omitempty"`
	// Card is the guest's address on the job's network; its card's MAC
	// is CardMAC(Card).
	Card netip.Addr `json:"card"`
	// Peers are the job's other VMs: where their nodes' VXLAN endpoints
	// are and their cards' addresses.
	Peers []Peer `json:"peers,omitempty"`
	// Table names the node's table for the segment (NodeTable).
	Table string `json:"table"`
}

// Peer is another VM of the job: its node's VXLAN endpoint and its card's
// address on the job's network.
type Peer struct {
	Endpoint netip.AddrPort `json:"endpoint"`
	Card     netip.Addr     `json:"card"`
}

// Devices of the job's network inside a VM's namespace: one VM per job
// per node, so the names are fixed.
const (
	JobNetVXLAN  = "jvx0"
	JobNetBridge = "jbr0"
	JobNetTap    = "jtap0"
)

// VXLANOverhead is what VXLAN over IPv4 adds to a frame: the outer IPv4
// (20) and UDP (8) headers, the VXLAN header (8) and the inner Ethernet
// header (14).
const VXLANOverhead = 50

// MaxVNI is the largest VXLAN network identifier (24 bits).
const MaxVNI = 1<<24 - 1

// vmTable names the bridge table in a VM's namespace.
const vmTable = "corral-jobnet"

// JobNetTable names the node's table of the segment vni whose endpoint
// listens on port: one node may hold the endpoints of several nodes (one
// port each, as corral dev runs them), each with its own table.
func JobNetTable(vni uint32, port uint16) string {
	return "corral-job-" + strconv.FormatUint(uint64(vni), 10) + "-" + strconv.FormatUint(uint64(port), 10)
}

// CardMAC returns the MAC address of the guest's card whose address on
// the job's network is a: locally administered (QEMU's 52:54 prefix with
// 01 after it, apart from the share's card's 52:54:00) and ending in the
// address's last three bytes, which differ between the VMs of a job
// whose subnet is a /8 or smaller. Every node derives its peers' MACs
// alike, so the VXLAN devices know each of them in advance and learn
// nothing from the wire.
func CardMAC(a netip.Addr) net.HardwareAddr {
	b := a.As4()
	return net.HardwareAddr{0x52, 0x54, 0x01, b[1], b[2], b[3]}
}

// Check reports the first thing about j that could not make a sound
// network.
func (j JobNet) Check() error {
	if j.VNI == 0 || j.VNI > MaxVNI {
		return fmt.Errorf("job network: vni %d: give 1 to %d", j.VNI, MaxVNI)
	}
	if !j.Local.IsValid() || !j.Local.Addr().Is4() || j.Local.Addr().IsUnspecified() || j.Local.Port() == 0 {
		return fmt.Errorf("job network: the node's endpoint %v: give an IPv4 address of the node and a port", j.Local)
	}
	if j.MTU != 0 && (j.MTU < 576 || j.MTU > 65535-VXLANOverhead) {
		return fmt.Errorf("job network: mtu %d: give 576 to %d, or 0 to derive it from the underlay", j.MTU, 65535-VXLANOverhead)
	}
	if !j.Card.Is4() {
		return fmt.Errorf("job network: the guest's address %v: give an IPv4 address", j.Card)
	}
	if j.Table == "" || len(j.Table) > 64 {
		return fmt.Errorf("job network: table name %q: give 1 to 64 characters", j.Table)
	}
	seen := map[netip.Addr]bool{j.Card: true}
	for _, p := range j.Peers {
		if !p.Endpoint.IsValid() || !p.Endpoint.Addr().Is4() || p.Endpoint.Addr().IsUnspecified() || p.Endpoint.Port() == 0 {
			return fmt.Errorf("job network: peer endpoint %v: give an IPv4 address and a port", p.Endpoint)
		}
		if !p.Card.Is4() || seen[p.Card] {
			return fmt.Errorf("job network: peer address %v: give an IPv4 address no other VM of the job has", p.Card)
		}
		seen[p.Card] = true
	}
	return nil
}

// NodeTable returns the segment's table in the node's namespace: its
// input chain accepts the segment's VXLAN datagrams (j.Local's port,
// j.VNI) from the peers' nodes and drops them from anyone else, so that
// no host of the underlay but the job's own nodes can put a frame on the
// job's network. Other traffic is left to the node's other tables.
func (j JobNet) NodeTable() Table {
	port := j.Local.Port()
	var rules []Rule
	seen := map[netip.Addr]bool{}
	for _, p := range j.Peers {
		a := p.Endpoint.Addr()
		if seen[a] {
			continue
		}
		seen[a] = true
		rules = append(rules, Rule{SAddr: netip.PrefixFrom(a, 32), UDPDport: port, VNI: j.VNI, Verdict: Accept})
	}
	rules = append(rules, Rule{UDPDport: port, VNI: j.VNI, Verdict: Drop})
	return Table{Name: j.Table, Chains: []Chain{{Name: hookInput, Hook: hookInput, Rules: rules}}}
}

// VMTable returns the bridge table in the VM's namespace: the bridge
// switches frames between the guest's card and the VXLAN device only;
// nothing it carries reaches the namespace's own stack (the file server's
// address, the way out) and the namespace sends nothing onto it.
func VMTable() Table {
	return Table{Name: vmTable, Bridge: true, Chains: []Chain{
		{Name: hookInput, Hook: hookInput, Drop: true},
		{Name: hookOutput, Hook: hookOutput, Drop: true},
	}}
}
