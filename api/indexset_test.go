package api

import (
	"errors"
	"math"
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

func TestBuildIndexSet(t *testing.T) {
	tests := map[string]struct {
		ranges []ArrayRange
		str    string
		len    int
	}{
		"huge range absorbs a small one": {[]ArrayRange{{0, 1 << 40, 1}, {1, 2, 1}}, "0-1099511627776", 1<<40 + 1},
		"same grid, same residue":        {[]ArrayRange{{0, 1 << 40, 2}, {1 << 20, 1 << 41, 2}}, "0-2199023255552:2", 1<<40 + 1},
		"reversed range is empty":        {[]ArrayRange{{33, 9, 1}, {5, 7, 1}}, "5-7", 3},
		"zero step counts as one":        {[]ArrayRange{{3, 5, 0}}, "3-5", 3},
		"interleaved steps listed":       {[]ArrayRange{{0, 10, 2}, {3, 9, 3}}, "0-2:2,3-4,6,8-10", 8},
		"odd and even make all":          {[]ArrayRange{{0, 10, 2}, {1, 9, 2}}, "0-10", 11},
		"up to MaxInt":                   {[]ArrayRange{{math.MaxInt - 2, math.MaxInt, 1}, {math.MaxInt, math.MaxInt, 1}}, "9223372036854775805-9223372036854775807", 3},
		"whole int range saturates Len":  {[]ArrayRange{{math.MinInt, math.MaxInt, 1}}, "-9223372036854775808-9223372036854775807", math.MaxInt},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := BuildIndexSet(tc.ranges)
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.str || s.Len() != tc.len {
				t.Errorf("got %q (Len %d), want %q (Len %d)", s, s.Len(), tc.str, tc.len)
			}
		})
	}
}

func TestBuildIndexSetRefuses(t *testing.T) {
	tests := map[string][]ArrayRange{
		"interleave over 2^40":  {{0, 1 << 40, 2}, {1, 1 << 40, 3}},
		"too many ranges":       make([]ArrayRange, MaxIndexRanges+1),
		"interleave just above": {{0, 2 * MaxIndexExpand, 2}, {1, 2 * MaxIndexExpand, 3}},
	}
	for name, ranges := range tests {
		t.Run(name, func(t *testing.T) {
			if s, err := BuildIndexSet(ranges); !errors.Is(err, ErrIndexSetTooComplex) {
				t.Fatalf("BuildIndexSet = %v, %v; want ErrIndexSetTooComplex", s, err)
			}
			if s := NewIndexSet(ranges); !s.Empty() {
				t.Fatalf("NewIndexSet = %v, want the empty set", s)
			}
		})
	}
}

func TestIndexSetLenOfNonCanonicalRanges(t *testing.T) {
	s := &IndexSet{Ranges: []ArrayRange{{33, 9, 1}, {5, 7, 1}}}
	if n := s.Len(); n != 3 {
		t.Fatalf("Len() = %d, want 3: a reversed range is empty", n)
	}
}

func TestParseIndexSetCanonicalises(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"as String writes": {"1,3,5-7", "1,3,5-7"},
		"unsorted":         {"9,2-3", "2-3,9"},
		"overlapping":      {"0-10,5", "0-10"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := ParseIndexSet(tc.in)
			if err != nil || s.String() != tc.want {
				t.Fatalf("ParseIndexSet(%q) = %q, %v; want %q", tc.in, s, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"+5", "5-", "5-3", "1-9:0", "a", "-1"} {
		if _, err := ParseIndexSet(bad); err == nil {
			t.Errorf("ParseIndexSet(%q) accepted", bad)
		}
	}
}
