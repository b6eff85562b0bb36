package display

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file is sinfo's format engine: -o's "%[#][.][-][size]X" codes and
// -O's "name[:[.][size][suffix]]" long names parse into one NodeFormat, and
// every built-in layout (default, -l, -N, -N -l, -s, -R, -R -l) is a format
// of it. How lines are formed from nodes is in nodes.go.

// sinfo's built-in formats, as Slurm 22.05 documents them. "#" sizes a
// column to its widest value (at least 9), as sinfo sizes its partition and
// node list columns; with -N the partition stays right-justified, as sinfo
// prints it (its code's "%.9P" with the computed width).
const (
	DefaultNodesFormat     = "%#P %.5a %.10l %.6D %.6t %N"
	LongNodesFormat        = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
	NodeNodesFormat        = "%#N %.6D %.#P %6t"
	NodeLongNodesFormat    = "%#N %.6D %.#P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E"
	SummarizeNodesFormat   = "%#P %.5a %.10l %.16F  %N"
	ListReasonsNodesFormat = "%20E %9u %19H %N"
	LongListReasonsFormat  = "%20E %12U %19H %6t %N"
	// defaultLongFieldWidth is the width of a -O field that names none.
	defaultLongFieldWidth = 20
)

// fitWidthMin is sinfo's MIN_NODE_FIELD_SIZE and MIN_PART_FIELD_SIZE: the
// narrowest a "#" column gets.
const fitWidthMin = 9

// NodeFormat is a parsed sinfo format.
type NodeFormat struct {
	cols []nodeColumn
}

// nodeColumn is one field, or literal text when def is nil.
type nodeColumn struct {
	lit   string
	def   *nodeFieldDef
	width int
	right bool
	// fit sizes the column to its widest value ("%#N").
	fit bool
}

// ParseNodeFormat parses sinfo's -o syntax: literal text and fields
// %[#][.][-][size]code, where "." right-justifies, "-" left-justifies (the
// default), "#" sizes the column to its widest value and size pads and
// truncates; "%%" is a literal "%".
func ParseNodeFormat(format string) (*NodeFormat, error) {
	f := &NodeFormat{}
	err := walkFormat(format, func(lit string) { f.cols = append(f.cols, nodeColumn{lit: lit}) }, func(at int) (int, error) {
		col, n, err := parseNodeField(format, at)
		if err == nil {
			f.cols = append(f.cols, col)
		}
		return n, err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// parseNodeField parses the field that starts at format[at] (a '%') and
// returns it with the number of bytes it spans.
func parseNodeField(format string, at int) (nodeColumn, int, error) {
	var col nodeColumn
	i := at + 1
	for ; i < len(format) && (format[i] == '.' || format[i] == '-' || format[i] == '#'); i++ {
		switch format[i] {
		case '#':
			col.fit = true
		default:
			col.right = format[i] == '.'
		}
	}
	for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
		col.width = col.width*10 + int(format[i]-'0')
		if col.width > maxWidth {
			return col, 0, fmt.Errorf("format %q: field at offset %d is wider than %d columns", format, at, maxWidth)
		}
	}
	if i >= len(format) {
		return col, 0, fmt.Errorf("format %q ends inside a field: add a field code after %q (valid codes: %s)",
			format, format[at:], nodeCodeList())
	}
	if code := format[i]; code < utf8.RuneSelf {
		col.def = nodeFieldDefs[code]
	}
	if col.def == nil {
		r, _ := utf8.DecodeRuneInString(format[i:])
		return col, 0, fmt.Errorf("Invalid node format specification: %s (in format %q; valid codes: %s)", "%"+string(r), format, nodeCodeList())
	}
	return col, i - at + 1, nil
}

func nodeCodeList() string {
	var b strings.Builder
	for i := 0; i < len(nodeValidCodes); i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('%')
		b.WriteByte(nodeValidCodes[i])
	}
	return b.String()
}

// ParseNodeLongFormat parses sinfo's -O syntax: comma-separated long field
// names, each optionally followed by ":[.][size][suffix]". A field without
// a size is 20 columns wide, as in sinfo; "." right-justifies and the
// suffix is printed after the field. Names are matched in any case.
func ParseNodeLongFormat(spec string) (*NodeFormat, error) {
	f := &NodeFormat{}
	for _, tok := range strings.Split(spec, ",") {
		if strings.TrimSpace(tok) == "" {
			continue
		}
		name, size, hasSize := strings.Cut(tok, ":")
		name = strings.TrimSpace(name)
		def := nodeLongFields[strings.ToLower(name)]
		if def == nil {
			return nil, fmt.Errorf("Invalid node format specification: %s (in --Format %q; valid fields: %s)", name, spec, nodeLongList())
		}
		col, suffix, err := parseLongSize(spec, name, size, hasSize)
		if err != nil {
			return nil, err
		}
		f.cols = append(f.cols, nodeColumn{def: def, width: col.width, right: col.right})
		if suffix != "" {
			f.cols = append(f.cols, nodeColumn{lit: suffix})
		}
	}
	if len(f.cols) == 0 {
		return nil, fmt.Errorf("--Format %q names no field; valid fields: %s", spec, nodeLongList())
	}
	return f, nil
}

// longSize is the width part of one -O field.
type longSize struct {
	width int
	right bool
}

// parseLongSize reads "[.][size][suffix]" after a -O field's colon, for
// sinfo and squeue alike: no colon is the default width of 20; a colon
// without a number is width 0, the value as it is.
func parseLongSize(spec, name, size string, hasSize bool) (longSize, string, error) {
	if !hasSize {
		return longSize{width: defaultLongFieldWidth}, "", nil
	}
	var s longSize
	if strings.HasPrefix(size, ".") {
		s.right, size = true, size[1:]
	}
	i := 0
	for ; i < len(size) && size[i] >= '0' && size[i] <= '9'; i++ {
		s.width = s.width*10 + int(size[i]-'0')
		if s.width > maxWidth {
			return s, "", fmt.Errorf("--Format %q: field %s is wider than %d columns", spec, name, maxWidth)
		}
	}
	return s, size[i:], nil
}

func nodeLongList() string {
	return strings.Join(nodeLongNames, ",")
}

// hasPartitionField reports whether a line of f shows anything of its
// partition; when none does, a node in several partitions is counted once.
func (f *NodeFormat) hasPartitionField() bool {
	for _, c := range f.cols {
		if c.def != nil && c.def.kind == kindPart {
			return true
		}
	}
	return false
}

// widths returns each column's width: its own, or for a "#" column the
// widest value of the lines or its header (at least fitWidthMin).
func (f *NodeFormat) widths(lines []*nodeGroup) []int {
	out := make([]int, len(f.cols))
	var scratch []byte
	for i, c := range f.cols {
		out[i] = c.width
		if !c.fit || c.def == nil {
			continue
		}
		w := max(fitWidthMin, utf8.RuneCountInString(c.def.header))
		for _, g := range lines {
			scratch = escapeTail(c.def.value(scratch[:0], g), 0)
			w = max(w, runeLen(scratch))
		}
		out[i] = w
	}
	return out
}

func (f *NodeFormat) appendHeader(dst []byte, widths []int) []byte {
	for i, c := range f.cols {
		if c.def == nil {
			dst = append(dst, c.lit...)
			continue
		}
		dst = appendPadded(dst, c.def.header, widths[i], c.right, true)
	}
	return append(dst, '\n')
}

func (f *NodeFormat) appendLine(dst []byte, g *nodeGroup, widths []int) []byte {
	for i, c := range f.cols {
		if c.def == nil {
			dst = append(dst, c.lit...)
			continue
		}
		start := len(dst)
		dst = c.def.value(dst, g)
		dst = escapeTail(dst, start)
		dst = appendCell(dst, start, widths[i], c.right, true)
	}
	return append(dst, '\n')
}

// groupKey is what decides whether two nodes of a partition share a line:
// the values of every field that tells nodes apart (states, reasons,
// features; with exact also sizes), as the line would print them.
func (f *NodeFormat) groupKey(dst []byte, g *nodeGroup, exact bool) []byte {
	for _, c := range f.cols {
		if c.def == nil || !(c.def.kind == kindNode || exact && c.def.kind == kindSize) {
			continue
		}
		dst = c.def.value(dst, g)
		dst = append(dst, 0)
	}
	return dst
}

func itoa(n int) string { return strconv.Itoa(n) }
