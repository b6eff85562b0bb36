package ctld

import (
	"context"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestTopJobs runs scontrol top through the API: alice's job 3, then 2,
// come first among her pending jobs by nice values exchanged with job 1;
// bob's job, named too, is left alone and named.
func TestTopJobs(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	var specs []api.JobSpec
	for i, nice := range []int{0, 10, 20} {
		sp := spec("a" + string(rune('1'+i)))
		sp.Nice, sp.Begin = nice, later
		specs = append(specs, sp)
	}
	bob := spec("b")
	bob.User, bob.Begin = "bob", later
	res, err := cl.Submit(ctx, append(specs, bob))
	if err != nil {
		t.Fatal(err)
	}
	id := func(i int) uint64 { return res[i].JobID }
	resp, err := cl.Top(ctx, api.TopRequest{IDs: []uint64{id(2), id(1), id(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Changed) != 2 || resp.Changed[0] != id(2) || resp.Changed[1] != id(1) || !strings.Contains(resp.Errors[id(3)], "not of the same user") {
		t.Fatalf("top: %+v", resp)
	}
	want := map[uint64]int{id(0): 20, id(1): 10, id(2): 0, id(3): 0}
	for jid, n := range want {
		j, err := cl.Job(ctx, jid, true)
		if err != nil || j.Spec.Nice != n {
			t.Errorf("job %d: nice %d (%v), want %d", jid, j.Spec.Nice, err, n)
		}
	}
}
