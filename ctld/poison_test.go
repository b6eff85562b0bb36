package ctld

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// smallInventory is a one-NUMA-node host with two CPUs and no devices: the
// scheduler places jobs inside it, so the device and CPU arithmetic runs.
func smallInventory() *api.Inventory {
	return &api.Inventory{Topology: &api.Topology{
		Sockets: 1,
		Nodes: []api.NUMANode{{ID: 0, MemMB: 4096, CPUs: []api.CPU{
			{ID: 0, Core: 0, Socket: 0}, {ID: 1, Core: 1, Socket: 0},
		}}},
		Distances: [][]int{{10}},
	}}
}

// runInventoryNode is runNode for a node that reports an inventory.
func runInventoryNode(ctx context.Context, cl *api.Client, name string) {
	runNodeInfo(ctx, cl, api.NodeInfo{Name: name, CPUs: 2, MemMB: 4096, Runner: "test", BootID: name + "-boot", Inventory: smallInventory()})
}

// poisonSpecs are requests that once passed the API and stopped every
// leader's scheduling pass for good. Here they go straight into the log,
// past the API's validation, as an older controller (or a bug) could have
// written them.
func poisonSpecs() map[string]api.JobSpec {
	base := func() api.JobSpec {
		return api.JobSpec{Name: "poison", User: "mallory", Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1, Partition: api.DefaultPartition}
	}
	specs := map[string]api.JobSpec{}
	s := base()
	s.Gres = []api.Gres{{Name: "gpu", Count: -5}}
	specs["gpu count -5"] = s
	s = base()
	s.NTasks, s.CPUsPerTask = 1<<40, 1<<40
	specs["ntasks × cpus overflow"] = s
	s = base()
	s.NTasks, s.CPUsPerTask = math.MaxInt, 2
	specs["ntasks × cpus wraps negative"] = s
	s = base()
	s.Dependency = &api.Dependency{Raw: "afterwards:1", Clauses: []api.DepClause{{Type: "afterwards", JobIDs: []string{"1"}}}}
	specs["unknown dependency type"] = s
	s = base()
	s.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: -3}}
	specs["negative hugepages"] = s
	s = base()
	s.TimeLimit = math.MaxInt64
	specs["time limit 2^63"] = s
	s = base()
	s.Nodes = -5
	specs["nodes -5"] = s
	s = base()
	s.Array = &api.ArraySpec{Raw: "0-1099511627776,1-2", Ranges: []api.ArrayRange{{First: 0, Last: 1 << 40, Step: 1}, {First: 1, Last: 2, Step: 1}}}
	specs["overlapping huge array"] = s
	s = base()
	s.Array = &api.ArraySpec{Raw: "10-5", Ranges: []api.ArrayRange{{First: 10, Last: 5, Step: 0}}}
	specs["array 10-5 step 0"] = s
	return specs
}

// TestPoisonEntriesDoNotStopScheduling commits jobs the scheduler cannot
// handle straight into the Raft log of a 3-voter cluster, then shows that
// the leader holds them as InvalidJob and keeps running every other job —
// and that a new leader, after the old one is stopped, does too.
func TestPoisonEntriesDoNotStopScheduling(t *testing.T) {
	tc := startCluster(t, 3)
	leader := tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runInventoryNode(ctx, cl, "n1")
	waitNodes(t, cl, 1)

	poison := map[uint64]string{}
	for name, spec := range poisonSpecs() {
		res, err := leader.submit(ctx, stateSpecs(spec))
		if err != nil {
			t.Fatalf("%s: committing the poison entry: %v", name, err)
		}
		poison[res[0].JobID] = name
	}
	runGood := func(n int) {
		t.Helper()
		var ids []uint64
		for i := 0; i < n; i++ {
			res, err := cl.Submit(ctx, []api.JobSpec{{Name: "good", User: "alice", Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res[0].JobID)
		}
		for _, id := range ids {
			waitState(t, cl, id, api.StateCompleted)
		}
	}
	runGood(5)
	for id, name := range poison {
		j := waitReason(t, cl, id, api.ReasonInvalidJob)
		if j.State != api.StatePending || !j.Spec.Hold || j.Message == "" {
			t.Errorf("%s: job %d is %s hold=%v message %q, want PENDING, held, with a message", name, id, j.State, j.Spec.Hold, j.Message)
		}
	}

	// Stop the leader: a new one replays the same entries and must keep
	// scheduling too.
	for i, c := range tc.ctls {
		if c == leader {
			tc.cancels[i]()
			err := <-tc.done[i]
			stopped := make(chan error, 1)
			stopped <- err
			tc.done[i] = stopped // for the cleanup's stop
		}
	}
	next := tc.waitLeader(t)
	if next == leader {
		t.Fatal("the stopped member still leads")
	}
	runGood(5)
}

// waitNodes waits until n nodes are registered.
func waitNodes(t testing.TB, cl *api.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		nodes, err := cl.Nodes(context.Background())
		if err == nil && len(nodes) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d nodes did not register within 10s", n)
}

// waitReason waits until job id is pending with reason r.
func waitReason(t testing.TB, cl *api.Client, id uint64, r api.Reason) *api.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last *api.Job
	for time.Now().Before(deadline) {
		j, err := cl.Job(context.Background(), id, false)
		if err == nil {
			last = j
			if j.Reason == r {
				return j
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %d did not get reason %s within 10s (last: %+v)", id, r, last)
	return nil
}

// TestApplyFailureIsContained gives the state a record that an apply cannot
// handle (a job id whose record is missing — a stand-in for any state a bug
// could leave) and applies an entry that trips over it: the entry answers
// with an error instead of stopping the replica, and later entries apply.
func TestApplyFailureIsContained(t *testing.T) {
	f := NewFSM(quietLog())
	f.Apply(entry(t, 1, state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 1, Jobs: stateSpecs(spec("a"))}))
	f.mu.Lock()
	f.state.Jobs[1] = nil
	f.mu.Unlock()

	res := f.Apply(entry(t, 2, state.CmdCancelJobs, &state.CancelJobs{Now: t0, IDs: []uint64{1}}))
	if err, ok := res.(error); !ok || !strings.Contains(err.Error(), "CancelJobs") {
		t.Fatalf("apply result %v, want an error naming the command", res)
	}
	res = f.Apply(entry(t, 3, state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 2, Jobs: stateSpecs(spec("b"))}))
	if sr, ok := res.(*state.SubmitResult); !ok || sr.Results[0].JobID != 2 {
		t.Fatalf("the next entry gave %v, want job 2 submitted", res)
	}
}
