package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// IndexSet is a set of array task indexes kept as ranges: sorted by First,
// not overlapping, each with Step ≥ 1 (a single index is First == Last).
// An array of 100,000 tasks is one range. Sets are values: the methods
// that change a set return a new one and leave the receiver as it was, so
// a job record holding one can be shared (the controller's state is
// copy-on-write).
type IndexSet struct {
	Ranges []ArrayRange `json:"ranges"`
}

// NewIndexSet returns the set of the indexes the ranges expand to.
// Overlapping ranges (0-10,5) are merged, so each index is counted once.
func NewIndexSet(ranges []ArrayRange) *IndexSet {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b ArrayRange) int { return a.First - b.First })
	overlap := false
	for i := 1; i < len(rs); i++ {
		if rs[i].First <= rs[i-1].Last {
			overlap = true
			break
		}
	}
	if !overlap {
		for i := range rs {
			rs[i] = normalRange(rs[i])
		}
		return &IndexSet{Ranges: rs}
	}
	// Rare: expand, deduplicate and compress again.
	var all []int
	for _, r := range rs {
		for i := r.First; i <= r.Last; i += max(r.Step, 1) {
			all = append(all, i)
		}
	}
	slices.Sort(all)
	return indexSetOf(slices.Compact(all))
}

// normalRange makes Last a member of the range and Step at least 1.
func normalRange(r ArrayRange) ArrayRange {
	if r.Step < 1 {
		r.Step = 1
	}
	r.Last = r.First + (r.Last-r.First)/r.Step*r.Step
	if r.First == r.Last {
		r.Step = 1
	}
	return r
}

// indexSetOf compresses sorted, distinct indexes into runs of equal steps.
func indexSetOf(idx []int) *IndexSet {
	s := &IndexSet{}
	for i := 0; i < len(idx); {
		r := ArrayRange{First: idx[i], Last: idx[i], Step: 1}
		if i+1 < len(idx) {
			step := idx[i+1] - idx[i]
			j := i + 1
			for j+1 < len(idx) && idx[j+1]-idx[j] == step {
				j++
			}
			// Two singles are clearer than a two-index run with a step.
			if j > i+1 || step == 1 {
				r.Last, r.Step = idx[j], step
				i = j + 1
				s.Ranges = append(s.Ranges, r)
				continue
			}
		}
		s.Ranges = append(s.Ranges, r)
		i++
	}
	return s
}

// Len returns how many indexes the set holds.
func (s *IndexSet) Len() int {
	if s == nil {
		return 0
	}
	n := 0
	for _, r := range s.Ranges {
		n += (r.Last-r.First)/r.Step + 1
	}
	return n
}

// Empty reports whether the set holds no index.
func (s *IndexSet) Empty() bool { return s == nil || len(s.Ranges) == 0 }

// Min and Max return the smallest and largest index; 0 for an empty set.
func (s *IndexSet) Min() int {
	if s.Empty() {
		return 0
	}
	return s.Ranges[0].First
}

func (s *IndexSet) Max() int {
	if s.Empty() {
		return 0
	}
	return s.Ranges[len(s.Ranges)-1].Last
}

// Contains reports whether i is in the set.
func (s *IndexSet) Contains(i int) bool {
	if s == nil {
		return false
	}
	k, _ := slices.BinarySearchFunc(s.Ranges, i, func(r ArrayRange, t int) int {
		switch {
		case r.Last < t:
			return -1
		case r.First > t:
			return 1
		}
		return 0
	})
	if k >= len(s.Ranges) {
		return false
	}
	r := s.Ranges[k]
	return i >= r.First && i <= r.Last && (i-r.First)%r.Step == 0
}

// Each calls f with the indexes in order until f returns false.
func (s *IndexSet) Each(f func(int) bool) {
	if s == nil {
		return
	}
	for _, r := range s.Ranges {
		for i := r.First; i <= r.Last; i += r.Step {
			if !f(i) {
				return
			}
		}
	}
}

// Without returns the set less index i (the same set when i is absent).
func (s *IndexSet) Without(i int) *IndexSet {
	if !s.Contains(i) {
		return s
	}
	out := &IndexSet{Ranges: make([]ArrayRange, 0, len(s.Ranges)+1)}
	for _, r := range s.Ranges {
		if i < r.First || i > r.Last {
			out.Ranges = append(out.Ranges, r)
			continue
		}
		if i > r.First {
			out.Ranges = append(out.Ranges, normalRange(ArrayRange{First: r.First, Last: i - r.Step, Step: r.Step}))
		}
		if i < r.Last {
			out.Ranges = append(out.Ranges, normalRange(ArrayRange{First: i + r.Step, Last: r.Last, Step: r.Step}))
		}
	}
	return out
}

// ParseIndexSet reads what String writes ("" is the empty set).
func ParseIndexSet(s string) (*IndexSet, error) {
	set := &IndexSet{}
	if s == "" {
		return set, nil
	}
	for _, item := range strings.Split(s, ",") {
		lo, rest, isRange := strings.Cut(item, "-")
		hi, step := lo, "1"
		if isRange {
			hi, step, _ = strings.Cut(rest, ":")
			if step == "" {
				step = "1"
			}
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		c, err3 := strconv.Atoi(step)
		if err1 != nil || err2 != nil || err3 != nil || b < a || c < 1 {
			return nil, fmt.Errorf("bad index range %q", item)
		}
		set.Ranges = append(set.Ranges, ArrayRange{First: a, Last: b, Step: c})
	}
	return set, nil
}

// String writes the set as squeue does inside brackets: "3-99", "1,3,5-7",
// "0-12:4".
func (s *IndexSet) String() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	for k, r := range s.Ranges {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.First))
		if r.Last != r.First {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Last))
			if r.Step > 1 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(r.Step))
			}
		}
	}
	return b.String()
}

func sortStrings(s []string) { slices.Sort(s) }
