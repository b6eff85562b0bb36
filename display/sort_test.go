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
	tests := map[string]struct {
		jobs []api.Job
		want []uint64
	}{
		"empty": {nil, nil},
		"running before pending": {
			[]api.Job{mk(1, api.StatePending, 900), mk(2, api.StateRunning, 1)},
			[]uint64{2, 1},
		},
		"priority descending then id": {
			[]api.Job{mk(5, api.StatePending, 10), mk(3, api.StatePending, 20), mk(4, api.StatePending, 10)},
			[]uint64{3, 4, 5},
		},
		"state order": {
			[]api.Job{
				mk(1, api.StateCompleted, 0), mk(2, api.StateRequeued, 0), mk(3, api.StatePending, 0),
				mk(4, api.StateSuspended, 0), mk(5, api.StateMigrating, 0), mk(6, api.StateCompleting, 0),
				mk(7, api.StateRunning, 0), mk(8, api.StateFailed, 0), mk(9, api.JobState("WEIRD"), 0),
			},
			[]uint64{7, 6, 5, 4, 3, 2, 1, 8, 9},
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
// permutation against a plain sort of the same jobs, and that no job is
// lost or duplicated.
func TestSortJobsMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
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
		}
		want := slices.Clone(jobs)
		slices.SortStableFunc(want, func(a, b api.Job) int {
			if ra, rb := stateRank(a.State), stateRank(b.State); ra != rb {
				return ra - rb
			}
			if a.Priority != b.Priority {
				return int(b.Priority - a.Priority)
			}
			return int(a.ID) - int(b.ID)
		})
		SortJobs(jobs)
		for i := range jobs {
			if jobs[i].ID != want[i].ID || jobs[i].State != want[i].State || jobs[i].Priority != want[i].Priority {
				t.Fatalf("round %d: position %d holds job %d/%s/%d, want %d/%s/%d", round, i,
					jobs[i].ID, jobs[i].State, jobs[i].Priority, want[i].ID, want[i].State, want[i].Priority)
			}
		}
	}
}
