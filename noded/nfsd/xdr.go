package nfsd

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// XDR (RFC 4506) as NFS uses it: big-endian 32-bit units, variable-length
// data preceded by its length and padded to a multiple of four bytes.

// errShort is wrapped by every decoding error: the caller answers
// GARBAGE_ARGS.
var errShort = errors.New("xdr: truncated or malformed data")

// xdrReader decodes XDR from a byte slice. The first failure sticks: later
// reads return zero values, and err says what went wrong, so a decoder
// reads every field and checks err once.
type xdrReader struct {
	b   []byte
	err error
}

func newReader(b []byte) *xdrReader { return &xdrReader{b: b} }

func (r *xdrReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{errShort}, args...)...)
	}
	r.b = nil
}

func (r *xdrReader) uint32() uint32 {
	if len(r.b) < 4 {
		r.fail("want 4 bytes, have %d", len(r.b))
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *xdrReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail("want 8 bytes, have %d", len(r.b))
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bool reads an XDR boolean, which must be 0 or 1.
func (r *xdrReader) bool() bool {
	v := r.uint32()
	if v > 1 {
		r.fail("boolean %d", v)
		return false
	}
	return v == 1
}

// fixed reads n bytes and their padding; the result aliases the input.
func (r *xdrReader) fixed(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.fail("want %d bytes, have %d", n, len(r.b))
		return nil
	}
	padded := (n + 3) &^ 3
	if padded > len(r.b) {
		r.fail("want %d bytes with padding, have %d", padded, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[padded:]
	return v
}

// opaque reads variable-length data of at most max bytes; the result
// aliases the input.
func (r *xdrReader) opaque(max int) []byte {
	n := r.uint32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.fail("length %d over the limit %d", n, max)
		return nil
	}
	return r.fixed(int(n))
}

// string reads a string of at most max bytes.
func (r *xdrReader) string(max int) string { return string(r.opaque(max)) }

// rest returns what is left unread.
func (r *xdrReader) rest() []byte { return r.b }

// xdrWriter encodes XDR into a growing byte slice.
type xdrWriter struct {
	b []byte
}

func (w *xdrWriter) uint32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *xdrWriter) uint64(v uint64) { w.b = binary.BigEndian.AppendUint64(w.b, v) }

func (w *xdrWriter) bool(v bool) {
	if v {
		w.uint32(1)
	} else {
		w.uint32(0)
	}
}

// fixed writes b and its padding.
func (w *xdrWriter) fixed(b []byte) {
	w.b = append(w.b, b...)
	for n := len(b); n%4 != 0; n++ {
		w.b = append(w.b, 0)
	}
}

// opaque writes variable-length data: its length, the bytes, the padding.
func (w *xdrWriter) opaque(b []byte) {
	w.uint32(uint32(len(b)))
	w.fixed(b)
}

func (w *xdrWriter) string(s string) { w.opaque([]byte(s)) }

// opaqueLen is the encoded size of variable-length data of n bytes.
func opaqueLen(n int) int { return 4 + (n+3)&^3 }
