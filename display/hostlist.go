package display

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file converts between node names and Slurm's hostlist notation,
// "n[1-3,5]" for n1 n2 n3 n5. A name's numeric suffix keeps its
// zero-padding: node01..node04 is node[01-04], and a range's width is that of
// its first number, as in Slurm (n[9-10] is n9 n10, n[09-10] is n09 n10).

// maxExpand bounds what ExpandHostlist produces, so that "n[1-999999999]"
// is refused rather than exhausting memory.
const maxExpand = 1 << 20

// maxDigits is the longest numeric suffix treated as a number; longer ones
// stay literal text so that they cannot overflow.
const maxDigits = 18

// host is a name split into prefix and numeric suffix.
type host struct {
	name   string
	prefix string
	digits string // "" when the name has no numeric suffix
	num    uint64
}

func splitHost(name string) host {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	h := host{name: name, prefix: name[:i]}
	if d := name[i:]; d != "" && len(d) <= maxDigits {
		h.digits = d
		h.num, _ = strconv.ParseUint(d, 10, 64)
	} else {
		h.prefix = name
	}
	return h
}

func compareHosts(a, b host) int {
	if c := strings.Compare(a.prefix, b.prefix); c != 0 {
		return c
	}
	if (a.digits == "") != (b.digits == "") {
		if a.digits == "" {
			return -1
		}
		return 1
	}
	if a.num != b.num {
		if a.num < b.num {
			return -1
		}
		return 1
	}
	return len(a.digits) - len(b.digits)
}

// hostRange is lo..hi printed with width digits (zero padded).
type hostRange struct {
	lo, hi uint64
	width  int
}

func numLen(n uint64) int {
	l := 1
	for n >= 10 {
		n /= 10
		l++
	}
	return l
}

// extends reports whether h continues r: the next number, spelled the way
// r's width would spell it.
func (r hostRange) extends(h host) bool {
	return h.num == r.hi+1 && len(h.digits) == max(r.width, numLen(h.num))
}

func appendNum(dst []byte, n uint64, width int) []byte {
	for i := numLen(n); i < width; i++ {
		dst = append(dst, '0')
	}
	return strconv.AppendUint(dst, n, 10)
}

// CompressHostlist returns names in Slurm's hostlist notation, sorted by
// prefix and number and without duplicates, as sinfo prints node lists:
// ["n3","n1","n2","n5"] is "n[1-3,5]". It returns "" for no names.
func CompressHostlist(names []string) string {
	hosts := make([]host, 0, len(names))
	for _, n := range names {
		if n != "" {
			hosts = append(hosts, splitHost(n))
		}
	}
	slices.SortFunc(hosts, compareHosts)
	hosts = slices.CompactFunc(hosts, func(a, b host) bool { return a.name == b.name })
	var out []byte
	for i := 0; i < len(hosts); {
		if len(out) > 0 {
			out = append(out, ',')
		}
		if hosts[i].digits == "" {
			out = append(out, hosts[i].name...)
			i++
			continue
		}
		j := i + 1
		for j < len(hosts) && hosts[j].digits != "" && hosts[j].prefix == hosts[i].prefix {
			j++
		}
		out = appendHostGroup(out, hosts[i:j])
		i = j
	}
	return string(out)
}

// appendHostGroup renders hosts that share a prefix: "n5" for one, else
// "n[1-3,5]".
func appendHostGroup(dst []byte, hosts []host) []byte {
	dst = append(dst, hosts[0].prefix...)
	if len(hosts) == 1 {
		return append(dst, hosts[0].digits...)
	}
	dst = append(dst, '[')
	r := hostRange{lo: hosts[0].num, hi: hosts[0].num, width: len(hosts[0].digits)}
	for _, h := range hosts[1:] {
		if r.extends(h) {
			r.hi = h.num
			continue
		}
		dst = appendRange(dst, r)
		dst = append(dst, ',')
		r = hostRange{lo: h.num, hi: h.num, width: len(h.digits)}
	}
	dst = appendRange(dst, r)
	return append(dst, ']')
}

func appendRange(dst []byte, r hostRange) []byte {
	dst = appendNum(dst, r.lo, r.width)
	if r.hi != r.lo {
		dst = append(dst, '-')
		dst = appendNum(dst, r.hi, r.width)
	}
	return dst
}

// ExpandHostlist expands Slurm hostlist notation into names, in the order
// written: "n[1-3,5],login" is n1 n2 n3 n5 login. Several bracket groups
// in one name multiply out ("r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2). Commas
// and spaces separate names outside brackets. An empty string expands to
// nothing.
func ExpandHostlist(s string) ([]string, error) {
	items, err := splitHostlist(s)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range items {
		names, err := expandItem(item, maxExpand-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		out = append(out, names...)
		if len(out) > maxExpand {
			return nil, fmt.Errorf("hostlist %q expands to more than %d names", s, maxExpand)
		}
	}
	return out, nil
}

// splitHostlist splits at commas and spaces outside brackets.
func splitHostlist(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				if depth++; depth > 1 {
					return nil, fmt.Errorf("hostlist %q: nested '[' at offset %d", s, i)
				}
				continue
			case ']':
				if depth--; depth < 0 {
					return nil, fmt.Errorf("hostlist %q: ']' without '[' at offset %d", s, i)
				}
				continue
			case ',', ' ', '\t', '\n':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		} else if depth > 0 {
			return nil, fmt.Errorf("hostlist %q: '[' is never closed", s)
		}
		if i > start {
			items = append(items, s[start:i])
		}
		start = i + 1
	}
	return items, nil
}

// expandItem expands one name with any number of bracket groups.
func expandItem(item string, limit int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		return []string{item}, nil
	}
	closing := open + strings.IndexByte(item[open:], ']')
	nums, err := expandBracket(item[open+1:closing], limit)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", item, err)
	}
	rest, err := expandItem(item[closing+1:], limit)
	if err != nil {
		return nil, err
	}
	if len(nums)*len(rest) > limit {
		return nil, fmt.Errorf("%q expands to more than %d names", item, maxExpand)
	}
	out := make([]string, 0, len(nums)*len(rest))
	for _, n := range nums {
		for _, r := range rest {
			out = append(out, item[:open]+n+r)
		}
	}
	return out, nil
}

// expandBracket expands "1-3,05" into its numbers, each range padded to the
// width of its first number.
func expandBracket(body string, limit int) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("empty brackets")
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		loS, hiS, isRange := strings.Cut(part, "-")
		if !isRange {
			hiS = loS
		}
		lo, err1 := parseDigits(loS)
		hi, err2 := parseDigits(hiS)
		if err := cmpErr(err1, err2); err != nil {
			return nil, fmt.Errorf("range %q: %w", part, err)
		}
		if hi < lo {
			return nil, fmt.Errorf("range %q ends before it starts", part)
		}
		if remaining := limit - len(out); remaining <= 0 || hi-lo >= uint64(remaining) {
			return nil, fmt.Errorf("range %q expands to more than %d names", part, maxExpand)
		}
		for n := lo; n <= hi; n++ {
			out = append(out, string(appendNum(nil, n, len(loS))))
		}
	}
	return out, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func parseDigits(s string) (uint64, error) {
	if s == "" || len(s) > maxDigits || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number of at most %d digits", s, maxDigits)
	}
	return strconv.ParseUint(s, 10, 64)
}
