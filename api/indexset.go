package api

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// IndexSet is a set of array task indexes kept as ranges in canonical form:
// sorted by First, their spans [First, Last] disjoint, each with Step ≥ 1
// and Last on the step grid (Last = First + k×Step); a single index is
// First == Last with Step 1. An array of 100,000 tasks is one range. Sets
// are values: the methods that change a set return a new one and leave the
// receiver as it was, so a job record holding one can be shared (the
// controller's state is copy-on-write).
//
// Sets are built arithmetically, never by listing every index: only where
// two ranges on different grids interleave (0-10:2 with 3-9:3) are the
// indexes of their common span listed, and never more than MaxIndexExpand
// of them (see BuildIndexSet).
type IndexSet struct {
	Ranges []ArrayRange `json:"ranges"`
}

// Limits of BuildIndexSet, far above what a person writes in --array
// (Slurm's own arrays have at most 4,000,001 tasks).
const (
	// MaxIndexRanges is the most ranges a set may be built from.
	MaxIndexRanges = 10_000
	// MaxIndexExpand is the most indexes listed one by one where ranges
	// on different grids interleave.
	MaxIndexExpand = 1 << 16
)

// ErrIndexSetTooComplex is returned by BuildIndexSet for ranges that
// cannot be merged within its limits.
var ErrIndexSetTooComplex = errors.New("index ranges too complex")

// NewIndexSet returns the set of the indexes the ranges expand to.
// Overlapping ranges (0-10,5) are merged, so each index is counted once;
// a range with Last below First is empty and a Step below 1 counts as 1.
// Ranges BuildIndexSet refuses give the empty set: validation refuses them
// before they reach a job record.
func NewIndexSet(ranges []ArrayRange) *IndexSet {
	s, err := BuildIndexSet(ranges)
	if err != nil {
		return &IndexSet{}
	}
	return s
}

// BuildIndexSet is NewIndexSet that says when the ranges are beyond its
// limits: more than MaxIndexRanges ranges, or ranges on different grids
// that interleave over more than MaxIndexExpand indexes. Its cost grows
// with the number of ranges, never with the number of indexes.
func BuildIndexSet(ranges []ArrayRange) (*IndexSet, error) {
	if len(ranges) > MaxIndexRanges {
		return nil, fmt.Errorf("%w: %d ranges, the most is %d", ErrIndexSetTooComplex, len(ranges), MaxIndexRanges)
	}
	rs := make([]ArrayRange, 0, len(ranges))
	for _, r := range ranges {
		if r.Last >= r.First {
			rs = append(rs, normalRange(r))
		}
	}
	slices.SortFunc(rs, func(a, b ArrayRange) int {
		if c := cmp.Compare(a.First, b.First); c != 0 {
			return c
		}
		return cmp.Compare(b.Last, a.Last) // the longer first: it absorbs the other
	})
	b := setBuilder{budget: MaxIndexExpand}
	for _, r := range rs {
		if err := b.add(r); err != nil {
			return nil, err
		}
	}
	return &IndexSet{Ranges: b.out}, nil
}

// span returns b-a for a ≤ b without overflow.
func span(a, b int) uint64 { return uint64(b) - uint64(a) }

// normalRange makes Last a member of the range and Step at least 1; the
// range must not be empty (Last ≥ First).
func normalRange(r ArrayRange) ArrayRange {
	if r.Step < 1 {
		r.Step = 1
	}
	st := uint64(r.Step)
	r.Last = int(uint64(r.First) + span(r.First, r.Last)/st*st)
	if r.First == r.Last {
		r.Step = 1
	}
	return r
}

// count returns how many indexes a normal range holds, at most MaxInt.
func (r ArrayRange) count() int {
	n := span(r.First, r.Last)/uint64(r.Step) + 1
	if n == 0 || n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}

// clip returns the part of normal range r within [lo, hi], and false when
// none of its indexes lies there.
func (r ArrayRange) clip(lo, hi int) (ArrayRange, bool) {
	lo, hi = max(lo, r.First), min(hi, r.Last)
	if lo > hi {
		return ArrayRange{}, false
	}
	st := uint64(r.Step)
	k := span(r.First, lo) / st
	if span(r.First, lo)%st != 0 {
		k++
	}
	if k > span(r.First, hi)/st {
		return ArrayRange{}, false
	}
	first := int(uint64(r.First) + k*st)
	return normalRange(ArrayRange{First: first, Last: hi, Step: r.Step}), true
}

// within reports whether every index of normal range a is in normal range b.
func (a ArrayRange) within(b ArrayRange) bool {
	if a.First < b.First || a.Last > b.Last || span(b.First, a.First)%uint64(b.Step) != 0 {
		return false
	}
	return a.First == a.Last || a.Step%b.Step == 0
}

// setBuilder merges normal ranges, given in order of First, into a
// canonical list.
type setBuilder struct {
	out []ArrayRange
	// budget is how many more indexes may be listed one by one.
	budget int
	// work counts the ranges revisited; see maxIndexWork.
	work int
}

// maxIndexWork bounds the ranges BuildIndexSet revisits while merging, so
// that adversarial overlaps cost milliseconds, not minutes.
const maxIndexWork = 1 << 22

// add merges r into the list. Every range already there starts at or
// before r.First, so only the tail of the list, the ranges that reach r,
// can overlap it.
func (b *setBuilder) add(r ArrayRange) error {
	k := len(b.out)
	for k > 0 && b.out[k-1].Last >= r.First {
		k--
	}
	if k == len(b.out) {
		b.push(r)
		return nil
	}
	b.work += len(b.out) - k
	if b.work > maxIndexWork {
		return fmt.Errorf("%w: the ranges overlap too much to merge; list them without overlap", ErrIndexSetTooComplex)
	}
	tail := slices.Clone(b.out[k:])
	b.out = b.out[:k]
	if r.First > math.MinInt {
		if head, ok := tail[0].clip(math.MinInt, r.First-1); ok {
			b.push(head)
		}
	}
	from, done := r.First, false // r's indexes below from are placed
	for _, a := range tail {
		a, ok := a.clip(r.First, math.MaxInt)
		if !ok {
			continue
		}
		if !done && a.First > r.Last {
			if rest, ok := r.clip(from, math.MaxInt); ok {
				b.push(rest)
			}
			done = true
		}
		if done {
			b.push(a)
			continue
		}
		if a.First > from {
			if gap, ok := r.clip(from, a.First-1); ok {
				b.push(gap)
			}
		}
		if err := b.merge(a, r); err != nil {
			return err
		}
		if a.Last >= r.Last {
			done = true
		} else {
			from = a.Last + 1
		}
	}
	if !done {
		if rest, ok := r.clip(from, math.MaxInt); ok {
			b.push(rest)
		}
	}
	return nil
}

// merge places the union of a and r over a's span, then a's indexes
// beyond r.
func (b *setBuilder) merge(a, r ArrayRange) error {
	hi := min(a.Last, r.Last)
	ra, _ := a.clip(a.First, hi) // never empty: a.First ≤ hi
	rr, okR := r.clip(a.First, hi)
	switch {
	case !okR || rr.within(ra):
		b.push(ra)
	case ra.within(rr):
		b.push(rr)
	default:
		n := ra.count() + rr.count()
		if n > b.budget {
			return fmt.Errorf("%w: ranges %s and %s interleave on different steps over more than %d indexes; list them without overlap",
				ErrIndexSetTooComplex, rangeText(a), rangeText(r), MaxIndexExpand)
		}
		b.budget -= n
		idx := make([]int, 0, n)
		for _, x := range []ArrayRange{ra, rr} {
			for i, v := 0, x.First; i < x.count(); i, v = i+1, v+x.Step {
				idx = append(idx, v)
			}
		}
		slices.Sort(idx)
		for _, v := range slices.Compact(idx) {
			b.push(ArrayRange{First: v, Last: v, Step: 1})
		}
	}
	if hi < a.Last {
		if rest, ok := a.clip(hi+1, a.Last); ok {
			b.push(rest)
		}
	}
	return nil
}

func rangeText(r ArrayRange) string {
	return (&IndexSet{Ranges: []ArrayRange{r}}).String()
}

// push appends a normal range that starts after every range in the list,
// then joins the last ranges while one continues another: a range on the
// same step whose next index the other is, single indexes one apart, and
// a third single index as far from the second as the second is from the
// first. Two singles further apart stay two singles ("1,5", not "1-5:4").
func (b *setBuilder) push(r ArrayRange) {
	b.out = append(b.out, r)
	for b.joinLast() {
	}
}

// joinLast joins the last range of the list to the one before it where it
// continues it, and reports whether it did.
func (b *setBuilder) joinLast() bool {
	n := len(b.out)
	if n < 2 {
		return false
	}
	x, r := &b.out[n-2], b.out[n-1]
	gap := span(x.Last, r.First)
	xSingle, rSingle := x.First == x.Last, r.First == r.Last
	switch {
	case !xSingle && gap == uint64(x.Step) && (rSingle || r.Step == x.Step):
		x.Last = r.Last
	case xSingle && !rSingle && gap == uint64(r.Step):
		x.Last, x.Step = r.Last, r.Step
	case xSingle && rSingle && gap == 1:
		x.Last, x.Step = r.Last, 1
	case xSingle && rSingle && n >= 3 && b.out[n-3].First == b.out[n-3].Last &&
		span(b.out[n-3].First, x.First) == gap && gap <= math.MaxInt:
		w := &b.out[n-3]
		w.Last, w.Step = r.Last, int(gap)
		b.out = b.out[:n-2]
		return true
	default:
		return false
	}
	b.out = b.out[:n-1]
	return true
}

// Len returns how many indexes the set holds (at most MaxInt). It counts a
// range whose Last is below its First as empty, so a set that did not come
// from BuildIndexSet never has a negative length.
func (s *IndexSet) Len() int {
	if s == nil {
		return 0
	}
	n := 0
	for _, r := range s.Ranges {
		if r.Last < r.First {
			continue
		}
		c := normalRange(r).count()
		if c > math.MaxInt-n {
			return math.MaxInt
		}
		n += c
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
	return i >= r.First && i <= r.Last && span(r.First, i)%uint64(max(r.Step, 1)) == 0
}

// Each calls f with the indexes in order until f returns false.
func (s *IndexSet) Each(f func(int) bool) {
	if s == nil {
		return
	}
	for _, r := range s.Ranges {
		if r.Last < r.First {
			continue
		}
		r = normalRange(r)
		// Counted, not compared with Last: Last may be MaxInt.
		for i, v := 0, r.First; i < r.count(); i, v = i+1, v+r.Step {
			if !f(v) {
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

// ParseIndexSet reads what String writes ("" is the empty set): indexes
// and FIRST-LAST[:STEP] ranges of decimal digits, comma-separated. The
// result is canonical, whatever order and overlap the text had.
func ParseIndexSet(s string) (*IndexSet, error) {
	if s == "" {
		return &IndexSet{}, nil
	}
	items := strings.Split(s, ",")
	ranges := make([]ArrayRange, 0, len(items))
	for _, item := range items {
		lo, rest, isRange := strings.Cut(item, "-")
		hi, step := lo, "1"
		if isRange {
			hi, step, _ = strings.Cut(rest, ":")
			if step == "" {
				step = "1"
			}
		}
		a, ok1 := decimal(lo)
		b, ok2 := decimal(hi)
		c, ok3 := decimal(step)
		if !ok1 || !ok2 || !ok3 || b < a || c < 1 {
			return nil, fmt.Errorf("bad index range %q", item)
		}
		ranges = append(ranges, ArrayRange{First: a, Last: b, Step: c})
	}
	if set := (&IndexSet{Ranges: ranges}); set.canonical() {
		// What String wrote: kept as it is, however many ranges an
		// array's cancelled tasks left.
		return set, nil
	}
	return BuildIndexSet(ranges)
}

// canonical reports whether the set is in the form BuildIndexSet gives:
// sorted, disjoint, positive steps, each Last on its grid.
func (s *IndexSet) canonical() bool {
	for i, r := range s.Ranges {
		if r.Step < 1 || r.Last < r.First || normalRange(r) != r {
			return false
		}
		if i > 0 && s.Ranges[i-1].Last >= r.First {
			return false
		}
	}
	return true
}

// decimal parses a non-negative decimal number of digits only.
func decimal(s string) (int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
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
