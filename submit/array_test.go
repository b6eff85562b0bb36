package submit

import (
	"reflect"
	"strings"
	"testing"

	"corral/api"
)

func TestParseArray(t *testing.T) {
	tests := map[string]struct {
		in    string
		want  api.ArraySpec
		count int
	}{
		"range":        {"0-99", api.ArraySpec{Ranges: []api.ArrayRange{{First: 0, Last: 99, Step: 1}}}, 100},
		"single index": {"7", api.ArraySpec{Ranges: []api.ArrayRange{{First: 7, Last: 7, Step: 1}}}, 1},
		"list": {"1,3,5-7", api.ArraySpec{Ranges: []api.ArrayRange{
			{First: 1, Last: 1, Step: 1}, {First: 3, Last: 3, Step: 1}, {First: 5, Last: 7, Step: 1}}}, 5},
		"step":              {"0-15:4", api.ArraySpec{Ranges: []api.ArrayRange{{First: 0, Last: 15, Step: 4}}}, 4},
		"step past the end": {"1-10:4", api.ArraySpec{Ranges: []api.ArrayRange{{First: 1, Last: 10, Step: 4}}}, 3},
		"throttle": {"0-15:4%2", api.ArraySpec{Throttle: 2,
			Ranges: []api.ArrayRange{{First: 0, Last: 15, Step: 4}}}, 4},
		"throttle on a list": {"1,2%1", api.ArraySpec{Throttle: 1,
			Ranges: []api.ArrayRange{{First: 1, Last: 1, Step: 1}, {First: 2, Last: 2, Step: 1}}}, 2},
		"zero throttle means no limit": {"0-3%0", api.ArraySpec{
			Ranges: []api.ArrayRange{{First: 0, Last: 3, Step: 1}}}, 4},
		"one-element range": {"5-5", api.ArraySpec{Ranges: []api.ArrayRange{{First: 5, Last: 5, Step: 1}}}, 1},
		"largest index": {"1000000", api.ArraySpec{
			Ranges: []api.ArrayRange{{First: MaxArrayIndex, Last: MaxArrayIndex, Step: 1}}}, 1},
		"duplicates counted": {"1-3,2", api.ArraySpec{Ranges: []api.ArrayRange{
			{First: 1, Last: 3, Step: 1}, {First: 2, Last: 2, Step: 1}}}, 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseArray(tc.in)
			if err != nil {
				t.Fatalf("ParseArray(%q): %v", tc.in, err)
			}
			tc.want.Raw = tc.in
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseArray(%q)\n got %+v\nwant %+v", tc.in, *got, tc.want)
			}
			if n := got.Count(); n != tc.count {
				t.Errorf("ParseArray(%q).Count() = %d, want %d", tc.in, n, tc.count)
			}
		})
	}
}

func TestParseArrayErrors(t *testing.T) {
	tests := map[string]struct {
		in, contains string
	}{
		"empty":              {"", "empty array expression"},
		"throttle only":      {"%4", "no indices before %"},
		"bad throttle":       {"0-9%x", `task limit "x"`},
		"empty throttle":     {"0-9%", `task limit ""`},
		"negative throttle":  {"0-9%-1", `task limit "-1"`},
		"double throttle":    {"0-9%2%3", `task limit "2%3"`},
		"empty entry":        {"1,,2", "empty entry"},
		"trailing comma":     {"1,", "empty entry"},
		"last below first":   {"9-3", "last index 3 is below first index 9"},
		"zero step":          {"0-9:0", "step must be at least 1"},
		"negative step":      {"0-9:-2", "step must be at least 1"},
		"bad step":           {"0-9:x", `step "x"`},
		"step without range": {"5:2", "a :STEP needs a FIRST-LAST range"},
		"index too large":    {"0-1000001", "index 1000001 is above the largest allowed, 1000000"},
		"single too large":   {"2000000", "above the largest allowed"},
		"overflow":           {"99999999999999999999999", "above the largest allowed"},
		"negative index":     {"-1", `index ""`},
		"letters":            {"a-b", `index "a"`},
		"open range":         {"3-", `index ""`},
		"space":              {"1, 2", `index " 2"`},
		"plus sign":          {"+1", `index "+1"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseArray(tc.in)
			if err == nil {
				t.Fatalf("ParseArray(%q) succeeded", tc.in)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.contains) || !strings.HasPrefix(msg, "--array") || !strings.Contains(msg, "FIRST-LAST") {
				t.Errorf("ParseArray(%q) error %q should name --array, contain %q and show the form", tc.in, msg, tc.contains)
			}
		})
	}
}
