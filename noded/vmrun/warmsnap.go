package vmrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/ident"
	"corral/internal/procref"
	"corral/vmimage"
)

// DefaultWarmSettle is how long a snapshot's guest prepared to stage root
// idles before it is saved: a little more than the 60 s attribute cache of
// its root mount (see Config.WarmSettle).
const DefaultWarmSettle = 65 * time.Second

// Bounds of making a snapshot.
const (
	// warmReadyWait bounds the snapshot guest's boot and preparation.
	warmReadyWait = 3 * time.Minute
	// warmSaveWait bounds QEMU's writing of the stream.
	warmSaveWait = 2 * time.Minute
	// warmNice is the nice value of a snapshot's QEMU and file server:
	// jobs' VMs come first.
	warmNice = 19
	// warmMemSlackMB is what the node must have available beyond a
	// snapshot VM's RAM before one is made.
	warmMemSlackMB = 512
)

// makeSnapshot makes the snapshot of shape sh: it boots the shape's VM as
// a job of nobody's with no script and its guest prepared to sh.stage
// (corral.warm=STAGE), waits for the guest's CORRAL READY and, at stage
// root, for Config.WarmSettle, pauses it, has QEMU write its stream to a
// file of the daemon's (0600), and ends the VM. The guest holds nothing of
// any job: its file server acted as nobody, and its preparation read only
// what anyone may read. Its QEMU and file server run at the lowest
// priority, without a cgroup, pinned nowhere.
func (r *Runner) makeSnapshot(p *warmPool, sh *warmShape) (*warmSnap, error) {
	began := time.Now()
	if err := memoryFor(sh.tmpl.Job.MemMB + r.OverheadMB() + warmMemSlackMB); err != nil {
		return nil, err
	}
	accel := r.Accel()
	contents, err := r.contentKeys(sh.img)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(p.dir, sh.key+snapBootExt)
	os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	spec := sh.tmpl
	spec.Dir = dir
	for _, out := range []*string{&spec.Stdout, &spec.Stderr} {
		if *out != "" {
			*out = filepath.Join(dir, *out)
		}
	}
	keys, err := newHandleKeys()
	if err != nil {
		return nil, err
	}
	rootKey, err := newHandleKeys()
	if err != nil {
		return nil, err
	}
	keys.root = rootKey.job
	ctx, cancel := context.WithTimeout(p.ctx, warmReadyWait+warmSaveWait+r.warmSettle(sh.stage))
	defer cancel()
	v, err := r.start(ctx, spec, startOpts{accel: accel, hostRoot: true, agent: true, keys: &keys, warm: sh.stage})
	if err != nil {
		return nil, fmt.Errorf("booting the snapshot's VM: %w", err)
	}
	defer func() { v.Kill(0); <-v.done }()
	reniceProcess(v.st.PID, warmNice)
	reniceProcess(v.NFSServerPID(), warmNice)
	if got := shapeKey(sh.stage, spec.Root, contents, v.st.Argv); got != sh.key {
		return nil, fmt.Errorf("the snapshot's VM has another device model than its shape's (key %s, want %s): %q", got, sh.key, v.st.Argv)
	}
	if err := waitReady(ctx, v); err != nil {
		return nil, err
	}
	select {
	case <-time.After(r.warmSettle(sh.stage)):
	case <-v.done:
		return nil, fmt.Errorf("the snapshot's VM ended while it settled: %s", lostMessage(v.f))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := v.Pause(); err != nil {
		return nil, err
	}
	s, err := p.writeStream(ctx, v, sh, contents)
	if err != nil {
		return nil, err
	}
	s.RootHandleKey = keys.root
	s.MakeSeconds = time.Since(began).Round(time.Millisecond).Seconds()
	if err := procref.WriteJSON(p.metaPath(s.Key), s); err != nil {
		p.remove(s.Key)
		return nil, fmt.Errorf("recording the snapshot: %w", err)
	}
	return s, nil
}

// writeStream has QEMU write the paused VM's stream to KEY.state: to a
// temporary file first, synced and checksummed, then renamed.
func (p *warmPool) writeStream(ctx context.Context, v *VM, sh *warmShape, contents string) (*warmSnap, error) {
	tmp := p.statePath(sh.key) + snapTmpExt
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	defer f.Close()
	st, err := v.saveState(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return nil, fmt.Errorf("saving the snapshot's VM: %w", err)
	}
	sum, err := fileSHA256(tmp)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, p.statePath(sh.key)); err != nil {
		return nil, err
	}
	if d, err := os.Open(p.dir); err == nil {
		d.Sync()
		d.Close()
	}
	return &warmSnap{Key: sh.key, Shape: sh.desc, Stage: sh.stage, Image: sh.img.Name, Contents: contents,
		Size: fi.Size(), ModTimeNano: fi.ModTime().UnixNano(), SHA256: sum, Created: time.Now(),
		SaveSeconds: st.Total.Seconds()}, nil
}

// warmSettle is how long a snapshot's guest prepared to stage idles
// before it is saved.
func (r *Runner) warmSettle(stage string) time.Duration {
	switch {
	case stage != vmimage.WarmRoot || r.cfg.WarmSettle < 0:
		return 0
	case r.cfg.WarmSettle == 0:
		return DefaultWarmSettle
	}
	return r.cfg.WarmSettle
}

// waitReady waits for the snapshot guest's CORRAL READY on its control
// port.
func waitReady(ctx context.Context, v *VM) error {
	for {
		if controlSays(v.f.control, vmimage.EventReady) {
			return nil
		}
		select {
		case <-v.done:
			return fmt.Errorf("the snapshot's VM ended before it was ready: %s", lostMessage(v.f))
		case <-ctx.Done():
			return fmt.Errorf("the snapshot's guest was not ready within %s: %w (console: %s)", warmReadyWait, ctx.Err(), tailFile(v.f.console, 4, 500))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// controlSays reports whether the control file holds an event of kind.
func controlSays(path string, kind vmimage.EventKind) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if ev, ok := vmimage.ParseControl(sc.Text()); ok && ev.Kind == kind {
			return true
		}
	}
	return false
}

// warmUser is whom a snapshot VM's file server acts as: nobody, so that
// what the guest caches before its snapshot is what anyone may read.
func warmUser() ident.User {
	if u, err := ident.Lookup("nobody"); err == nil {
		return u
	}
	return ident.User{Name: "nobody", UID: 65534, GID: 65534, Groups: []uint32{65534}, Home: "/nonexistent"}
}

// reniceProcess sets the nice value of every thread of pid (nice is a
// thread's; threads started later inherit it from the thread that starts
// them).
func reniceProcess(pid, nice int) {
	if pid <= 0 {
		return
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			unix.Setpriority(unix.PRIO_PROCESS, tid, nice)
		}
	}
}

// memoryFor checks that the node has mb MiB available (MemAvailable): a
// snapshot's VM is not a job's, and the scheduler does not count it.
func memoryFor(mb int64) error {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil // nothing to check against
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil && kb>>10 < mb {
				return fmt.Errorf("the node has %d MiB of memory available, and a snapshot's VM needs %d: not now", kb>>10, mb)
			}
			return nil
		}
	}
	return errors.New("no MemAvailable in /proc/meminfo")
}
