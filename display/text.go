package display

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// This file holds the byte-level helpers every renderer shares: column
// padding with Slurm's truncation rules, Slurm's three duration spellings,
// its unit conversion for memory and its time stamps. They append to a
// caller's buffer so that rendering a row allocates nothing.

const (
	// yearSeconds is squeue's YEAR_SECONDS: durations above it print as
	// INVALID.
	yearSeconds = 365 * 24 * 3600
	// slurmTime is slurm_make_time_str's default layout.
	slurmTime = "2006-01-02T15:04:05"
)

// appendCell appends the value produced by fill as one column of width
// runes. It copies _print_str from squeue and sinfo: width 0 prints the value
// as is; a left-justified column pads on the right and always truncates
// (printf's "%.Ns"); a right-justified column pads on the left and truncates
// only when cut is set (squeue never cuts node lists and times).
func appendCell(dst []byte, start int, width int, right, cut bool) []byte {
	if width <= 0 {
		return dst
	}
	val := dst[start:]
	n := runeLen(val)
	if n > width && (cut || !right) {
		dst = dst[:start+runeOffset(val, width)]
		return dst
	}
	if n >= width {
		return dst
	}
	pad := width - n
	if !right {
		return appendSpaces(dst, pad)
	}
	vlen := len(dst) - start
	dst = appendSpaces(dst, pad)
	copy(dst[start+pad:], dst[start:start+vlen])
	for i := start; i < start+pad; i++ {
		dst[i] = ' '
	}
	return dst
}

// appendPadded appends s, made safe for a terminal (appendSafe), as a
// column (see appendCell).
func appendPadded(dst []byte, s string, width int, right, cut bool) []byte {
	start := len(dst)
	dst = appendSafe(dst, s)
	return appendCell(dst, start, width, right, cut)
}

const spaces = "                                                                "

func appendSpaces(dst []byte, n int) []byte {
	for n > len(spaces) {
		dst = append(dst, spaces...)
		n -= len(spaces)
	}
	return append(dst, spaces[:n]...)
}

// runeLen counts runes, with a fast path for the ASCII that fills almost
// every column.
func runeLen(b []byte) int {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return utf8.RuneCount(b)
		}
	}
	return len(b)
}

// runeOffset returns the byte offset of the n-th rune of b, so truncation
// never splits a multi-byte character (C's squeue counts bytes; counting
// runes keeps the output valid UTF-8 and equal for ASCII).
func runeOffset(b []byte, n int) int {
	off := 0
	for i := 0; i < n && off < len(b); i++ {
		if b[off] < utf8.RuneSelf {
			off++
			continue
		}
		_, size := utf8.DecodeRune(b[off:])
		off += size
	}
	return off
}

func append2(dst []byte, v int64) []byte {
	return append(dst, byte('0'+v/10), byte('0'+v%10))
}

// appendCompactSecs renders secs the way squeue's and sinfo's _print_secs
// do: M:SS, H:MM:SS or D-HH:MM:SS.
func appendCompactSecs(dst []byte, secs int64) []byte {
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	switch {
	case d > 0:
		dst = strconv.AppendInt(dst, d, 10)
		dst = append(dst, '-')
		dst = append2(dst, h)
		dst = append(dst, ':')
	case h > 0:
		dst = strconv.AppendInt(dst, h, 10)
		dst = append(dst, ':')
	default:
		dst = strconv.AppendInt(dst, m, 10)
		dst = append(dst, ':')
		return append2(dst, s)
	}
	dst = append2(dst, m)
	dst = append(dst, ':')
	return append2(dst, s)
}

// appendSqueueSecs is squeue's _print_secs: negative durations and ones
// longer than a year print as INVALID.
func appendSqueueSecs(dst []byte, secs int64) []byte {
	if secs < 0 || secs > yearSeconds {
		return append(dst, "INVALID"...)
	}
	return appendCompactSecs(dst, secs)
}

// appendLongSecs is secs2time_str, which scontrol uses: HH:MM:SS or
// D-HH:MM:SS.
func appendLongSecs(dst []byte, secs int64) []byte {
	if secs < 0 {
		return append(dst, "INVALID"...)
	}
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	if d > 0 {
		dst = strconv.AppendInt(dst, d, 10)
		dst = append(dst, '-')
	}
	dst = append2(dst, h)
	dst = append(dst, ':')
	dst = append2(dst, m)
	dst = append(dst, ':')
	return append2(dst, s)
}

// Unit indexes of convert_num_unit.
const (
	unitNone = 0
	unitMega = 2
)

// appendUnits is Slurm's convert_num_unit with CONVERT_NUM_UNIT_EXACT, the
// default of squeue and sinfo: divide by 1024 while the value stays a whole
// or half multiple, then print an integer or two decimals and the unit
// letter. 1024M is "1G", 1536M is "1.50G", 1500M stays "1500M".
func appendUnits(dst []byte, num float64, unit int) []byte {
	const letters = "\x00KMGTP?"
	if int64(num) == 0 {
		return append(dst, '0')
	}
	for num >= 1024 && uint64(num)%512 == 0 {
		num /= 1024
		unit++
	}
	if unit < 0 || unit > 5 {
		unit = 6
	}
	if i := uint64(num); float64(i) == num {
		dst = strconv.AppendUint(dst, i, 10)
	} else {
		dst = strconv.AppendFloat(dst, num, 'f', 2, 64)
	}
	if unit != unitNone {
		dst = append(dst, letters[unit])
	}
	return dst
}

// appendMemMB renders a size in MiB as squeue's MIN_MEMORY does.
func appendMemMB(dst []byte, mb int64) []byte {
	return appendUnits(dst, float64(mb), unitMega)
}

// appendTime renders t in loc with Slurm's time layout, or none when t is
// the zero time (squeue says "N/A", scontrol "Unknown" or "None").
func appendTime(dst []byte, t time.Time, loc *time.Location, none string) []byte {
	if t.IsZero() {
		return append(dst, none...)
	}
	if loc != nil {
		t = t.In(loc)
	}
	return t.AppendFormat(dst, slurmTime)
}
