package submit

import (
	"errors"
	"fmt"
	"strings"

	"corral/internal/getopt"
)

// directivePrefixes are the magic words that start an option line in a
// script: Slurm's, and corral's own for options Slurm does not have (the
// syntax is the same, and either may carry any option).
var directivePrefixes = []string{"#SBATCH", "#CORRAL"}

// directive is one #SBATCH or #CORRAL line and the options on it.
type directive struct {
	file    string
	line    int
	text    string
	options []getopt.Parsed
}

// locate adds the directive's file, line and text to an error found while
// applying it.
func (d directive) locate(err error) error {
	var e *Error
	if errors.As(err, &e) {
		located := *e
		located.File, located.Line, located.Directive = d.file, d.line, d.text
		return &located
	}
	located := grammarError(err)
	located.File, located.Line, located.Directive = d.file, d.line, d.text
	return located
}

// scanDirectives reads the option lines at the top of a script the way
// sbatch does: after the "#!" line, lines are read until the first one that
// is neither blank nor a comment (its first non-blank character is '#');
// of those, the ones that start, in column one, with "#SBATCH" or "#CORRAL"
// followed by a blank or by an option's '-' carry options. An indented "#SBATCH" is a comment, and
// directives after the first command are ignored, as in Slurm. On a
// directive line, quotes group words ("-J 'my job'"), and a word that
// starts with '#' begins a comment.
func scanDirectives(text, file string) ([]directive, error) {
	lines := strings.Split(text, "\n")
	var out []directive
	for i := 1; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		if !strings.HasPrefix(trimmed, "#") {
			break
		}
		rest, ok := cutDirectivePrefix(line)
		if !ok {
			continue
		}
		d := directive{file: file, line: i + 1, text: strings.TrimRight(line, " \t")}
		words, err := splitDirective(rest)
		if err != nil {
			return nil, d.locate(err)
		}
		parsed, err := cliParser.Parse(words)
		if err != nil {
			return nil, d.locate(grammarError(err))
		}
		if len(parsed.Args) > 0 {
			return nil, d.locate(&Error{Field: "directive", Message: fmt.Sprintf(
				"unexpected argument %q: a directive line holds only options (quote values that contain spaces)", parsed.Args[0])})
		}
		for _, p := range parsed.Options {
			if why := optionsByLong[p.Option.Long].cliOnly; why != "" {
				return nil, d.locate(&Error{Field: p.Option.Name(), Message: fmt.Sprintf(
					"%s is only valid on the command line (%s); remove it from the script", p.Option.Name(), why)})
			}
		}
		d.options = parsed.Options
		out = append(out, d)
	}
	return out, nil
}

// cutDirectivePrefix returns what follows "#SBATCH" or "#CORRAL" at the
// very start of line, when a blank, the end of the line or an option's '-'
// follows it: sbatch reads "#SBATCH--time=1" as "#SBATCH --time=1" (it
// parses whatever follows the magic word), so corral does too rather than
// ignore the line.
func cutDirectivePrefix(line string) (string, bool) {
	for _, prefix := range directivePrefixes {
		rest, ok := strings.CutPrefix(line, prefix)
		if ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '-') {
			return rest, true
		}
	}
	return "", false
}

// splitDirective splits the text after the magic word into words. Single
// and double quotes group characters (they are removed; there are no
// escapes), white space separates words, and an unquoted '#' at the start of
// a word ends the line.
func splitDirective(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, &Error{Field: "directive", Message: fmt.Sprintf("unterminated %c quote; close it on the same line", quote)}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
