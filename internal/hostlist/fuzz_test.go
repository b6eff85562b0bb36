package hostlist

import (
	"errors"
	"slices"
	"testing"
)

// FuzzExpand reads any text as a host list. It must never panic, never
// build more than the limit, agree with Count, and a list it reads must
// survive Compress: Expand(Compress(names)) is the sorted set of names.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"n[1-4,7],gpu[01-02]", "a[1-2]b[08-10]-ib", "n[0-999999999999]", "x,,y z", "n[", "[1-3]", "n99999999999999999999"} {
		f.Add(s)
	}
	const limit = 4096
	f.Fuzz(func(t *testing.T, s string) {
		names, err := Expand(s, limit)
		n, cerr := Count(s, limit)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Expand: %v; Count: %v", err, cerr)
		}
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("Expand(%q): %v is neither ErrSyntax nor ErrTooMany", s, err)
			}
			return
		}
		if len(names) > limit || len(names) != n {
			t.Fatalf("Expand(%q) gave %d names, Count %d, limit %d", s, len(names), n, limit)
		}
		c := Compress(names)
		back, err := Expand(c, limit)
		if err != nil {
			t.Fatalf("Expand(Compress(%q)) = Expand(%q): %v", s, c, err)
		}
		want := slices.Compact(slices.Sorted(slices.Values(names)))
		if got := slices.Sorted(slices.Values(back)); !slices.Equal(got, want) {
			t.Fatalf("Expand(Compress(%q)) = %q, want %q", s, got, want)
		}
		if len(back) != len(want) {
			t.Fatalf("Compress(%q) = %q repeats names", s, c)
		}
	})
}
