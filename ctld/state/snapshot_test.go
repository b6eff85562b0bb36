package state

import (
	"os"
	"testing"

	"corral/api"
)

// TestReadFormat2Snapshot reads a snapshot written by the controller of
// the last release before allocations (testdata/snapshot-v2.json, written
// by ctld/testdata/mkfixture.go.txt): every job is there with its state,
// each job that ran has the allocation of its run, and the nodes list the
// active ones.
func TestReadFormat2Snapshot(t *testing.T) {
	f, err := os.Open("testdata/snapshot-v2.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadSnapshot(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("the upgraded state breaks an invariant: %v", err)
	}
	want := map[uint64]struct {
		state api.JobState
		node  string
	}{
		1: {api.StateCompleted, "n1"}, 2: {api.StateRunning, "n1"}, 3: {api.StatePending, ""},
		4: {api.StateCompleting, "n1"}, 5: {api.StatePending, ""}, 6: {api.StatePending, ""},
		7: {api.StateRunning, "n2"}, 8: {api.StateRunning, "n2"}, 9: {api.StateRunning, "n1"},
	}
	if len(s.Jobs) != len(want) {
		t.Errorf("%d jobs, want %d", len(s.Jobs), len(want))
	}
	for id, w := range want {
		j := s.Jobs[id]
		if j == nil {
			t.Errorf("job %d is missing", id)
			continue
		}
		node := ""
		if a := s.LastAlloc(j); a != nil {
			node = a.Node
		}
		if j.State != w.state || node != w.node {
			t.Errorf("job %d: %s on %q, want %s on %q", id, j.State, node, w.state, w.node)
		}
	}
	if a := s.LastAlloc(s.Jobs[4]); a == nil || a.Desired != AllocStop || a.StopAs != api.StateCancelled {
		t.Errorf("the COMPLETING job's allocation is %+v, want one being stopped as CANCELLED", a)
	}
	if n := s.Nodes["n1"]; n == nil || len(n.Allocs) != 3 || n.AllocCPUs != 4 {
		t.Errorf("node n1: %+v, want 3 active allocations holding its 4 CPUs", n)
	}
	if s.Requests.Len() != 6 || len(s.QOS) != 4 || s.Config.Weights.Age != 2000 || s.Accounts["phys"] == nil {
		t.Errorf("request ids %d, QoS %d, age weight %d, account phys %v: the policy and request ids did not come through",
			s.Requests.Len(), len(s.QOS), s.Config.Weights.Age, s.Accounts["phys"])
	}
	// What it reads back writes as format 3 and reads back the same.
	if h := restoredCopy(t, &replica{s: s}).Hash(); h != s.Hash() {
		t.Error("the upgraded state changes in a format-3 round trip")
	}
}
