package nfsd

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// READDIR and READDIRPLUS are stateless: a cookie is the kernel's own
// directory offset of the entry after which to go on (getdents64's d_off),
// which the server seeks to on a descriptor opened afresh. Disk file
// systems keep those offsets stable (ext4 hashes names into them), so a
// cookie stays good across server restarts and, for a shared file system,
// nodes. The cookie verifier is always zero, as with the kernel's server.

// dirent is one entry getdents64 returned.
type dirent struct {
	ino  uint64
	off  uint64
	name string
}

// parseDirents decodes getdents64 records (struct linux_dirent64).
func parseDirents(b []byte, out []dirent) []dirent {
	for len(b) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(b[16:]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		out = append(out, dirent{ino: binary.NativeEndian.Uint64(b), off: binary.NativeEndian.Uint64(b[8:]), name: string(name)})
		b = b[reclen:]
	}
	return out
}

// Fixed sizes of READDIR(PLUS) replies, for fitting entries into the
// client's count.
const (
	readdirHead  = 4 + 4 + 84 + 8 // status, dir attributes, verifier
	readdirTail  = 4 + 4          // end of list, eof
	entryFixed   = 4 + 8 + 8      // value follows, fileid, cookie
	entryPlusMax = 4 + 84 + 4 + 4 // name attributes and handle, besides the handle's bytes
)

func (s *Server) readdir(args []byte, w *xdrWriter) bool {
	a, err := decodeReaddir(args)
	if err != nil {
		return false
	}
	s.listDir(a, w)
	return true
}

func (s *Server) readdirplus(args []byte, w *xdrWriter) bool {
	a, err := decodeReaddirplus(args)
	if err != nil {
		return false
	}
	s.listDir(a, w)
	return true
}

// listDir answers READDIR and READDIRPLUS.
func (s *Server) listDir(a readdirArgs, w *xdrWriter) {
	start := len(w.b)
	dir := s.resolveFor(w, a.Dir, noAttrs)
	if dir == nil {
		return
	}
	defer dir.close()
	ents, eof, err := s.readEntries(dir, a.Cookie, a.MaxCount)
	dattr := s.attrsOrNil(dir)
	if w.status(err) != nfsOK {
		w.postOpAttr(dattr)
		return
	}
	w.postOpAttr(dattr)
	w.fixed(make([]byte, 8)) // cookie verifier
	used, listed := readdirHead+readdirTail, 0
	dirUsed := 0
	for _, e := range ents {
		size := entryFixed + opaqueLen(len(e.name))
		var fh []byte
		var ea *attrs
		if a.Plus {
			// Entries the user may not look up come without a handle
			// or attributes: the client looks them up itself.
			fh, ea, _ = s.child(dir, e.name)
			size += entryPlusMax + len(fh) + 3
		}
		if used+size > int(a.MaxCount) || (a.Plus && dirUsed+entryFixed+opaqueLen(len(e.name)) > int(a.Count)) {
			eof = false
			break
		}
		used += size
		dirUsed += entryFixed + opaqueLen(len(e.name))
		listed++
		w.bool(true)
		fileid := e.ino
		if ea != nil {
			fileid = ea.fileid
		}
		w.uint64(fileid)
		w.string(e.name)
		w.uint64(e.off)
		if a.Plus {
			w.postOpAttr(ea)
			w.postOpFH(fh)
		}
	}
	if listed == 0 && len(ents) > 0 {
		// Not even one entry fits the client's count.
		w.b = w.b[:start]
		w.uint32(errTooSmall)
		w.postOpAttr(dattr)
		return
	}
	w.bool(false)
	w.bool(eof)
}

// readEntries reads the entries after cookie, about as many as a reply of
// count bytes can hold, as the user (who needs read permission on the
// directory). eof says the directory has no more.
func (s *Server) readEntries(dir *object, cookie uint64, count uint32) ([]dirent, bool, error) {
	fd, err := unix.Open(procPath(dir.fd), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	if cookie != 0 {
		if _, err := unix.Seek(fd, int64(cookie), 0); err != nil {
			return nil, false, unix.EINVAL
		}
	}
	// An entry of the reply takes at least 24 bytes: reading much more
	// than count/24 entries is wasted.
	want := int(count)/24 + 1
	buf := make([]byte, 32<<10)
	var ents []dirent
	for len(ents) < want {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			return ents, true, nil
		}
		ents = parseDirents(buf[:n], ents)
	}
	return ents, false, nil
}
