package vmrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"corral/api"
	"corral/noded"
)

// The probe's test guest and its bounds.
const (
	probeMemMB = 256
	// kvmBound is how long KVM may take to boot the test guest and run it
	// to CORRAL EXIT 0. A working KVM takes a fraction of a second; one
	// that emulates (nested KVM without the features a stock kernel wants)
	// is slower than TCG or never gets there.
	kvmBound = 5 * time.Second
	// tcgBound is generous: TCG boots in about 1.3 s on an idle core, and a
	// busy CI machine must not fail the probe for being slow.
	tcgBound = 60 * time.Second
	// sampleEvery is how often the probe reads QEMU's memory figures.
	sampleEvery = 10 * time.Millisecond
)

// probeOutcome is what the accelerator probe found; Probe returns it as
// JSON and Restore reads it back.
type probeOutcome struct {
	Accel      string `json:"accel"`
	OverheadMB int64  `json:"overhead_mb"`
	Report     string `json:"report"`
}

// Probe picks the accelerator and measures QEMU's memory per VM (see
// probe), once: a runner that already probed (or restored a probe) returns
// what it found at once, and concurrent calls wait for the one probe. It
// returns the outcome as JSON, for Restore. It takes a few seconds under
// TCG, well under one with KVM.
func (r *Runner) Probe(ctx context.Context) ([]byte, error) {
	r.probeMu.Lock()
	defer r.probeMu.Unlock()
	o := r.found.Load()
	if o == nil {
		found, err := r.probe(ctx)
		if err != nil {
			return nil, fmt.Errorf("vm runner: %w", err)
		}
		o = &found
		r.found.Store(o)
		r.log.Info("vm runner ready", "accel", o.Accel, "overhead_mb", o.OverheadMB, "probe", r.ProbeReport())
	}
	return json.Marshal(o)
}

// Restore adopts what an earlier Probe found, which the node daemon
// recorded on this boot for a runner with the same ProbeKey: the VMs then
// need no test guest to start. A runner that already probed keeps its own.
func (r *Runner) Restore(found []byte) error {
	o, err := restoredOutcome(found, r.cfg.Accel)
	if err != nil {
		return fmt.Errorf("vm runner: %w", err)
	}
	r.probeMu.Lock()
	defer r.probeMu.Unlock()
	if r.found.Load() == nil {
		r.found.Store(&o)
		r.log.Info("vm runner ready", "accel", o.Accel, "overhead_mb", o.OverheadMB, "probe", r.ProbeReport())
	}
	return nil
}

// restoredOutcome reads a recorded probe, which must name a usable
// accelerator (the forced one, when Config.Accel forces one) and a sane
// overhead.
func restoredOutcome(found []byte, forced string) (probeOutcome, error) {
	var o probeOutcome
	if err := json.Unmarshal(found, &o); err != nil {
		return o, fmt.Errorf("reading the recorded probe: %w", err)
	}
	switch {
	case o.Accel != "kvm" && o.Accel != "tcg":
		return o, fmt.Errorf("the recorded probe names accelerator %q, not kvm or tcg", o.Accel)
	case forced != "" && o.Accel != forced:
		return o, fmt.Errorf("the recorded probe chose %s, but %s is forced", o.Accel, forced)
	case o.OverheadMB < 0 || o.OverheadMB > maxOverheadMB:
		return o, fmt.Errorf("the recorded probe's QEMU overhead of %d MiB is outside 0..%d", o.OverheadMB, maxOverheadMB)
	}
	o.Report += " (recorded by an earlier daemon on this boot)"
	return o, nil
}

// maxOverheadMB bounds a recorded overhead: QEMU's own memory per VM is
// tens of MiB, its translated-code cache under TCG at most a few hundred.
const maxOverheadMB = 1 << 14

// ProbeKey names what the probe's outcome depends on besides the host's
// boot: the forced accelerator, whether /dev/kvm opens, and the versions
// (path, size, modification time, inode) of this program, which builds the
// test guest's payload, of QEMU and of the default image's kernel and
// initramfs. Any of them changing makes the node daemon probe again.
func (r *Runner) ProbeKey() string {
	kvm := "kvm:opens"
	if err := openKVM(); err != nil {
		kvm = "kvm:no"
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "?"
	}
	img := r.images[r.cfg.DefaultImage]
	return strings.Join([]string{"accel:" + r.cfg.Accel, kvm, fileStamp(exe), fileStamp(r.cfg.QEMU),
		fileStamp(img.Kernel), fileStamp(img.Initrd)}, " ")
}

// fileStamp names a version of the file at path: a rebuilt or reinstalled
// file has another size, modification time or inode.
func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return path + ":missing"
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%s:%d:%d:%d", path, fi.Size(), fi.ModTime().UnixNano(), ino)
}

// probe picks the accelerator by booting a test guest, whose script just
// exits 0, under each candidate: KVM only if /dev/kvm opens and the guest
// reaches CORRAL EXIT 0 within kvmBound (an openable /dev/kvm proves
// nothing: a nested KVM may open and still fail to run a stock kernel),
// else TCG, which must boot too, so that a broken image or QEMU fails the
// probe loudly rather than every job. The boot that succeeds also measures
// QEMU's memory overhead.
func (r *Runner) probe(ctx context.Context) (probeOutcome, error) {
	var notes []string
	var boot probeBoot
	var err error
	chosen := ""
	if r.cfg.Accel != "tcg" {
		if kerr := openKVM(); kerr != nil && r.cfg.Accel == "" {
			notes = append(notes, fmt.Sprintf("kvm not tried (%v)", kerr))
		} else {
			boot, err = r.bootTest(ctx, "kvm", kvmBound)
			if err == nil {
				chosen = "kvm"
				notes = append(notes, fmt.Sprintf("kvm booted the test guest in %.2fs", boot.took.Seconds()))
			} else {
				notes = append(notes, fmt.Sprintf("kvm failed after %.2fs: %v", boot.took.Seconds(), err))
				if r.cfg.Accel == "kvm" {
					return probeOutcome{}, fmt.Errorf("accelerator kvm was forced but does not work: %s", strings.Join(notes, "; "))
				}
			}
		}
	}
	if chosen == "" {
		boot, err = r.bootTest(ctx, "tcg", tcgBound)
		if err != nil {
			return probeOutcome{}, fmt.Errorf("the default image %q does not boot under TCG either (%v): %s",
				r.cfg.DefaultImage, err, strings.Join(notes, "; "))
		}
		chosen = "tcg"
		notes = append(notes, fmt.Sprintf("tcg booted the test guest in %.2fs", boot.took.Seconds()))
	}
	overhead := boot.mem.overheadMB()
	return probeOutcome{Accel: chosen, OverheadMB: overhead,
		Report: fmt.Sprintf("accel %s: %s; QEMU overhead %d MiB/VM (%s)", chosen, strings.Join(notes, "; "), overhead, boot.mem)}, nil
}

// openKVM reports why /dev/kvm cannot be used, if it cannot.
func openKVM() error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// probeBoot is what one test boot found.
type probeBoot struct {
	took time.Duration // Start to the VM's end after CORRAL EXIT 0
	mem  memUsage
}

// bootTest runs the test guest under accel through the same Start path as
// every job, and requires it to exit 0 within bound.
func (r *Runner) bootTest(ctx context.Context, accel string, bound time.Duration) (probeBoot, error) {
	var b probeBoot
	dir, err := os.MkdirTemp("", "corral-vmprobe-")
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	spec := noded.LaunchSpec{
		Job:     &api.Job{CPUs: 1, MemMB: probeMemMB},
		Dir:     dir,
		Stdout:  filepath.Join(dir, "out"),
		Script:  "exit 0\n",
		WorkDir: "/",
	}
	t0 := time.Now()
	v, err := r.start(ctx, spec, startOpts{accel: accel})
	if err != nil {
		b.took = time.Since(t0)
		return b, err
	}
	samples := sampleMemory(v.st.PID, probeMemMB, v.done)
	timedOut := false
	select {
	case <-v.done:
	case <-ctx.Done():
		timedOut = true
		v.Kill(0)
		<-v.done
	}
	b.took = time.Since(t0)
	b.mem = <-samples
	res := v.Wait()
	if timedOut {
		return b, fmt.Errorf("the test guest did not finish within %s (guest console: %s)", bound, tailFile(filepath.Join(dir, consoleFile), 3, 300))
	}
	if res != (noded.Result{}) {
		return b, fmt.Errorf("the test guest did not exit 0: %+v", res)
	}
	return b, nil
}

// memUsage is QEMU's memory as the probe saw it, in KiB.
type memUsage struct {
	hwm        int64 // VmHWM: peak resident set
	guest      int64 // resident guest RAM at the peak of nonGuest
	nonGuest   int64 // peak anonymous memory that is not guest RAM
	file       int64 // file-backed resident pages at that peak
	foundGuest bool  // whether the guest RAM mapping was found in smaps
}

// overheadMB is QEMU's memory per VM beyond its guest RAM, rounded up to
// MiB.
//
// Method: while the test guest boots and runs, every 10 ms, read QEMU's
// RssAnon and RssShmem (/proc/PID/status) and the resident size of the
// guest RAM mapping (the anonymous mapping of exactly -m bytes in
// /proc/PID/smaps); the overhead is the peak of their difference. That is
// VmHWM minus the guest RAM the probe touched, less the file-backed pages:
// the QEMU binary, its libraries and the kernel image (-kernel is mapped
// from the file) are page cache, shared by every VM on the node and
// reclaimable, so charging them to each VM would count them many times.
// Guest RAM itself is charged in full by the job's --mem. Under TCG the
// overhead is mostly the translated-code cache, which grows with the
// variety of code a job runs (up to QEMU's tb-size): the probe's figure is
// what a booting guest needs, and heavy jobs can use more.
func (m memUsage) overheadMB() int64 {
	kb := m.nonGuest
	if !m.foundGuest {
		kb = m.hwm - m.file // no guest mapping: charge all anonymous memory
	}
	return (kb + 1023) / 1024
}

func (m memUsage) String() string {
	return fmt.Sprintf("peak RSS %d MiB: guest RAM touched %d, QEMU anonymous %d, shared file pages %d",
		m.hwm/1024, m.guest/1024, m.nonGuest/1024, m.file/1024)
}

// sampleMemory samples QEMU's memory until done is closed and then sends
// what it saw.
func sampleMemory(pid int, guestMB int64, done <-chan struct{}) <-chan memUsage {
	out := make(chan memUsage, 1)
	go func() {
		var m memUsage
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			if s, ok := readMemory(pid, guestMB); ok {
				m = m.merge(s)
			}
			select {
			case <-done:
				out <- m
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// merge folds sample s into the peak m. Samples without the guest mapping
// (taken while QEMU sets up or tears down its RAM) count only when no
// sample had it.
func (m memUsage) merge(s memUsage) memUsage {
	hwm := max(m.hwm, s.hwm)
	switch {
	case s.foundGuest && (!m.foundGuest || s.nonGuest >= m.nonGuest),
		!s.foundGuest && !m.foundGuest && s.nonGuest >= m.nonGuest:
		m = s
	}
	m.hwm = hwm
	return m
}

// readMemory takes one sample of QEMU's memory.
func readMemory(pid int, guestMB int64) (memUsage, bool) {
	var m memUsage
	proc := "/proc/" + strconv.Itoa(pid)
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return m, false
	}
	fields := statusKB(status)
	m.hwm, m.file = fields["VmHWM"], fields["RssFile"]
	anon := fields["RssAnon"] + fields["RssShmem"]
	smaps, err := os.ReadFile(proc + "/smaps")
	if err == nil {
		m.guest, m.foundGuest = guestRSS(smaps, guestMB*1024)
	}
	m.nonGuest = anon - m.guest
	return m, m.hwm > 0
}

// statusKB parses the "Name:  123 kB" lines of /proc/PID/status.
func statusKB(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, " kB")), 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}

// guestRSS returns the resident KiB of the guest RAM: the anonymous
// mapping (no path) of exactly sizeKB in smaps.
func guestRSS(smaps []byte, sizeKB int64) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(nil, 1<<20)
	inGuest := false
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			inGuest = len(f) == 5 && mappingKB(f[0]) == sizeKB
		case inGuest && len(f) == 3 && f[0] == "Rss:":
			n, err := strconv.ParseInt(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// mappingKB returns the size of an smaps address range "start-end".
func mappingKB(rng string) int64 {
	a, b, _ := strings.Cut(rng, "-")
	start, err1 := strconv.ParseUint(a, 16, 64)
	end, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil || end < start {
		return -1
	}
	return int64((end - start) / 1024)
}
