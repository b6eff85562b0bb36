package vmrun

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// IDRange is a range of uids (and the gids of the same numbers) reserved
// on the node for job VMs' QEMU processes: no user, file or other service
// of the node may use them. They need no /etc/passwd entry.
type IDRange struct {
	// First is the range's first id.
	First uint32
	// Count is how many ids it holds: the most VMs that can run at once.
	Count uint32
}

// DefaultVMIDs is the range of Config.VMIDs when none is set: 65536 ids
// from 0x70000000, above the ranges that useradd, systemd's dynamic users
// and the usual /etc/subuid allotments hand out, and below 2^31, which
// some tools read as negative.
var DefaultVMIDs = IDRange{First: 0x70000000, Count: 65536}

// contains reports whether id lies in the range.
func (r IDRange) contains(id uint32) bool {
	return id >= r.First && uint64(id) < uint64(r.First)+uint64(r.Count)
}

// check says what is wrong with a configured range.
func (r IDRange) check() error {
	if r.Count == 0 {
		return errors.New("the VM id range is empty: give it a count of at least the VMs the node runs at once")
	}
	if r.First == 0 || uint64(r.First)+uint64(r.Count) > 0xFFFFFFFF {
		return fmt.Errorf("the VM id range %d+%d must lie within 1..4294967294 (uid 0 is root, 4294967295 means none)", r.First, r.Count)
	}
	return nil
}

// heldIDs are the VM ids held by running VMs (and VMs being started) of
// every Runner of this process, each with its state directory: one
// process may run several node daemons (corral dev), whose VMs must not
// share an id either.
var heldIDs = struct {
	sync.Mutex
	m map[uint32]string
}{m: map[uint32]string{}}

// qemuIdentity is whom a VM's QEMU runs as: recorded in vm.json, so that a
// restarted daemon keeps the id taken while the VM runs.
type qemuIdentity struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// VFIO are the VFIO group devices given to UID (vfio.go); QEMU then
	// keeps CAP_IPC_LOCK, to pin guest RAM.
	VFIO []string `json:"vfio,omitempty"`
}

// takeID reserves a free id of the range for the VM in dir. An id is free
// when no VM of this runner holds it and no process of the node runs as
// it: the second check covers VMs of an earlier daemon that Recover has
// not re-adopted yet, and anything left of a VM that ended. The lowest
// free id is taken.
func (r *Runner) takeID(dir string) (uint32, error) {
	heldIDs.Lock()
	defer heldIDs.Unlock()
	running := processUIDs()
	rng := r.cfg.VMIDs
	for i := uint32(0); i < rng.Count; i++ {
		id := rng.First + i
		if _, held := heldIDs.m[id]; held || running[id] {
			continue
		}
		heldIDs.m[id] = dir
		return id, nil
	}
	return 0, fmt.Errorf("all %d ids of the VM id range %d..%d are taken by running VMs: widen the range (vmrun.Config.VMIDs) or run fewer VMs on this node",
		rng.Count, rng.First, uint64(rng.First)+uint64(rng.Count)-1)
}

// holdID marks id as held by the VM in dir (a VM Recover re-adopted).
func (r *Runner) holdID(id uint32, dir string) {
	if !r.cfg.VMIDs.contains(id) {
		return
	}
	heldIDs.Lock()
	heldIDs.m[id] = dir
	heldIDs.Unlock()
}

// releaseID frees id once its VM's QEMU is gone.
func releaseID(id uint32, dir string) {
	heldIDs.Lock()
	if heldIDs.m[id] == dir {
		delete(heldIDs.m, id)
	}
	heldIDs.Unlock()
}

// processUIDs returns the real uids of the node's processes.
func processUIDs() map[uint32]bool {
	ents, _ := os.ReadDir("/proc")
	uids := map[uint32]bool{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if id, ok := statusUID("/proc/" + e.Name() + "/status"); ok {
			uids[id] = true
		}
	}
	return uids
}

// statusUID reads the real uid from a /proc/PID/status file.
func statusUID(path string) (uint32, bool) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0, false
			}
			id, err := strconv.ParseUint(fields[0], 10, 32)
			return uint32(id), err == nil
		}
	}
	return 0, false
}

// qemuIdentityFor returns whom the VM in dir runs its QEMU as: an id of
// its own from the range, its gid the same number, and no supplementary
// group but /dev/kvm's when the VM uses KVM and the device is open to its
// group only. A daemon that is not root cannot change uids, and its QEMU
// runs as the daemon's own user, which is not root either.
func (r *Runner) qemuIdentityFor(dir, accel string) (qemuIdentity, error) {
	if os.Geteuid() != 0 {
		return qemuIdentity{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}, nil
	}
	var groups []uint32
	if accel == "kvm" {
		g, err := kvmGroups()
		if err != nil {
			return qemuIdentity{}, err
		}
		groups = g
	}
	id, err := r.takeID(dir)
	if err != nil {
		return qemuIdentity{}, err
	}
	return qemuIdentity{UID: id, GID: id, Groups: groups}, nil
}

// kvmGroups returns the groups an unprivileged QEMU needs for /dev/kvm:
// none when the device is open to everyone, its group when it is open to
// that group.
func kvmGroups() ([]uint32, error) {
	fi, err := os.Stat("/dev/kvm")
	if err != nil {
		return nil, fmt.Errorf("KVM: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	mode := fi.Mode().Perm()
	switch {
	case mode&0o006 == 0o006:
		return nil, nil
	case ok && mode&0o060 == 0o060:
		return []uint32{st.Gid}, nil
	}
	return nil, fmt.Errorf("KVM: /dev/kvm (mode %o) is open to neither its group nor everyone, and the VM's QEMU runs as an unprivileged uid of its own: give the device to a group with read and write (Debian's udev rule: group kvm, mode 0660)", mode)
}

// credential is the process credential of an identity; nil when it is the
// daemon's own (a daemon that is not root).
func (id qemuIdentity) credential() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: id.UID, Gid: id.GID, Groups: append([]uint32{}, id.Groups...)}
}

// startUnprivileged starts cmd as id, with no capabilities (a non-root
// uid keeps none across execve; a VM with VFIO devices keeps
// CAP_IPC_LOCK alone) and no_new_privs set, so that nothing it
// executes (a set-user-id program, one with file capabilities) can gain
// privileges again. Go's exec cannot set no_new_privs in the child, so it
// is set on a thread of its own that forks QEMU and is then thrown away
// (a goroutine that ends locked to its thread takes the thread with it):
// the daemon's other threads keep their privileges.
func startUnprivileged(cmd *exec.Cmd, id qemuIdentity) error {
	if id.UID == 0 {
		return errors.New("refusing to run the VM's QEMU as root (uid 0)")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = id.credential()
	if len(id.VFIO) > 0 && cmd.SysProcAttr.Credential != nil {
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_IPC_LOCK}
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("setting no_new_privs for QEMU: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
