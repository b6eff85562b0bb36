package ctld

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/ctld/state"
)

// holdNode plays a node daemon that registers and heartbeats but never
// ends a run: what it is given keeps running.
func holdNode(ctx context.Context, cl *api.Client, name string, cpus int) {
	info := api.NodeInfo{Name: name, CPUs: cpus, MemMB: 4096, Runner: "test", BootID: name + "-boot"}
	for cl.Register(ctx, info) != nil && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	for ctx.Err() == nil {
		_ = cl.Heartbeat(ctx, name, info.BootID)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestOnePassWithPreemptionsIsOneEntry fills a node with two besteffort
// jobs and submits a guaranteed job that needs the whole node: the pass
// that preempts both victims (requeue, besteffort's mode) and gives the
// preemptor its reason commits one ApplyPlan, and no other entry (no
// CancelJobs, no SuspendJobs), between the submission and the victims'
// end.
func TestOnePassWithPreemptionsIsOneEntry(t *testing.T) {
	tc := startCluster(t, 1)
	leader := tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go holdNode(ctx, cl, "n1", 2)
	be := func(name string) api.JobSpec { s := spec(name); s.QOS = "besteffort"; return s }
	res, err := cl.Submit(ctx, []api.JobSpec{be("v1"), be("v2")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		waitState(t, cl, r.JobID, api.StateRunning)
	}
	from := leader.Raft().LastIndex()
	pre := spec("preemptor")
	pre.QOS, pre.CPUsPerTask = "guaranteed", 2
	pres, err := cl.Submit(ctx, []api.JobSpec{pre})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		waitState(t, cl, r.JobID, api.StateCompleting)
	}
	counts := map[state.CommandType]int{}
	var plan *state.ApplyPlan
	for i := from + 1; i <= leader.Raft().LastIndex(); i++ {
		var l raft.Log
		if err := leader.node.store.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue
		}
		ct, p, err := state.Decode(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		counts[ct]++
		if ap, ok := p.(*state.ApplyPlan); ok && len(ap.Stops) > 0 {
			plan = ap
		}
	}
	if counts[state.CmdApplyPlan] != 1 || counts[state.CmdCancelJobs] != 0 || counts[state.CmdSuspendJobs] != 0 {
		t.Fatalf("the pass wrote %v, want one ApplyPlan and no CancelJobs or SuspendJobs", counts)
	}
	if plan == nil || len(plan.Stops) != 2 || len(plan.Reasons) != 1 || plan.Reasons[0].JobID != pres[0].JobID {
		t.Fatalf("the plan entry is %+v, want both victims stopped and the preemptor's reason", plan)
	}
	for _, st := range plan.Stops {
		if st.Mode != api.PreemptRequeue || st.By != pres[0].JobID {
			t.Errorf("stop %+v: want requeue mode for job %d", st, pres[0].JobID)
		}
	}
}
