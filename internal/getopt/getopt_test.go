package getopt

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// table is a cut-down sbatch table: flags, required and optional values,
// options with only one kind of name, a hidden option and two long names
// where one is a prefix of the other (mem, mem-per-cpu).
var table = []Option{
	{Short: 'J', Long: "job-name", Arg: RequiredArgument, ArgName: "NAME", Help: "name of the job"},
	{Short: 'p', Long: "partition", Arg: RequiredArgument, ArgName: "PARTITION", Help: "partition"},
	{Long: "parsable", Help: "print only the job id"},
	{Short: 'N', Long: "nodes", Arg: RequiredArgument, Help: "node count"},
	{Short: 'l', Long: "long", Help: "long listing"},
	{Short: 'H', Long: "hold", Help: "hold the job"},
	{Long: "mem", Arg: RequiredArgument, ArgName: "SIZE", Help: "memory per node"},
	{Long: "mem-per-cpu", Arg: RequiredArgument, ArgName: "SIZE", Help: "memory per CPU"},
	{Long: "nice", Arg: OptionalArgument, ArgName: "N", Help: "lower priority"},
	{Short: 'x', Arg: OptionalArgument, ArgName: "X", Help: "short-only optional"},
	{Short: 'v', Help: "short-only flag"},
	{Long: "no-requeue", Help: "never requeue"},
	{Long: "no-kill", Hidden: true},
}

func opt(long string) Option {
	for _, o := range table {
		if o.Long == long {
			return o
		}
	}
	panic("no option " + long)
}

func short(r rune) Option {
	for _, o := range table {
		if o.Short == r {
			return o
		}
	}
	panic("no option " + string(r))
}

// parseCase is a command line that parses, and what Parse must return.
type parseCase struct {
	mode Mode
	args []string
	want Result
}

var parseCases = map[string]parseCase{
	"nothing": {
		args: nil,
		want: Result{},
	},
	"long with equals": {
		args: []string{"--partition=debug"},
		want: Result{Options: []Parsed{{Option: opt("partition"), Spelled: "--partition", Value: "debug", HasValue: true}}},
	},
	"long with separate value": {
		args: []string{"--partition", "debug"},
		want: Result{Options: []Parsed{{Option: opt("partition"), Spelled: "--partition", Value: "debug", HasValue: true}}},
	},
	"long value may start with a dash": {
		args: []string{"--job-name", "-weird"},
		want: Result{Options: []Parsed{{Option: opt("job-name"), Spelled: "--job-name", Value: "-weird", HasValue: true}}},
	},
	"long empty value after equals": {
		args: []string{"--job-name="},
		want: Result{Options: []Parsed{{Option: opt("job-name"), Spelled: "--job-name", Value: "", HasValue: true}}},
	},
	"value keeps later equals signs": {
		args: []string{"--job-name=a=b"},
		want: Result{Options: []Parsed{{Option: opt("job-name"), Spelled: "--job-name", Value: "a=b", HasValue: true}}},
	},
	"short with separate value": {
		args: []string{"-p", "debug"},
		want: Result{Options: []Parsed{{Option: short('p'), Spelled: "-p", Value: "debug", HasValue: true}}},
	},
	"short with attached value": {
		args: []string{"-pdebug"},
		want: Result{Options: []Parsed{{Option: short('p'), Spelled: "-p", Value: "debug", HasValue: true}}},
	},
	"short takes a negative number as its value": {
		args: []string{"-N", "-1"},
		want: Result{Options: []Parsed{{Option: short('N'), Spelled: "-N", Value: "-1", HasValue: true}}},
	},
	"combined short flags": {
		args: []string{"-lH"},
		want: Result{Options: []Parsed{
			{Option: short('l'), Spelled: "-l"},
			{Option: short('H'), Spelled: "-H"},
		}},
	},
	"flags then a value option in one cluster": {
		args: []string{"-lHp", "debug"},
		want: Result{Options: []Parsed{
			{Option: short('l'), Spelled: "-l"},
			{Option: short('H'), Spelled: "-H"},
			{Option: short('p'), Spelled: "-p", Value: "debug", HasValue: true},
		}},
	},
	"value option swallows the rest of the cluster": {
		args: []string{"-Nl"},
		want: Result{Options: []Parsed{{Option: short('N'), Spelled: "-N", Value: "l", HasValue: true}}},
	},
	"flag before value option in cluster": {
		args: []string{"-lN1"},
		want: Result{Options: []Parsed{
			{Option: short('l'), Spelled: "-l"},
			{Option: short('N'), Spelled: "-N", Value: "1", HasValue: true},
		}},
	},
	"optional long bare": {
		args: []string{"--nice"},
		want: Result{Options: []Parsed{{Option: opt("nice"), Spelled: "--nice"}}},
	},
	"optional long with value": {
		args: []string{"--nice=5"},
		want: Result{Options: []Parsed{{Option: opt("nice"), Spelled: "--nice", Value: "5", HasValue: true}}},
	},
	"optional long does not take the next argument": {
		mode: Permute,
		args: []string{"--nice", "5"},
		want: Result{Options: []Parsed{{Option: opt("nice"), Spelled: "--nice"}}, Args: []string{"5"}},
	},
	"optional short attached": {
		args: []string{"-x7"},
		want: Result{Options: []Parsed{{Option: short('x'), Spelled: "-x", Value: "7", HasValue: true}}},
	},
	"optional short bare does not take the next argument": {
		mode: Permute,
		args: []string{"-x", "7"},
		want: Result{Options: []Parsed{{Option: short('x'), Spelled: "-x"}}, Args: []string{"7"}},
	},
	"unique prefix": {
		args: []string{"--part=debug"},
		want: Result{Options: []Parsed{{Option: opt("partition"), Spelled: "--part", Value: "debug", HasValue: true}}},
	},
	"unique prefix with separate value": {
		args: []string{"--job", "x"},
		want: Result{Options: []Parsed{{Option: opt("job-name"), Spelled: "--job", Value: "x", HasValue: true}}},
	},
	"exact match beats longer names": {
		args: []string{"--mem=4G"},
		want: Result{Options: []Parsed{{Option: opt("mem"), Spelled: "--mem", Value: "4G", HasValue: true}}},
	},
	"prefix of the longer name": {
		args: []string{"--mem-p=1G"},
		want: Result{Options: []Parsed{{Option: opt("mem-per-cpu"), Spelled: "--mem-p", Value: "1G", HasValue: true}}},
	},
	"hidden options parse": {
		args: []string{"--no-kill"},
		want: Result{Options: []Parsed{{Option: opt("no-kill"), Spelled: "--no-kill"}}},
	},
	"double dash ends options": {
		args: []string{"-H", "--", "-p", "x"},
		want: Result{Options: []Parsed{{Option: short('H'), Spelled: "-H"}}, Args: []string{"-p", "x"}},
	},
	"double dash as a value is a value": {
		args: []string{"-J", "--", "-H"},
		want: Result{Options: []Parsed{
			{Option: short('J'), Spelled: "-J", Value: "--", HasValue: true},
			{Option: short('H'), Spelled: "-H"},
		}},
	},
	"single dash is positional": {
		mode: Permute,
		args: []string{"-", "-H"},
		want: Result{Options: []Parsed{{Option: short('H'), Spelled: "-H"}}, Args: []string{"-"}},
	},
	"stop mode: everything after the first positional is positional": {
		mode: StopAtNonOption,
		args: []string{"-H", "job.sh", "-p", "x", "--", "--hold"},
		want: Result{Options: []Parsed{{Option: short('H'), Spelled: "-H"}}, Args: []string{"job.sh", "-p", "x", "--", "--hold"}},
	},
	"stop mode: single dash stops too": {
		mode: StopAtNonOption,
		args: []string{"-", "-H"},
		want: Result{Args: []string{"-", "-H"}},
	},
	"permute mode: options after positionals": {
		mode: Permute,
		args: []string{"a", "-H", "b", "--partition", "p", "c"},
		want: Result{
			Options: []Parsed{
				{Option: short('H'), Spelled: "-H"},
				{Option: opt("partition"), Spelled: "--partition", Value: "p", HasValue: true},
			},
			Args: []string{"a", "b", "c"},
		},
	},
	"permute mode: double dash keeps the rest verbatim": {
		mode: Permute,
		args: []string{"a", "--", "-H"},
		want: Result{Args: []string{"a", "-H"}},
	},
	"order is kept and repeats are all reported": {
		args: []string{"-p", "a", "--partition=b", "-pc"},
		want: Result{Options: []Parsed{
			{Option: short('p'), Spelled: "-p", Value: "a", HasValue: true},
			{Option: opt("partition"), Spelled: "--partition", Value: "b", HasValue: true},
			{Option: short('p'), Spelled: "-p", Value: "c", HasValue: true},
		}},
	},
	"short-only flag": {
		args: []string{"-v"},
		want: Result{Options: []Parsed{{Option: short('v'), Spelled: "-v"}}},
	},
}

func TestParse(t *testing.T) {
	tests := parseCases
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := MustNew(tc.mode, table...)
			got, err := p.Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.args, *got, tc.want)
			}
		})
	}
}

// parseErrorCase is a command line Parse must refuse, and the error.
type parseErrorCase struct {
	args       []string
	kind       error
	option     string
	suggestion string
	contains   []string
	excludes   []string
}

var parseErrorCases = map[string]parseErrorCase{
	"unknown long lists valid options": {
		args:     []string{"--foo"},
		kind:     ErrUnknownOption,
		option:   "--foo",
		contains: []string{`unknown option "--foo"`, "valid options:", "--partition", "--mem-per-cpu", "-v"},
		excludes: []string{"no-kill", "did you mean"},
	},
	"unknown long with value names the option only": {
		args:     []string{"--foo=bar"},
		kind:     ErrUnknownOption,
		option:   "--foo",
		contains: []string{`"--foo"`},
		excludes: []string{"bar"},
	},
	"typo suggests the closest option": {
		args:       []string{"--partiton=debug"},
		kind:       ErrUnknownOption,
		option:     "--partiton",
		suggestion: "--partition",
		contains:   []string{`unknown option "--partiton"`, "did you mean --partition?"},
	},
	"transposition suggests": {
		args:       []string{"--hodl"},
		kind:       ErrUnknownOption,
		suggestion: "--hold",
		contains:   []string{"did you mean --hold?"},
	},
	"longer than any name suggests": {
		args:       []string{"--partitions"},
		kind:       ErrUnknownOption,
		suggestion: "--partition",
	},
	"hidden options are never suggested": {
		args:     []string{"--no-kll"},
		kind:     ErrUnknownOption,
		contains: []string{"valid options:"},
		excludes: []string{"no-kill"},
	},
	"upper case typo suggests": {
		args:       []string{"--HOLD"},
		kind:       ErrUnknownOption,
		suggestion: "--hold",
	},
	"empty long name": {
		args:     []string{"--=x"},
		kind:     ErrUnknownOption,
		contains: []string{`unknown option "--"`},
	},
	"ambiguous prefix lists candidates": {
		args:     []string{"--par=x"},
		kind:     ErrAmbiguousOption,
		option:   "--par",
		contains: []string{`"--par" is ambiguous`, "--partition", "--parsable"},
	},
	"ambiguous prefix includes hidden candidates": {
		args:     []string{"--no-"},
		kind:     ErrAmbiguousOption,
		contains: []string{"--no-requeue", "--no-kill"},
	},
	"unknown short": {
		args:     []string{"-z"},
		kind:     ErrUnknownOption,
		option:   "-z",
		contains: []string{`unknown option "-z"`, "-J", "-p", "long options start with --"},
	},
	"unknown short inside a cluster names the cluster": {
		args:     []string{"-lz"},
		kind:     ErrUnknownOption,
		option:   "-z",
		contains: []string{`unknown option "-z" in "-lz"`},
	},
	"missing long value": {
		args:     []string{"--partition"},
		kind:     ErrMissingValue,
		option:   "--partition",
		contains: []string{`"--partition" requires a value`, "--partition=PARTITION"},
	},
	"missing long value via prefix": {
		args:     []string{"--job"},
		kind:     ErrMissingValue,
		option:   "--job",
		contains: []string{"--job-name=NAME"},
	},
	"missing short value": {
		args:     []string{"-H", "-p"},
		kind:     ErrMissingValue,
		option:   "-p",
		contains: []string{`"-p" requires a value`},
	},
	"flag given a value": {
		args:     []string{"--hold=yes"},
		kind:     ErrUnexpectedValue,
		option:   "--hold",
		contains: []string{"--hold takes no value", `"--hold=yes"`},
	},
	"flag prefix given a value": {
		args:     []string{"--ho=1"},
		kind:     ErrUnexpectedValue,
		option:   "--ho",
		contains: []string{"--hold takes no value"},
	},
}

func TestParseErrors(t *testing.T) {
	tests := parseErrorCases
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := MustNew(Permute, table...)
			_, err := p.Parse(tc.args)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want %v", tc.args, tc.kind)
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %q is not %v", err, tc.kind)
			}
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error %T is not *Error", err)
			}
			if tc.option != "" && ge.Option != tc.option {
				t.Errorf("Option = %q, want %q", ge.Option, tc.option)
			}
			if ge.Suggestion != tc.suggestion {
				t.Errorf("Suggestion = %q, want %q", ge.Suggestion, tc.suggestion)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			for _, s := range tc.excludes {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q should not contain %q", err, s)
				}
			}
		})
	}
}

func TestNewRejectsBadTables(t *testing.T) {
	tests := map[string][]Option{
		"no name":             {{Help: "nameless"}},
		"duplicate long":      {{Long: "a"}, {Long: "a"}},
		"duplicate short":     {{Short: 'a'}, {Short: 'a', Long: "b"}},
		"dashes in long":      {{Long: "--a"}},
		"equals in long":      {{Long: "a=b"}},
		"dash as short":       {{Short: '-'}},
		"unknown arg kind":    {{Long: "a", Arg: ArgKind(7)}},
		"space in long name":  {{Long: "a b"}},
		"equals as short":     {{Short: '='}},
		"negative kind value": {{Long: "a", Arg: ArgKind(-1)}},
	}
	for name, opts := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(Permute, opts...); err == nil {
				t.Errorf("New accepted %+v", opts)
			}
		})
	}
}

func TestMustNewPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustNew did not panic on a duplicate name")
		}
	}()
	MustNew(Permute, Option{Long: "a"}, Option{Long: "a"})
}

func TestLookup(t *testing.T) {
	p := MustNew(Permute, table...)
	tests := map[string]struct {
		name string
		want string
		ok   bool
	}{
		"long":              {name: "partition", want: "--partition", ok: true},
		"long with dashes":  {name: "--partition", want: "--partition", ok: true},
		"short":             {name: "p", want: "--partition", ok: true},
		"short with dash":   {name: "-v", want: "-v", ok: true},
		"prefix is not one": {name: "part"},
		"unknown":           {name: "zzz"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o, ok := p.Lookup(tc.name)
			if ok != tc.ok || (ok && o.Name() != tc.want) {
				t.Errorf("Lookup(%q) = %s, %v; want %s, %v", tc.name, o.Name(), ok, tc.want, tc.ok)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	got := MustNew(Permute, table...).Usage()
	for _, want := range []string{
		"  -J, --job-name=NAME",
		"      --mem-per-cpu=SIZE",
		"      --nice[=N]",
		"  -x[X]",
		"  -v ",
		"name of the job\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Usage() lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "no-kill") {
		t.Errorf("Usage() shows a hidden option:\n%s", got)
	}
	// Help texts start in one column.
	col := -1
	for _, o := range table {
		if o.Hidden {
			continue
		}
		for _, line := range strings.Split(got, "\n") {
			if strings.HasPrefix(line, "  "+usageLeft(o)+" ") {
				i := strings.LastIndex(line, o.Help)
				if col == -1 {
					col = i
				} else if i != col {
					t.Errorf("help of %s starts in column %d, want %d", o.Name(), i, col)
				}
			}
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := map[string]struct {
		a, b string
		want int
	}{
		"equal":         {"hold", "hold", 0},
		"insertion":     {"partiton", "partition", 1},
		"transposition": {"hodl", "hold", 1},
		"substitution":  {"qos", "foo", 2},
		"empty":         {"", "abc", 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := editDistance(tc.a, tc.b); got != tc.want {
				t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
