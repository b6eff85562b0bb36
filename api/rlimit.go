package api

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Rlimit is one resource limit a job's processes get (sbatch --propagate):
// a soft limit by Slurm's name (RlimitNames), RlimitUnlimited for none.
type Rlimit struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// RlimitUnlimited is RLIM_INFINITY.
const RlimitUnlimited uint64 = math.MaxUint64

// RlimitNames are the limits --propagate knows, in Slurm's words and
// order.
var RlimitNames = []string{"AS", "CORE", "CPU", "DATA", "FSIZE", "MEMLOCK", "NOFILE", "NPROC", "RSS", "STACK"}

// ParsePropagate reads sbatch's --propagate list: ALL (the default when no
// value is given), NONE, or limits by name (an RLIMIT_ prefix is allowed),
// comma-separated. It returns the names, sorted.
func ParsePropagate(s string) ([]string, error) {
	if s == "" || strings.EqualFold(s, "ALL") {
		return slices.Clone(RlimitNames), nil
	}
	if strings.EqualFold(s, "NONE") {
		return nil, nil
	}
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(item)), "RLIMIT_")
		if !slices.Contains(RlimitNames, name) {
			return nil, fmt.Errorf("unknown resource limit %q (use ALL, NONE or any of %s)", strings.TrimSpace(item), strings.Join(RlimitNames, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// CheckRlimits says why a job's limits are not a list the nodes can apply
// (known names, each once, sorted), or nil.
func CheckRlimits(ls []Rlimit) error {
	for i, l := range ls {
		switch {
		case !slices.Contains(RlimitNames, l.Name):
			return fmt.Errorf("unknown resource limit %q (known: %s)", l.Name, strings.Join(RlimitNames, ", "))
		case i > 0 && ls[i-1].Name >= l.Name:
			return fmt.Errorf("resource limit %s is out of order or given twice (list each once, sorted by name)", l.Name)
		}
	}
	return nil
}
