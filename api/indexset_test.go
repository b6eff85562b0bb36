package api

import (
	"slices"
	"testing"
)

func indexes(s *IndexSet) []int {
	var out []int
	s.Each(func(i int) bool { out = append(out, i); return true })
	return out
}

func TestIndexSet(t *testing.T) {
	tests := map[string]struct {
		ranges []ArrayRange
		str    string
		want   []int
	}{
		"one range":               {[]ArrayRange{{0, 4, 1}}, "0-4", []int{0, 1, 2, 3, 4}},
		"list and range":          {[]ArrayRange{{1, 1, 1}, {3, 3, 1}, {5, 7, 1}}, "1,3,5-7", []int{1, 3, 5, 6, 7}},
		"step; last off the step": {[]ArrayRange{{0, 15, 4}}, "0-12:4", []int{0, 4, 8, 12}},
		"unsorted input":          {[]ArrayRange{{9, 9, 1}, {2, 3, 1}}, "2-3,9", []int{2, 3, 9}},
		"overlaps merge":          {[]ArrayRange{{0, 4, 1}, {3, 6, 1}, {10, 14, 2}}, "0-6,10-14:2", []int{0, 1, 2, 3, 4, 5, 6, 10, 12, 14}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := NewIndexSet(tc.ranges)
			if got := s.String(); got != tc.str {
				t.Errorf("String = %q, want %q", got, tc.str)
			}
			if got := indexes(s); !slices.Equal(got, tc.want) {
				t.Errorf("indexes = %v, want %v", got, tc.want)
			}
			if s.Len() != len(tc.want) || s.Min() != tc.want[0] || s.Max() != tc.want[len(tc.want)-1] {
				t.Errorf("Len/Min/Max = %d/%d/%d", s.Len(), s.Min(), s.Max())
			}
			for _, i := range tc.want {
				if !s.Contains(i) {
					t.Errorf("Contains(%d) = false", i)
				}
			}
		})
	}
}

func TestIndexSetWithout(t *testing.T) {
	s := NewIndexSet([]ArrayRange{{0, 12, 4}, {20, 25, 1}})
	tests := []struct {
		drop int
		str  string
	}{
		{0, "4-12:4,20-25"},
		{8, "0-4:4,12,20-25"},
		{12, "0-8:4,20-25"},
		{22, "0-12:4,20-21,23-25"},
		{7, "0-12:4,20-25"}, // absent
	}
	for _, tc := range tests {
		got := s.Without(tc.drop)
		if got.String() != tc.str {
			t.Errorf("Without(%d) = %q, want %q", tc.drop, got, tc.str)
		}
		if tc.drop != 7 && got.Contains(tc.drop) {
			t.Errorf("Without(%d) still contains it", tc.drop)
		}
	}
	if s.String() != "0-12:4,20-25" {
		t.Errorf("Without changed its receiver: %q", s)
	}
	one := NewIndexSet([]ArrayRange{{5, 5, 1}})
	if e := one.Without(5); !e.Empty() || e.Len() != 0 {
		t.Errorf("removing the last index leaves %q", e)
	}
	big := NewIndexSet([]ArrayRange{{0, 99_999, 1}})
	if big.Len() != 100_000 || len(big.Ranges) != 1 {
		t.Errorf("0-99999 is %d ranges, %d indexes", len(big.Ranges), big.Len())
	}
}
