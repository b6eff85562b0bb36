package submit

import (
	"reflect"
	"strings"
	"testing"

	"corral/api"
)

func TestParseDependency(t *testing.T) {
	tests := map[string]struct {
		in   string
		want api.Dependency
	}{
		"after": {"after:12", api.Dependency{
			Clauses: []api.DepClause{{Type: "after", JobIDs: []string{"12"}}}}},
		"after with delay": {"after:12+5", api.Dependency{
			Clauses: []api.DepClause{{Type: "after", JobIDs: []string{"12"}, Minutes: 5}}}},
		"after with zero delay": {"after:12+0", api.Dependency{
			Clauses: []api.DepClause{{Type: "after", JobIDs: []string{"12"}}}}},
		"after, delays shared": {"after:12+5:13+5", api.Dependency{
			Clauses: []api.DepClause{{Type: "after", JobIDs: []string{"12", "13"}, Minutes: 5}}}},
		"after, delays differ": {"after:12+5:13:14", api.Dependency{
			Clauses: []api.DepClause{
				{Type: "after", JobIDs: []string{"12"}, Minutes: 5},
				{Type: "after", JobIDs: []string{"13", "14"}},
			}}},
		"afterany": {"afterany:7", api.Dependency{
			Clauses: []api.DepClause{{Type: "afterany", JobIDs: []string{"7"}}}}},
		"afterok several ids": {"afterok:12:13", api.Dependency{
			Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"12", "13"}}}}},
		"afternotok": {"afternotok:9", api.Dependency{
			Clauses: []api.DepClause{{Type: "afternotok", JobIDs: []string{"9"}}}}},
		"aftercorr array element": {"aftercorr:12_3", api.Dependency{
			Clauses: []api.DepClause{{Type: "aftercorr", JobIDs: []string{"12_3"}}}}},
		"singleton": {"singleton", api.Dependency{
			Clauses: []api.DepClause{{Type: "singleton"}}}},
		"type in upper case": {"AfterOK:5", api.Dependency{
			Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"5"}}}}},
		"all of": {"afterok:12,afternotok:13,singleton", api.Dependency{
			Clauses: []api.DepClause{
				{Type: "afterok", JobIDs: []string{"12"}},
				{Type: "afternotok", JobIDs: []string{"13"}},
				{Type: "singleton"},
			}}},
		"any of": {"afterok:12?afterany:13_0", api.Dependency{Any: true,
			Clauses: []api.DepClause{
				{Type: "afterok", JobIDs: []string{"12"}},
				{Type: "afterany", JobIDs: []string{"13_0"}},
			}}},
		"legacy bare id": {"12", api.Dependency{
			Clauses: []api.DepClause{{Type: "afterany", JobIDs: []string{"12"}}}}},
		"legacy id list": {"12:13_1", api.Dependency{
			Clauses: []api.DepClause{{Type: "afterany", JobIDs: []string{"12", "13_1"}}}}},
		"mixed element and plain ids": {"afterok:5_1:6", api.Dependency{
			Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"5_1", "6"}}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDependency(tc.in)
			if err != nil {
				t.Fatalf("ParseDependency(%q): %v", tc.in, err)
			}
			tc.want.Raw = tc.in
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseDependency(%q)\n got %+v\nwant %+v", tc.in, *got, tc.want)
			}
		})
	}
}

func TestParseDependencyErrors(t *testing.T) {
	tests := map[string]struct {
		in, contains string
	}{
		"empty":               {"", "empty dependency"},
		"mixed separators":    {"afterok:1,afterok:2?afterok:3", "cannot be mixed"},
		"empty clause":        {"afterok:1,", "empty clause"},
		"leading separator":   {"?afterok:1", "empty clause"},
		"unknown type":        {"before:12", `unknown dependency type "before"`},
		"expand unsupported":  {"expand:12", `unknown dependency type "expand"`},
		"no ids":              {"afterok", "afterok needs at least one job id"},
		"empty id":            {"afterok:", `"" in "afterok:" is not a job id`},
		"empty id in list":    {"afterok:1::2", `"" in "afterok:1::2" is not a job id`},
		"letters":             {"afterok:abc", `"abc" in "afterok:abc" is not a job id`},
		"zero id":             {"afterok:0", `"0" in "afterok:0" is not a job id`},
		"negative id":         {"afterok:-3", `"-3"`},
		"bad element":         {"afterok:12_", `"12_"`},
		"element of element":  {"afterok:12_3_4", `"12_3_4"`},
		"wildcard element":    {"afterok:12_*", `"12_*"`},
		"singleton with ids":  {"singleton:12", "singleton takes no job ids"},
		"delay on afterok":    {"afterok:12+5", "only after takes a +minutes delay"},
		"bad delay":           {"after:12+soon", `delay "soon"`},
		"negative delay":      {"after:12+-1", `delay "-1"`},
		"empty delay":         {"after:12+", `delay ""`},
		"space":               {"afterok: 12", `" 12"`},
		"empty type":          {":12", `unknown dependency type ""`},
		"legacy with garbage": {"12+5", `only after takes a +minutes delay`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDependency(tc.in)
			if err == nil {
				t.Fatalf("ParseDependency(%q) succeeded", tc.in)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.contains) || !strings.HasPrefix(msg, "--dependency") || !strings.Contains(msg, "afterok") {
				t.Errorf("ParseDependency(%q) error %q should name --dependency, contain %q and list the forms", tc.in, msg, tc.contains)
			}
		})
	}
}
