package hostlist

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"one name":              {"n1", []string{"n1"}},
		"range and number":      {"n[1-4,7]", []string{"n1", "n2", "n3", "n4", "n7"}},
		"padded":                {"gpu[01-02]", []string{"gpu01", "gpu02"}},
		"padding from the low":  {"n[08-10]", []string{"n08", "n09", "n10"}},
		"no padding":            {"n[8-10]", []string{"n8", "n9", "n10"}},
		"wider than the number": {"n[001-2]", []string{"n001", "n002"}},
		"several entries":       {"n[1-2],gpu[01-02]", []string{"n1", "n2", "gpu01", "gpu02"}},
		"white space":           {"a b\tc\nd", []string{"a", "b", "c", "d"}},
		"suffix":                {"n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		"two groups":            {"a[1-2]b[1-2]", []string{"a1b1", "a1b2", "a2b1", "a2b2"}},
		"group alone":           {"[3-4]", []string{"3", "4"}},
		"repeats kept":          {"n1,n1", []string{"n1", "n1"}},
		"empty entries skipped": {"a,,b,", []string{"a", "b"}},
		"empty":                 {"", []string{}},
		"zero":                  {"n[0-1]", []string{"n0", "n1"}},
		"dots and underscores":  {"node_a.b[1-2]", []string{"node_a.b1", "node_a.b2"}},
		"order kept":            {"n3,n1", []string{"n3", "n1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Expand(tc.in, 1000)
			if err != nil {
				t.Fatalf("Expand(%q): %v", tc.in, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
			n, err := Count(tc.in, 1000)
			if err != nil || n != len(tc.want) {
				t.Errorf("Count(%q) = %d, %v; want %d", tc.in, n, err, len(tc.want))
			}
		})
	}
}

func TestExpandRefuses(t *testing.T) {
	tests := map[string]struct {
		in   string
		want error
		says string
	}{
		"unclosed":        {"n[1-2", ErrSyntax, "never closed"},
		"stray close":     {"n1]", ErrSyntax, "closes no"},
		"empty group":     {"n[]", ErrSyntax, "empty group"},
		"backwards":       {"n[5-2]", ErrSyntax, "ends below"},
		"not a number":    {"n[a-b]", ErrSyntax, "not a number"},
		"prism":           {"bgl[123x456]", ErrSyntax, "not a number"},
		"nested":          {"n[1[2]]", ErrSyntax, "not a number"},
		"open range":      {"n[1-]", ErrSyntax, "not a number"},
		"bad element":     {"n[1-2,x]", ErrSyntax, "not a number"},
		"bad byte":        {"n/1", ErrSyntax, "names hold"},
		"too many digits": {"n[0-1234567890123456789]", ErrSyntax, "more than 18 digits"},
		"over the limit":  {"n[1-1001]", ErrTooMany, "more than 1000"},
		"huge range":      {"n[0-999999999999999999]", ErrTooMany, "more than 1000"},
		"huge product":    {"a[1-100000]b[1-100000]c[1-100000]", ErrTooMany, "more than 1000"},
		"many entries":    {strings.Repeat("n[1-600],", 2), ErrTooMany, "more than 1000"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Expand(tc.in, 1000)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Expand(%q) = %d names, %v; want %v saying %q", tc.in, len(got), err, tc.want, tc.says)
			}
			if _, err := Count(tc.in, 1000); !errors.Is(err, tc.want) {
				t.Errorf("Count(%q): %v, want %v", tc.in, err, tc.want)
			}
		})
	}
}

func TestCompress(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want string
	}{
		"run":                {[]string{"n1", "n2", "n3"}, "n[1-3]"},
		"sorted and uniq":    {[]string{"n3", "n1", "n2", "n1"}, "n[1-3]"},
		"gap":                {[]string{"n1", "n2", "n4", "n7", "n8"}, "n[1-2,4,7-8]"},
		"padded":             {[]string{"gpu02", "gpu01"}, "gpu[01-02]"},
		"padding grows":      {[]string{"n08", "n09", "n10"}, "n[08-10]"},
		"no padding grows":   {[]string{"n9", "n10"}, "n[9-10]"},
		"padding breaks run": {[]string{"n8", "n09"}, "n[8,09]"},
		"single":             {[]string{"n7"}, "n7"},
		"prefixes":           {[]string{"n1", "gpu01", "n2", "gpu02", "login"}, "gpu[01-02],login,n[1-2]"},
		"bare and numbered":  {[]string{"n", "n1", "n2"}, "n,n[1-2]"},
		"numbers only":       {[]string{"2", "1"}, "[1-2]"},
		"inner digits":       {[]string{"r1n1", "r1n2", "r2n1"}, "r1n[1-2],r2n1"},
		"empty":              {nil, ""},
		"empty names":        {[]string{"", "n1"}, "n1"},
		"padded then plain":  {[]string{"n08", "n9"}, "n[08,9]"},
		"padding carries":    {[]string{"n099", "n100"}, "n[099-100]"},
		"same number widths": {[]string{"n01", "n1"}, "n[1,01]"},
		"numeric order":      {[]string{"n10", "n9", "n100"}, "n[9-10,100]"},
		"huge suffix":        {[]string{"n1234567890123456789"}, "n1234567890123456789"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Compress(tc.in)
			if got != tc.want {
				t.Errorf("Compress(%q) = %q, want %q", tc.in, got, tc.want)
			}
			back, err := Expand(got, 1000)
			if err != nil {
				t.Fatalf("Expand(%q): %v", got, err)
			}
			want := slices.Compact(slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(tc.in), func(n string) bool { return n == "" }))))
			if !slices.Equal(slices.Sorted(slices.Values(back)), want) {
				t.Errorf("Expand(Compress(%q)) = %q", tc.in, back)
			}
		})
	}
}

// TestRoundTrip checks, over random sets of names, that expanding a
// compressed list gives back the names sorted and without repeats, and
// that compressing is idempotent.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prefixes := []string{"n", "node", "gpu", "rack1-n", "login"}
	for round := range 500 {
		var names []string
		for range rng.IntN(40) {
			p := prefixes[rng.IntN(len(prefixes))]
			num := rng.IntN(120)
			switch rng.IntN(4) {
			case 0:
				names = append(names, p)
			case 1:
				names = append(names, p+"0"+strconv.Itoa(num))
			default:
				names = append(names, p+strconv.Itoa(num))
			}
		}
		compressed := Compress(names)
		got, err := Expand(compressed, 1000)
		if err != nil {
			t.Fatalf("round %d: Expand(%q): %v", round, compressed, err)
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Compact(slices.Sorted(slices.Values(names)))) {
			t.Fatalf("round %d: %q compressed to %q expands to %q", round, names, compressed, got)
		}
		if again := Compress(got); again != compressed {
			t.Fatalf("round %d: compressing again gave %q, want %q", round, again, compressed)
		}
	}
}

// BenchmarkExpand expands a 10,000-node list, as a job's nodes on a
// large cluster would be.
func BenchmarkExpand(b *testing.B) {
	for b.Loop() {
		if _, err := Expand("n[00001-10000]", 100_000); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompress compresses 10,000 names.
func BenchmarkCompress(b *testing.B) {
	names, _ := Expand("n[00001-10000]", 100_000)
	for b.Loop() {
		Compress(names)
	}
}
