package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// License is a count of a cluster-wide license (Slurm's local licenses):
// the scheduler configuration's Licenses gives each name's total, a job's
// request (sbatch -L) how many it holds while it runs.
type License struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// LicenseUse is one of the cluster's licenses as scontrol show lic shows
// it: its total, and how many running jobs hold.
type LicenseUse struct {
	Name  string `json:"name"`
	Total int    `json:"total"`
	Used  int    `json:"used"`
}

// MaxLicenseCount bounds one license's total and one request of it.
const MaxLicenseCount = 1_000_000

// ParseLicenses reads Slurm's license list, "NAME[:COUNT][,NAME[:COUNT]]..."
// (a count of 1 when none is given; "NAME*COUNT", slurm.conf's older form,
// is read too), sorted by name, each name once. Slurm's "|" (any one of)
// is refused: the job would hold a license it did not choose.
func ParseLicenses(s string) ([]License, error) {
	if strings.Contains(s, "|") {
		return nil, fmt.Errorf("%q: corral does not take \"|\" (any one of several licenses); name the licenses the job needs, e.g. matlab:2,fluent", s)
	}
	var out []License
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			return nil, fmt.Errorf("%q: an empty license name; write NAME[:COUNT],..., e.g. matlab:2,fluent", s)
		}
		name, count, has := strings.Cut(item, ":")
		if !has {
			name, count, has = strings.Cut(item, "*")
		}
		n := 1
		if has {
			var err error
			if n, err = strconv.Atoi(count); err != nil || n < 1 || n > MaxLicenseCount {
				return nil, fmt.Errorf("license %s: count %q must be a whole number from 1 to %d", name, count, MaxLicenseCount)
			}
		}
		if !licenseName(name) {
			return nil, fmt.Errorf("license %q: a name holds letters, digits, '_', '-' and '.' only (at most 64)", name)
		}
		if slices.ContainsFunc(out, func(l License) bool { return l.Name == name }) {
			return nil, fmt.Errorf("license %s is named twice in %q", name, s)
		}
		out = append(out, License{Name: name, Count: n})
	}
	slices.SortFunc(out, func(a, b License) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// licenseName reports whether s is a license name.
func licenseName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// FormatLicenses writes licenses as ParseLicenses reads them.
func FormatLicenses(ls []License) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Name + ":" + strconv.Itoa(l.Count)
	}
	return strings.Join(parts, ",")
}

// CheckLicenses says why a request's licenses are not well formed, or nil:
// the rules of ParseLicenses, for a request that did not come through it.
func CheckLicenses(ls []License) error {
	for i, l := range ls {
		switch {
		case !licenseName(l.Name):
			return fmt.Errorf("license %q: a name holds letters, digits, '_', '-' and '.' only (at most 64)", l.Name)
		case l.Count < 1 || l.Count > MaxLicenseCount:
			return fmt.Errorf("license %s: count %d must be from 1 to %d", l.Name, l.Count, MaxLicenseCount)
		case i > 0 && ls[i-1].Name >= l.Name:
			return fmt.Errorf("licenses must be sorted by name, each once (%s after %s)", l.Name, ls[i-1].Name)
		}
	}
	return nil
}
