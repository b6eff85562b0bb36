package getopt

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ArgKind says whether an option takes a value.
type ArgKind int

// Argument kinds, as in getopt_long's has_arg.
const (
	// NoArgument options are flags: --hold, -H.
	NoArgument ArgKind = iota
	// RequiredArgument options always take a value: --time=1:00, --time 1:00,
	// -t1:00 or -t 1:00.
	RequiredArgument
	// OptionalArgument options take a value only when it is attached:
	// --nice=5 or -x5; "--nice 5" leaves 5 as a separate argument.
	OptionalArgument
)

// Mode says what Parse does with the first argument that is not an option.
type Mode int

// Parsing modes.
const (
	// StopAtNonOption ends option parsing at the first non-option argument;
	// it and everything after it are positional. sbatch uses this so that
	// the arguments after a script path belong to the script.
	StopAtNonOption Mode = iota
	// Permute collects non-option arguments as positional and keeps parsing
	// options after them, as GNU tools and squeue do.
	Permute
)

// Option is one entry of an option table.
type Option struct {
	// Short is the one-rune short name (0 when the option has none).
	Short rune
	// Long is the long name without its leading "--".
	Long string
	// Arg says whether the option takes a value.
	Arg ArgKind
	// ArgName names the value in help text, e.g. "TIME"; "VALUE" when empty.
	ArgName string
	// Help is the one-line description shown by Usage.
	Help string
	// Hidden options parse normally but are left out of Usage, of the list
	// of valid options in errors and of "did you mean" hints. Callers use
	// them for options they recognise only to refuse with a better message.
	Hidden bool
}

// Name returns the option's canonical spelling: "--long", or "-x" for an
// option that has no long name.
func (o Option) Name() string {
	if o.Long != "" {
		return "--" + o.Long
	}
	return "-" + string(o.Short)
}

// Parsed is one option occurrence found by Parse.
type Parsed struct {
	// Option is the table entry that matched.
	Option Option
	// Spelled is the option as the user wrote it, without any value:
	// "--part", "--partition" or "-p".
	Spelled string
	// Value is the option's value; HasValue tells an empty value
	// ("--comment=") from none (an OptionalArgument option given bare).
	Value    string
	HasValue bool
}

// Result is what Parse found, in command-line order.
type Result struct {
	// Options holds every option occurrence in order; apply them in order
	// so that a later occurrence wins.
	Options []Parsed
	// Args holds the positional (non-option) arguments in order.
	Args []string
}

// Parser parses arguments against one option table.
type Parser struct {
	options []Option
	mode    Mode
	byLong  map[string]int
	byShort map[rune]int
}

// New checks the table and returns a parser for it. A table error (a
// duplicate name, an option with no name, a long name with "=" in it) is a
// programming mistake, reported with the offending entry.
func New(mode Mode, options ...Option) (*Parser, error) {
	p := &Parser{
		options: append([]Option(nil), options...),
		mode:    mode,
		byLong:  make(map[string]int, len(options)),
		byShort: make(map[rune]int, len(options)),
	}
	for i, o := range p.options {
		if err := checkEntry(o); err != nil {
			return nil, fmt.Errorf("getopt: option table entry %d: %w", i, err)
		}
		if o.Long != "" {
			if _, dup := p.byLong[o.Long]; dup {
				return nil, fmt.Errorf("getopt: option table entry %d: long name --%s is listed twice", i, o.Long)
			}
			p.byLong[o.Long] = i
		}
		if o.Short != 0 {
			if _, dup := p.byShort[o.Short]; dup {
				return nil, fmt.Errorf("getopt: option table entry %d: short name -%c is listed twice", i, o.Short)
			}
			p.byShort[o.Short] = i
		}
	}
	return p, nil
}

// MustNew is New for a table fixed at compile time; it panics on a table
// error, which a test of the caller's package will then catch.
func MustNew(mode Mode, options ...Option) *Parser {
	p, err := New(mode, options...)
	if err != nil {
		panic(err)
	}
	return p
}

func checkEntry(o Option) error {
	switch {
	case o.Short == 0 && o.Long == "":
		return fmt.Errorf("option has neither a short nor a long name")
	case o.Short == '-' || o.Short == '=' || o.Short == ' ' || o.Short == utf8.RuneError:
		return fmt.Errorf("short name %q cannot be used", o.Short)
	case strings.HasPrefix(o.Long, "-"):
		return fmt.Errorf("long name %q must be given without its leading dashes", o.Long)
	case strings.ContainsAny(o.Long, "= \t"):
		return fmt.Errorf("long name %q must not contain '=' or spaces", o.Long)
	case o.Arg < NoArgument || o.Arg > OptionalArgument:
		return fmt.Errorf("option %s has an unknown argument kind %d", o.Name(), o.Arg)
	}
	return nil
}

// Options returns a copy of the parser's table.
func (p *Parser) Options() []Option {
	return append([]Option(nil), p.options...)
}

// Lookup returns the table entry with the given long name (without dashes)
// or short name ("x" or "-x"), matching exactly.
func (p *Parser) Lookup(name string) (Option, bool) {
	name = strings.TrimLeft(name, "-")
	if i, ok := p.byLong[name]; ok {
		return p.options[i], true
	}
	if r, size := utf8.DecodeRuneInString(name); size == len(name) && size > 0 {
		if i, ok := p.byShort[r]; ok {
			return p.options[i], true
		}
	}
	return Option{}, false
}

// Parse parses args (without the program name). Nothing is printed; the
// first malformed option stops parsing with an *Error.
func (p *Parser) Parse(args []string) (*Result, error) {
	res := &Result{}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			res.Args = append(res.Args, args[i+1:]...)
			return res, nil
		case strings.HasPrefix(arg, "--"):
			used, err := p.parseLong(res, arg, args[i+1:])
			if err != nil {
				return nil, err
			}
			i += used
		case len(arg) > 1 && arg[0] == '-':
			used, err := p.parseShorts(res, arg, args[i+1:])
			if err != nil {
				return nil, err
			}
			i += used
		case p.mode == StopAtNonOption:
			res.Args = append(res.Args, args[i:]...)
			return res, nil
		default:
			res.Args = append(res.Args, arg)
		}
	}
	return res, nil
}

// parseLong handles one "--name[=value]" argument and returns how many of
// the following arguments it consumed as its value (0 or 1).
func (p *Parser) parseLong(res *Result, arg string, rest []string) (int, error) {
	name, value, hasValue := strings.Cut(arg[2:], "=")
	o, err := p.matchLong(name, arg)
	if err != nil {
		return 0, err
	}
	spelled := "--" + name
	switch o.Arg {
	case NoArgument:
		if hasValue {
			return 0, &Error{Kind: ErrUnexpectedValue, Option: spelled,
				Message: fmt.Sprintf("option %s takes no value (got %q; write %s alone)", o.Name(), arg, o.Name())}
		}
	case RequiredArgument:
		if !hasValue {
			if len(rest) == 0 {
				return 0, missingValue(o, spelled)
			}
			res.Options = append(res.Options, Parsed{Option: o, Spelled: spelled, Value: rest[0], HasValue: true})
			return 1, nil
		}
	}
	res.Options = append(res.Options, Parsed{Option: o, Spelled: spelled, Value: value, HasValue: hasValue})
	return 0, nil
}

// matchLong finds the option a long name refers to: an exact match, or the
// only option whose long name starts with it.
func (p *Parser) matchLong(name, arg string) (Option, error) {
	if name == "" {
		return Option{}, p.unknownLong(name, arg)
	}
	if i, ok := p.byLong[name]; ok {
		return p.options[i], nil
	}
	var candidates []int
	for i, o := range p.options {
		if o.Long != "" && strings.HasPrefix(o.Long, name) {
			candidates = append(candidates, i)
		}
	}
	switch len(candidates) {
	case 0:
		return Option{}, p.unknownLong(name, arg)
	case 1:
		return p.options[candidates[0]], nil
	}
	names := make([]string, len(candidates))
	for j, i := range candidates {
		names[j] = p.options[i].Name()
	}
	return Option{}, &Error{Kind: ErrAmbiguousOption, Option: "--" + name, Candidates: names,
		Message: fmt.Sprintf("option \"--%s\" is ambiguous (it could be %s; type more of the name)", name, strings.Join(names, ", "))}
}

// parseShorts handles one "-abc" cluster and returns how many following
// arguments it consumed as a value (0 or 1).
func (p *Parser) parseShorts(res *Result, arg string, rest []string) (int, error) {
	for j := 1; j < len(arg); {
		r, size := utf8.DecodeRuneInString(arg[j:])
		j += size
		spelled := "-" + string(r)
		i, ok := p.byShort[r]
		if !ok {
			return 0, p.unknownShort(spelled, arg)
		}
		o := p.options[i]
		attached := arg[j:]
		switch o.Arg {
		case NoArgument:
			res.Options = append(res.Options, Parsed{Option: o, Spelled: spelled})
			continue
		case OptionalArgument:
			res.Options = append(res.Options, Parsed{Option: o, Spelled: spelled, Value: attached, HasValue: attached != ""})
			return 0, nil
		}
		if attached != "" {
			res.Options = append(res.Options, Parsed{Option: o, Spelled: spelled, Value: attached, HasValue: true})
			return 0, nil
		}
		if len(rest) == 0 {
			return 0, missingValue(o, spelled)
		}
		res.Options = append(res.Options, Parsed{Option: o, Spelled: spelled, Value: rest[0], HasValue: true})
		return 1, nil
	}
	return 0, nil
}

func missingValue(o Option, spelled string) error {
	example := o.Name() + "=" + argName(o)
	if o.Long == "" {
		example = o.Name() + " " + argName(o)
	}
	return &Error{Kind: ErrMissingValue, Option: spelled,
		Message: fmt.Sprintf("option %q requires a value (e.g. %s)", spelled, example)}
}

func argName(o Option) string {
	if o.ArgName != "" {
		return o.ArgName
	}
	return "VALUE"
}
