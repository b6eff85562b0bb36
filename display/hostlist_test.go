package display

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCompressHostlist(t *testing.T) {
	tests := map[string]struct {
		names []string
		want  string
	}{
		"none":                 {nil, ""},
		"one":                  {[]string{"n1"}, "n1"},
		"range and single":     {[]string{"n3", "n1", "n2", "n5"}, "n[1-3,5]"},
		"zero padding kept":    {[]string{"node01", "node02", "node03", "node04"}, "node[01-04]"},
		"natural widths join":  {[]string{"n9", "n10", "n11"}, "n[9-11]"},
		"padded into two digs": {[]string{"n08", "n09", "n10"}, "n[08-10]"},
		"padded then natural":  {[]string{"n08", "n9"}, "n[08,9]"},
		"padding carries over": {[]string{"n099", "n100"}, "n[099-100]"},
		"same number widths":   {[]string{"n01", "n1"}, "n[1,01]"},
		"no digits":            {[]string{"login", "n1", "n2"}, "login,n[1-2]"},
		"several prefixes":     {[]string{"b2", "a1", "b1"}, "a1,b[1-2]"},
		"duplicates dropped":   {[]string{"n1", "n2", "n1"}, "n[1-2]"},
		"digits inside prefix": {[]string{"rack1-node2", "rack1-node1"}, "rack1-node[1-2]"},
		"numeric not lexical":  {[]string{"n10", "n9", "n100"}, "n[9-10,100]"},
		"empty names skipped":  {[]string{"", "n1"}, "n1"},
		"huge suffix literal":  {[]string{"n1234567890123456789"}, "n1234567890123456789"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := CompressHostlist(tc.names); got != tc.want {
				t.Errorf("CompressHostlist(%q) = %q, want %q", tc.names, got, tc.want)
			}
		})
	}
}

func TestExpandHostlist(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"empty":            {"", nil},
		"plain":            {"login", []string{"login"}},
		"range and single": {"n[1-3,5]", []string{"n1", "n2", "n3", "n5"}},
		"padded":           {"node[01-04]", []string{"node01", "node02", "node03", "node04"}},
		"width of first":   {"n[9-10]", []string{"n9", "n10"}},
		"padded width":     {"n[08-10]", []string{"n08", "n09", "n10"}},
		"list":             {"login,n[1-2]", []string{"login", "n1", "n2"}},
		"spaces separate":  {"a, b  c", []string{"a", "b", "c"}},
		"suffix":           {"n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		"cartesian":        {"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		"order kept":       {"n3,n1", []string{"n3", "n1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ExpandHostlist(tc.in)
			if err != nil {
				t.Fatalf("ExpandHostlist(%q): %v", tc.in, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ExpandHostlist(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestExpandHostlistErrors(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"unclosed":       {"n[1-3", "never closed"},
		"stray close":    {"n1]", "without '['"},
		"nested":         {"n[[1]]", "nested"},
		"empty brackets": {"n[]", "empty brackets"},
		"backwards":      {"n[3-1]", "ends before it starts"},
		"not a number":   {"n[a-b]", "not a number"},
		"bad element":    {"n[1-2,x]", "not a number"},
		"open range":     {"n[1-]", "not a number"},
		"too many":       {"n[1-99999999]", "more than"},
		"too many total": {"a[0-999999],b[0-999999]", "more than"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ExpandHostlist(tc.in)
			if err == nil {
				t.Fatalf("ExpandHostlist(%q) = %d names, want an error", tc.in, len(got))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

// TestHostlistRoundTrip checks, over random sets of names, that expanding a
// compressed list gives back the names sorted and without duplicates, and
// that compressing is idempotent.
func TestHostlistRoundTrip(t *testing.T) {
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
		compressed := CompressHostlist(names)
		got, err := ExpandHostlist(compressed)
		if err != nil {
			t.Fatalf("round %d: ExpandHostlist(%q): %v", round, compressed, err)
		}
		want := sortedUnique(names)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %q compressed to %q expands to %q, want %q", round, names, compressed, got, want)
		}
		if again := CompressHostlist(got); again != compressed {
			t.Fatalf("round %d: compressing again gave %q, want %q", round, again, compressed)
		}
	}
}

func sortedUnique(names []string) []string {
	hosts := make([]host, 0, len(names))
	for _, n := range names {
		hosts = append(hosts, splitHost(n))
	}
	slices.SortFunc(hosts, compareHosts)
	var out []string
	for _, h := range hosts {
		if len(out) == 0 || out[len(out)-1] != h.name {
			out = append(out, h.name)
		}
	}
	return out
}
