package getopt

import (
	"strings"
)

// Usage renders the visible options as help text, one per line, in table
// order, e.g.
//
//	-t, --time=TIME           time limit
//	    --nice[=N]            lower the job's priority
func (p *Parser) Usage() string {
	var lefts []string
	var helps []string
	width := 0
	for _, o := range p.options {
		if o.Hidden {
			continue
		}
		left := usageLeft(o)
		lefts = append(lefts, left)
		helps = append(helps, o.Help)
		width = max(width, len(left))
	}
	var b strings.Builder
	for i, left := range lefts {
		b.WriteString("  ")
		b.WriteString(left)
		if helps[i] != "" {
			b.WriteString(strings.Repeat(" ", width-len(left)+2))
			b.WriteString(helps[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// usageLeft is the "-t, --time=TIME" column of one option.
func usageLeft(o Option) string {
	var b strings.Builder
	if o.Short != 0 {
		b.WriteString("-")
		b.WriteRune(o.Short)
		if o.Long != "" {
			b.WriteString(", ")
		}
	} else {
		b.WriteString("    ")
	}
	if o.Long != "" {
		b.WriteString("--")
		b.WriteString(o.Long)
	}
	sep := "="
	if o.Long == "" {
		sep = " "
	}
	switch o.Arg {
	case RequiredArgument:
		b.WriteString(sep + argName(o))
	case OptionalArgument:
		if o.Long == "" {
			sep = ""
		}
		b.WriteString("[" + sep + argName(o) + "]")
	}
	return b.String()
}
