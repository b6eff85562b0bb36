package display

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"corral/api"
)

// squeue's built-in formats.
const (
	// DefaultQueueFormat is squeue's default.
	DefaultQueueFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
	// LongQueueFormat is squeue -l.
	LongQueueFormat = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
	// StartQueueFormat is squeue --start.
	StartQueueFormat = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
)

// maxWidth bounds a column's width so that a typo cannot make every row
// megabytes long.
const maxWidth = 4096

// QueueOptions are squeue's display options.
type QueueOptions struct {
	// Priority, when set, gives each job's priority for %Q and %p (the
	// controller computes pending jobs' multifactor priority as the
	// scheduler does); nil shows the job's Priority field.
	Priority func(*api.Job) int64
	// Format is -o/--format; empty selects the default, -l or --start
	// format. A Format wins over the formats of Long and Start (squeue
	// refuses -o with -l; the CLI may do the same), while Long still prints
	// the date and Start still shows only pending jobs.
	Format string
	// NoHeader is -h: no header line (and no date line with Long).
	NoHeader bool
	// Long is -l: the long format, preceded by the date like squeue -l.
	Long bool
	// Start is --start: only pending jobs, with their start times.
	Start bool
	// LongFormat is -O, in squeue's long field names; it wins over
	// Format.
	LongFormat string
	// Array is -r: one line per array task, an array's pending tasks each
	// on its own line rather than folded into "12_[3-9]". ShowTask, when
	// set, picks the pending tasks shown (those a "-j 12_5" names).
	Array    bool
	ShowTask func(array uint64, task int) bool
	// Dated prints the date above the header, as squeue -i does.
	Dated bool
}

func (o QueueOptions) format() string {
	switch {
	case o.Format != "":
		return o.Format
	case o.Start:
		return StartQueueFormat
	case o.Long:
		return LongQueueFormat
	}
	return DefaultQueueFormat
}

// Layout returns the parsed format the options select, so that a caller
// can refuse a bad -o or -O before it fetches anything.
func (o QueueOptions) Layout() (*QueueFormat, error) {
	if o.LongFormat != "" {
		return ParseQueueLongFormat(o.LongFormat)
	}
	return ParseQueueFormat(o.format())
}

// QueueFormat is a parsed squeue format, ready to render many rows.
type QueueFormat struct {
	cols []column
}

// column is one field, or literal text when def is nil.
type column struct {
	lit   string
	def   *fieldDef
	width int
	right bool
}

// ParseQueueFormat parses squeue's -o syntax: literal text and fields
// %[.][-][width]code, where "." right-justifies, "-" left-justifies (the
// default) and width pads and truncates like squeue; "%%" is a literal "%".
// Callers can parse before fetching jobs to reject a bad format early.
func ParseQueueFormat(format string) (*QueueFormat, error) {
	f := &QueueFormat{}
	err := walkFormat(format, func(lit string) { f.cols = append(f.cols, column{lit: lit}) }, func(at int) (int, error) {
		col, n, err := parseField(format, at)
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

// walkFormat splits a squeue or sinfo -o format into its runs of literal
// text ("%%" read as "%"), given to lit, and its fields: field gets the
// offset of the '%' that starts one and says how many bytes it spans.
func walkFormat(format string, lit func(string), field func(at int) (int, error)) error {
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			lit(text.String())
			text.Reset()
		}
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			text.WriteByte(format[i])
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			text.WriteByte('%')
			i++
			continue
		}
		flush()
		n, err := field(i)
		if err != nil {
			return err
		}
		i += n - 1
	}
	flush()
	return nil
}

// parseField parses the field that starts at format[at] (a '%') and returns
// it with the number of bytes it spans.
func parseField(format string, at int) (column, int, error) {
	var col column
	i := at + 1
	for ; i < len(format) && (format[i] == '.' || format[i] == '-'); i++ {
		col.right = format[i] == '.'
	}
	for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
		col.width = col.width*10 + int(format[i]-'0')
		if col.width > maxWidth {
			return col, 0, fmt.Errorf("format %q: field at offset %d is wider than %d columns", format, at, maxWidth)
		}
	}
	if i >= len(format) {
		return col, 0, fmt.Errorf("format %q ends inside a field: add a field code after %q (valid codes: %s)",
			format, format[at:], codeList())
	}
	code := format[i]
	if code < utf8.RuneSelf {
		col.def = fieldDefs[code]
	}
	if col.def == nil {
		r, _ := utf8.DecodeRuneInString(format[i:])
		why := ""
		if reason, ok := unsupportedCodes[code]; ok {
			why = " (" + reason + ")"
		}
		return col, 0, fmt.Errorf("format %q: unknown field code %q%s; valid codes: %s",
			format, "%"+string(r), why, codeList())
	}
	return col, i - at + 1, nil
}

func codeList() string {
	var b strings.Builder
	for i := 0; i < len(validCodes); i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('%')
		b.WriteByte(validCodes[i])
	}
	return b.String()
}

// Queue renders jobs like squeue, in the order given (see SortJobs). With
// opts.Start only pending jobs are shown, as squeue --start does. now is
// the time elapsed times are measured to; times are shown in now's location.
func Queue(w io.Writer, jobs []api.Job, opts QueueOptions, now time.Time) error {
	refs := make([]*api.Job, len(jobs))
	for i := range jobs {
		refs[i] = &jobs[i]
	}
	return QueueRefs(w, refs, opts, now)
}

// QueueRefs is Queue over job pointers: the controller renders listings
// from the records it holds without copying them.
func QueueRefs(w io.Writer, jobs []*api.Job, opts QueueOptions, now time.Time) error {
	f, err := opts.Layout()
	if err != nil {
		return err
	}
	rw := newRowWriter(w)
	if (opts.Long || opts.Dated) && !opts.NoHeader {
		rw.buf = now.AppendFormat(rw.buf, time.ANSIC)
		rw.buf = append(rw.buf, '\n')
	}
	if !opts.NoHeader {
		rw.buf = f.appendHeader(rw.buf)
	}
	c := rowCtx{now: now, loc: now.Location(), prio: opts.Priority}
	for i := range jobs {
		if opts.Start && !pendingLike(jobs[i].State) {
			continue
		}
		if opts.Array && jobs[i].IsArrayPending() {
			if err := f.writeTasks(rw, jobs[i], opts.ShowTask, &c); err != nil {
				return err
			}
			continue
		}
		rw.buf = f.appendRow(rw.buf, jobs[i], &c)
		if err := rw.maybeFlush(); err != nil {
			return err
		}
	}
	return rw.flush()
}

func (f *QueueFormat) appendHeader(dst []byte) []byte {
	for _, col := range f.cols {
		if col.def == nil {
			dst = append(dst, col.lit...)
			continue
		}
		dst = appendPadded(dst, col.def.header, col.width, col.right, !col.def.headerNoCut)
	}
	return append(dst, '\n')
}

func (f *QueueFormat) appendRow(dst []byte, j *api.Job, c *rowCtx) []byte {
	for i := range f.cols {
		col := &f.cols[i]
		if col.def == nil {
			dst = append(dst, col.lit...)
			continue
		}
		start := len(dst)
		dst = col.def.value(dst, j, c)
		dst = escapeTail(dst, start)
		if col.width > 0 {
			cut := col.def.cut == cutAlways || (col.def.cut == cutReason && showsReason(j.State))
			dst = appendCell(dst, start, col.width, col.right, cut)
		}
	}
	return append(dst, '\n')
}

// writeTasks renders an array's pending record as squeue -r does: a line
// per task, each as task 12_5 of the array.
func (f *QueueFormat) writeTasks(rw *rowWriter, j *api.Job, show func(uint64, int) bool, c *rowCtx) error {
	task := *j
	task.ArrayPending = nil
	if task.ArrayJobID == 0 {
		task.ArrayJobID = j.ID
	}
	var err error
	j.ArrayPending.Each(func(i int) bool {
		if show != nil && !show(task.ArrayJobID, i) {
			return true
		}
		task.ArrayTaskID = i
		rw.buf = f.appendRow(rw.buf, &task, c)
		err = rw.maybeFlush()
		return err == nil
	})
	return err
}

// rowWriter batches rows into one buffer and writes it in large chunks.
type rowWriter struct {
	w   io.Writer
	buf []byte
}

const flushAt = 64 << 10

func newRowWriter(w io.Writer) *rowWriter {
	return &rowWriter{w: w, buf: make([]byte, 0, flushAt+4096)}
}

func (r *rowWriter) maybeFlush() error {
	if len(r.buf) < flushAt {
		return nil
	}
	return r.flush()
}

func (r *rowWriter) flush() error {
	if len(r.buf) == 0 {
		return nil
	}
	_, err := r.w.Write(r.buf)
	r.buf = r.buf[:0]
	return err
}
