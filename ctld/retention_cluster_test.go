package ctld

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// TestLeaderPurgesFinishedJobs runs the leader's purge loop in a 3-voter
// cluster with MinJobAge=1s: finished jobs leave every replica, a finished
// job that a held job depends on stays until that one ends, and a retried
// submission still gets its original job id.
func TestLeaderPurgesFinishedJobs(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")

	var specs []api.JobSpec
	for i := 0; i < 4; i++ {
		specs = append(specs, spec(fmt.Sprint("short-", i)))
	}
	res, err := cl.Submit(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	target := res[0].JobID
	waitState(t, cl, target, api.StateCompleted)
	dependant := spec("dependant")
	dependant.Hold = true
	dependant.Dependency = afterok(fmt.Sprint(target))
	dres, err := cl.Submit(ctx, []api.JobSpec{dependant})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[1:] {
		waitGone(t, cl, r.JobID)
	}
	if j, err := cl.Job(ctx, target, false); err != nil || j.State != api.StateCompleted {
		t.Fatalf("job %d, which held job %d depends on, was purged (%v)", target, dres[0].JobID, err)
	}
	again, err := cl.Submit(ctx, specs[1:2])
	if err != nil || again[0].JobID != res[1].JobID || !again[0].Duplicate {
		t.Fatalf("retry of a purged job's submission: %+v, %v; want job %d, duplicate", again, err, res[1].JobID)
	}

	// Once the dependant ends, both go.
	if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{dres[0].JobID}}}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cl, dres[0].JobID)
	waitGone(t, cl, target)
	waitConverged(t, tc)
	for i, c := range tc.ctls {
		c.FSM().Read(func(s *state.State) {
			if len(s.Jobs) != 0 || s.FinishedIndexed() != 0 {
				t.Errorf("member %d keeps %d jobs and %d finished refs, want none", i+1, len(s.Jobs), s.FinishedIndexed())
			}
		})
	}
}

// waitGone waits until job id is no longer known (purged).
func waitGone(t testing.TB, cl *api.Client, id uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := cl.Job(context.Background(), id, false)
		var ae *api.APIError
		if errors.As(err, &ae) && ae.Status == 404 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still known 20s after it should have been purged (err %v)", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitConverged(t testing.TB, tc *testCluster) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h0 := tc.ctls[0].FSM().Hash()
		same := true
		for _, c := range tc.ctls[1:] {
			same = same && c.FSM().Hash() == h0
		}
		if same {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("replicas did not converge")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
