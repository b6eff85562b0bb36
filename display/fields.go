package display

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds Slurm's print_fields layout, which sacctmgr and sshare
// share: a header of names, a line of dashes as wide as each column, then
// one line per record, every cell followed by one space. A positive width
// right-justifies a column and a negative one left-justifies it. Lines here
// end without the trailing spaces Slurm leaves, so that copied output and
// golden tests carry no invisible characters.

// field is one column of a print_fields table.
type field struct {
	name  string
	width int // negative: left-justified
	// text marks a string column: a longer value is cut to the width with
	// its last character replaced by '+', as print_fields_str does.
	// Numbers are never cut; they widen their cell.
	text bool
}

// fieldsTable renders records as print_fields does.
type fieldsTable struct {
	fields []field
	b      strings.Builder
	line   []byte
}

func (t *fieldsTable) header() {
	for _, f := range t.fields {
		t.cell(f.name, f.width, true)
	}
	t.endLine()
	for _, f := range t.fields {
		t.line = append(t.line, strings.Repeat("-", absInt(f.width))...)
		t.line = append(t.line, ' ')
	}
	t.endLine()
}

// row appends one record; cells holds one value per field, "" for a blank
// cell.
func (t *fieldsTable) row(cells ...string) {
	for i, f := range t.fields {
		t.cell(cells[i], f.width, f.text)
	}
	t.endLine()
}

func (t *fieldsTable) cell(s string, width int, cut bool) {
	s = Safe(s)
	n := absInt(width)
	if cut && n > 0 && utf8.RuneCountInString(s) > n {
		r := []rune(s)[:n]
		r[n-1] = '+'
		s = string(r)
	}
	pad := max(0, n-utf8.RuneCountInString(s))
	if width > 0 {
		t.line = append(t.line, strings.Repeat(" ", pad)...)
	}
	t.line = append(t.line, s...)
	if width < 0 {
		t.line = append(t.line, strings.Repeat(" ", pad)...)
	}
	t.line = append(t.line, ' ')
}

// endLine ends the current line without its trailing spaces.
func (t *fieldsTable) endLine() {
	t.b.WriteString(strings.TrimRight(string(t.line), " "))
	t.b.WriteByte('\n')
	t.line = t.line[:0]
}

// fitWidths widens each column to its longest cell (and header), keeping
// the column's justification, for tables whose values must never be cut.
func fitWidths(fields []field, rows [][]string) {
	for i := range fields {
		n := max(absInt(fields[i].width), utf8.RuneCountInString(fields[i].name))
		for _, r := range rows {
			n = max(n, utf8.RuneCountInString(r[i]))
		}
		if fields[i].width < 0 {
			fields[i].width = -n
		} else {
			fields[i].width = n
		}
	}
}

func absInt(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// formatFieldDouble is print_fields_double: "%f" (six decimals) when that
// fits the width, else "%e" with as many decimals as keep it near the
// width. inf and nan are spelled as glibc's printf spells them.
func formatFieldDouble(v float64, width int) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(v, 'f', 6, 64)
	if len(s) <= width {
		return s
	}
	// Slurm formats with precision width, then shortens the precision by
	// as much as that overshot the width.
	prec := width
	if e := formatCExp(v, width); len(e) > width {
		prec -= len(e) - width
	}
	return formatCExp(v, max(prec, 0))
}

// formatCExp is C's "%.*e": a mantissa and an exponent of at least two
// digits (Go's 'e' format already writes e+05).
func formatCExp(v float64, prec int) string {
	return strconv.FormatFloat(v, 'e', prec, 64)
}

// formatShares prints shares as sacctmgr and sshare print them, a whole
// number, keeping a fraction corral allows.
func formatShares(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}
