package ctld

import (
	"context"
	"slices"
	"testing"

	"corral/api"
	"corral/ctld/state"
)

// TestSubmitResendsForgottenBlobs proposes a job that names its script and
// environment by key without carrying them, as the leader does when the
// state held them when it looked but forgot them (their last job purged)
// before the entry applied: the apply refuses the job, and the leader's
// resubmitMissing proposes it again with its content.
func TestSubmitResendsForgottenBlobs(t *testing.T) {
	tc := startCluster(t, 1)
	leader := tc.waitLeader(t)
	sp := stateSpec(func() *api.JobSpec {
		s := spec("forgotten")
		s.Env = []string{"HOME=/home/alice", "SAMPLE=7"}
		return &s
	}())
	blobs := [][]state.BlobRecord{state.OutOfLine(&sp)}
	specs := []state.JobSpec{sp}
	f, err := leader.proposeSubmit(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := leader.submitResult(f)
	if err != nil || len(res.Missing) != 1 || res.Results[0].JobID != 0 {
		t.Fatalf("a job naming blobs the state lacks: %+v, %v; want it refused as missing", res, err)
	}
	if err := leader.resubmitMissing(specs, blobs, res); err != nil {
		t.Fatal(err)
	}
	id := res.Results[0].JobID
	if id == 0 || res.Results[0].Error != "" {
		t.Fatalf("resubmitted: %+v", res.Results[0])
	}
	j, err := tc.client(t).Job(context.Background(), id, false)
	if err != nil || !slices.Equal(j.Spec.Env, []string{"HOME=/home/alice", "SAMPLE=7"}) || j.Spec.Script != "#!/bin/sh\necho hi\n" {
		t.Fatalf("job %d reads back %+v (%v)", id, j, err)
	}
}
