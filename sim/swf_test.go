package sim

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// headerTrace has a full header, a comment, a blank line and two jobs, the
// second with a fractional average CPU time as the LANL log writes it.
const headerTrace = `; Version: 2.2
; UnixStartTime: 843480031
; MaxNodes: 100
; MaxProcs: 128
; Note: a comment the reader ignores

   15   599850 192180   3477    4     -1    -1    4  53940    -1  1  12  12  -1 -1 -1 -1 -1
    2      465      5   3362   32 489.00   988   32    900  1024  1   3   3   3  1 -1 -1 -1
`

func TestReadSWF(t *testing.T) {
	want := &Trace{
		MaxProcs: 128, MaxNodes: 100, UnixStartTime: 843480031,
		Jobs: []SWFJob{
			{Number: 15, Submit: 599850, Wait: 192180, Run: 3477, AllocProcs: 4, AvgCPUTime: -1, UsedMemory: -1,
				ReqProcs: 4, ReqTime: 53940, ReqMemory: -1, Status: 1, User: 12, Group: 12, Executable: -1,
				Queue: -1, Partition: -1, PrecedingJob: -1, ThinkTimeAfter: -1, Line: 7},
			{Number: 2, Submit: 465, Wait: 5, Run: 3362, AllocProcs: 32, AvgCPUTime: 489, UsedMemory: 988,
				ReqProcs: 32, ReqTime: 900, ReqMemory: 1024, Status: 1, User: 3, Group: 3, Executable: 3,
				Queue: 1, Partition: -1, PrecedingJob: -1, ThinkTimeAfter: -1, Line: 8},
		},
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(headerTrace)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	// Compression is recognised by its magic bytes, not by a file name.
	for name, input := range map[string][]byte{"plain": []byte(headerTrace), "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			got, err := ReadSWF(bytes.NewReader(input))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ReadSWF =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestReadSWFErrors(t *testing.T) {
	const job = "1 0 -1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
	tests := map[string]struct {
		input string
		want  string
	}{
		"a missing field": {
			input: job + "2 0 -1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1\n",
			want:  "line 2: 17 fields, want 18",
		},
		"an extra field": {
			input: job + job[:len(job)-1] + " 7\n",
			want:  "line 2: 19 fields, want 18",
		},
		"a field that is not a number": {
			input: "; MaxProcs: 4\n" + "1 0 -1 ten 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n",
			want:  `line 2: field 4 (run time): "ten" is not a number`,
		},
		"a fraction where a whole number belongs": {
			input: "1 0 -1 10 4 -1 -1 4 60.5 -1 1 1 1 -1 -1 -1 -1 -1\n",
			want:  `line 1: field 9 (requested time): "60.5" is not a whole number`,
		},
		"a header value that is not a number": {
			input: "; MaxProcs: many\n" + job,
			want:  `line 1: header MaxProcs: "many" is not a whole number`,
		},
		"gzip magic followed by garbage": {
			input: "\x1f\x8bnot really gzip",
			want:  "reading gzip-compressed trace",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSWF(strings.NewReader(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadSWF error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// An integral value written with a decimal point is still a whole number.
func TestReadSWFWholeNumberWithPoint(t *testing.T) {
	tr, err := ReadSWF(strings.NewReader("7 0 -1 10.0 4 -1 -1 4 60.00 -1 1 1 1 -1 -1 -1 -1 -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if j := tr.Jobs[0]; j.Run != 10 || j.ReqTime != 60 {
		t.Errorf("run, requested time = %d, %d, want 10, 60", j.Run, j.ReqTime)
	}
}

// TestSWFNumberSpellings reads the spellings a field may take, on the fast
// path for plain integers and the general one for the rest, alike.
func TestSWFNumberSpellings(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  int64
		bad   bool
	}{
		{field: "42", want: 42},
		{field: "-1", want: -1},
		{field: "-0", want: 0},
		{field: "007", want: 7},
		{field: "+5", want: 5},
		{field: "1e3", want: 1000},
		{field: "12.0", want: 12},
		{field: "1234567890123456", want: 1234567890123456},
		{field: "12.5", bad: true},
		{field: "-", bad: true},
		{field: "1-2", bad: true},
		{field: "NaN", bad: true},
	} {
		t.Run(tc.field, func(t *testing.T) {
			line := "1 0 -1 " + tc.field + " 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1"
			j, err := parseSWFJob(line, 3)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), "line 3: field 4 (run time)") {
					t.Fatalf("%q: got %+v, %v; want an error naming line 3, field 4", tc.field, j, err)
				}
				return
			}
			if err != nil || j.Run != tc.want {
				t.Fatalf("%q: run time %d, %v; want %d", tc.field, j.Run, err, tc.want)
			}
		})
	}
	if _, err := parseSWFJob("1\t0 -1\v10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1", 1); err == nil || !strings.Contains(err.Error(), "17 fields") {
		t.Fatalf("17 fields separated by tabs and spaces: %v; want an error counting 17", err)
	}
}

// TestReadSWFGzipReadAhead reads compressed traces longer than the
// read-ahead's chunks: every job arrives, in order; a bad line far into
// the file is named by its number; a file cut short is an error; and no
// reading goroutine is left behind by any of them.
func TestReadSWFGzipReadAhead(t *testing.T) {
	gz := func(text string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	var text strings.Builder
	text.WriteString("; MaxProcs: 8\n")
	const jobs = 40_000 // about 2 MB: eight chunks
	for n := 1; n <= jobs; n++ {
		fmt.Fprintf(&text, "%d %d -1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n", n, n)
	}
	good := gz(text.String())
	goroutines := runtime.NumGoroutine()
	tr, err := ReadSWF(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) != jobs || tr.Jobs[jobs-1].Number != jobs || tr.Jobs[jobs-1].Line != jobs+1 {
		t.Fatalf("%d jobs, the last %+v; want %d, the last on line %d", len(tr.Jobs), tr.Jobs[len(tr.Jobs)-1], jobs, jobs+1)
	}
	bad := gz(text.String() + "x 0 -1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n" + text.String())
	if _, err := ReadSWF(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("line %d: field 1", jobs+2)) {
		t.Errorf("a bad line %d: %v; want an error naming it", jobs+2, err)
	}
	// Cut in half: the line cut short, or the end of the stream, is an
	// error.
	if _, err := ReadSWF(bytes.NewReader(good[:len(good)/2])); err == nil {
		t.Errorf("a file cut in half was read whole")
	}
	if _, err := ReadSWF(bytes.NewReader(gz(text.String())[:len(good)-4])); err == nil || !strings.Contains(err.Error(), "reading trace after line") {
		t.Errorf("a file without its last bytes (the size the gzip trailer checks): %v; want a read error", err)
	}
	for range 100 {
		if runtime.NumGoroutine() <= goroutines {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines after reading, %d before", runtime.NumGoroutine(), goroutines)
}
