package api

import (
	"fmt"
	"net/netip"
)

// JobNet is a multi-node job's private network as a node gets it in the
// job of each of its desired allocations: the job's VXLAN segment (VNI),
// this allocation's address on it with the network's prefix length
// (Addr), and every member of the job, this one included, in rank order.
// The controllers assign the segment and the addresses when the job
// starts; the node daemons build the overlay between them (noded/vmnet).
type JobNet struct {
	VNI     uint32         `json:"vni"`
	Addr    netip.Prefix   `json:"addr"`
	Members []JobNetMember `json:"members"`
}

// JobNetMember is one allocation of a job on its private network: its
// node, its VM's address, and where its node's VXLAN endpoint listens
// (the node's NodeInfo.Overlay, "ADDR:PORT"; empty while the node has
// not said).
type JobNetMember struct {
	Node     string     `json:"node"`
	Addr     netip.Addr `json:"addr"`
	Endpoint string     `json:"endpoint,omitempty"`
}

// MaxVNI is the largest VXLAN network identifier, 24 bits.
const MaxVNI = 1<<24 - 1

// ParseOverlay reads a node's overlay endpoint (NodeInfo.Overlay): an
// IPv4 address of the node, not 0.0.0.0, and a UDP port.
func ParseOverlay(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Is4() || ap.Addr().IsUnspecified() || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("overlay endpoint %q: give the node's IPv4 address and a UDP port, as 192.0.2.1:4789", s)
	}
	return ap, nil
}
