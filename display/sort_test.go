package display

import (
	"math/rand/v2"
	"slices"
	"testing"

	"corral/api"
)

func TestSortJobs(t *testing.T) {
	mk := func(id uint64, st api.JobState, prio int64) api.Job {
		return api.Job{ID: id, State: st, Priority: prio}
	}
	inPart := func(j api.Job, part string) api.Job { j.Spec.Partition = part; return j }
	tests := map[string]struct {
		jobs []api.Job
		want []uint64
	}{
		"empty": {nil, nil},
		// squeue's "t" compares the compact states as text: PD before R.
		"pending before running": {
			[]api.Job{mk(1, api.StateRunning, 900), mk(2, api.StatePending, 1)},
			[]uint64{2, 1},
		},
		"priority descending then id": {
			[]api.Job{mk(5, api.StatePending, 10), mk(3, api.StatePending, 20), mk(4, api.StatePending, 10)},
			[]uint64{3, 4, 5},
		},
		"partition first": {
			[]api.Job{inPart(mk(1, api.StatePending, 0), "gpu"), mk(2, api.StateRunning, 0), inPart(mk(3, api.StateCompleted, 0), "debug")},
			[]uint64{2, 3, 1},
		},
		"state order as text": {
			[]api.Job{
				mk(1, api.StateCompleted, 0), mk(2, api.StateRequeued, 0), mk(3, api.StatePending, 0),
				mk(4, api.StateSuspended, 0), mk(6, api.StateCompleting, 0),
				mk(7, api.StateRunning, 0), mk(8, api.StateFailed, 0),
			},
			[]uint64{1, 6, 8, 3, 7, 2, 4},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			SortJobs(tc.jobs)
			var got []uint64
			for _, j := range tc.jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSortJobsMatchesReference checks the index sort and in-place
// permutation against a plain sort of the same jobs by the -S engine's
// default keys, and that no job is lost or duplicated.
func TestSortJobsMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ref, err := ParseQueueSort("")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		n := rng.IntN(300)
		jobs := make([]api.Job, n)
		for i := range jobs {
			jobs[i] = api.Job{
				ID:       uint64(rng.IntN(1000)),
				State:    api.AllJobStates[rng.IntN(len(api.AllJobStates))],
				Priority: int64(rng.IntN(5)),
				Spec:     api.JobSpec{Name: "j"},
			}
			jobs[i].Spec.User = string(rune('a' + i%26))
			jobs[i].Spec.Partition = []string{"", "batch", "gpu", "debug"}[rng.IntN(4)]
		}
		want := slices.Clone(jobs)
		slices.SortStableFunc(want, func(a, b api.Job) int { return ref.Compare(&a, &b, t0) })
		SortJobs(jobs)
		for i := range jobs {
			if jobs[i].ID != want[i].ID || jobs[i].State != want[i].State || jobs[i].Priority != want[i].Priority {
				t.Fatalf("round %d: position %d holds job %d/%s/%d, want %d/%s/%d", round, i,
					jobs[i].ID, jobs[i].State, jobs[i].Priority, want[i].ID, want[i].State, want[i].Priority)
			}
		}
	}
}
