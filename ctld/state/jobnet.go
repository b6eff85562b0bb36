package state

import (
	"net/netip"

	"corral/api"
)

// JobNet is a multi-node run's private network (see api.JobNet and
// noded/vmnet): the VXLAN segment its VMs share across their nodes and
// the subnet their cards are on. It is assigned in the apply of the start
// (AssignJobNet) and kept on the job while the run lasts; each VM's
// address follows from its allocation's rank (JobNetAddr), so the
// allocations carry nothing of it.
type JobNet struct {
	VNI    uint32       `json:"vni"`
	Subnet netip.Prefix `json:"subnet"`
}

// DefaultJobSubnet is the subnet of every multi-node run's network. Runs
// never share a segment, so they may share the subnet; it only must not
// overlap a network a guest reaches otherwise (the site's, for a
// partition whose network is node).
var DefaultJobSubnet = netip.MustParsePrefix("10.214.0.0/16")

// MaxJobNetNodes is the most nodes a run's network addresses on
// DefaultJobSubnet (its network and broadcast addresses left out).
const MaxJobNetNodes = 1<<16 - 2

// JobNetAddr returns the address of the VM of rank on subnet: the
// subnet's first address after its own, plus rank.
func JobNetAddr(subnet netip.Prefix, rank int) netip.Addr {
	b := subnet.Masked().Addr().As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n += uint32(rank) + 1
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

// firstVNI is where a job's search for a free segment begins: derived
// from its id, so that a replayed log picks the same one.
func firstVNI(id uint64) uint32 { return uint32((id-1)%api.MaxVNI) + 1 }

// pickVNI returns the first segment from firstVNI(id) on that inUse
// does not hold.
func pickVNI(id uint64, inUse map[uint32]bool) uint32 {
	v := firstVNI(id)
	for inUse[v] {
		if v++; v > api.MaxVNI {
			v = 1
		}
	}
	return v
}

// vnisOnNodes returns the segments of the multi-node runs, other than
// job skip's, that hold an active allocation on one of nodes. Only a
// node's own segments can clash: a node gives each segment one VXLAN
// device, and a segment's datagrams go only to its run's nodes.
func (s *State) vnisOnNodes(nodes []string, skip uint64) map[uint32]bool {
	inUse := map[uint32]bool{}
	for _, name := range nodes {
		n := s.Nodes[name]
		if n == nil {
			continue
		}
		for _, id := range n.Allocs {
			a := s.Allocs[id]
			if a == nil || !a.Active() || a.Job == skip {
				continue
			}
			if j := s.Jobs[a.Job]; j != nil && j.Net != nil {
				inUse[j.Net.VNI] = true
			}
		}
	}
	return inUse
}

// AssignJobNet gives job j, starting a run on nodes (rank order), its
// private network when the run spans more than one node (and fits the
// subnet), and takes away an earlier run's. Deterministic: the first
// segment from the job's own on that no other run on those nodes holds.
func (s *State) AssignJobNet(j *Job, nodes []string) {
	j.Net = nil
	if len(nodes) < 2 || len(nodes) > MaxJobNetNodes {
		return
	}
	j.Net = &JobNet{VNI: pickVNI(j.ID, s.vnisOnNodes(nodes, j.ID)), Subnet: DefaultJobSubnet}
}

// APIJobNet returns job j's network as the node of rank in its run needs
// it (api.JobNet: the segment, that VM's address with the subnet's
// length, and every member in rank order with its node's overlay
// endpoint, empty for a node that offers none); nodes are the run's nodes
// in rank order. It is nil for a job without a network or a rank outside
// the run. The desired allocations carry it to the node daemons.
func (s *State) APIJobNet(j *Job, nodes []string, rank int) *api.JobNet {
	if j.Net == nil || rank < 0 || rank >= len(nodes) || len(nodes) > MaxJobNetNodes {
		return nil
	}
	subnet := j.Net.Subnet.Masked()
	n := &api.JobNet{VNI: j.Net.VNI, Addr: netip.PrefixFrom(JobNetAddr(subnet, rank), subnet.Bits()),
		Members: make([]api.JobNetMember, len(nodes))}
	for i, name := range nodes {
		n.Members[i] = api.JobNetMember{Node: name, Addr: JobNetAddr(subnet, i)}
		if node := s.Nodes[name]; node != nil {
			n.Members[i].Endpoint = node.Overlay
		}
	}
	return n
}
