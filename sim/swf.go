package sim

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Trace is a workload in the Standard Workload Format.
type Trace struct {
	// Name labels the trace in reports (e.g. its file name); ReadSWF
	// leaves it empty.
	Name string
	// MaxProcs and MaxNodes are the header's machine size; 0 when absent.
	MaxProcs int
	MaxNodes int
	// UnixStartTime is the epoch second that submit time 0 stands for.
	UnixStartTime int64
	// Jobs are in the order of the file.
	Jobs []SWFJob
}

// SWFJob is one job line: the format's 18 fields in order, -1 where the log
// does not know. Times are in seconds, memory in KB per processor.
type SWFJob struct {
	Number         int64
	Submit         int64
	Wait           int64
	Run            int64
	AllocProcs     int64
	AvgCPUTime     float64
	UsedMemory     float64
	ReqProcs       int64
	ReqTime        int64
	ReqMemory      float64
	Status         int64
	User           int64
	Group          int64
	Executable     int64
	Queue          int64
	Partition      int64
	PrecedingJob   int64
	ThinkTimeAfter int64
	// Line is the job's line number in the file, for messages.
	Line int
}

// swfFieldCount is the number of fields on every job line.
const swfFieldCount = 18

// swfFieldNames name the fields in error messages, by field number - 1.
var swfFieldNames = [swfFieldCount]string{
	"job number", "submit time", "wait time", "run time", "allocated processors",
	"average CPU time", "used memory", "requested processors", "requested time",
	"requested memory", "status", "user id", "group id", "executable number",
	"queue number", "partition number", "preceding job number", "think time",
}

// ReadSWF reads a Standard Workload Format trace, gzip-compressed or not:
// `;` lines are the header and comments (MaxProcs, MaxNodes and
// UnixStartTime are kept), blank lines are ignored, and every other line is
// one job of 18 numeric fields. A malformed line is an error that names its
// line number and field.
func ReadSWF(r io.Reader) (*Trace, error) {
	sc, done, err := swfLines(r)
	if err != nil {
		return nil, err
	}
	defer done()
	tr := &Trace{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "":
			continue
		case text[0] == ';':
			if err := tr.readHeader(text[1:], line); err != nil {
				return nil, err
			}
			continue
		}
		j, err := parseSWFJob(text, line)
		if err != nil {
			return nil, err
		}
		if len(tr.Jobs) == cap(tr.Jobs) {
			// Doubling: append grows a long slice by a quarter at a
			// time, which copies a 100,000-job trace many times over.
			tr.Jobs = slices.Grow(tr.Jobs, max(len(tr.Jobs), 1024))
		}
		tr.Jobs = append(tr.Jobs, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading trace after line %d: %w", line, err)
	}
	return tr, nil
}

// swfLines returns a scanner of r's lines, r being a trace, gzip-compressed
// (recognised by its magic bytes) or not; done releases what it holds.
func swfLines(r io.Reader) (sc *bufio.Scanner, done func(), err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var src io.Reader = br
	done = func() {}
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("reading gzip-compressed trace: %w", err)
		}
		// Inflating costs about as much as reading the lines: it runs
		// ahead in a goroutine of its own (on another core, when one is
		// free).
		ra := newReadAhead(zr)
		src = ra
		done = func() {
			ra.Close()
			zr.Close()
		}
	}
	sc = bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return sc, done, nil
}

// readHeader keeps the header fields the simulation uses; other comment
// lines are ignored.
func (tr *Trace) readHeader(text string, line int) error {
	key, value, ok := strings.Cut(text, ":")
	if !ok {
		return nil
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	if key != "MaxProcs" && key != "MaxNodes" && key != "UnixStartTime" {
		return nil
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return fmt.Errorf("line %d: header %s: %q is not a whole number", line, key, value)
	}
	if key != "UnixStartTime" && n > math.MaxInt32 {
		return fmt.Errorf("line %d: header %s: %d is more processors than corral can simulate", line, key, n)
	}
	switch key {
	case "MaxProcs":
		tr.MaxProcs = int(n)
	case "MaxNodes":
		tr.MaxNodes = int(n)
	default:
		tr.UnixStartTime = n
	}
	return nil
}

// parseSWFJob reads one job line. It reads each field as it finds it: a
// plain integer (what logs mostly write) digit by digit as it scans,
// anything else with readField. A wrong field count is reported before a
// field that is not a number, and the first such field is the one named.
func parseSWFJob(text string, line int) (SWFJob, error) {
	var ints [swfFieldCount]int64
	var floats [swfFieldCount]float64
	n, bad := 0, -1
	var badText, badWhat string
	for i := 0; i < len(text); {
		if swfSpace[text[i]] {
			i++
			continue
		}
		start := i
		if text[i] == '-' {
			i++
		}
		digits := i
		var v int64
		for ; i < len(text) && text[i]-'0' <= 9; i++ {
			v = v*10 + int64(text[i]-'0')
		}
		if d := i - digits; d > 0 && d <= 15 && (i == len(text) || swfSpace[text[i]]) {
			// A plain integer, as plainInt reads it.
			if digits > start {
				v = -v
			}
			if n < swfFieldCount {
				ints[n], floats[n] = v, float64(v)
			}
			n++
			continue
		}
		for i < len(text) && !swfSpace[text[i]] {
			i++
		}
		if n < swfFieldCount && bad < 0 {
			f := text[start:i]
			if ints[n], floats[n], badWhat = readField(f, n); badWhat != "" {
				bad, badText = n, f
			}
		}
		n++
	}
	if n != swfFieldCount {
		return SWFJob{}, fmt.Errorf("line %d: %d fields, want %d (a job line holds the 18 SWF fields; use -1 for unknown values)", line, n, swfFieldCount)
	}
	if bad >= 0 {
		return SWFJob{}, fmt.Errorf("line %d: field %d (%s): %q is not %s", line, bad+1, swfFieldNames[bad], badText, badWhat)
	}
	return SWFJob{
		Number: ints[0], Submit: ints[1], Wait: ints[2], Run: ints[3], AllocProcs: ints[4],
		AvgCPUTime: floats[5], UsedMemory: floats[6], ReqProcs: ints[7], ReqTime: ints[8],
		ReqMemory: floats[9], Status: ints[10], User: ints[11], Group: ints[12],
		Executable: ints[13], Queue: ints[14], Partition: ints[15], PrecedingJob: ints[16],
		ThinkTimeAfter: ints[17], Line: line,
	}, nil
}

// swfSpace marks the bytes isSWFSpace accepts, for the scan of a line.
var swfSpace = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isSWFSpace(byte(c))
	}
	return t
}()

// readField reads field i, written f: its value as an integer (for the
// fields that must be whole) and as a float, or what it is not ("a
// number", "a whole number").
func readField(f string, i int) (int64, float64, string) {
	if v, ok := plainInt(f); ok {
		return v, float64(v), ""
	}
	v, err := parseFloat(f)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, 0, "a number"
	case isFractionalField(i):
		return 0, v, ""
	case v != math.Trunc(v) || math.Abs(v) > 1<<53:
		return 0, 0, "a whole number"
	}
	return int64(v), v, ""
}

// pow10 are the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat is strconv.ParseFloat(f, 64), with the decimals logs write
// (an optional minus sign, digits, a point, digits: 15 digits at most)
// read without it: their digits and their power of ten are exact in a
// float64, so one division rounds as ParseFloat does.
func parseFloat(f string) (float64, error) {
	digits := f
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	point := strings.IndexByte(digits, '.')
	if point < 1 || point == len(digits)-1 || len(digits) > 16 {
		return strconv.ParseFloat(f, 64)
	}
	var m int64
	for k := 0; k < len(digits); k++ {
		if k == point {
			continue
		}
		c := digits[k]
		if c < '0' || c > '9' {
			return strconv.ParseFloat(f, 64)
		}
		m = m*10 + int64(c-'0')
	}
	x := float64(m) / pow10[len(digits)-point-1]
	if len(digits) < len(f) {
		x = -x
	}
	return x, nil
}

// isSWFSpace reports whether c separates fields: ASCII white space.
func isSWFSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'
}

// plainInt reads a field written as most are: an optional minus sign and
// at most 15 digits (so the value is exact as a float too). Anything else
// (a fraction, an exponent, a plus sign) is left to strconv.ParseFloat.
func plainInt(f string) (int64, bool) {
	digits := f
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(f) {
		v = -v
	}
	return v, true
}

// isFractionalField reports whether field i (0-based) may hold a fraction:
// average CPU time, used memory and requested memory. Real logs write the
// others as integers.
func isFractionalField(i int) bool { return i == 5 || i == 6 || i == 9 }

// readAhead reads its source in a goroutine of its own, up to
// readAheadChunks chunks ahead of its reader. Close stops the goroutine
// and waits for it, so that the source may be closed then.
type readAhead struct {
	full chan readChunk
	free chan []byte
	// cur is what is left of the chunk being read, held its array
	// (given back once read), err the source's error after it.
	cur, held []byte
	err       error
	stop      chan struct{}
	stopped   chan struct{}
}

// readChunk is one read of the source: its bytes, and the error that
// ended the source after them (nil while it goes on).
type readChunk struct {
	b   []byte
	err error
}

// The read-ahead's chunks: enough that inflating never waits for the
// reader to catch up on a chunk boundary.
const (
	readAheadChunks = 3
	readAheadSize   = 256 << 10
)

func newReadAhead(src io.Reader) *readAhead {
	ra := &readAhead{full: make(chan readChunk, readAheadChunks), free: make(chan []byte, readAheadChunks+1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	for range readAheadChunks + 1 {
		ra.free <- make([]byte, readAheadSize)
	}
	go ra.fill(src)
	return ra
}

// fill reads src into free chunks until it ends or Close.
func (ra *readAhead) fill(src io.Reader) {
	defer close(ra.stopped)
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := 0, error(nil)
		for n < len(b) && err == nil {
			var k int
			k, err = src.Read(b[n:])
			n += k
		}
		select {
		case ra.full <- readChunk{b: b[:n], err: err}:
		case <-ra.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read reads what the goroutine read, and its source's error after it.
func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.err != nil {
			return 0, ra.err
		}
		if ra.held != nil {
			ra.free <- ra.held[:cap(ra.held)]
		}
		c := <-ra.full
		ra.cur, ra.held, ra.err = c.b, c.b, c.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// Close stops the goroutine and waits until it no longer reads.
func (ra *readAhead) Close() {
	close(ra.stop)
	<-ra.stopped
}
