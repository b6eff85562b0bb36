package nfsd

// The NFSv3 (RFC 1813) and MOUNT v3 procedures' arguments and their
// decoders. Each decoder reads one procedure's arguments from the bytes
// after the call header and fails (the server answers GARBAGE_ARGS) when
// they are truncated or malformed. Limits that have an NFS error of their
// own (a name too long) are checked by the procedure, not here.

// NFSv3 procedures.
const (
	procNull        = 0
	procGetattr     = 1
	procSetattr     = 2
	procLookup      = 3
	procAccess      = 4
	procReadlink    = 5
	procRead        = 6
	procWrite       = 7
	procCreate      = 8
	procMkdir       = 9
	procSymlink     = 10
	procMknod       = 11
	procRemove      = 12
	procRmdir       = 13
	procRename      = 14
	procLink        = 15
	procReaddir     = 16
	procReaddirplus = 17
	procFsstat      = 18
	procFsinfo      = 19
	procPathconf    = 20
	procCommit      = 21
)

// MOUNT v3 procedures.
const (
	mountProcNull    = 0
	mountProcMnt     = 1
	mountProcDump    = 2
	mountProcUmnt    = 3
	mountProcUmntall = 4
	mountProcExport  = 5
)

// Sizes of the protocol.
const (
	fhMax      = 64   // NFS3_FHSIZE
	maxName    = 255  // the longest name the server passes on (NAME_MAX)
	maxNameXDR = 4096 // the longest name it decodes, to answer NAMETOOLONG
	maxPath    = 4096 // symlink targets and MOUNT dirpaths (MNTPATHLEN is 1024)
	maxIO      = 1 << 20
)

// Ways to set a time in SETATTR (time_how).
const (
	timeDontChange = 0
	timeServer     = 1
	timeClient     = 2
)

// CREATE modes (createmode3).
const (
	createUnchecked = 0
	createGuarded   = 1
	createExclusive = 2
)

// WRITE stability (stable_how).
const (
	unstable = 0
	dataSync = 1
	fileSync = 2
)

// nfstime is nfstime3.
type nfstime struct {
	Sec, Nsec uint32
}

// sattr is sattr3: the attributes a client sets; each is set only when
// its flag is.
type sattr struct {
	SetMode bool
	Mode    uint32
	SetUID  bool
	UID     uint32
	SetGID  bool
	GID     uint32
	SetSize bool
	Size    uint64
	Atime   uint32 // time_how
	AtimeV  nfstime
	Mtime   uint32
	MtimeV  nfstime
}

func (r *xdrReader) time() nfstime { return nfstime{Sec: r.uint32(), Nsec: r.uint32()} }

func (r *xdrReader) sattr() sattr {
	var a sattr
	if a.SetMode = r.bool(); a.SetMode {
		a.Mode = r.uint32()
	}
	if a.SetUID = r.bool(); a.SetUID {
		a.UID = r.uint32()
	}
	if a.SetGID = r.bool(); a.SetGID {
		a.GID = r.uint32()
	}
	if a.SetSize = r.bool(); a.SetSize {
		a.Size = r.uint64()
	}
	a.Atime = r.setTime(&a.AtimeV)
	a.Mtime = r.setTime(&a.MtimeV)
	return a
}

func (r *xdrReader) setTime(v *nfstime) uint32 {
	how := r.uint32()
	switch how {
	case timeDontChange, timeServer:
	case timeClient:
		*v = r.time()
	default:
		r.fail("time_how %d", how)
	}
	return how
}

func (r *xdrReader) fh() []byte { return r.opaque(fhMax) }

// diropArgs is diropargs3: a name in a directory.
type diropArgs struct {
	Dir  []byte
	Name string
}

func (r *xdrReader) dirop() diropArgs { return diropArgs{Dir: r.fh(), Name: r.string(maxNameXDR)} }

// decodeFH decodes the arguments of GETATTR, READLINK, FSSTAT, FSINFO and
// PATHCONF: one file handle.
func decodeFH(b []byte) ([]byte, error) {
	r := newReader(b)
	fh := r.fh()
	return fh, r.err
}

// decodeDirop decodes the arguments of LOOKUP, REMOVE and RMDIR.
func decodeDirop(b []byte) (diropArgs, error) {
	r := newReader(b)
	a := r.dirop()
	return a, r.err
}

type setattrArgs struct {
	Obj        []byte
	Attr       sattr
	Guard      bool
	GuardCtime nfstime
}

func decodeSetattr(b []byte) (setattrArgs, error) {
	r := newReader(b)
	a := setattrArgs{Obj: r.fh(), Attr: r.sattr()}
	if a.Guard = r.bool(); a.Guard {
		a.GuardCtime = r.time()
	}
	return a, r.err
}

type accessArgs struct {
	Obj    []byte
	Access uint32
}

func decodeAccess(b []byte) (accessArgs, error) {
	r := newReader(b)
	a := accessArgs{Obj: r.fh(), Access: r.uint32()}
	return a, r.err
}

type readArgs struct {
	File   []byte
	Offset uint64
	Count  uint32
}

func decodeRead(b []byte) (readArgs, error) {
	r := newReader(b)
	a := readArgs{File: r.fh(), Offset: r.uint64(), Count: r.uint32()}
	return a, r.err
}

type writeArgs struct {
	File   []byte
	Offset uint64
	Count  uint32
	Stable uint32
	Data   []byte // aliases the request
}

func decodeWrite(b []byte) (writeArgs, error) {
	r := newReader(b)
	a := writeArgs{File: r.fh(), Offset: r.uint64(), Count: r.uint32(), Stable: r.uint32()}
	a.Data = r.opaque(maxIO)
	if r.err == nil && a.Stable > fileSync {
		r.fail("stable_how %d", a.Stable)
	}
	if r.err == nil && int(a.Count) > len(a.Data) {
		r.fail("count %d with %d bytes of data", a.Count, len(a.Data))
	}
	if r.err == nil {
		a.Data = a.Data[:a.Count]
	}
	return a, r.err
}

type createArgs struct {
	Where diropArgs
	Mode  uint32 // createmode3
	Attr  sattr  // UNCHECKED and GUARDED
	Verf  [8]byte
}

func decodeCreate(b []byte) (createArgs, error) {
	r := newReader(b)
	a := createArgs{Where: r.dirop(), Mode: r.uint32()}
	switch a.Mode {
	case createUnchecked, createGuarded:
		a.Attr = r.sattr()
	case createExclusive:
		copy(a.Verf[:], r.fixed(8))
	default:
		r.fail("createmode3 %d", a.Mode)
	}
	return a, r.err
}

type mkdirArgs struct {
	Where diropArgs
	Attr  sattr
}

func decodeMkdir(b []byte) (mkdirArgs, error) {
	r := newReader(b)
	a := mkdirArgs{Where: r.dirop(), Attr: r.sattr()}
	return a, r.err
}

type symlinkArgs struct {
	Where  diropArgs
	Attr   sattr
	Target string
}

func decodeSymlink(b []byte) (symlinkArgs, error) {
	r := newReader(b)
	a := symlinkArgs{Where: r.dirop(), Attr: r.sattr(), Target: r.string(maxPath)}
	return a, r.err
}

// File types (ftype3).
const (
	typeReg  = 1
	typeDir  = 2
	typeBlk  = 3
	typeChr  = 4
	typeLnk  = 5
	typeSock = 6
	typeFifo = 7
)

type mknodArgs struct {
	Where        diropArgs
	Type         uint32
	Attr         sattr
	Major, Minor uint32 // character and block devices
}

func decodeMknod(b []byte) (mknodArgs, error) {
	r := newReader(b)
	a := mknodArgs{Where: r.dirop(), Type: r.uint32()}
	switch a.Type {
	case typeChr, typeBlk:
		a.Attr = r.sattr()
		a.Major, a.Minor = r.uint32(), r.uint32()
	case typeSock, typeFifo:
		a.Attr = r.sattr()
	case typeReg, typeDir, typeLnk:
		// No arguments follow: the procedure answers BADTYPE.
	default:
		r.fail("ftype3 %d", a.Type)
	}
	return a, r.err
}

type renameArgs struct {
	From, To diropArgs
}

func decodeRename(b []byte) (renameArgs, error) {
	r := newReader(b)
	a := renameArgs{From: r.dirop(), To: r.dirop()}
	return a, r.err
}

type linkArgs struct {
	File []byte
	Link diropArgs
}

func decodeLink(b []byte) (linkArgs, error) {
	r := newReader(b)
	a := linkArgs{File: r.fh(), Link: r.dirop()}
	return a, r.err
}

type readdirArgs struct {
	Dir    []byte
	Cookie uint64
	Verf   [8]byte
	Count  uint32
	// MaxCount is READDIRPLUS's maxcount; Count is its dircount.
	MaxCount uint32
	Plus     bool
}

func decodeReaddir(b []byte) (readdirArgs, error) {
	r := newReader(b)
	a := readdirArgs{Dir: r.fh(), Cookie: r.uint64()}
	copy(a.Verf[:], r.fixed(8))
	a.Count = r.uint32()
	a.MaxCount = a.Count
	return a, r.err
}

func decodeReaddirplus(b []byte) (readdirArgs, error) {
	r := newReader(b)
	a := readdirArgs{Dir: r.fh(), Cookie: r.uint64(), Plus: true}
	copy(a.Verf[:], r.fixed(8))
	a.Count, a.MaxCount = r.uint32(), r.uint32()
	return a, r.err
}

type commitArgs struct {
	File   []byte
	Offset uint64
	Count  uint32
}

func decodeCommit(b []byte) (commitArgs, error) {
	r := newReader(b)
	a := commitArgs{File: r.fh(), Offset: r.uint64(), Count: r.uint32()}
	return a, r.err
}

// decodeDirpath decodes the argument of MOUNT's MNT and UMNT: a path of
// at most MNTPATHLEN (1024) bytes.
func decodeDirpath(b []byte) (string, error) {
	r := newReader(b)
	p := r.string(1024)
	return p, r.err
}
