package submit

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// describe writes a constraint's parts, so a test reads what was parsed.
func describe(c *Constraint) string {
	var parts []string
	if c.All != nil {
		parts = append(parts, "all:"+c.All.String())
	}
	for _, x := range c.Counted {
		parts = append(parts, fmt.Sprintf("count:%s*%d", x.Expr, x.Count))
	}
	if len(c.Match) > 0 {
		var alts []string
		for _, m := range c.Match {
			alts = append(alts, m.String())
		}
		parts = append(parts, "match:"+strings.Join(alts, "/"))
	}
	for _, x := range c.Split {
		parts = append(parts, fmt.Sprintf("split:%s*%d", x.Expr, x.Count))
	}
	return strings.Join(parts, " ")
}

func TestParseConstraint(t *testing.T) {
	tests := map[string]struct {
		in, want string
		nodes    int
	}{
		"one feature":        {"intel", "all:intel", 1},
		"and":                {"intel&ib", "all:intel&ib", 1},
		"or":                 {"a|b|c", "all:a|b|c", 1},
		"grouped":            {"(a|b)&ib", "all:(a|b)&ib", 1},
		"nested":             {"a&(b|(c&d))", "all:a&(b|(c&d))", 1},
		"count":              {"gpu*2", "count:gpu*2", 2},
		"count and every":    {"intel&gpu*4", "all:intel count:gpu*4", 4},
		"counted group":      {"(a|b)*3&c", "all:c count:a|b*3", 3},
		"matching or":        {"[rack1|rack2|rack3]", "match:rack1/rack2/rack3", 1},
		"matching or and":    {"intel&[r1|r2]", "all:intel match:r1/r2", 1},
		"one alternative":    {"[r1]", "match:r1", 1},
		"multiple counts":    {"[rack1*2&rack2*4]", "split:rack1*2 split:rack2*4", 6},
		"counts with groups": {"[(a|b)*1&c*2]", "split:a|b*1 split:c*2", 3},
		"one count":          {"[a*3]", "split:a*3", 3},
		"names":              {"node_a.b-1&X9", "all:node_a.b-1&X9", 1},
		"parens alone":       {"((a))", "all:a", 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := ParseConstraint(tc.in)
			if err != nil {
				t.Fatalf("ParseConstraint(%q): %v", tc.in, err)
			}
			if got := describe(c); got != tc.want {
				t.Errorf("ParseConstraint(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if got := c.NodesNeeded(); got != tc.nodes {
				t.Errorf("NodesNeeded(%q) = %d, want %d", tc.in, got, tc.nodes)
			}
		})
	}
}

func TestParseConstraintRefuses(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"empty":                 {"", "empty expression"},
		"trailing and":          {"a&", "the expression ends where a feature was expected"},
		"double and":            {"a&&b", "at byte 2"},
		"mixed":                 {"a&b|c", "mixes '&' and '|' at one level; add parentheses"},
		"unclosed paren":        {"(a|b", "expected ')'"},
		"stray paren":           {"a)", "unexpected ')'"},
		"empty parens":          {"()", "')' is not part of a feature name"},
		"count in parens":       {"(a*2)", "a count applies to a term of the outermost"},
		"count zero":            {"a*0", "a count is a whole number from 1 to 100000"},
		"count huge":            {"a*100001", "from 1 to 100000"},
		"count missing":         {"a*", "a count is a whole number"},
		"count under or":        {"a*2|b", "cannot be an alternative of '|'"},
		"bracket under or":      {"[a|b]|c", "cannot be an alternative of '|'"},
		"two brackets":          {"[a|b]&[c|d]", "a bracket group may appear once"},
		"bracket in parens":     {"([a|b])", "outside parentheses"},
		"bracket count":         {"[a|b]*2", "a bracket group takes no count"},
		"bracket mixed":         {"[a*1&b*1|c]", "either a matching OR"},
		"counts in matching or": {"[a*2|b]", "the alternatives of a matching OR [a|b] take no counts"},
		"count missing in &":    {"[a*2&b]", "every term of multiple counts needs a count"},
		"unclosed bracket":      {"[a|b", "expected ']'"},
		"space":                 {"a & b", "unexpected ' '"},
		"comma":                 {"a,b", `unexpected ','`},
		"not":                   {"!a", `'!' is not part of a feature name`},
		"leading dash":          {"-a", "must start with a letter, a digit or '_'"},
		"long name":             {strings.Repeat("f", 65), "longer than 64 bytes"},
		"too long":              {strings.Repeat("a&", 600) + "a", "the most is 1024"},
		"too many features":     {strings.TrimSuffix(strings.Repeat("a&", 65), "&"), "it names 65 features; the most is 64"},
		"too deep":              {strings.Repeat("(", 9) + "a" + strings.Repeat(")", 9), "nest deeper than 8"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := ParseConstraint(tc.in)
			if err == nil {
				t.Fatalf("ParseConstraint(%q) = %s, want an error", tc.in, describe(c))
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--constraint") {
				t.Errorf("ParseConstraint(%q): %q, want it to name --constraint and say %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestConstraintHolds(t *testing.T) {
	c, err := ParseConstraint("intel&(ib|roce)")
	if err != nil {
		t.Fatal(err)
	}
	node := func(features ...string) func(string) bool {
		return func(f string) bool { return slices.Contains(features, f) }
	}
	tests := map[string]struct {
		has  func(string) bool
		want bool
	}{
		"both":       {node("intel", "ib"), true},
		"other":      {node("intel", "roce", "gpu"), true},
		"no network": {node("intel"), false},
		"no intel":   {node("amd", "ib"), false},
		"none":       {node(), false},
	}
	for name, tc := range tests {
		if got := c.All.Holds(tc.has); got != tc.want {
			t.Errorf("%s: Holds = %v, want %v", name, got, tc.want)
		}
	}
	if got := c.Features(); !slices.Equal(got, []string{"intel", "ib", "roce"}) {
		t.Errorf("Features() = %q", got)
	}
}

func TestConstraintSatisfiedBy(t *testing.T) {
	node := func(features ...string) func(string) bool {
		return func(f string) bool { return slices.Contains(features, f) }
	}
	a, b, ab, ac, none := node("a"), node("b"), node("a", "b"), node("a", "c"), node()
	tests := map[string]struct {
		c     string
		nodes []func(string) bool
		want  bool
	}{
		"every node":                    {"a", []func(string) bool{a, ab, ac}, true},
		"one without":                   {"a", []func(string) bool{a, b}, false},
		"a count met":                   {"b*2", []func(string) bool{b, ab, a}, true},
		"a count short":                 {"b*2", []func(string) bool{b, a, a}, false},
		"every node and a count":        {"a&c*1", []func(string) bool{a, ac}, true},
		"matching or, one alternative":  {"[b|c]", []func(string) bool{ab, b}, true},
		"matching or, mixed":            {"[b|c]", []func(string) bool{b, ac}, false},
		"split":                         {"[a*1&b*1]", []func(string) bool{a, b}, true},
		"split needs disjoint nodes":    {"[a*1&b*1]", []func(string) bool{ab, none}, false},
		"split, a node serves either":   {"[a*2&b*1]", []func(string) bool{ab, a, b}, true},
		"split, the choice matters":     {"[a*1&b*2]", []func(string) bool{ab, b, a}, true},
		"split, not enough":             {"[a*2&b*2]", []func(string) bool{ab, ab, ab}, false},
		"split and every node":          {"c&[a*1&b*1]", []func(string) bool{ac, node("b", "c")}, true},
		"split of a group":              {"[(a|b)*2&c*1]", []func(string) bool{a, b, node("c")}, true},
		"split of a group, one missing": {"[(a|b)*2&c*1]", []func(string) bool{a, ac, none}, false},
	}
	for name, tc := range tests {
		c, err := ParseConstraint(tc.c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := c.SatisfiedBy(tc.nodes); got != tc.want {
			t.Errorf("%s: %s SatisfiedBy = %v, want %v", name, tc.c, got, tc.want)
		}
	}
}

// BenchmarkSplitFits checks multiple counts over 10,000 nodes of four
// kinds: the flow runs over the kinds, not the nodes.
func BenchmarkSplitFits(b *testing.B) {
	c, err := ParseConstraint("[a*2000&b*3000&(a|c)*4000]")
	if err != nil {
		b.Fatal(err)
	}
	kinds := []func(string) bool{
		func(f string) bool { return f == "a" }, func(f string) bool { return f == "b" },
		func(f string) bool { return f == "c" }, func(f string) bool { return f == "a" || f == "b" },
	}
	nodes := make([]func(string) bool, 10_000)
	for i := range nodes {
		nodes[i] = kinds[i%4]
	}
	for b.Loop() {
		if !c.SatisfiedBy(nodes) {
			b.Fatal("not satisfied")
		}
	}
}
