package submit

import (
	"fmt"
	"slices"
	"strings"
)

const exportForms = "use ALL, NONE, ALL,VAR=value,... or VAR,VAR=value,..., e.g. --export=ALL,OMP_NUM_THREADS=4"

// ExportEnv computes the environment a job gets from an --export value and
// the submitting environment env (KEY=VALUE entries; a later entry for a key
// wins, entries without "=" are ignored). The result is sorted KEY=VALUE
// lines, the form of JobSpec.Env:
//
//	"" or ALL           every variable of env
//	NONE                no variables
//	ALL,VAR=val,...     every variable of env, plus or overriding the listed ones
//	VAR1,VAR2=val,...   only VAR1 from env (when set) and VAR2=val
//
// ALL and NONE are matched in any case. A value cannot contain a comma,
// because commas separate the list, as in Slurm.
func ExportEnv(value string, env []string) ([]string, error) {
	bad := func(why string) error {
		return optionError("--export", value, nil, "%s (%s)", why, exportForms)
	}
	from := environMap(env)
	if value == "" {
		return sortedEnv(from), nil
	}
	all, none := false, false
	chosen := map[string]string{}
	for _, item := range strings.Split(value, ",") {
		switch {
		case strings.EqualFold(item, "ALL"):
			all = true
			continue
		case strings.EqualFold(item, "NONE"):
			none = true
			continue
		case item == "":
			return nil, bad("empty entry in the list")
		}
		key, val, hasVal := strings.Cut(item, "=")
		if !validEnvName(key) {
			return nil, bad(fmt.Sprintf("%q is not a variable name (letters, digits and '_', not starting with a digit)", key))
		}
		if hasVal {
			chosen[key] = val
		} else if v, ok := from[key]; ok {
			chosen[key] = v
		}
	}
	if all && none {
		return nil, bad("ALL and NONE cannot both be given")
	}
	if all {
		for k, v := range chosen {
			from[k] = v
		}
		return sortedEnv(from), nil
	}
	return sortedEnv(chosen), nil
}

// environMap turns KEY=VALUE entries into a map; later entries win.
func environMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// sortedEnv renders a map as sorted KEY=VALUE lines; nil when it is empty.
func sortedEnv(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// validEnvName reports whether s is a portable shell variable name.
func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
