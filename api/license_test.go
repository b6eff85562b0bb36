package api

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseLicenses reads Slurm's license lists and refuses what is not
// one, naming what is wrong.
func TestParseLicenses(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []License
		err  string
	}{
		"one":            {in: "matlab", want: []License{{"matlab", 1}}},
		"counts":         {in: "matlab:2,fluent:4", want: []License{{"fluent", 4}, {"matlab", 2}}},
		"slurm.conf's *": {in: "abaqus*10", want: []License{{"abaqus", 10}}},
		"any of":         {in: "matlab|fluent", err: `does not take "|"`},
		"empty item":     {in: "matlab,,fluent", err: "an empty license name"},
		"zero":           {in: "matlab:0", err: "must be a whole number from 1"},
		"twice":          {in: "matlab:1,matlab:2", err: "named twice"},
		"a bad name":     {in: "mat lab", err: "a name holds letters"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseLicenses(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseLicenses(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseLicenses(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// FuzzParseLicenses: any text either is refused or reads as licenses that
// CheckLicenses takes and that FormatLicenses writes back to the same.
func FuzzParseLicenses(f *testing.F) {
	for _, s := range []string{"matlab", "matlab:2,fluent:4", "a*3", "x|y", ",", "m:99999999999", "é:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ls, err := ParseLicenses(s)
		if err != nil {
			return
		}
		if err := CheckLicenses(ls); err != nil {
			t.Fatalf("ParseLicenses(%q) = %v, which CheckLicenses refuses: %v", s, ls, err)
		}
		back, err := ParseLicenses(FormatLicenses(ls))
		if err != nil || !reflect.DeepEqual(back, ls) {
			t.Fatalf("%q: %v written as %q reads back as %v, %v", s, ls, FormatLicenses(ls), back, err)
		}
	})
}
