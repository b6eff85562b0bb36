package display

import (
	"strings"
	"unicode/utf8"
)

// This file keeps what the controllers send from reaching a terminal as
// anything but text. Job names, comments, users, accounts, reasons, node
// names and messages come from clients of the API, which may be hostile:
// an escape sequence in a job name could clear another user's screen,
// retitle their terminal window or fake output lines. Every value a
// renderer prints goes through appendSafe, which writes control characters
// and bytes that are not UTF-8 as escapes ("\x1b", "\n", "\u202e") and
// everything else, in any script, as it is. Literal text of a caller's own
// format (squeue -o) is the caller's and is not escaped.

// hexDigits spells escapes.
const hexDigits = "0123456789abcdef"

// needsEscape reports whether a rune must not reach a terminal as it is:
// C0 controls and DEL, C1 controls (U+0080..U+009F, read as escapes by
// some terminals), the Unicode line and paragraph separators and the
// bidirectional controls that reorder what is shown (U+061C, U+200E,
// U+200F, U+202A..U+202E, U+2066..U+2069).
func needsEscape(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
		r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// safeASCII reports whether s is printable ASCII, the fast path: nothing
// to escape.
func safeASCII[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// appendSafe appends s with control characters, the runes needsEscape
// names and invalid UTF-8 bytes escaped.
func appendSafe(dst []byte, s string) []byte {
	if safeASCII(s) {
		return append(dst, s...)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = appendByteEscape(dst, s[i])
		case needsEscape(r):
			dst = appendRuneEscape(dst, r)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

func appendByteEscape(dst []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(dst, `\n`...)
	case '\r':
		return append(dst, `\r`...)
	case '\t':
		return append(dst, `\t`...)
	}
	return append(dst, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
}

func appendRuneEscape(dst []byte, r rune) []byte {
	if r < 0x80 {
		return appendByteEscape(dst, byte(r))
	}
	return append(dst, '\\', 'u', hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
}

// escapeTail escapes, in place, what a value renderer appended to dst
// after start; it costs one scan when there is nothing to escape.
func escapeTail(dst []byte, start int) []byte {
	if safeASCII(dst[start:]) {
		return dst
	}
	val := string(dst[start:])
	return appendSafe(dst[:start], val)
}

// Safe returns s as every renderer of this package prints a value: with
// control characters, bidirectional controls and invalid UTF-8 escaped.
// The CLI uses it for text it prints itself, such as the server's error
// messages.
func Safe(s string) string {
	if safeASCII(s) {
		return s
	}
	return string(appendSafe(nil, s))
}

// SafeText is Safe for text of several lines, such as an error message: it
// keeps newlines and tabs and escapes every other control character.
func SafeText(s string) string {
	if safeASCII(strings.NewReplacer("\n", " ", "\t", " ").Replace(s)) {
		return s
	}
	var b []byte
	for line := range strings.SplitSeq(s, "\n") {
		if b != nil {
			b = append(b, '\n')
		}
		for i, part := range strings.Split(line, "\t") {
			if i > 0 {
				b = append(b, '\t')
			}
			b = appendSafe(b, part)
		}
	}
	return string(b)
}
