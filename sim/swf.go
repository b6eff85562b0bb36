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
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading gzip-compressed trace: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	tr := &Trace{}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
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

// parseSWFJob reads one job line.
func parseSWFJob(text string, line int) (SWFJob, error) {
	var fields [swfFieldCount]string
	n := 0
	for i := 0; i < len(text); {
		if isSWFSpace(text[i]) {
			i++
			continue
		}
		start := i
		for i < len(text) && !isSWFSpace(text[i]) {
			i++
		}
		if n < swfFieldCount {
			fields[n] = text[start:i]
		}
		n++
	}
	if n != swfFieldCount {
		return SWFJob{}, fmt.Errorf("line %d: %d fields, want %d (a job line holds the 18 SWF fields; use -1 for unknown values)", line, n, swfFieldCount)
	}
	var ints [swfFieldCount]int64
	var floats [swfFieldCount]float64
	for i, f := range fields {
		if v, ok := plainInt(f); ok {
			ints[i], floats[i] = v, float64(v)
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return SWFJob{}, fmt.Errorf("line %d: field %d (%s): %q is not a number", line, i+1, swfFieldNames[i], f)
		}
		floats[i] = v
		if isFractionalField(i) {
			continue
		}
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return SWFJob{}, fmt.Errorf("line %d: field %d (%s): %q is not a whole number", line, i+1, swfFieldNames[i], f)
		}
		ints[i] = int64(v)
	}
	return SWFJob{
		Number: ints[0], Submit: ints[1], Wait: ints[2], Run: ints[3], AllocProcs: ints[4],
		AvgCPUTime: floats[5], UsedMemory: floats[6], ReqProcs: ints[7], ReqTime: ints[8],
		ReqMemory: floats[9], Status: ints[10], User: ints[11], Group: ints[12],
		Executable: ints[13], Queue: ints[14], Partition: ints[15], PrecedingJob: ints[16],
		ThinkTimeAfter: ints[17], Line: line,
	}, nil
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
