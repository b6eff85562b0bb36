package state

import (
	"net/netip"
	"slices"
	"testing"

	"corral/api"
)

func TestJobNetAddr(t *testing.T) {
	for rank, want := range map[int]string{0: "10.214.0.1", 1: "10.214.0.2", 254: "10.214.0.255", 255: "10.214.1.0", MaxJobNetNodes - 1: "10.214.255.254"} {
		if got := JobNetAddr(DefaultJobSubnet, rank); got.String() != want {
			t.Errorf("rank %d: %v, want %s", rank, got, want)
		}
	}
	if got := JobNetAddr(netip.MustParsePrefix("10.214.7.9/16"), 0); got.String() != "10.214.0.1" {
		t.Errorf("an unmasked subnet: %v", got)
	}
}

func TestPickVNI(t *testing.T) {
	if v := firstVNI(1); v != 1 {
		t.Errorf("job 1's segment %d", v)
	}
	if v := firstVNI(api.MaxVNI + 1); v != 1 {
		t.Errorf("the ids wrap: job %d's segment %d", api.MaxVNI+1, v)
	}
	if v := pickVNI(api.MaxVNI, map[uint32]bool{api.MaxVNI: true}); v != 1 {
		t.Errorf("past the last segment the search wraps to 1: %d", v)
	}
	if v := pickVNI(7, map[uint32]bool{7: true, 8: true}); v != 9 {
		t.Errorf("segments 7 and 8 in use: %d", v)
	}
}

// TestAssignJobNet checks the segments of runs: a run of one node has
// none; a run of several gets its job's own, or the next one free on its
// nodes when another run there holds that (a run on other nodes only
// does not count); an earlier run's network is replaced.
func TestAssignJobNet(t *testing.T) {
	s := New()
	holds := func(id uint64, vni uint32, nodes ...string) {
		s.Jobs[id] = &Job{ID: id, Spec: &JobSpec{}, Net: &JobNet{VNI: vni, Subnet: DefaultJobSubnet}}
		for _, name := range nodes {
			s.NextAllocID++
			a := &Allocation{ID: s.NextAllocID, Job: id, Node: name, Status: AllocActive}
			s.Allocs[a.ID] = a
			n := s.Nodes[name]
			if n == nil {
				n = &Node{Name: name}
				s.Nodes[name] = n
			}
			n.Allocs = append(n.Allocs, a.ID)
		}
	}
	holds(100, 42, "a", "b")
	holds(200, 43, "c", "d")
	holds(300, 44, "e")
	s.Allocs[s.NextAllocID].Status = AllocEnded // job 300's run is over

	cases := map[string]struct {
		id    uint64
		nodes []string
		want  uint32 // 0: no network
	}{
		"one node":                       {42, []string{"a"}, 0},
		"its own segment":                {7, []string{"a", "b"}, 7},
		"taken on a shared node":         {42, []string{"b", "e"}, 43},
		"taken, and the next one too":    {42, []string{"a", "c"}, 44},
		"taken on other nodes only":      {42, []string{"e", "f"}, 42},
		"held by a run that ended":       {44, []string{"e", "f"}, 44},
		"its own earlier run's is fine":  {100, []string{"a", "b"}, 100},
		"more nodes than the subnet has": {5, make([]string, MaxJobNetNodes+1), 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			j := &Job{ID: c.id, Net: &JobNet{VNI: 99}}
			if c.id == 100 {
				j = s.Jobs[100]
				s.Jobs[100].Net.VNI = 100
				defer func() { s.Jobs[100].Net = &JobNet{VNI: 42, Subnet: DefaultJobSubnet} }()
			}
			s.AssignJobNet(j, c.nodes)
			switch {
			case c.want == 0 && j.Net != nil:
				t.Fatalf("got a network %+v, want none", j.Net)
			case c.want != 0 && (j.Net == nil || j.Net.VNI != c.want || j.Net.Subnet != DefaultJobSubnet):
				t.Fatalf("got %+v, want segment %d on %v", j.Net, c.want, DefaultJobSubnet)
			}
		})
	}
}

// TestAPIJobNet checks what each node of a run gets of its job's
// network: the segment, its own VM's address (by its rank) on the
// subnet, and every member in rank order with its node's endpoint (none
// for a node that offers none); nothing for a job without a network or
// a rank outside the run.
func TestAPIJobNet(t *testing.T) {
	s := New()
	s.Nodes["n1"] = &Node{Name: "n1", Overlay: "192.0.2.1:4789"}
	s.Nodes["n2"] = &Node{Name: "n2"}
	s.Nodes["n3"] = &Node{Name: "n3", Overlay: "192.0.2.3:4790"}
	j := &Job{ID: 9, Net: &JobNet{VNI: 9, Subnet: DefaultJobSubnet}}
	nodes := []string{"n3", "n1", "n2"}
	members := []api.JobNetMember{
		{Node: "n3", Addr: netip.MustParseAddr("10.214.0.1"), Endpoint: "192.0.2.3:4790"},
		{Node: "n1", Addr: netip.MustParseAddr("10.214.0.2"), Endpoint: "192.0.2.1:4789"},
		{Node: "n2", Addr: netip.MustParseAddr("10.214.0.3")},
	}
	for rank, want := range []string{"10.214.0.1/16", "10.214.0.2/16", "10.214.0.3/16"} {
		n := s.APIJobNet(j, nodes, rank)
		if n == nil || n.VNI != 9 || n.Addr.String() != want || !slices.Equal(n.Members, members) {
			t.Errorf("rank %d: %+v, want segment 9, address %s, members %v", rank, n, want, members)
		}
	}
	if n := s.APIJobNet(j, nodes, 3); n != nil {
		t.Errorf("a rank outside the run: %+v", n)
	}
	if n := s.APIJobNet(&Job{ID: 10}, nodes, 0); n != nil {
		t.Errorf("a job without a network: %+v", n)
	}
}
