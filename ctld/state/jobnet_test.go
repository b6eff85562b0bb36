package state

import (
	"net/netip"
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
