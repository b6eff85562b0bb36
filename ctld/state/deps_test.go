package state

import (
	"slices"
	"strconv"
	"testing"

	"corral/api"
)

func TestDependencyCycle(t *testing.T) {
	dep := func(ids ...uint64) *Dependency {
		c := DepClause{Type: "afterok"}
		for _, id := range ids {
			c.JobIDs = append(c.JobIDs, strconv.FormatUint(id, 10))
		}
		return &Dependency{Clauses: []DepClause{c}}
	}
	// Pending jobs: 2 waits on 1, 3 waits on 2, 4 waits on 3 and 9; 9 is
	// completed.
	s := New()
	put := func(id uint64, st api.JobState, d *Dependency) {
		s.putJob(&Job{ID: id, State: st, Spec: JobSpec{Dependency: d}})
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
