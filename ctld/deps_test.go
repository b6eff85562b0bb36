package ctld

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// TestDependenciesResolvedAtSubmit submits an array and jobs that depend on
// it as a whole and on one of its tasks: the controller records typed
// targets (a whole array, an array task, a job) once, at submit; the API
// still shows the references as the user wrote them; `corral why` reads
// the targets; and an update that would close a cycle through the array
// is refused by the same resolution.
func TestDependenciesResolvedAtSubmit(t *testing.T) {
	tc := startCluster(t, 1)
	leader := tc.waitLeader(t)
	cl := tc.client(t)
	ctx := context.Background()
	arr := spec("arr")
	arr.Array = &api.ArraySpec{Raw: "0-3", Ranges: []api.ArrayRange{{First: 0, Last: 3, Step: 1}}}
	plain := spec("plain")
	res, err := cl.Submit(ctx, []api.JobSpec{arr, plain})
	if err != nil {
		t.Fatal(err)
	}
	a, p := res[0].JobID, res[1].JobID
	as, ps := strconv.FormatUint(a, 10), strconv.FormatUint(p, 10)
	depOn := func(name, raw string) api.JobSpec {
		sp := spec(name)
		d, err := submit.ParseDependency(raw)
		if err != nil {
			t.Fatal(err)
		}
		sp.Dependency = d
		return sp
	}
	res, err = cl.Submit(ctx, []api.JobSpec{depOn("whole", "afterok:"+as), depOn("task", "afterany:"+as+"_2:"+ps)})
	if err != nil {
		t.Fatal(err)
	}
	whole, task := res[0].JobID, res[1].JobID
	var got map[uint64][]state.DepTarget
	leader.fsm.Read(func(s *state.State) {
		got = map[uint64][]state.DepTarget{}
		for _, id := range []uint64{whole, task} {
			for _, c := range s.Jobs[id].Spec.Dependency.Clauses {
				if len(c.JobIDs) > 0 {
					t.Errorf("job %d keeps the unparsed references %v", id, c.JobIDs)
				}
				got[id] = append(got[id], c.Targets...)
			}
		}
	})
	want := map[uint64][]state.DepTarget{
		whole: {{Kind: state.DepArray, Job: a}},
		task:  {{Kind: state.DepTask, Job: a, Task: 2}, {Kind: state.DepJob, Job: p}},
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("job %d targets = %+v, want %+v", id, got[id], w)
		}
	}
	j, err := cl.Job(ctx, task, false)
	if err != nil {
		t.Fatal(err)
	}
	if ids := j.Spec.Dependency.Clauses[0].JobIDs; !slices.Equal(ids, []string{as + "_2", ps}) {
		t.Errorf("the API shows the dependency as %v, want the user's references", ids)
	}
	eventually(t, "why names the whole array's state", func() bool {
		w, err := cl.Why(ctx, strconv.FormatUint(whole, 10))
		return err == nil && strings.Contains(strings.Join(w.Lines, "\n"), "afterok:"+as+" is PENDING")
	})
	d, err := submit.ParseDependency("afterok:" + strconv.FormatUint(task, 10))
	if err != nil {
		t.Fatal(err)
	}
	err = cl.UpdateJob(ctx, api.UpdateJobRequest{ID: p, Dependency: d})
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("an update of job %d onto job %d (which waits on it) gave %v, want a cycle refused", p, task, err)
	}
}
