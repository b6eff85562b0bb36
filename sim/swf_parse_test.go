package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// parseSWFJobReference is the job-line reader parseSWFJob replaced, kept
// as the reference it must agree with: every field split out first, then
// each read with strconv where it is not a plain integer.
func parseSWFJobReference(text string, line int) (SWFJob, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool { return r < 0x80 && isSWFSpace(byte(r)) })
	if len(fields) != swfFieldCount {
		return SWFJob{}, fmt.Errorf("line %d: %d fields, want %d (a job line holds the 18 SWF fields; use -1 for unknown values)", line, len(fields), swfFieldCount)
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

// sameJobLine reports whether parseSWFJob and the reference read text
// alike: the same job (floats to the bit, so -0 and 0 differ) or the same
// error.
func sameJobLine(text string) (string, bool) {
	got, gerr := parseSWFJob(text, 3)
	want, werr := parseSWFJobReference(text, 3)
	if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		return fmt.Sprintf("error %v, reference %v", gerr, werr), false
	}
	bits := func(j SWFJob) [3]uint64 {
		return [3]uint64{math.Float64bits(j.AvgCPUTime), math.Float64bits(j.UsedMemory), math.Float64bits(j.ReqMemory)}
	}
	if got != want || bits(got) != bits(want) {
		return fmt.Sprintf("%+v, reference %+v", got, want), false
	}
	return "", true
}

// TestParseSWFJobAsReference reads lines with the numbers logs write and
// the forms only strconv reads (exponents, signs, long digit strings,
// points at either end), fields too few or too many, and fields that are
// not numbers or not whole, and requires what the reference reads.
func TestParseSWFJobAsReference(t *testing.T) {
	const rest = " 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1"
	for _, f := range []string{"46.00", "0.1", "-1.5", "-0.0", "-0", "489.00", "1e3", "1E-2", "+5", "5.", ".5", ".", "-",
		"-.5", "1.2.3", "123456789012345", "1234567890123456", "12345678901234.5", "1234567890123.45", "0.000000000000001",
		"9007199254740993", "1_000", "0x10", "inf", "NaN", "1e400", "ten", "60.5", "3.0000000000000004", "٣"} {
		for _, line := range []string{
			"1 0 -1 " + f + rest, // run time: whole
			"1 0 -1 10 4 " + f + " -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1", // average CPU time: fractional
			"1 0 -1 " + f + " 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1",    // 17 fields
			"1 0 x " + f + rest, // an earlier bad field
		} {
			if why, ok := sameJobLine(line); !ok {
				t.Errorf("%q: %s", line, why)
			}
		}
	}
}

// FuzzParseSWFJob compares the job-line reader with the reference on
// arbitrary lines.
func FuzzParseSWFJob(f *testing.F) {
	f.Add("   55    10448      5    302  512  46.00 16580  512    900 32768  0   1   1   3  4 -1 -1 -1")
	f.Add("1 0 -1 10 4 -1 -1 4 60.5 -1 1 1 1 -1 -1 -1 -1 -1")
	f.Add("1 0 -1 1e3 4 -0.0 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1 7")
	f.Fuzz(func(t *testing.T, line string) {
		if why, ok := sameJobLine(line); !ok {
			t.Fatalf("%q: %s", line, why)
		}
	})
}
