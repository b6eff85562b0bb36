package state

import (
	"slices"
	"strconv"
	"testing"

	"corral/api"
)

func TestDependencyCycle(t *testing.T) {
	s := New()
	dep := func(ids ...uint64) *Dependency {
		c := DepClause{Type: "afterok"}
		for _, id := range ids {
			c.JobIDs = append(c.JobIDs, strconv.FormatUint(id, 10))
		}
		// Resolved as the controller resolves a request at submit.
		return s.ResolveDependency(&Dependency{Clauses: []DepClause{c}})
	}
	// Pending jobs: 2 waits on 1, 3 waits on 2, 4 waits on 3 and 9; 9 is
	// completed.
	put := func(id uint64, st api.JobState, d *Dependency) {
		s.putJob(&Job{ID: id, State: st, Spec: &JobSpec{Dependency: d}})
	}
	put(1, api.StatePending, nil)
	put(2, api.StatePending, dep(1))
	put(3, api.StatePending, dep(2))
	put(4, api.StatePending, dep(3, 9))
	put(9, api.StateCompleted, nil)
	tests := map[string]struct {
		id   uint64
		dep  *Dependency
		want []uint64
	}{
		"1 on 3 closes 1 → 3 → 2 → 1":      {1, dep(3), []uint64{1, 3, 2}},
		"1 on 4 closes the long way round": {1, dep(4), []uint64{1, 4, 3, 2}},
		"a job on itself":                  {2, dep(2), []uint64{2}},
		"1 on 9 (completed): no cycle":     {1, dep(9), nil},
		"4 on 1: a diamond, no cycle":      {4, dep(1, 2), nil},
		"removing a dependency: no cycle":  {3, nil, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := DependencyCycle(s, tc.id, tc.dep)
			if !slices.Equal(got, tc.want) {
				t.Errorf("cycle = %v, want %v", got, tc.want)
			}
		})
	}
	if got := CycleText([]uint64{1, 3, 2}); got != "1 → 3 → 2 → 1" {
		t.Errorf("CycleText = %q", got)
	}
}

// TestDependencyCycleThroughArrays checks that the cycle check reads a
// dependency's typed targets as the pass does: "5_3" of an array whose
// task 3 has not started is the array's pending record, and "5" names the
// whole array.
func TestDependencyCycleThroughArrays(t *testing.T) {
	s := New()
	raw := func(refs ...string) *Dependency {
		return s.ResolveDependency(&Dependency{Clauses: []DepClause{{Type: "afterok", JobIDs: refs}}})
	}
	s.putJob(&Job{ID: 5, ArrayJobID: 5, State: api.StatePending,
		ArrayPending: api.NewIndexSet([]api.ArrayRange{{First: 0, Last: 9, Step: 1}})})
	s.putJob(&Job{ID: 6, State: api.StatePending})
	s.putJob(&Job{ID: 7, ArrayJobID: 5, ArrayTaskID: 0, State: api.StateRunning})
	s.ArrayTasks[5] = []uint64{7}
	s.Tasks[api.TaskRef{Array: 5, Task: 0}] = 7
	arr := s.Jobs[5]
	arr.Spec.Dependency = raw("6")
	s.putJob(arr)
	tests := map[string]struct {
		dep  *Dependency
		kind DepKind
		want []uint64
	}{
		"6 on a pending task of 5, which waits on 6": {raw("5_3"), DepTask, []uint64{6, 5}},
		"6 on the whole array 5":                     {raw("5"), DepArray, []uint64{6, 5}},
		"6 on a task of 5 that runs: no cycle":       {raw("5_0"), DepTask, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if k := tc.dep.Clauses[0].Targets[0].Kind; k != tc.kind {
				t.Fatalf("target kind = %s, want %s", k, tc.kind)
			}
			if got := DependencyCycle(s, 6, tc.dep); !slices.Equal(got, tc.want) {
				t.Errorf("cycle = %v, want %v", got, tc.want)
			}
		})
	}
}
