package ctld

import (
	"context"
	"strings"
	"testing"

	"corral/api"
)

// TestQueueAndShowJobPrintPriority checks that squeue's %Q and scontrol
// show job print the multifactor priority the scheduler computes (with the
// default weights a fresh job on a cluster without accounts gets the
// partition factor's 1000, less its nice), not the stored 0.
func TestQueueAndShowJobPrintPriority(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx := context.Background()
	res, err := cl.Submit(ctx, []api.JobSpec{
		{Name: "a", User: "alice", Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1, Hold: true},
		{Name: "b", User: "alice", Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1, Hold: true, Nice: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	text, err := cl.QueueText(ctx, api.QueueQuery{Format: "%i %Q", NoHeader: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		got = append(got, strings.Join(strings.Fields(line), " "))
	}
	if want := "1 1000,2 900"; strings.Join(got, ",") != want {
		t.Errorf("queue %%i %%Q = %q, want %q", strings.Join(got, ","), want)
	}
	j, err := cl.Job(ctx, res[1].JobID, false)
	if err != nil {
		t.Fatal(err)
	}
	if j.Priority != 900 {
		t.Errorf("show job: priority %d, want 900", j.Priority)
	}
	jobs, err := cl.Jobs(ctx, api.JobFilter{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Priority != 1000-int64(j.Spec.Nice) {
			t.Errorf("job list: job %d priority %d, want %d", j.ID, j.Priority, 1000-j.Spec.Nice)
		}
	}
}
