//go:build linux

package guestinit

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// warmUp prepares a guest booted for a warm start's snapshot
// (corral.warm=STAGE): it does, for the share in /job/fs, what every job
// of that share needs (prepareRoot, to stage), warms the page cache at
// stage root, starts the agent, says CORRAL READY and waits. The node
// saves the guest then; warmUp returns in each copy of it the node
// restores, once the agent has put that copy's job in /job, and init goes
// on as for a job it booted with.
func (g *guest) warmUp(stage string) {
	b, err := os.ReadFile(filepath.Join(jobDir, "fs"))
	if err != nil {
		g.finish(127, "warm start: the share to prepare: "+err.Error())
	}
	share, err := vmimage.ParseFS(b)
	if err != nil {
		g.finish(127, "warm start: "+err.Error())
	}
	to := stageNet
	if stage == vmimage.WarmRoot {
		to = stageMounted
	}
	if err := g.prepareRoot(&share, to); err != nil {
		g.finish(127, "warm start: "+err.Error())
	}
	if stage == vmimage.WarmRoot {
		g.warmCache()
		// The overlay copies /etc up from the host's tree once, here:
		// each copy then only replaces the file with its own.
		g.newMachineID(newRoot)
	}
	jobIn := make(chan struct{})
	if err := g.startWarmAgent(func(x vmimage.JobStart, payload []byte) error {
		if err := g.takeJob(x, payload); err != nil {
			return err
		}
		close(jobIn)
		return nil
	}); err != nil {
		g.finish(127, "warm start: agent: "+err.Error())
	}
	fmt.Fprintln(g.ctl, "CORRAL READY")
	g.drain()
	g.logf("ready for a snapshot")
	select {
	case <-jobIn:
		g.logf("job received")
	case <-time.After(warmOrphaned):
		// The node that booted this guest went away without saving or
		// ending it: nothing will.
		g.finish(127, "warm start: no job came")
	}
}

// warmOrphaned is how long a guest booted for a snapshot waits for a job
// (its monotonic clock: in a restored copy, from the moment it said
// READY, the snapshot's wait and settling included) before it powers off.
const warmOrphaned = 10 * time.Minute

// startWarmAgent starts the agent before the job: its modules, its port,
// and Serve, answering Hello and FrameJob until the job's root is set.
func (g *guest) startWarmAgent(onJob func(vmimage.JobStart, []byte) error) error {
	if err := g.loadModules("agent"); err != nil {
		return err
	}
	dev, err := findAgentPort(vmimage.AgentPortName, 10*time.Second)
	if err != nil {
		return err
	}
	port, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	a := newWaitingAgent(port, g.reaper, g.logf)
	a.onJob = onJob
	if err := a.signalOnConnect(port); err != nil {
		g.logf("agent: no signal when the host connects: %v", err)
	}
	g.agent = a
	go a.Serve()
	return nil
}

// warmCaches are the programs a guest prepared to stage root runs once
// before its snapshot, so that their pages are in every copy's page
// cache: the shells and python of most batch scripts.
var warmCaches = [][]string{{"/bin/bash", "-c", ":"}, {"/usr/bin/python3", "-c", "pass"}}

// warmUID is whom the warm-up runs as: nobody, so that what the snapshot
// caches is what anyone may read.
const warmUID = 65534

// warmCache runs warmCaches in the job's root as warmUID, each bounded in
// time; a missing program is skipped (a partition's root may lack it).
func (g *guest) warmCache() {
	devnull, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer devnull.Close()
	for _, argv := range warmCaches {
		if _, err := os.Stat(newRoot + argv[0]); err != nil {
			continue
		}
		pid, wait, err := g.reaper.spawn(func() (int, error) {
			return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Dir: "/",
				Env:   []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/", "LANG=C"},
				Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()},
				Sys:   &syscall.SysProcAttr{Chroot: newRoot, Setsid: true, Credential: &syscall.Credential{Uid: warmUID, Gid: warmUID}}})
		})
		if err != nil {
			g.logf("warm-up %s: %v", argv[0], err)
			continue
		}
		select {
		case <-wait:
		case <-time.After(30 * time.Second):
			unix.Kill(-pid, unix.SIGKILL)
			<-wait
		}
		g.logf("warm-up %s done", argv[0])
	}
}

// takeJob gives a restored guest what must be its own before its job
// exists, then puts the job's payload in /job: randomness no other copy
// of the snapshot has (reseed), the host's wall clock, and the files the
// job's own boot would have had under /job.
func (g *guest) takeJob(x vmimage.JobStart, payload []byte) error {
	files, err := vmimage.ParsePayload(payload)
	if err != nil {
		return err
	}
	if err := reseed(x.Seed); err != nil {
		return fmt.Errorf("reseeding the guest's random generator: %w", err)
	}
	ts := unix.NsecToTimespec(x.TimeUnixNano)
	if err := unix.ClockSettime(unix.CLOCK_REALTIME, &ts); err != nil {
		return fmt.Errorf("setting the guest's clock: %w", err)
	}
	if err := os.RemoveAll(jobDir); err != nil {
		return err
	}
	if err := os.Mkdir(jobDir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		mode := fs.FileMode(0o644)
		if f.Name == "script" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(jobDir, f.Name), f.Data, mode); err != nil {
			return err
		}
	}
	return nil
}

// reseed credits seed to the kernel's entropy pool (RNDADDENTROPY) and
// makes its random generator draw a new key from the pool at once
// (RNDRESEEDCRNG): every copy of a snapshot had the same generator state,
// and from here each has its own.
func reseed(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info: entropy_count (bits), buf_size (bytes), buf.
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return fmt.Errorf("RNDADDENTROPY: %w", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDRESEEDCRNG, 0); e != 0 {
		return fmt.Errorf("RNDRESEEDCRNG: %w", e)
	}
	return nil
}

// newMachineID gives the job's root an /etc/machine-id of its own, drawn
// from the guest's random generator: the host's tree holds the node's,
// which every job on the node would otherwise share, and a warm start's
// copies would share the snapshot's. A root without /etc keeps none.
func (g *guest) newMachineID(root string) {
	etc := root + "/etc"
	if st, err := os.Stat(etc); err != nil || !st.IsDir() {
		return
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		g.logf("machine-id: %v", err)
		return
	}
	p := etc + "/machine-id"
	// The host's may be a link: replace the link, not what it names.
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		g.logf("machine-id: %v", err)
		return
	}
	if err := os.WriteFile(p, []byte(hex.EncodeToString(id[:])+"\n"), 0o444); err != nil {
		g.logf("machine-id: %v", err)
	}
}
