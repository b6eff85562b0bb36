package getopt

import (
	"errors"
	"fmt"
	"strings"
)

// Kinds of parse error; *Error unwraps to one of them.
var (
	ErrUnknownOption   = errors.New("unknown option")
	ErrAmbiguousOption = errors.New("ambiguous option")
	ErrMissingValue    = errors.New("option requires a value")
	ErrUnexpectedValue = errors.New("option takes no value")
)

// Error is a parse error. Its message names the option as the user typed it
// and says what would be valid.
type Error struct {
	// Kind is one of ErrUnknownOption, ErrAmbiguousOption, ErrMissingValue
	// or ErrUnexpectedValue.
	Kind error
	// Option is the option as the user spelled it, e.g. "--partiton" or "-z".
	Option string
	// Suggestion is the closest valid option for an unknown long option
	// ("--partition"), or empty when none is close.
	Suggestion string
	// Candidates lists the options an ambiguous prefix could mean.
	Candidates []string
	// Message is the full text returned by Error.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the error's kind, so errors.Is(err, ErrUnknownOption) works.
func (e *Error) Unwrap() error { return e.Kind }

func (p *Parser) unknownLong(name, arg string) error {
	spelled := "--" + name
	if i := strings.IndexByte(arg, '='); i >= 0 {
		spelled = arg[:i]
	}
	e := &Error{Kind: ErrUnknownOption, Option: spelled}
	if s := p.suggest(name); s != "" {
		e.Suggestion = "--" + s
		e.Message = fmt.Sprintf("unknown option %q (did you mean --%s?)", spelled, s)
		return e
	}
	e.Message = fmt.Sprintf("unknown option %q (valid options: %s)", spelled, strings.Join(p.visibleNames(), ", "))
	return e
}

func (p *Parser) unknownShort(spelled, arg string) error {
	var shorts []string
	for _, o := range p.options {
		if o.Short != 0 && !o.Hidden {
			shorts = append(shorts, "-"+string(o.Short))
		}
	}
	in := ""
	if len(arg) > 2 {
		in = fmt.Sprintf(" in %q", arg)
	}
	return &Error{Kind: ErrUnknownOption, Option: spelled,
		Message: fmt.Sprintf("unknown option %q%s (valid short options: %s; long options start with --)",
			spelled, in, strings.Join(shorts, " "))}
}

// visibleNames lists the canonical spelling of every option that is not
// hidden, in table order.
func (p *Parser) visibleNames() []string {
	var names []string
	for _, o := range p.options {
		if !o.Hidden {
			names = append(names, o.Name())
		}
	}
	return names
}

// suggest returns the visible long name closest to name, or "" when none is
// close enough to be a plausible typo. "Close" allows about one edit per
// four letters (a transposition counts as one), so "--partiton" suggests
// --partition but "--foo" does not suggest --qos.
func (p *Parser) suggest(name string) string {
	limit := len(name) / 4
	if limit < 1 {
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, o := range p.options {
		if o.Hidden || o.Long == "" {
			continue
		}
		d := editDistance(strings.ToLower(name), o.Long)
		if d < bestDist || (d == bestDist && o.Long < best) {
			best, bestDist = o.Long, d
		}
	}
	if bestDist > limit {
		return ""
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b:
// insertions, deletions, substitutions and adjacent transpositions each cost
// one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
