package nfsd

// Encoders of the procedures' arguments, the client's side of args.go:
// the test client sends them and the fuzz targets check that decoding
// what they encode gives the arguments back.

func (w *xdrWriter) sattr(a sattr) {
	w.bool(a.SetMode)
	if a.SetMode {
		w.uint32(a.Mode)
	}
	w.bool(a.SetUID)
	if a.SetUID {
		w.uint32(a.UID)
	}
	w.bool(a.SetGID)
	if a.SetGID {
		w.uint32(a.GID)
	}
	w.bool(a.SetSize)
	if a.SetSize {
		w.uint64(a.Size)
	}
	for _, t := range []struct {
		how uint32
		v   nfstime
	}{{a.Atime, a.AtimeV}, {a.Mtime, a.MtimeV}} {
		w.uint32(t.how)
		if t.how == timeClient {
			w.uint32(t.v.Sec)
			w.uint32(t.v.Nsec)
		}
	}
}

func (w *xdrWriter) dirop(a diropArgs) {
	w.opaque(a.Dir)
	w.string(a.Name)
}

func encodeFH(fh []byte) []byte { w := &xdrWriter{}; w.opaque(fh); return w.b }

func encodeDirop(a diropArgs) []byte { w := &xdrWriter{}; w.dirop(a); return w.b }

func encodeSetattr(a setattrArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.Obj)
	w.sattr(a.Attr)
	w.bool(a.Guard)
	if a.Guard {
		w.uint32(a.GuardCtime.Sec)
		w.uint32(a.GuardCtime.Nsec)
	}
	return w.b
}

func encodeAccess(a accessArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.Obj)
	w.uint32(a.Access)
	return w.b
}

func encodeRead(a readArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.File)
	w.uint64(a.Offset)
	w.uint32(a.Count)
	return w.b
}

func encodeWrite(a writeArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.File)
	w.uint64(a.Offset)
	w.uint32(a.Count)
	w.uint32(a.Stable)
	w.opaque(a.Data)
	return w.b
}

func encodeCreate(a createArgs) []byte {
	w := &xdrWriter{}
	w.dirop(a.Where)
	w.uint32(a.Mode)
	if a.Mode == createExclusive {
		w.fixed(a.Verf[:])
	} else {
		w.sattr(a.Attr)
	}
	return w.b
}

func encodeMkdir(a mkdirArgs) []byte {
	w := &xdrWriter{}
	w.dirop(a.Where)
	w.sattr(a.Attr)
	return w.b
}

func encodeSymlink(a symlinkArgs) []byte {
	w := &xdrWriter{}
	w.dirop(a.Where)
	w.sattr(a.Attr)
	w.string(a.Target)
	return w.b
}

func encodeMknod(a mknodArgs) []byte {
	w := &xdrWriter{}
	w.dirop(a.Where)
	w.uint32(a.Type)
	switch a.Type {
	case typeChr, typeBlk:
		w.sattr(a.Attr)
		w.uint32(a.Major)
		w.uint32(a.Minor)
	case typeSock, typeFifo:
		w.sattr(a.Attr)
	}
	return w.b
}

func encodeRename(a renameArgs) []byte {
	w := &xdrWriter{}
	w.dirop(a.From)
	w.dirop(a.To)
	return w.b
}

func encodeLink(a linkArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.File)
	w.dirop(a.Link)
	return w.b
}

func encodeReaddir(a readdirArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.Dir)
	w.uint64(a.Cookie)
	w.fixed(a.Verf[:])
	w.uint32(a.Count)
	return w.b
}

func encodeReaddirplus(a readdirArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.Dir)
	w.uint64(a.Cookie)
	w.fixed(a.Verf[:])
	w.uint32(a.Count)
	w.uint32(a.MaxCount)
	return w.b
}

func encodeCommit(a commitArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.File)
	w.uint64(a.Offset)
	w.uint32(a.Count)
	return w.b
}

func encodeGetacl(a getaclArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.Obj)
	w.uint32(a.Mask)
	return w.b
}

func encodeSetacl(a setaclArgs) []byte {
	w := &xdrWriter{}
	w.opaque(a.Obj)
	w.uint32(a.Mask)
	for _, acl := range [][]aclEntry{a.Access, a.Default} {
		w.uint32(uint32(len(acl)))
		w.uint32(uint32(len(acl)))
		for _, e := range acl {
			w.uint32(e.Tag)
			w.uint32(e.ID)
			w.uint32(e.Perm)
		}
	}
	return w.b
}
