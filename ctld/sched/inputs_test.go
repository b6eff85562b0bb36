package sched

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// applyState applies commands to a new state, numbering them from 1.
func applyState(t *testing.T, cmds ...any) *state.State {
	t.Helper()
	s := state.New()
	for i, c := range cmds {
		var ct state.CommandType
		switch c.(type) {
		case *state.RegisterNode:
			ct = state.CmdRegisterNode
		case *state.SubmitJobs:
			ct = state.CmdSubmitJobs
		case *state.ApplyPlan:
			ct = state.CmdApplyPlan
		case *state.SetConfig:
			ct = state.CmdSetConfig
		default:
			t.Fatalf("applyState: no command type for %T", c)
		}
		if err, ok := s.Apply(uint64(i+1), ct, c).(error); ok {
			t.Fatal(err)
		}
	}
	return s
}

// TestSnapshotFromState checks what a pass reads from the replicated
// state: the reservations the last plan made (so a new leader's
// conservative backfill keeps them), the memory per CPU and the policy,
// and lists in sorted order whatever order the maps hold.
func TestSnapshotFromState(t *testing.T) {
	jobs := make([]state.JobSpec, 5)
	for i := range jobs {
		jobs[i] = state.JobSpec{Name: "j", User: "alice", NTasks: 1, CPUsPerTask: 1, RequestID: string(rune('a' + i))}
	}
	s := applyState(t,
		&state.RegisterNode{Now: t0, Info: api.NodeInfo{Name: "b", CPUs: 1, MemMB: 1024, BootID: "x"}},
		&state.RegisterNode{Now: t0, Info: api.NodeInfo{Name: "a", CPUs: 1, MemMB: 1024, BootID: "y"}},
		&state.SubmitJobs{Now: t0, FirstID: 1, Jobs: jobs},
		&state.SetConfig{Settings: [][2]string{{"SchedulerPolicy", "conservative"}, {"DefMemPerCPU", "300"}}},
		&state.ApplyPlan{Now: t0, Starts: []state.PlanStart{{JobID: 2, Node: "b", CPUs: 1, MemMB: 300}, {JobID: 4, Node: "a", CPUs: 1, MemMB: 300}},
			Reasons: []state.PlanReason{{JobID: 3, Reason: api.ReasonResources, Start: t0.Add(time.Hour), Node: "b"}}},
	)
	snap := NewSnapshot(s, t0.Add(time.Minute))
	if r := snap.Reservations[3]; r.Node != "b" || !r.Start.Equal(t0.Add(time.Hour)) || len(snap.Reservations) != 1 {
		t.Errorf("reservations %v, want job 3's on b at t0+1h", snap.Reservations)
	}
	if snap.Policy != PolicyConservative || snap.DefMemPerCPU != 300 {
		t.Errorf("policy %s, memory per CPU %d; want conservative and 300", snap.Policy, snap.DefMemPerCPU)
	}
	var pending []uint64
	for _, j := range snap.Pending {
		pending = append(pending, j.ID)
	}
	if len(pending) != 3 || pending[0] != 1 || pending[1] != 3 || pending[2] != 5 {
		t.Errorf("pending %v, want [1 3 5]", pending)
	}
	if snap.Nodes[0].Name != "a" || snap.Running[0].Alloc.Node != "a" || snap.Running[1].Job.ID != 2 {
		t.Errorf("nodes and runs not in name order: %s, %s, %d", snap.Nodes[0].Name, snap.Running[0].Alloc.Node, snap.Running[1].Job.ID)
	}
}
