package nfsd

import (
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
// Encoding (at most fhMax = 64 bytes):
//
//	byte 0      handleVersion
//	bytes 1-4   export id (fnv32a of the export's path)
//	bytes 5-12  file system key (fsKey: its type and f_fsid)
//	bytes 13-16 the kernel handle's type
//	bytes 17-   the kernel handle's bytes (at most 47)
type handle struct {
	Export uint32
	FSKey  uint64
	Type   int32
	Kernel []byte
}

const (
	handleVersion   = 1
	handleHeader    = 17
	maxKernelHandle = fhMax - handleHeader
)

var (
	errBadHandle = errors.New("malformed file handle")
	// errHandleTooLong says a file system's kernel handles do not fit in
	// an NFSv3 handle with this server's header.
	errHandleTooLong = errors.New("the file system's handle is too long for NFSv3")
)

func (h handle) encode() ([]byte, error) {
	if len(h.Kernel) > maxKernelHandle {
		return nil, errHandleTooLong
	}
	b := make([]byte, handleHeader, handleHeader+len(h.Kernel))
	b[0] = handleVersion
	binary.BigEndian.PutUint32(b[1:], h.Export)
	binary.BigEndian.PutUint64(b[5:], h.FSKey)
	binary.BigEndian.PutUint32(b[13:], uint32(h.Type))
	return append(b, h.Kernel...), nil
}

// decodeHandle reads a handle this server issued; anything else is
// errBadHandle (NFS3ERR_BADHANDLE).
func decodeHandle(b []byte) (handle, error) {
	if len(b) < handleHeader+1 || len(b) > fhMax || b[0] != handleVersion {
		return handle{}, errBadHandle
	}
	return handle{
		Export: binary.BigEndian.Uint32(b[1:]),
		FSKey:  binary.BigEndian.Uint64(b[5:]),
		Type:   int32(binary.BigEndian.Uint32(b[13:])),
		Kernel: b[handleHeader:],
	}, nil
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
