package sched

import (
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// moveCluster is a state with vm nodes that can migrate (each: 2 CPUs,
// 4 GiB, TCG), jobs 1..len(on) each running on the node on[i] names with
// 1 CPU and 512 MiB, and what setup adds. It returns the state and the
// next index.
func moveCluster(t *testing.T, nodes []api.NodeInfo, on []string, spec func(i int, sp *state.JobSpec)) (*state.State, uint64) {
	t.Helper()
	s := state.New()
	index := uint64(0)
	apply := func(ct state.CommandType, p any) any {
		index++
		return s.Apply(index, ct, p)
	}
	for _, n := range nodes {
		apply(state.CmdRegisterNode, &state.RegisterNode{Now: t0, Info: n})
	}
	var specs []state.JobSpec
	var starts []state.PlanStart
	for i, node := range on {
		sp := state.JobSpec{Name: "j", User: "alice", NTasks: 1, CPUsPerTask: 1, MemPerNode: 512}
		if spec != nil {
			spec(i, &sp)
		}
		specs = append(specs, sp)
		starts = append(starts, state.PlanStart{JobID: uint64(i + 1), Node: node, CPUs: 1, MemMB: 512})
	}
	apply(state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 1, Jobs: specs})
	if pr := apply(state.CmdApplyPlan, &state.ApplyPlan{Now: t0, Starts: starts}).(*state.PlanResult); len(pr.Started) != len(on) {
		t.Fatalf("started %v of %d", pr.Started, len(on))
	}
	return s, index
}

func migNode(name string) api.NodeInfo {
	return api.NodeInfo{Name: name, CPUs: 2, MemMB: 4096, Runner: "vm", BootID: name, Accel: "tcg", Migrate: true, APIAddr: "http://" + name}
}

// TestMovesArePlaced runs passes over states with requested migrations and
// drained nodes, applies their plans, and checks where each job goes, or
// why it stays.
func TestMovesArePlaced(t *testing.T) {
	kvm := migNode("k1")
	kvm.Accel = "kvm"
	noMig := migNode("p1")
	noMig.Migrate = false
	small := migNode("s1")
	small.CPUs = 1
	tests := map[string]struct {
		nodes []api.NodeInfo
		on    []string
		spec  func(i int, sp *state.JobSpec)
		// request asks for job 1's migration (to node want); drain
		// drains the node with --migrate.
		request     bool
		want, drain string
		// to is where each job runs after the pass ("" for its node);
		// note what the drained node says.
		to   map[uint64]string
		note string
	}{
		"a request goes to the node with room": {nodes: []api.NodeInfo{migNode("a1"), migNode("a2"), small}, on: []string{"a1", "s1"},
			request: true, to: map[uint64]string{1: "a2"}},
		"a request to a node goes there": {nodes: []api.NodeInfo{migNode("a1"), migNode("a2"), migNode("a3")}, on: []string{"a1"},
			request: true, want: "a3", to: map[uint64]string{1: "a3"}},
		"nothing else can migrate or has the accelerator": {nodes: []api.NodeInfo{migNode("a1"), kvm, noMig}, on: []string{"a1"},
			request: true, to: map[uint64]string{1: "a1"}},
		"a drain moves what fits and says what stays": {nodes: []api.NodeInfo{migNode("a1"), small}, on: []string{"a1", "a1"},
			drain: "a1", to: map[uint64]string{1: "s1", 2: "a1"}, note: "job 2 fits on no other node"},
		"a drain leaves a job that cannot migrate": {nodes: []api.NodeInfo{migNode("a1"), migNode("a2")}, on: []string{"a1", "a1"},
			spec: func(i int, sp *state.JobSpec) { sp.NoMigrate = i == 1 }, drain: "a1", to: map[uint64]string{1: "a2", 2: "a1"},
			note: "job 2 cannot migrate: it asked for --no-migrate"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, index := moveCluster(t, tc.nodes, tc.on, tc.spec)
			if tc.request {
				index++
				res := s.Apply(index, state.CmdMigrateJobs, &state.MigrateJobs{Now: t0, Requests: []state.MigrateRequest{{Job: 1, To: tc.want, Token: "t"}}}).(*state.IDsResult)
				if len(res.Changed) != 1 {
					t.Fatalf("request refused: %v", res.Errors)
				}
			}
			if tc.drain != "" {
				index++
				s.Apply(index, state.CmdNodeDrain, &state.NodeDrain{Now: t0, Node: tc.drain, Drain: true, Reason: "x", Migrate: true})
			}
			snap := NewSnapshot(s, t0.Add(time.Second))
			plan := Schedule(snap)
			cmd := plan.Entry(t0.Add(time.Second), snap, 100)
			for i := range cmd.Migrations {
				cmd.Migrations[i].Token = "stamped" // the leader's part
			}
			index++
			if pr := s.Apply(index, state.CmdApplyPlan, cmd).(*state.PlanResult); len(pr.Skipped) > 0 {
				t.Fatalf("the apply skipped the pass's migrations %v", pr.Skipped)
			}
			for id, want := range tc.to {
				j := s.Jobs[id]
				node := ""
				if run := s.ActiveAllocs(j); len(run) > 0 {
					node = run[0].Node
				}
				if m := s.LiveMigration(j); m != nil && m.To != "" {
					node = m.To
				}
				if node != want {
					t.Errorf("job %d goes to %q, want %q", id, node, want)
				}
			}
			if tc.drain != "" && !strings.Contains(s.Nodes[tc.drain].DrainNote, tc.note) {
				t.Errorf("the drained node's note is %q, want it to say %q", s.Nodes[tc.drain].DrainNote, tc.note)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Error(err)
			}
			// The same state plans nothing new: the moves are placed.
			if again := Schedule(NewSnapshot(s, t0.Add(2*time.Second))); len(again.Migrations) != 0 {
				t.Errorf("a second pass moves %+v again", again.Migrations)
			}
		})
	}
}

// TestSameMemory: a guest's memory must be of the same kind at both ends.
func TestSameMemory(t *testing.T) {
	bound := &api.Placement{NUMANodes: []int{0}}
	huge := &api.Placement{NUMANodes: []int{1}, Hugepages: []api.HugepageAmount{{Node: 1, SizeKB: 2048, Count: 4}}}
	for _, c := range []struct {
		src, dst *api.Placement
		numa     string
		want     bool
	}{
		{nil, nil, "", true}, {bound, bound, "", true}, {bound, nil, "", false}, {nil, bound, "", false},
		{bound, nil, api.NUMANone, true}, {bound, huge, "", false}, {huge, huge, "", true},
	} {
		if got := sameMemory(c.src, c.dst, c.numa); got != c.want {
			t.Errorf("sameMemory(%v, %v, %q) = %v, want %v", c.src, c.dst, c.numa, got, c.want)
		}
	}
}

// TestRestoreIsPlacedWhereTheFileIs checkpoints job 1 on a1 and restores
// it: the pass starts it only on a node that can read the file (a1 itself
// when the file is a1's own; a node of the same shared checkpoint
// directory otherwise), never on one without it.
func TestRestoreIsPlacedWhereTheFileIs(t *testing.T) {
	for name, tc := range map[string]struct {
		dir  string
		full bool // a1 is full when the job is restored
		want string
	}{
		"a node's own file":           {dir: "", want: "a1"},
		"its own file, its node full": {dir: "", full: true, want: ""},
		"a shared directory":          {dir: "/shared", full: true, want: "a2"},
	} {
		t.Run(name, func(t *testing.T) {
			a1, a2, b1 := migNode("a1"), migNode("a2"), migNode("b1")
			a1.CheckpointDir, a2.CheckpointDir = tc.dir, tc.dir
			on := []string{"a1"}
			if tc.full {
				on = append(on, "a1", "b1", "b1")
			}
			s, index := moveCluster(t, []api.NodeInfo{a1, b1, a2}, on, nil)
			step := func(ct state.CommandType, p any) any { index++; return s.Apply(index, ct, p) }
			step(state.CmdCheckpointJobs, &state.CheckpointJobs{Now: t0, IDs: []uint64{1}})
			a := s.ActiveAllocs(s.Jobs[1])[0]
			step(state.CmdCheckpointReports, &state.CheckpointReports{Now: t0, Node: "a1", Reports: []api.CheckpointReport{
				{Job: 1, Alloc: a.ID, Event: state.CheckpointSaved, Path: "/x", Size: 1, SHA256: "ab"}}})
			step(state.CmdJobReports, &state.JobReports{Now: t0, Node: "a1", BootID: "a1", Reports: []api.JobReport{
				{Alloc: a.ID, JobID: 1, StartIndex: a.StartIndex, State: api.StateCancelled}}})
			if tc.full {
				// Job 2 fills the room job 1 left on a1.
				step(state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 10, Jobs: []state.JobSpec{{Name: "f", User: "alice", NTasks: 1, CPUsPerTask: 1, MemPerNode: 512}}})
				step(state.CmdApplyPlan, &state.ApplyPlan{Now: t0, Starts: []state.PlanStart{{JobID: 10, Node: "a1", CPUs: 1, MemMB: 512}}})
			}
			if res := step(state.CmdRestoreJobs, &state.RestoreJobs{Now: t0, IDs: []uint64{1}}).(*state.IDsResult); len(res.Changed) != 1 {
				t.Fatalf("restore refused: %v", res.Errors)
			}
			snap := NewSnapshot(s, t0.Add(time.Second))
			plan := Schedule(snap)
			got := ""
			for _, st := range plan.Starts {
				if st.JobID == 1 {
					got = st.Node
				}
			}
			if got != tc.want {
				t.Fatalf("the restore starts on %q, want %q (reason %s)", got, tc.want, plan.Reasons[1])
			}
			step(state.CmdApplyPlan, plan.Entry(t0.Add(time.Second), snap, 100))
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
