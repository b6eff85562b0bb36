package nfsd

import (
	"encoding/binary"
	"sort"
)

// The NFSACL side protocol (program 100227, version 3) carries POSIX ACLs
// for NFSv3. The server needs it even where no file has an ACL: the
// guest's NFS client marks its mounts POSIX-ACL capable, so overlayfs,
// checking a permission on its own inode, asks the NFS lower layer for
// the file's ACL, and without this program the client answers
// EOPNOTSUPP, which fails every exec of a file that is not the user's
// own (root skips the check). With it, a file without an ACL reads as
// "none" and the mode bits decide; a file with one shows it, so the
// guest grants what the node grants.

const (
	progNFSACL = 100227
	aclVers    = 3

	aclProcNull   = 0
	aclProcGetacl = 1
	aclProcSetacl = 2

	// GETACL and SETACL mask bits.
	aclAccess      = 0x1
	aclAccessCount = 0x2
	aclDefault     = 0x4
	aclDefaultCnt  = 0x8
	aclMaskAll     = aclAccess | aclAccessCount | aclDefault | aclDefaultCnt

	// aclDefaultFlag marks the entries of a default ACL on the wire.
	aclDefaultFlag = 0x1000
	// maxACLEntries is the most entries the kernel's client and server
	// take (NFS_ACL_MAX_ENTRIES).
	maxACLEntries = 1024
)

// POSIX ACL entry tags, the same in the kernel's xattr format and on the
// wire.
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclEntry is one entry of a POSIX ACL.
type aclEntry struct {
	Tag  uint32
	ID   uint32
	Perm uint32
}

type getaclArgs struct {
	Obj  []byte
	Mask uint32
}

func decodeGetacl(b []byte) (getaclArgs, error) {
	r := newReader(b)
	a := getaclArgs{Obj: r.fh(), Mask: r.uint32()}
	if r.err == nil && a.Mask&^aclMaskAll != 0 {
		r.fail("getacl mask %#x", a.Mask)
	}
	return a, r.err
}

type setaclArgs struct {
	Obj     []byte
	Mask    uint32
	Access  []aclEntry
	Default []aclEntry
}

func decodeSetacl(b []byte) (setaclArgs, error) {
	r := newReader(b)
	a := setaclArgs{Obj: r.fh(), Mask: r.uint32()}
	if r.err == nil && a.Mask&^aclMaskAll != 0 {
		r.fail("setacl mask %#x", a.Mask)
	}
	a.Access = r.acl()
	a.Default = r.acl()
	return a, r.err
}

// acl reads one ACL: its entry count, then the entries as an array.
func (r *xdrReader) acl() []aclEntry {
	count := r.uint32()
	n := r.uint32()
	if r.err != nil {
		return nil
	}
	if count > maxACLEntries || n > count {
		r.fail("ACL of %d entries (count %d)", n, count)
		return nil
	}
	if uint64(n)*12 > uint64(len(r.b)) {
		r.fail("ACL of %d entries in %d bytes", n, len(r.b))
		return nil
	}
	var out []aclEntry
	for i := uint32(0); i < n; i++ {
		e := aclEntry{Tag: r.uint32() &^ aclDefaultFlag, ID: r.uint32(), Perm: r.uint32()}
		switch e.Tag {
		case aclUserObj, aclUser, aclGroupObj, aclGroup, aclOther:
			if e.Perm&^7 != 0 {
				r.fail("ACL entry permissions %#o", e.Perm)
			}
		case aclMask:
			e.Perm &= 7
		default:
			r.fail("ACL entry tag %#x", e.Tag)
		}
		out = append(out, e)
	}
	return out
}

// acl writes an ACL in the wire format: none is written as zero entries
// (the client then goes by the mode). The owner's and owning group's
// entries carry their ids, and a minimal ACL gets the mask entry Solaris
// wants, as the kernel's server does.
//
// With withEntries false only the count goes (the client asked for the
// count alone).
func (w *xdrWriter) acl(entries []aclEntry, withEntries bool, uid, gid, flag uint32) {
	if len(entries) == 3 {
		entries = []aclEntry{entries[0], entries[1], {Tag: aclMask, Perm: entries[1].Perm}, entries[2]}
	}
	w.uint32(uint32(len(entries)))
	if !withEntries {
		w.uint32(0)
		return
	}
	w.uint32(uint32(len(entries)))
	for _, e := range entries {
		w.uint32(e.Tag | flag)
		switch e.Tag {
		case aclUserObj:
			w.uint32(uid)
		case aclGroupObj:
			w.uint32(gid)
		case aclUser, aclGroup:
			w.uint32(e.ID)
		default:
			w.uint32(0)
		}
		w.uint32(e.Perm & 7)
	}
}

// xattrACL decodes the kernel's system.posix_acl_* value (version 2,
// little-endian {tag u16, perm u16, id u32} entries).
func xattrACL(b []byte) []aclEntry {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != 2 {
		return nil
	}
	var out []aclEntry
	for b = b[4:]; len(b) >= 8; b = b[8:] {
		out = append(out, aclEntry{Tag: uint32(binary.LittleEndian.Uint16(b)), Perm: uint32(binary.LittleEndian.Uint16(b[2:])),
			ID: binary.LittleEndian.Uint32(b[4:])})
	}
	return out
}

// aclXattr encodes entries as a system.posix_acl_* value, in the order
// the kernel wants (by tag, then id); ids of the entries that have none
// become ACL_UNDEFINED_ID.
func aclXattr(entries []aclEntry) []byte {
	sorted := append([]aclEntry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Tag != sorted[j].Tag {
			return sorted[i].Tag < sorted[j].Tag
		}
		return sorted[i].ID < sorted[j].ID
	})
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range sorted {
		id := e.ID
		if e.Tag != aclUser && e.Tag != aclGroup {
			id = 0xffffffff
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(e.Tag))
		b = binary.LittleEndian.AppendUint16(b, uint16(e.Perm))
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

// minimalACL reports whether entries say no more than a mode does (the
// owner, a group entry equal to the mask, the others), which is how the
// client sends "remove the ACL".
func minimalACL(entries []aclEntry) bool {
	var group, mask *aclEntry
	for i := range entries {
		switch entries[i].Tag {
		case aclUser, aclGroup:
			return false
		case aclGroupObj:
			group = &entries[i]
		case aclMask:
			mask = &entries[i]
		}
	}
	return mask == nil || (group != nil && mask.Perm == group.Perm)
}
