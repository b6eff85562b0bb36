package nfsd

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// mountTable maps the node's mounts to file system keys (fsKey) and keeps
// one open descriptor per file system, which open_by_handle_at needs to
// know where to decode a kernel handle. It is read from
// /proc/self/mountinfo, again when an unknown mount or key turns up (a file
// system mounted after the server started), at most every rescanEvery.
type mountTable struct {
	mu      sync.Mutex
	byMount map[int]uint64 // mount id -> key
	fds     map[uint64]int // key -> O_PATH descriptor of one mount of it
	// open holds the descriptors open_by_handle_at gets, which must not
	// be O_PATH ones: each is opened from its O_PATH one when first
	// needed, so that scanning the mounts opens no directory for reading
	// (which could trigger an automount).
	open    map[uint64]int
	scanned time.Time
}

const rescanEvery = 200 * time.Millisecond

func newMountTable() (*mountTable, error) {
	m := &mountTable{byMount: map[int]uint64{}, fds: map[uint64]int{}, open: map[uint64]int{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.scan(); err != nil {
		return nil, err
	}
	return m, nil
}

// key returns the file system key of a mount id name_to_handle_at gave.
func (m *mountTable) key(mountID int) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.byMount[mountID]; ok {
		return k, nil
	}
	m.rescan()
	if k, ok := m.byMount[mountID]; ok {
		return k, nil
	}
	return 0, fmt.Errorf("mount %d is not in /proc/self/mountinfo", mountID)
}

// fd returns a descriptor on the file system with the given key, or
// unix.ESTALE when the node does not mount it.
func (m *mountTable) fd(key uint64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fd, ok := m.open[key]; ok {
		return fd, nil
	}
	pfd, ok := m.fds[key]
	if !ok {
		m.rescan()
		if pfd, ok = m.fds[key]; !ok {
			return -1, unix.ESTALE
		}
	}
	fd, err := unix.Open(procPath(pfd), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	m.open[key] = fd
	return fd, nil
}

func (m *mountTable) rescan() {
	if time.Since(m.scanned) < rescanEvery {
		return
	}
	m.scan()
}

// scan reads mountinfo and opens each mount point it does not know yet.
// A mount point that cannot be opened (hidden under another mount, or
// gone) is skipped: objects on it cannot be reached by path either.
func (m *mountTable) scan() error {
	m.scanned = time.Now()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("reading the node's mounts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		id, point, ok := parseMountinfo(sc.Text())
		if !ok {
			continue
		}
		if _, known := m.byMount[id]; known {
			continue
		}
		m.add(point)
	}
	return sc.Err()
}

// add opens a mount point and records its file system under the mount id
// the descriptor really is on (another mount may hide the one listed).
func (m *mountTable) add(point string) {
	fd, err := unix.Open(point, unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return
	}
	key, mnt, err := describe(fd)
	if err != nil {
		unix.Close(fd)
		return
	}
	m.byMount[mnt] = key
	if _, have := m.fds[key]; have {
		unix.Close(fd)
		return
	}
	m.fds[key] = fd
}

// describe returns the file system key and mount id of a descriptor.
func describe(fd int) (key uint64, mountID int, err error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return 0, 0, err
	}
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, 0, errors.New("statx gives no mount id (Linux 5.8 or later is needed)")
	}
	dev := unix.Mkdev(stx.Dev_major, stx.Dev_minor)
	return fsKey(sfs.Type, sfs.Fsid.Val, dev), int(stx.Mnt_id), nil
}

// parseMountinfo returns a mountinfo line's mount id and mount point
// (with its octal escapes undone).
func parseMountinfo(line string) (int, string, bool) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return 0, "", false
	}
	id, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, "", false
	}
	return id, unescapeMountinfo(f[4]), true
}

func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
