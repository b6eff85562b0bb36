package submit

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestExportEnv(t *testing.T) {
	env := []string{"PATH=/usr/bin", "HOME=/home/alice", "LANG=C", "EMPTY=", "NOEQUALS", "=weird", "HOME=/home/bob", "A1=x", "A=y"}
	tests := map[string]struct {
		value string
		want  []string
	}{
		"default is everything": {"",
			[]string{"A1=x", "A=y", "EMPTY=", "HOME=/home/bob", "LANG=C", "PATH=/usr/bin"}},
		"ALL": {"ALL",
			[]string{"A1=x", "A=y", "EMPTY=", "HOME=/home/bob", "LANG=C", "PATH=/usr/bin"}},
		"all in lower case": {"all",
			[]string{"A1=x", "A=y", "EMPTY=", "HOME=/home/bob", "LANG=C", "PATH=/usr/bin"}},
		"NONE":            {"NONE", nil},
		"none lower case": {"none", nil},
		"ALL plus values": {"ALL,OMP_NUM_THREADS=4,LANG=en_US.UTF-8",
			[]string{"A1=x", "A=y", "EMPTY=", "HOME=/home/bob", "LANG=en_US.UTF-8", "OMP_NUM_THREADS=4", "PATH=/usr/bin"}},
		"ALL after the values": {"X=1,ALL",
			[]string{"A1=x", "A=y", "EMPTY=", "HOME=/home/bob", "LANG=C", "PATH=/usr/bin", "X=1"}},
		"only listed names": {"PATH,HOME",
			[]string{"HOME=/home/bob", "PATH=/usr/bin"}},
		"listed names and values": {"PATH,FOO=bar",
			[]string{"FOO=bar", "PATH=/usr/bin"}},
		"listed name not set is skipped": {"PATH,MISSING",
			[]string{"PATH=/usr/bin"}},
		"value overrides the environment": {"HOME=/tmp",
			[]string{"HOME=/tmp"}},
		"empty value": {"FOO=",
			[]string{"FOO="}},
		"value with equals": {"OPTS=a=b",
			[]string{"OPTS=a=b"}},
		"NONE with values": {"NONE,FOO=1",
			[]string{"FOO=1"}},
		"later listing wins": {"FOO=1,FOO=2",
			[]string{"FOO=2"}},
		"empty variable exported by name": {"EMPTY",
			[]string{"EMPTY="}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ExportEnv(tc.value, env)
			if err != nil {
				t.Fatalf("ExportEnv(%q): %v", tc.value, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ExportEnv(%q)\n got %q\nwant %q", tc.value, got, tc.want)
			}
			if !slices.IsSorted(got) {
				t.Errorf("ExportEnv(%q) = %q is not sorted", tc.value, got)
			}
		})
	}
}

func TestExportEnvErrors(t *testing.T) {
	tests := map[string]struct {
		value, contains string
	}{
		"ALL and NONE":     {"ALL,NONE", "ALL and NONE cannot both be given"},
		"empty entry":      {"ALL,,FOO=1", "empty entry"},
		"trailing comma":   {"FOO,", "empty entry"},
		"bad name":         {"ALL,1FOO=2", `"1FOO" is not a variable name`},
		"dash in name":     {"MY-VAR=1", `"MY-VAR" is not a variable name`},
		"empty name":       {"=value", `"" is not a variable name`},
		"space in name":    {"FOO BAR", `"FOO BAR" is not a variable name`},
		"comma in a value": {"ALL,X=a,b c", `"b c" is not a variable name`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ExportEnv(tc.value, nil)
			if err == nil {
				t.Fatalf("ExportEnv(%q) succeeded", tc.value)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.contains) || !strings.HasPrefix(msg, "--export=") {
				t.Errorf("ExportEnv(%q) error %q should name --export and contain %q", tc.value, msg, tc.contains)
			}
		})
	}
}
