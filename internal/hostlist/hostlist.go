package hostlist

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxDigits bounds the digits of one number in a bracket group, so every
// number and every count fits an int64.
const MaxDigits = 18

// ErrTooMany marks a list that stands for more names than the caller's
// limit.
var ErrTooMany = errors.New("too many names")

// ErrSyntax marks a list that is not host list syntax.
var ErrSyntax = errors.New("not a host list")

// span is one item of a bracket group: lo..hi, written width wide (0: as
// the number is, without padding).
type span struct {
	lo, hi int64
	width  int
}

// piece is a literal part of a name or a bracket group (group non-nil).
type piece struct {
	lit   string
	group []span
}

// pattern is one name of a list, with its bracket groups.
type pattern []piece

// parse reads s into its patterns; it builds no name.
func parse(s string) ([]pattern, error) {
	var out []pattern
	var cur pattern
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			cur = append(cur, piece{lit: lit.String()})
			lit.Reset()
		}
	}
	end := func() {
		flush()
		if len(cur) > 0 {
			out = append(out, cur)
			cur = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ',' || c == ' ' || c == '\t' || c == '\n':
			end()
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, syntaxErr(s, "'[' at byte %d is never closed", i)
			}
			g, err := parseGroup(s[i+1 : i+j])
			if err != nil {
				return nil, syntaxErr(s, "[%s]: %v", s[i+1:i+j], err)
			}
			flush()
			cur = append(cur, piece{group: g})
			i += j
		case c == ']':
			return nil, syntaxErr(s, "']' at byte %d closes no '['", i)
		case nameByte(c):
			lit.WriteByte(c)
		default:
			return nil, syntaxErr(s, "byte %d is %q; names hold letters, digits, '.', '-' and '_'", i, c)
		}
	}
	end()
	return out, nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// parseGroup reads the inside of a bracket group: "1-4,7,08-10".
func parseGroup(g string) ([]span, error) {
	if g == "" {
		return nil, errors.New("an empty group; list numbers or ranges, e.g. [1-4,7]")
	}
	var out []span
	for _, item := range strings.Split(g, ",") {
		loText, hiText, isRange := strings.Cut(item, "-")
		lo, err := number(loText)
		if err != nil {
			return nil, err
		}
		hi := lo
		if isRange {
			if hi, err = number(hiText); err != nil {
				return nil, err
			}
		}
		if hi < lo {
			return nil, fmt.Errorf("%s: the range ends below its start", item)
		}
		w := 0
		if len(loText) > 1 && loText[0] == '0' {
			w = len(loText)
		}
		out = append(out, span{lo: lo, hi: hi, width: w})
	}
	return out, nil
}

// number reads the digits of a bracket group's number.
func number(s string) (int64, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if len(s) > MaxDigits {
		return 0, fmt.Errorf("%s has more than %d digits", s, MaxDigits)
	}
	return strconv.ParseInt(s, 10, 64)
}

func syntaxErr(s, format string, args ...any) error {
	shown := s
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	return fmt.Errorf("%w: %q: %s", ErrSyntax, shown, fmt.Sprintf(format, args...))
}

// count returns how many names p stands for, or limit+1 once it is more
// than limit.
func (p pattern) count(limit int) int {
	n := 1
	for _, pc := range p {
		if pc.group == nil {
			continue
		}
		g := 0
		for _, sp := range pc.group {
			g = satAdd(g, satSize(sp), limit)
		}
		n = satMul(n, g, limit)
	}
	return n
}

func satSize(sp span) int {
	d := sp.hi - sp.lo + 1
	if d > int64(^uint(0)>>2) {
		return int(^uint(0) >> 2)
	}
	return int(d)
}

func satAdd(a, b, limit int) int {
	if a > limit-b {
		return limit + 1
	}
	return a + b
}

func satMul(a, b, limit int) int {
	if a == 0 || b == 0 {
		return 0
	}
	if a > limit/b {
		return limit + 1
	}
	return a * b
}

// Count returns how many names s stands for (repeats counted), without
// building them; a list of more than limit names is ErrTooMany.
func Count(s string, limit int) (int, error) {
	ps, err := parse(s)
	if err != nil {
		return 0, err
	}
	return countAll(s, ps, limit)
}

func countAll(s string, ps []pattern, limit int) (int, error) {
	total := 0
	for _, p := range ps {
		total = satAdd(total, p.count(limit), limit)
		if total > limit {
			shown := s
			if len(shown) > 64 {
				shown = shown[:64] + "…"
			}
			return 0, fmt.Errorf("%w: %q stands for more than %d names", ErrTooMany, shown, limit)
		}
	}
	return total, nil
}

// Expand returns the names s stands for, in the order it gives them
// (repeats kept, as Slurm keeps them). A list of more than limit names is
// refused with ErrTooMany before any is built; one that is not host list
// syntax with ErrSyntax.
func Expand(s string, limit int) ([]string, error) {
	ps, err := parse(s)
	if err != nil {
		return nil, err
	}
	n, err := countAll(s, ps, limit)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	var buf []byte
	for _, p := range ps {
		out = expandInto(out, buf[:0], p)
	}
	return out, nil
}

// expandInto appends the names of p, with prefix written before them.
func expandInto(out []string, prefix []byte, p pattern) []string {
	if len(p) == 0 {
		return append(out, string(prefix))
	}
	pc := p[0]
	if pc.group == nil {
		return expandInto(out, append(prefix, pc.lit...), p[1:])
	}
	for _, sp := range pc.group {
		for v := sp.lo; v <= sp.hi; v++ {
			out = expandInto(out, appendNumber(prefix, v, sp.width), p[1:])
		}
	}
	return out
}

// numLen is the number of digits of v ≥ 0.
func numLen(v int64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// appendNumber writes v at least width digits wide, zero-padded.
func appendNumber(b []byte, v int64, width int) []byte {
	var digits [20]byte
	d := strconv.AppendInt(digits[:0], v, 10)
	for i := len(d); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

// numbered is a name split into its prefix and trailing number.
type numbered struct {
	name, prefix, digits string
	value                int64
	hasNumber            bool
}

func split(name string) numbered {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	n := numbered{name: name, prefix: name[:i], digits: name[i:]}
	if n.digits != "" && len(n.digits) <= MaxDigits {
		n.value, _ = strconv.ParseInt(n.digits, 10, 64)
		n.hasNumber = true
	} else {
		n.prefix, n.digits = name, ""
	}
	return n
}

// width is the width a name's number fixes: its digits' length when it
// has a leading zero, else 0.
func (n numbered) width() int {
	if len(n.digits) > 1 && n.digits[0] == '0' {
		return len(n.digits)
	}
	return 0
}

// Compress writes names as a host list: sorted (by prefix, then number),
// without repeats, each run of consecutive numbers with the same prefix
// and padding as one range, the ranges of one prefix in one bracket group:
// "n1,n3,n2,gpu02,gpu01" is "gpu[01-02],n[1-3]". A name whose number stands
// alone is written as it is ("n7"). The names must be valid (letters,
// digits, '.', '-' and '_'), or Expand will not read the result back.
func Compress(names []string) string {
	ns := make([]numbered, 0, len(names))
	for _, name := range names {
		if name != "" {
			ns = append(ns, split(name))
		}
	}
	slices.SortFunc(ns, func(a, b numbered) int {
		if c := strings.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		if a.hasNumber != b.hasNumber {
			if !a.hasNumber {
				return -1
			}
			return 1
		}
		if a.value != b.value {
			if a.value < b.value {
				return -1
			}
			return 1
		}
		return len(a.digits) - len(b.digits)
	})
	ns = slices.CompactFunc(ns, func(a, b numbered) bool { return a.name == b.name })
	var out []string
	for i := 0; i < len(ns); {
		j := i + 1
		for j < len(ns) && ns[j].prefix == ns[i].prefix && ns[j].hasNumber == ns[i].hasNumber {
			j++
		}
		out = append(out, compressPrefix(ns[i:j]))
		i = j
	}
	return strings.Join(out, ",")
}

// compressPrefix writes names of one prefix, sorted, as one entry.
func compressPrefix(ns []numbered) string {
	if !ns[0].hasNumber {
		return ns[0].name
	}
	if len(ns) == 1 {
		return ns[0].name
	}
	var ranges []string
	for i := 0; i < len(ns); {
		w := ns[i].width()
		j := i + 1
		// ns[j] continues the run when its number follows and is spelled
		// the way the run's width spells it: digits without a leading zero
		// beyond that width.
		for j < len(ns) && ns[j].value == ns[j-1].value+1 && len(ns[j].digits) == max(w, numLen(ns[j].value)) {
			j++
		}
		r := ns[i].digits
		if j-1 > i {
			r += "-" + ns[j-1].digits
		}
		ranges = append(ranges, r)
		i = j
	}
	return ns[0].prefix + "[" + strings.Join(ranges, ",") + "]"
}
