package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"corral/api"
)

// setBesteffort changes the besteffort QoS's preemption mode through the API.
func setBesteffort(t *testing.T, cl *api.Client, mode api.PreemptMode) {
	t.Helper()
	pol, err := cl.Policy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range pol.QOS {
		if q.Name == "besteffort" {
			q.PreemptMode = mode
			if err := cl.PutQOS(context.Background(), api.QOSRequest{QOS: q}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("no besteffort QoS")
}

// TestPreemptionModes fills a 2-CPU node with a besteffort job, then
// submits a guaranteed job that needs the whole node, once per mode of the
// besteffort QoS: the guaranteed job runs at once, and the victim ends
// PREEMPTED (cancel), goes back to PENDING and runs again (requeue), or is
// SUSPENDED while the guaranteed job runs and then resumes (suspend).
func TestPreemptionModes(t *testing.T) {
	for _, mode := range []api.PreemptMode{api.PreemptCancel, api.PreemptRequeue, api.PreemptSuspend} {
		t.Run(string(mode), func(t *testing.T) {
			c := oneNodeCluster(t, "n1", "--cpus", "2", "--mem", "1G")
			cl := c.client(t)
			setBesteffort(t, cl, mode)
			work := t.TempDir()
			sub := func(args ...string) uint64 {
				return mustID(t, c.submit(t, work, append([]string{"--mem", "100M", "-c", "2"}, args...)...))
			}
			victim := sub("--qos", "besteffort", "--wrap", "sleep 2")
			waitJob(t, cl, victim, api.StateRunning, 15*time.Second)
			time.Sleep(200 * time.Millisecond)
			start := time.Now()
			boss := sub("--qos", "guaranteed", "--wrap", "sleep 1")
			waitJob(t, cl, boss, api.StateRunning, 15*time.Second)
			t.Logf("%s: guaranteed job running %s after submission", mode, time.Since(start).Round(time.Millisecond))
			v, err := cl.Job(context.Background(), victim, false)
			if err != nil {
				t.Fatal(err)
			}
			switch mode {
			case api.PreemptCancel:
				if v.State != api.StatePreempted {
					t.Errorf("victim is %s, want PREEMPTED", v.State)
				}
			case api.PreemptRequeue:
				if v.State != api.StatePending || v.Restarts != 1 {
					t.Errorf("victim is %s after %d restarts, want PENDING after 1", v.State, v.Restarts)
				}
				if !v.SubmitTime.Before(start) {
					t.Errorf("requeued victim's submit time %v is not its original one", v.SubmitTime)
				}
				waitJob(t, cl, boss, api.StateCompleted, 15*time.Second)
				waitJob(t, cl, victim, api.StateCompleted, 20*time.Second)
			case api.PreemptSuspend:
				if v.State != api.StateSuspended {
					t.Errorf("victim is %s, want SUSPENDED", v.State)
				}
				waitJob(t, cl, boss, api.StateCompleted, 15*time.Second)
				waitJob(t, cl, victim, api.StateCompleted, 20*time.Second)
			}
		})
	}
}

// TestFairShareBetweenTenants: two tenants with equal shares, one user
// each, submit the same 40 one-CPU jobs; alice's are all queued before
// bob's. Fair-share must interleave them: of the first 40 jobs to start,
// each tenant gets 50 % ± 10 %.
func TestFairShareBetweenTenants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 80 jobs")
	}
	c := oneNodeCluster(t, "n1", "--cpus", "2", "--mem", "2G")
	cl := c.client(t)
	ctx := context.Background()
	for _, a := range []api.Account{{Name: "tenant-a", Shares: 1}, {Name: "tenant-b", Shares: 1}} {
		if err := cl.PutAccount(ctx, api.AccountRequest{Account: a}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []api.AccountUser{{Name: "alice", Account: "tenant-a", Shares: 1}, {Name: "bob", Account: "tenant-b", Shares: 1}} {
		if err := cl.PutUser(ctx, api.UserRequest{User: u}); err != nil {
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	const each = 40
	for _, user := range []string{"alice", "bob"} {
		var specs []api.JobSpec
		for i := 0; i < each; i++ {
			specs = append(specs, api.JobSpec{Name: user, User: user, Script: "#!/bin/sh\nsleep 0.1\n", NTasks: 1, CPUsPerTask: 1,
				MemPerNode: 50, WorkDir: work, SubmitDir: work, Output: "/dev/null", RequestID: fmt.Sprintf("%s-%d", user, i)})
		}
		if _, err := cl.Submit(ctx, specs); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		jobs := allJobs(t, cl)
		done := 0
		for _, j := range jobs {
			if j.State.Terminal() {
				done++
			}
		}
		if done == 2*each {
			var order []api.Job
			for _, j := range jobs {
				order = append(order, j)
			}
			starts := map[string]int{}
			firstN := firstStarted(order, each)
			for _, j := range firstN {
				starts[j.Spec.User]++
			}
			t.Logf("of the first %d starts: alice %d, bob %d", each, starts["alice"], starts["bob"])
			if d := starts["alice"] - starts["bob"]; d > each/10 || d < -each/10 {
				t.Errorf("first %d starts: alice %d, bob %d; want each within 10 %% of half", each, starts["alice"], starts["bob"])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs ended in 90 s", done, 2*each)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// firstStarted returns the n jobs that started first (start time, then id).
func firstStarted(jobs []api.Job, n int) []api.Job {
	sorted := append([]api.Job(nil), jobs...)
	for i := 1; i < len(sorted); i++ {
		for k := i; k > 0; k-- {
			a, b := sorted[k-1], sorted[k]
			if a.StartTime.After(b.StartTime) || a.StartTime.Equal(b.StartTime) && a.ID > b.ID {
				sorted[k-1], sorted[k] = b, a
			}
		}
	}
	return sorted[:min(n, len(sorted))]
}
