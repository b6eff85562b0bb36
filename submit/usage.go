package submit

import (
	"strings"

	"corral/internal/getopt"
)

// cliParser parses sbatch options, supported and refused alike, for both the
// command line and directive lines. It stops at the first non-option
// argument: that is the script path, and what follows are its arguments.
var cliParser *getopt.Parser

// optionsByLong finds an option's definition by its long name.
var optionsByLong map[string]optionDef

func init() {
	defs := append(append([]optionDef(nil), supportedOptions...), otherDefs()...)
	optionsByLong = make(map[string]optionDef, len(defs))
	table := make([]getopt.Option, len(defs))
	for i, d := range defs {
		table[i] = d.Option
		optionsByLong[d.Long] = d
	}
	cliParser = getopt.MustNew(getopt.StopAtNonOption, table...)
}

const usageHeader = `Usage: corral submit [OPTIONS] SCRIPT [ARGS...]
       corral submit [OPTIONS] --wrap=COMMAND
       corral submit [OPTIONS] < SCRIPT

Submits a batch script. The script must start with a "#!" line. Options may
also be given on "#SBATCH" (or "#CORRAL") lines at the top of the script,
before its first command; options on the command line win.

Options:
`

const usageFooter = `
Long options may be shortened to any unambiguous prefix (--part for
--partition). Every other sbatch option is accepted with a warning where
it has no meaning under corral (--cpu-freq in a VM), or refused with the
reason where accepting it would mislead (--reservation); docs/cli.md lists
each one's fate.
`

// Usage returns the help text for -h/--help.
func Usage() string {
	var b strings.Builder
	b.WriteString(usageHeader)
	b.WriteString(cliParser.Usage())
	b.WriteString(usageFooter)
	return b.String()
}
