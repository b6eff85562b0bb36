package ctld

import (
	"context"
	"testing"
	"time"

	"corral/api"
)

// TestSubmitTestOnly asks a controller when jobs would start, as sbatch
// --test-only does: a job that fits now starts now on the node with room;
// one that does not gets the start the pass reserves it, when the running
// job's time limit ends; a held one gets its reason; an invalid one is
// refused as a real submission is. Nothing is stored: the job count and
// the next job id stay as they were.
func TestSubmitTestOnly(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	base := "http://" + c.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := api.NewClient(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 4, MemMB: 4096, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	big := jobSpec(func(s *api.JobSpec) { s.CPUsPerTask, s.TimeLimit = 3, 600 })
	res, err := cl.Submit(ctx, []api.JobSpec{big})
	if err != nil {
		t.Fatal(err)
	}
	var running *api.Job
	waitFor(t, func() bool {
		running, err = cl.Job(ctx, res[0].JobID, true)
		return err == nil && running.State == api.StateRunning
	})
	before, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := cl.TestOnly(ctx, []api.JobSpec{
		jobSpec(nil),
		jobSpec(func(s *api.JobSpec) { s.CPUsPerTask = 2 }),
		jobSpec(func(s *api.JobSpec) { s.Hold = true }),
	})
	if err != nil {
		t.Fatal(err)
	}
	limitEnd := running.StartTime.Add(600 * time.Second)
	if w := runs[0]; w.Node != "n1" || w.Start.IsZero() || time.Since(w.Start) > time.Minute || w.Partition != api.DefaultPartition || w.CPUs != 1 {
		t.Errorf("a job that fits now: %+v, want a start now on n1", w)
	}
	if w := runs[1]; w.Node != "n1" || !w.Start.Equal(limitEnd) {
		t.Errorf("a job that waits: %+v, want a start at %s on n1 (the running job's time limit)", w, limitEnd)
	}
	if w := runs[2]; !w.Start.IsZero() || w.Reason != api.ReasonJobHeldUser {
		t.Errorf("a held job: %+v, want no start and reason JobHeldUser", w)
	}
	if runs[0].JobID != runs[1].JobID-1 || runs[0].JobID <= res[0].JobID {
		t.Errorf("would-be ids %d, %d after job %d", runs[0].JobID, runs[1].JobID, res[0].JobID)
	}
	bad := post(t, base, "/v1/jobs", api.SubmitRequest{TestOnly: true, Jobs: []api.JobSpec{jobSpec(func(s *api.JobSpec) { s.CPUsPerTask = 64 })}})
	refused(t, bad, "cpus_per_task", "Requested node configuration is not available")
	after, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := cl.Jobs(ctx, api.JobFilter{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || after.CommitIndex != before.CommitIndex {
		t.Errorf("after the test-only requests: %d jobs (want 1), commit index %d → %d (want unchanged)", len(jobs), before.CommitIndex, after.CommitIndex)
	}
}
