// Package getopt parses command-line options the way GNU getopt_long does,
// for every corral subcommand and for the option text of #SBATCH lines.
//
// It owns the option grammar only: --long=value, --long value, -x value,
// -xvalue, clusters of short flags (-Nl), "--" as the end of options,
// unambiguous prefixes of long options (--part for --partition), and two
// ways of treating the first non-option argument (StopAtNonOption, as sbatch
// does for a script path and its arguments, or Permute, as squeue does). It
// never interprets a value, never prints, and never reads os.Args: callers
// get an ordered list of (option, value) pairs and apply them in order, so a
// later occurrence wins.
//
// Errors are *Error values that name the option as the user spelled it and
// say what would be valid; an unknown long option close to a known one gets
// a "did you mean --partition?" hint. errors.Is matches them against
// ErrUnknownOption, ErrAmbiguousOption, ErrMissingValue and
// ErrUnexpectedValue.
//
// The entry point is New (or MustNew for a static table) followed by
// Parser.Parse; Parser.Usage renders the table as help text.
package getopt
