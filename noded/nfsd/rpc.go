package nfsd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ONC RPC version 2 (RFC 5531) over TCP: record marking, the call header
// and the reply header.

// Programs and versions the server answers.
const (
	progNFS   = 100003
	progMount = 100005
	nfsVers   = 3
	mountVers = 3
)

// Message types, reply and accept states, reject states and auth flavors.
const (
	msgCall  = 0
	msgReply = 1

	replyAccepted = 0
	replyDenied   = 1

	acceptSuccess      = 0
	acceptProgUnavail  = 1
	acceptProgMismatch = 2
	acceptProcUnavail  = 3
	acceptGarbageArgs  = 4
	acceptSystemErr    = 5

	rejectRPCMismatch = 0
	rejectAuthError   = 1

	authNone = 0
	authSys  = 1

	authBadCred = 1 // auth_stat AUTH_BADCRED
)

// maxAuthBody is the longest credential or verifier body RFC 5531 allows.
const maxAuthBody = 400

// maxRecord bounds one RPC message: a WRITE of wtmax bytes and its
// headers fit with room to spare. A longer record ends the connection.
const maxRecord = maxIO + 64<<10

// readRecord reads one record (all its fragments) from r into buf, which
// it grows as needed, and returns it. It refuses a record longer than
// limit without reading it all: the connection cannot be trusted further.
func readRecord(r io.Reader, buf []byte, limit int) ([]byte, error) {
	buf = buf[:0]
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		h := binary.BigEndian.Uint32(hdr[:])
		last, n := h&0x80000000 != 0, int(h&0x7fffffff)
		if len(buf)+n > limit {
			return buf, fmt.Errorf("rpc: record of more than %d bytes (a fragment of %d after %d)", limit, n, len(buf))
		}
		start := len(buf)
		if cap(buf) < start+n {
			grown := make([]byte, start, start+n+start/2)
			copy(grown, buf)
			buf = grown
		}
		buf = buf[:start+n]
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		if last {
			return buf, nil
		}
	}
}

// recordHeader returns the record mark of a one-fragment record of n
// bytes.
func recordHeader(n int) [4]byte {
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], 0x80000000|uint32(n))
	return h
}

// callHeader is what the server reads of an RPC call before its
// arguments. The credential is checked for form only: the server acts as
// the job's user whatever the guest claims (see the package
// documentation).
type callHeader struct {
	XID        uint32
	RPCVers    uint32
	Prog, Vers uint32
	Proc       uint32
	CredFlavor uint32
}

// errNotCall is returned for a message that is not a call: a server
// ignores replies sent to it.
var errNotCall = errors.New("rpc: not a call")

// parseCall decodes a call header and returns the arguments that follow.
// An error other than errNotCall means the header itself is malformed;
// the XID is then still set when it could be read, so that the caller can
// answer GARBAGE_ARGS.
func parseCall(msg []byte) (callHeader, []byte, error) {
	r := newReader(msg)
	var h callHeader
	h.XID = r.uint32()
	mtype := r.uint32()
	if r.err != nil {
		return h, nil, r.err
	}
	if mtype != msgCall {
		return h, nil, errNotCall
	}
	h.RPCVers = r.uint32()
	h.Prog = r.uint32()
	h.Vers = r.uint32()
	h.Proc = r.uint32()
	h.CredFlavor = r.uint32()
	r.opaque(maxAuthBody)
	r.uint32() // verifier flavor
	r.opaque(maxAuthBody)
	if r.err != nil {
		return h, nil, r.err
	}
	return h, r.rest(), nil
}

// replyWriter builds one reply message, record mark first.
type replyWriter struct {
	xdrWriter
}

// newReply starts a reply to xid with room for the record mark.
func newReply(buf []byte, xid uint32) *replyWriter {
	w := &replyWriter{xdrWriter{b: append(buf[:0], 0, 0, 0, 0)}}
	w.uint32(xid)
	w.uint32(msgReply)
	return w
}

// accepted writes an accepted reply's header with the given state and a
// null verifier; results follow for acceptSuccess.
func (w *replyWriter) accepted(stat uint32) {
	w.uint32(replyAccepted)
	w.uint32(authNone)
	w.uint32(0)
	w.uint32(stat)
}

// progMismatch writes PROG_MISMATCH with the one supported version.
func (w *replyWriter) progMismatch(vers uint32) {
	w.accepted(acceptProgMismatch)
	w.uint32(vers)
	w.uint32(vers)
}

// rpcMismatch writes a denied reply for an RPC version other than 2.
func (w *replyWriter) rpcMismatch() {
	w.uint32(replyDenied)
	w.uint32(rejectRPCMismatch)
	w.uint32(2)
	w.uint32(2)
}

// authError writes a denied reply for a credential flavor the server does
// not take.
func (w *replyWriter) authError(stat uint32) {
	w.uint32(replyDenied)
	w.uint32(rejectAuthError)
	w.uint32(stat)
}

// finish fills in the record mark and returns the bytes to send.
func (w *replyWriter) finish() []byte {
	h := recordHeader(len(w.b) - 4)
	copy(w.b, h[:])
	return w.b
}
