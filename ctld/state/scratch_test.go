package state

import (
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestScratchSpaceHeld: a start's --tmp is held on its node while the run
// is active, a start that would exceed the node's scratch space is
// rejected, and the space comes back when the run ends.
func TestScratchSpaceHeld(t *testing.T) {
	r := newReplica()
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 8, MemMB: 8192, BootID: "b1", TmpMB: 10000}}),
		entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b")}}),
		entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{
			{JobID: 1, Node: "n1", CPUs: 1, MemMB: 64, TmpMB: 6000}, {JobID: 2, Node: "n1", CPUs: 1, MemMB: 64, TmpMB: 6000}}}),
	})
	n := r.s.Nodes["n1"]
	if n.AllocTmpMB != 6000 || r.s.Jobs[2].State != api.StatePending || run(r.s, 1).TmpMB != 6000 {
		t.Fatalf("after the plan: node holds %d MiB, job 2 is %s; want 6000 held and job 2 rejected", n.AllocTmpMB, r.s.Jobs[2].State)
	}
	r.Apply(entry(t, 4, CmdJobReports, jobReport(t0.Add(time.Second), 1, 3, api.StateCompleted, 0)))
	if got := r.s.Nodes["n1"].AllocTmpMB; got != 0 {
		t.Errorf("after the run ended the node holds %d MiB, want 0", got)
	}
}

// TestScratchSpaceMigrates: a live migration takes the job's scratch space
// with it: a destination with too little in all is refused when the
// migration is asked for, one with too little free is skipped by the
// plan's apply, and the destination holds it from placement on.
func TestScratchSpaceMigrates(t *testing.T) {
	r := newReplica()
	scratchNode := func(name, boot string, mb int64) api.NodeInfo {
		n := vmNode(name, boot)
		n.TmpMB = mb
		return n
	}
	held := spec("held")
	held.TmpMB = 800
	busy := spec("busy")
	busy.TmpMB = 300
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: scratchNode("v1", "b1", 1000)}),
		entry(t, 2, CmdRegisterNode, &RegisterNode{Now: t0, Info: scratchNode("small", "b2", 500)}),
		entry(t, 3, CmdRegisterNode, &RegisterNode{Now: t0, Info: scratchNode("full", "b3", 1000)}),
		entry(t, 4, CmdRegisterNode, &RegisterNode{Now: t0, Info: scratchNode("v2", "b4", 1000)}),
		entry(t, 5, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{held, busy}}),
		entry(t, 6, CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{
			{JobID: 1, Node: "v1", CPUs: 1, MemMB: 512, TmpMB: 800}, {JobID: 2, Node: "full", CPUs: 1, MemMB: 512, TmpMB: 300}}}),
	})
	res := r.Apply(entry(t, 7, CmdMigrateJobs, &MigrateJobs{Now: t0.Add(time.Minute), Requests: []MigrateRequest{{Job: 1, To: "small", By: "alice", Token: "tok"}}})).(*IDsResult)
	if why := res.Errors[1]; !strings.Contains(why, "node small has 500 MiB of scratch space; the job holds 800 (--tmp)") {
		t.Fatalf("a migration to a node with 500 MiB of scratch space: %q; want it refused naming --tmp", why)
	}
	r.Apply(entry(t, 8, CmdMigrateJobs, &MigrateJobs{Now: t0.Add(time.Minute), Requests: []MigrateRequest{{Job: 1, By: "alice", Token: "tok"}}}))
	m := r.s.LiveMigration(r.s.Jobs[1])
	if m == nil {
		t.Fatal("the migration to any node was refused")
	}
	to := func(node string) *PlanResult {
		return r.Apply(entry(t, r.s.Index+1, CmdApplyPlan, &ApplyPlan{Now: t0.Add(2 * time.Minute), Migrations: []PlanMigration{
			{JobID: 1, From: "v1", To: node, Migration: m.ID, CPUs: 1, MemMB: 512}}})).(*PlanResult)
	}
	if pr := to("full"); len(pr.Skipped) != 1 || r.s.Nodes["full"].AllocTmpMB != 300 {
		t.Fatalf("placed on full, where 700 MiB are free: skipped %v, full holds %d MiB; want skipped, 300", pr.Skipped, r.s.Nodes["full"].AllocTmpMB)
	}
	if pr := to("v2"); len(pr.Migrated) != 1 {
		t.Fatalf("placed on v2: skipped %v", pr.Skipped)
	}
	if v1, v2 := r.s.Nodes["v1"].AllocTmpMB, r.s.Nodes["v2"].AllocTmpMB; v1 != 800 || v2 != 800 {
		t.Errorf("during the migration v1 holds %d MiB and v2 %d; want 800 on both (the source runs until the switch)", v1, v2)
	}
}

// TestScratchSpaceUpdate: scontrol update MinTmpDiskNode changes a pending
// job's --tmp, and is refused for a running one (its node holds what it
// started with).
func TestScratchSpaceUpdate(t *testing.T) {
	r := newReplica()
	applyAll(t, r, []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 8, MemMB: 8192, BootID: "b1", TmpMB: 10000}}),
		entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("a"), spec("b")}}),
		entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1, MemMB: 64}}}),
	})
	mb := int64(3000)
	res := r.Apply(entry(t, 4, CmdUpdateJob, &UpdateJob{Now: t0, ID: 1, By: "alice", Changes: &JobEdits{TmpMB: &mb}}))
	if err, _ := res.(error); err == nil || !strings.Contains(err.Error(), "job 1 is RUNNING; MinTmpDiskNode can change only while it is pending") {
		t.Errorf("updating a running job's --tmp: %v; want it refused", res)
	}
	r.Apply(entry(t, 5, CmdUpdateJob, &UpdateJob{Now: t0, ID: 2, By: "alice", Changes: &JobEdits{TmpMB: &mb}}))
	if got, run := r.s.Jobs[2].Spec.TmpMB, r.s.Jobs[1].Spec.TmpMB; got != 3000 || run != 0 {
		t.Errorf("job 2 asks for %d MiB, job 1 for %d; want 3000 and 0", got, run)
	}
	if c := restoredCopy(t, r); c.s.Jobs[2].Spec.TmpMB != 3000 || c.s.Hash() != r.s.Hash() {
		t.Error("a snapshot loses job 2's new --tmp")
	}
}

// TestGoldenScratchGang checks that the golden log's multi-node start with
// --tmp is taken, each node holding the job's scratch space, so that the
// golden hashes pin that apply and not a rejection.
func TestGoldenScratchGang(t *testing.T) {
	r := newReplica()
	for i, c := range goldenCommands() {
		r.Apply(entry(t, uint64(i+1), c.t, c.p))
	}
	run := r.s.RunAllocs(r.s.Jobs[215])
	if len(run) != 2 || run[0].TmpMB != 1024 || run[1].TmpMB != 1024 {
		t.Fatalf("job 215's run: %d allocations", len(run))
	}
	if a, b := r.s.Nodes["tmp1"].AllocTmpMB, r.s.Nodes["tmp2"].AllocTmpMB; a != 4096+1024 || b != 1024 {
		t.Errorf("tmp1 holds %d MiB, tmp2 %d; want 5120 and 1024", a, b)
	}
}
