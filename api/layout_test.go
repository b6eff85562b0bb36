package api

import (
	"slices"
	"testing"
)

func TestTaskLayout(t *testing.T) {
	tests := map[string]struct {
		ntasks, perNode, k int
		counts             []int
		text               string
		block, cyclic      []int
	}{
		"even":            {4, 0, 2, []int{2, 2}, "2(x2)", []int{0, 0, 1, 1}, []int{0, 1, 0, 1}},
		"uneven":          {5, 0, 2, []int{3, 2}, "3,2", []int{0, 0, 0, 1, 1}, []int{0, 1, 0, 1, 0}},
		"per node":        {0, 2, 3, []int{2, 2, 2}, "2(x3)", []int{0, 0, 1, 1, 2, 2}, []int{0, 1, 2, 0, 1, 2}},
		"a task a node":   {0, 1, 4, []int{1, 1, 1, 1}, "1(x4)", []int{0, 1, 2, 3}, []int{0, 1, 2, 3}},
		"runs":            {7, 0, 4, []int{2, 2, 2, 1}, "2(x3),1", []int{0, 0, 1, 1, 2, 2, 3}, []int{0, 1, 2, 3, 0, 1, 2}},
		"one node":        {3, 0, 1, []int{3}, "3", []int{0, 0, 0}, []int{0, 0, 0}},
		"more than asked": {5, 4, 2, []int{3, 2}, "3,2", []int{0, 0, 0, 1, 1}, []int{0, 1, 0, 1, 0}},
	}
	for name, tc := range tests {
		counts := TaskCounts(tc.ntasks, tc.perNode, tc.k)
		if !slices.Equal(counts, tc.counts) {
			t.Errorf("%s: TaskCounts = %v, want %v", name, counts, tc.counts)
		}
		if got := TasksPerNodeText(counts); got != tc.text {
			t.Errorf("%s: TasksPerNodeText = %q, want %q", name, got, tc.text)
		}
		if got := TaskNodes(counts, false); !slices.Equal(got, tc.block) {
			t.Errorf("%s: block = %v, want %v", name, got, tc.block)
		}
		if got := TaskNodes(counts, true); !slices.Equal(got, tc.cyclic) {
			t.Errorf("%s: cyclic = %v, want %v", name, got, tc.cyclic)
		}
		if most := MostTasksPerNode(tc.ntasks, tc.perNode, tc.k); most != slices.Max(counts) {
			t.Errorf("%s: MostTasksPerNode = %d, want %d", name, most, slices.Max(counts))
		}
	}
}
