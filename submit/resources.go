package submit

import (
	"fmt"
	"strconv"
	"strings"

	"corral/api"
)

// ParseMemory parses a Slurm memory size into MiB: a whole number with an
// optional unit K, M (the default), G or T, in either case ("4096", "512K",
// "4G", "1T"). Kilobytes round up to whole MiB, so "1K" is 1 MiB. Errors
// name --mem; Parse renames them for --mem-per-cpu.
func ParseMemory(s string) (int64, error) {
	digits := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := s[len(digits):]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, optionError("--mem", s, strconv.ErrSyntax,
			"%q is not a whole number of megabytes (use e.g. 4096, 512K, 4G or 1T)", digits)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > MaxMemoryMiB*1024 {
		return 0, optionError("--mem", s, strconv.ErrRange, "size is too large (the most is 1024P)")
	}
	var mib int64
	switch strings.ToUpper(unit) {
	case "K":
		mib = (n + 1023) / 1024
	case "", "M":
		mib = n
	case "G":
		mib = n * 1024
	case "T":
		mib = n * 1024 * 1024
	default:
		return 0, optionError("--mem", s, nil, "unknown unit %q (use K, M, G or T)", unit)
	}
	if mib > MaxMemoryMiB {
		return 0, optionError("--mem", s, strconv.ErrRange, "size is too large (the most is 1024P)")
	}
	return mib, nil
}

// ParseGres parses a --gres list: comma-separated "name[[:type]:count]"
// entries such as "gpu", "gpu:2", "gpu:a100:2" or "gpu:a100" (count 1).
// "none" asks for no generic resources and gives an empty list. The same
// name and type may not appear twice.
func ParseGres(s string) ([]api.Gres, error) {
	bad := func(why string) error {
		return optionError("--gres", s, nil, "%s (use NAME[:TYPE][:COUNT], comma-separated, e.g. --gres=gpu:a100:2)", why)
	}
	if s == "" {
		return nil, bad("empty resource list")
	}
	if strings.EqualFold(s, "none") {
		return nil, nil
	}
	var out []api.Gres
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		g, why := parseGresItem(item)
		if why != "" {
			return nil, bad(why)
		}
		key := g.Name + ":" + g.Type
		if seen[key] {
			return nil, bad(fmt.Sprintf("%q is listed twice; give one entry with the total count", strings.TrimSuffix(key, ":")))
		}
		seen[key] = true
		out = append(out, g)
	}
	return out, nil
}

func parseGresItem(item string) (api.Gres, string) {
	if item == "" {
		return api.Gres{}, "empty entry"
	}
	parts := strings.Split(item, ":")
	if len(parts) > 3 {
		return api.Gres{}, fmt.Sprintf("%q has too many fields", item)
	}
	g := api.Gres{Name: parts[0], Count: 1}
	if !gresWord(g.Name) {
		return api.Gres{}, fmt.Sprintf("name %q in %q must be letters, digits, '_', '-' or '.', starting with a letter or digit", g.Name, item)
	}
	last := parts[len(parts)-1]
	countGiven := len(parts) > 1 && last != "" && strings.TrimLeft(last, "0123456789") == ""
	if len(parts) == 3 && !countGiven {
		return api.Gres{}, fmt.Sprintf("count %q in %q is not a whole number", last, item)
	}
	if len(parts) == 3 || len(parts) == 2 && !countGiven {
		g.Type = parts[1]
		if !gresWord(g.Type) {
			return api.Gres{}, fmt.Sprintf("type %q in %q must be letters, digits, '_', '-' or '.', starting with a letter or digit", g.Type, item)
		}
	}
	if countGiven {
		n, err := strconv.Atoi(last)
		if err != nil || n < 1 || n > MaxGresCount {
			return api.Gres{}, fmt.Sprintf("count %q in %q must be between 1 and %d", last, item, MaxGresCount)
		}
		g.Count = n
	}
	return g, ""
}

// gresWord reports whether s is a non-empty name made of the characters
// Slurm allows in gres names and types, starting with a letter or digit.
func gresWord(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '.' || s[0] == '_' {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}
