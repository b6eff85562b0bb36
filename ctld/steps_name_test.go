package ctld

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestStepNameIsText refuses a step whose name holds control characters
// (squeue -s and sacct print it), naming the job and the field, and takes
// a plain one.
func TestStepNameIsText(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := api.NewClient("http://" + c.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	cl.User = "alice"
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 2048, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.Submit(ctx, []api.JobSpec{jobSpec(nil)})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].JobID
	waitFor(t, func() bool {
		j, err := cl.Job(ctx, id, true)
		return err == nil && j.State == api.StateRunning
	})
	_, err = cl.BeginStep(ctx, id, api.StepRequest{Name: "run\x1b]0;owned\x07"})
	var apiErr *api.APIError
	if !errors.As(err, &apiErr) || apiErr.Field != "name" || !strings.Contains(apiErr.Message, "control character") || !strings.Contains(apiErr.Message, "job ") {
		t.Fatalf("a step named with a terminal escape: %v; want a refusal naming the job and the name", err)
	}
	if st, err := cl.BeginStep(ctx, id, api.StepRequest{Name: "hostname"}); err != nil || st.Name != "hostname" {
		t.Fatalf("a step named hostname: %+v, %v", st, err)
	}
}
