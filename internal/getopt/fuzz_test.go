package getopt

import (
	"strings"
	"testing"
)

// FuzzParse checks the option grammar on arbitrary command lines: it never
// panics, and every option it returns is one of the table's.
func FuzzParse(f *testing.F) {
	table := []Option{
		{Short: 't', Long: "time", Arg: RequiredArgument},
		{Short: 'H', Long: "hold"},
		{Long: "nice", Arg: OptionalArgument},
		{Short: 'J', Long: "job-name", Arg: RequiredArgument},
		{Long: "partition", Arg: RequiredArgument},
	}
	for _, s := range []string{"-t 10 --hold x", "-Ht5 --nice=3 -- -x", "--tim=5 --part p", "-J", "--nice 5", "---", "-", "--=x"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, line string, permute bool) {
		mode := StopAtNonOption
		if permute {
			mode = Permute
		}
		p := MustNew(mode, table...)
		res, err := p.Parse(strings.Split(line, " "))
		if err != nil {
			return
		}
		for _, o := range res.Options {
			if _, ok := p.byLong[o.Option.Long]; !ok && o.Option.Short == 0 {
				t.Fatalf("Parse(%q) returned an option not in the table: %+v", line, o.Option)
			}
		}
	})
}
