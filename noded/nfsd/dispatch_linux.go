package nfsd

import (
	"errors"
	"path/filepath"
)

// authTooWeak is the auth_stat of a credential flavor the server does not
// take (RPCSEC_GSS, say): only AUTH_NONE and AUTH_SYS are, and their
// content is ignored.
const authTooWeak = 5

// answer decodes one RPC call and returns its reply, record mark
// included, built in out; nil when the message deserves none (a reply, or
// bytes too short to hold an XID).
func (s *Server) answer(msg, out []byte) []byte {
	h, args, err := parseCall(msg)
	if errors.Is(err, errNotCall) {
		return nil
	}
	if err != nil && len(msg) < 8 {
		return nil
	}
	w := newReply(out, h.XID)
	switch {
	case err != nil:
		w.accepted(acceptGarbageArgs)
	case h.RPCVers != 2:
		w.rpcMismatch()
	case h.CredFlavor != authNone && h.CredFlavor != authSys:
		w.authError(authTooWeak)
	case h.Prog == progNFS:
		s.call(w, h, args, nfsVers, len(nfsProcs), func(w *xdrWriter) bool { return nfsProcs[h.Proc](s, args, w) })
	case h.Prog == progMount:
		s.call(w, h, args, mountVers, len(mountProcs), func(w *xdrWriter) bool { return mountProcs[h.Proc](s, args, w) })
	case h.Prog == progNFSACL:
		s.call(w, h, args, aclVers, len(aclProcs), func(w *xdrWriter) bool { return aclProcs[h.Proc](s, args, w) })
	default:
		w.accepted(acceptProgUnavail)
	}
	return w.finish()
}

// call answers a call of a program the server has: the version and the
// procedure must be known, and run answers GARBAGE_ARGS when the
// arguments do not decode.
func (s *Server) call(w *replyWriter, h callHeader, args []byte, vers uint32, procs int, run func(*xdrWriter) bool) {
	switch {
	case h.Vers != vers:
		w.progMismatch(vers)
	case h.Proc >= uint32(procs):
		w.accepted(acceptProcUnavail)
	default:
		start := len(w.b)
		w.accepted(acceptSuccess)
		if !run(&w.xdrWriter) {
			w.b = w.b[:start]
			w.accepted(acceptGarbageArgs)
		}
	}
}

// A mountProc is one MOUNT v3 procedure, as nfsProc.
type mountProc func(s *Server, args []byte, w *xdrWriter) bool

var mountProcs = [...]mountProc{
	mountProcNull:    func(*Server, []byte, *xdrWriter) bool { return true },
	mountProcMnt:     (*Server).mnt,
	mountProcDump:    func(_ *Server, _ []byte, w *xdrWriter) bool { w.bool(false); return true },
	mountProcUmnt:    func(_ *Server, args []byte, _ *xdrWriter) bool { _, err := decodeDirpath(args); return err == nil },
	mountProcUmntall: func(*Server, []byte, *xdrWriter) bool { return true },
	mountProcExport:  (*Server).exportList,
}

// mnt answers MNT with an export's root handle. Only exact export paths
// mount: a subdirectory of an export is reached by LOOKUP.
func (s *Server) mnt(args []byte, w *xdrWriter) bool {
	p, err := decodeDirpath(args)
	if err != nil {
		return false
	}
	e := s.byPath[filepath.Clean(p)]
	if e == nil {
		w.uint32(mountErrNoEnt)
		return true
	}
	w.uint32(nfsOK)
	w.opaque(e.fh)
	w.uint32(1) // auth flavors: AUTH_SYS
	w.uint32(authSys)
	return true
}

// exportList answers EXPORT: every export, open to all (the listener
// decides who connects).
func (s *Server) exportList(_ []byte, w *xdrWriter) bool {
	for _, e := range s.exports {
		w.bool(true)
		w.string(e.path)
		w.bool(false) // no groups
	}
	w.bool(false)
	return true
}
