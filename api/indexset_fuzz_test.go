package api

import (
	"math"
	"slices"
	"testing"
)

// fuzzRanges reads ranges from data: its first byte picks a base (0, near
// MaxInt, near MinInt) so that overflow at the ends of int is exercised;
// then each three bytes are one range's First and Last offsets from the
// base (0..63) and its Step (-2..13, so zero and negative steps occur).
func fuzzRanges(data []byte) (base int, ranges []ArrayRange) {
	if len(data) == 0 {
		return 0, nil
	}
	switch data[0] % 3 {
	case 1:
		base = math.MaxInt - 63
	case 2:
		base = math.MinInt
	}
	data = data[1:]
	for len(data) >= 3 && len(ranges) < 12 {
		ranges = append(ranges, ArrayRange{
			First: base + int(data[0]%64),
			Last:  base + int(data[1]%64),
			Step:  int(data[2]%16) - 2,
		})
		data = data[3:]
	}
	return base, ranges
}

// modelOf is the brute-force meaning of ranges: the sorted distinct
// offsets from base of the indexes they name.
func modelOf(base int, ranges []ArrayRange) []int {
	var out []int
	for _, r := range ranges {
		step := max(r.Step, 1)
		for off := r.First - base; off <= r.Last-base; off += step {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkSet compares a set with its model and checks that it is canonical.
func checkSet(t *testing.T, what string, s *IndexSet, base int, model []int) {
	t.Helper()
	if !s.canonical() {
		t.Fatalf("%s: %v is not canonical", what, s.Ranges)
	}
	if s.Len() != len(model) {
		t.Fatalf("%s: Len() = %d, want %d (%v)", what, s.Len(), len(model), s.Ranges)
	}
	var got []int
	s.Each(func(i int) bool { got = append(got, i-base); return true })
	if !slices.Equal(got, model) {
		t.Fatalf("%s: Each gives %v, want %v (%v)", what, got, model, s.Ranges)
	}
	for off := -2; off < 66; off++ {
		i := base + off
		if (off < 0 && base == math.MinInt) || (off > 63 && base > 0) {
			continue // outside int
		}
		if want := slices.Contains(model, off); s.Contains(i) != want {
			t.Fatalf("%s: Contains(base%+d) = %v, want %v (%v)", what, off, !want, want, s.Ranges)
		}
	}
	if len(model) > 0 && (s.Min() != base+model[0] || s.Max() != base+model[len(model)-1]) {
		t.Fatalf("%s: Min/Max = %d/%d, want base+%d/base+%d", what, s.Min(), s.Max(), model[0], model[len(model)-1])
	}
}

// FuzzIndexSet checks that NewIndexSet, Len, Contains, Each, Without,
// String and ParseIndexSet agree with a brute-force model on small inputs,
// keep sets canonical and never panic; text is fed to ParseIndexSet as it
// is.
func FuzzIndexSet(f *testing.F) {
	f.Add([]byte{0, 33, 9, 3, 5, 7, 3}, "33-9,5-7")
	f.Add([]byte{0, 0, 10, 3, 5, 5, 3}, "0-10,5")
	f.Add([]byte{1, 0, 63, 3, 1, 2, 3}, "0-12:4,20-25")
	f.Add([]byte{2, 0, 20, 4, 3, 19, 5, 1, 1, 0}, "1,3,5-7")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		base, ranges := fuzzRanges(data)
		model := modelOf(base, ranges)
		s := NewIndexSet(ranges)
		checkSet(t, "NewIndexSet", s, base, model)
		if again := NewIndexSet(s.Ranges); !slices.Equal(again.Ranges, s.Ranges) {
			t.Fatalf("NewIndexSet of a canonical set changed it: %v → %v", s.Ranges, again.Ranges)
		}
		for _, off := range model {
			rest := slices.DeleteFunc(slices.Clone(model), func(o int) bool { return o == off })
			checkSet(t, "Without", s.Without(base+off), base, rest)
		}
		if base == 0 {
			p, err := ParseIndexSet(s.String())
			if err != nil {
				t.Fatalf("ParseIndexSet(%q): %v", s.String(), err)
			}
			checkSet(t, "ParseIndexSet(String())", p, 0, model)
		}
		if p, err := ParseIndexSet(text); err == nil {
			if !p.canonical() {
				t.Fatalf("ParseIndexSet(%q) = %v: not canonical", text, p.Ranges)
			}
			if q, err := ParseIndexSet(p.String()); err != nil || q.Len() != p.Len() {
				t.Fatalf("ParseIndexSet(%q) = %q does not read back (%v)", text, p.String(), err)
			}
		}
	})
}
