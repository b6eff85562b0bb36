package nfsd

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/fnv"
)

// handle is what an NFS file handle of this server holds: the export it
// was issued under, the identity of the file system the object is on and
// the kernel's own handle of the object on that file system
// (name_to_handle_at). None of it is local to one server process or one
// node: a restarted server, or the server of another node that mounts the
// same file system, decodes the same handle to the same object. The
// mount id name_to_handle_at also returns is local to one node and is never
// put in a handle.
//
// Every handle carries a MAC under the job's handle key (Config.HandleKey)
// over all of it. Without one, a guest could make a handle up: take the
// handle of any file from the read-only root export, write the id of a
// shared path's export into it, and write to that file, anywhere on the
// node, as the job's user (as root for a root job). The kernel handles
// themselves are no secret (they hold inode and generation numbers); the
// MAC is what says this server issued the handle, under that export.
//
// Encoding (at most fhMax = 64 bytes):
//
//	byte 0      handleVersion
//	bytes 1-4   export id (fnv32a of the export's path)
//	bytes 5-12  file system key (fsKey: its type and f_fsid)
//	byte 13     the kernel handle's type (FILEID_* values are below 256)
//	bytes 14-21 the first 8 bytes of HMAC-SHA256(key, bytes 0-13 and 22-)
//	bytes 22-   the kernel handle's bytes (at most 42)
type handle struct {
	Export uint32
	FSKey  uint64
	Type   int32
	Kernel []byte
}

const (
	handleVersion   = 2
	macAt, macLen   = 14, 8
	handleHeader    = macAt + macLen
	maxKernelHandle = fhMax - handleHeader
	// HandleKeyLen is the length of a handle key.
	HandleKeyLen = 32
)

var (
	errBadHandle = errors.New("malformed file handle")
	// errHandleTooLong says a file system's kernel handles do not fit in
	// an NFSv3 handle with this server's header.
	errHandleTooLong = errors.New("the file system's handle is too long for NFSv3")
)

// handleKey authenticates handles (see handle).
type handleKey []byte

// newHandleKey returns a random key.
func newHandleKey() (handleKey, error) {
	k := make(handleKey, HandleKeyLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// mac returns the MAC of an encoded handle b (its MAC bytes left out).
func (k handleKey) mac(b []byte) [macLen]byte {
	m := hmac.New(sha256.New, k)
	m.Write(b[:macAt])
	m.Write(b[handleHeader:])
	var out [macLen]byte
	copy(out[:], m.Sum(nil))
	return out
}

func (k handleKey) encode(h handle) ([]byte, error) {
	if len(h.Kernel) > maxKernelHandle || h.Type < 0 || h.Type > 0xff {
		return nil, errHandleTooLong
	}
	b := make([]byte, handleHeader, handleHeader+len(h.Kernel))
	b[0] = handleVersion
	binary.BigEndian.PutUint32(b[1:], h.Export)
	binary.BigEndian.PutUint64(b[5:], h.FSKey)
	b[13] = byte(h.Type)
	b = append(b, h.Kernel...)
	m := k.mac(b)
	copy(b[macAt:], m[:])
	return b, nil
}

// decode reads a handle this server (or another with the same key)
// issued; anything else, a handle of another key or version among them,
// is errBadHandle (NFS3ERR_BADHANDLE).
func (k handleKey) decode(b []byte) (handle, error) {
	if len(b) < handleHeader+1 || len(b) > fhMax || b[0] != handleVersion {
		return handle{}, errBadHandle
	}
	if m := k.mac(b); !hmac.Equal(m[:], b[macAt:handleHeader]) {
		return handle{}, errBadHandle
	}
	return handle{
		Export: binary.BigEndian.Uint32(b[1:]),
		FSKey:  binary.BigEndian.Uint64(b[5:]),
		Type:   int32(b[13]),
		Kernel: b[handleHeader:],
	}, nil
}

// exportOf reads the export id of an encoded handle, unchecked.
func exportOf(b []byte) (uint32, bool) {
	if len(b) < handleHeader {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[1:]), true
}

// sameObject reports whether two handles name the same object.
func (h handle) sameObject(o handle) bool {
	return h.FSKey == o.FSKey && h.Type == o.Type && string(h.Kernel) == string(o.Kernel)
}

// exportID names an export in handles: the same path gives the same id on
// every node and in every server process.
func exportID(path string) uint32 {
	f := fnv.New32a()
	f.Write([]byte(path))
	return f.Sum32()
}

// fsKey identifies a file system by its type and f_fsid (statfs), which
// disk file systems derive from their UUID and cluster file systems from
// their own identity, so that it is the same on every node that mounts
// it. dev, the device number, stands in only where f_fsid is zero.
func fsKey(fsType int64, fsid [2]int32, dev uint64) uint64 {
	f := fnv.New64a()
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], uint64(fsType))
	binary.BigEndian.PutUint32(b[8:], uint32(fsid[0]))
	binary.BigEndian.PutUint32(b[12:], uint32(fsid[1]))
	if fsid == [2]int32{} {
		binary.BigEndian.PutUint64(b[16:], dev)
	}
	f.Write(b[:])
	return f.Sum64()
}

// fileID is the fileid the client sees: the inode number, made distinct
// for objects on other file systems than the export's own (an export
// shows the file systems mounted below it as one, with one fsid, so that
// the guest mounts no submounts).
func fileID(ino uint64, key, exportKey uint64) uint64 {
	if key == exportKey {
		return ino
	}
	return ino ^ (key&0xffffff)<<40
}
