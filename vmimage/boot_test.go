package vmimage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests boot the real image in a real QEMU (TCG: they must pass on
// hosts without KVM). CI installs qemu-system-x86 and runs `make image`
// first; elsewhere they skip, saying what is missing.

// testImage returns the image built by `make image` (or the one in
// $CORRAL_IMAGE_DIR) and the path of qemu-system-x86_64, or skips.
func testImage(tb testing.TB) (*Image, string) {
	tb.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		tb.Skip("qemu-system-x86_64 not found: apt-get install qemu-system-x86 to run the boot tests")
	}
	dir := os.Getenv("CORRAL_IMAGE_DIR")
	if dir == "" {
		dir = filepath.Join("..", "build", "images", "default")
	}
	img, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		tb.Skipf("no guest image (%v): run make image to run the boot tests", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return img, qemu
}

// hostTSCkHz reads the host's TSC frequency for tsc_early_khz from the
// first "cpu MHz" line of /proc/cpuinfo.
func hostTSCkHz(tb testing.TB) int {
	tb.Helper()
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^cpu MHz\s*:\s*([0-9.]+)`).FindSubmatch(raw)
	if m == nil {
		tb.Fatal("no cpu MHz in /proc/cpuinfo")
	}
	mhz, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatal(err)
	}
	return int(mhz * 1000)
}

// vmSpec describes one test boot.
type vmSpec struct {
	payload     Payload
	memMiB      int
	cpus        int
	sharedErr   bool     // stdout and stderr on ttyS1, no ttyS2
	extraAppend []string // more kernel parameters
	timeout     time.Duration
}

// vmResult is what came out of one boot.
type vmResult struct {
	stdout, stderr, console string
	events                  []Event
	toStarted, toExit       time.Duration // from QEMU's start; 0 when missing
	total                   time.Duration
	maxRSSKiB               int64
}

// boot runs one VM to completion the way the node daemon is meant to.
func boot(tb testing.TB, img *Image, qemu string, spec vmSpec) vmResult {
	tb.Helper()
	dir := tb.TempDir()
	initrd := filepath.Join(dir, "initrd.cpio")
	f, err := os.Create(initrd)
	if err != nil {
		tb.Fatal(err)
	}
	if err := img.WriteInitrd(f, spec.payload); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	args := []string{
		"-M", "microvm", "-accel", "tcg", "-cpu", "max",
		"-m", strconv.Itoa(spec.memMiB), "-smp", strconv.Itoa(spec.cpus),
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "file:" + path("console.txt"),
		"-chardev", "file,id=out,path=" + path("out.txt"),
		"-device", StdoutPort.DeviceArg("out"),
	}
	if !spec.sharedErr {
		args = append(args,
			"-chardev", "file,id=err,path="+path("err.txt"),
			"-device", StderrPort.DeviceArg("err"))
	}
	args = append(args,
		"-chardev", "file,id=ctl,path="+path("ctl.txt"),
		"-device", ControlPort.DeviceArg("ctl"),
		"-kernel", img.Kernel, "-initrd", initrd,
		"-append", KernelCmdline(hostTSCkHz(tb), spec.extraAppend...))
	timeout := spec.timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	var qemuOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &qemuOut, &qemuOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var res vmResult
	// The control file is polled as a host would read a socket: the times
	// are accurate to the polling period.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var werr error
poll:
	for {
		select {
		case werr = <-done:
			break poll
		case <-tick.C:
			ctl, _ := os.ReadFile(path("ctl.txt"))
			if res.toStarted == 0 && bytes.Contains(ctl, []byte("CORRAL STARTED\n")) {
				res.toStarted = time.Since(start)
			}
			if res.toExit == 0 && bytes.Contains(ctl, []byte("CORRAL EXIT ")) {
				res.toExit = time.Since(start)
			}
		}
	}
	res.total = time.Since(start)
	read := func(name string) string {
		b, _ := os.ReadFile(path(name))
		return string(b)
	}
	res.stdout, res.stderr, res.console = read("out.txt"), read("err.txt"), read("console.txt")
	if werr != nil {
		tb.Fatalf("qemu: %v\n%s\nconsole:\n%s", werr, qemuOut.String(), res.console)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.maxRSSKiB = ru.Maxrss // kilobytes on Linux
	}
	sc := bufio.NewScanner(strings.NewReader(read("ctl.txt")))
	for sc.Scan() {
		ev, ok := ParseControl(sc.Text())
		if !ok {
			tb.Errorf("control channel: unexpected line %q", sc.Text())
			continue
		}
		res.events = append(res.events, ev)
	}
	return res
}

func TestBootRunsJob(t *testing.T) {
	img, qemu := testImage(t)
	script := `#!/bin/sh
echo "nproc=$(nproc)"
free -m
echo "uname=$(uname -r)"
printf 'multi=[%s]\n' "$MULTI"
for a in "$@"; do printf 'arg=[%s]\n' "$a"; done
echo "pwd=$(pwd)"
echo "stdin=$(cat | wc -c)"
echo "host=$(hostname)"
env | sort | sed -n 's/^\(FOO\|PATH\)=/env:\1=/p'
echo "to stderr" >&2
exit 3
`
	res := boot(t, img, qemu, vmSpec{
		payload: Payload{
			Script:  []byte(script),
			Env:     []string{"PATH=/usr/bin:/bin", "MULTI=a b\nc  d", "FOO=x=y"},
			Args:    []string{"one two", "", "three\nfour"},
			WorkDir: "/scratch/job1",
		},
		memMiB: 256, cpus: 2, extraAppend: []string{"corral.hostname=node7"},
	})
	t.Logf("boot→STARTED %v, STARTED→EXIT %v, total %v, peak RSS %d MiB, PVH=%v",
		res.toStarted, res.toExit-res.toStarted, res.total, res.maxRSSKiB/1024, img.PVH)

	want := []Event{{Kind: EventStarted}, {Kind: EventExit, Code: 3}}
	if !slices.Equal(res.events, want) {
		t.Fatalf("control events = %v, want %v\nconsole:\n%s", res.events, want, res.console)
	}
	out := res.stdout
	for _, line := range []string{
		"nproc=2\n",
		"uname=" + img.KernelVersion + "\n",
		"multi=[a b\nc  d]\n",
		"arg=[one two]\narg=[]\narg=[three\nfour]\n",
		"pwd=/scratch/job1\n",
		"stdin=0\n",
		"host=node7\n",
		"env:FOO=x=y\nenv:PATH=/usr/bin:/bin\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("stdout lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Errorf("stdout has CRs: the port is not raw:\n%q", out)
	}
	m := regexp.MustCompile(`(?m)^Mem:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no free -m output:\n%s", out)
	}
	// The kernel keeps its own image and tables: 256 MiB of RAM shows as
	// about 220.
	if total, _ := strconv.Atoi(m[1]); total < 200 || total > 256 {
		t.Errorf("guest memory %d MiB, want close to 256", total)
	}
	if res.stderr != "to stderr\n" {
		t.Errorf("stderr = %q, want %q", res.stderr, "to stderr\n")
	}
}

func TestBootSharedStdoutStderr(t *testing.T) {
	img, qemu := testImage(t)
	res := boot(t, img, qemu, vmSpec{
		payload: Payload{Script: []byte("echo out; echo err >&2; echo out2; kill -TERM $$\n")},
		memMiB:  128, cpus: 1, sharedErr: true,
	})
	if res.stdout != "out\nerr\nout2\n" {
		t.Errorf("stdout = %q, want stdout and stderr interleaved", res.stdout)
	}
	// A script without "#!" runs under /bin/sh; killed by SIGTERM it exits
	// 128+15.
	want := []Event{{Kind: EventStarted}, {Kind: EventExit, Code: 128 + 15}}
	if !slices.Equal(res.events, want) {
		t.Fatalf("control events = %v, want %v\nconsole:\n%s", res.events, want, res.console)
	}
}

func TestBootReportsOOM(t *testing.T) {
	img, qemu := testImage(t)
	// tail keeps everything after the last newline, and /dev/zero has none:
	// it touches every byte it buffers until the OOM killer stops it.
	script := "#!/bin/sh\nhead -c 400m /dev/zero | tail -n 1 >/dev/null\necho \"pipeline=$?\"\n"
	res := boot(t, img, qemu, vmSpec{
		payload: Payload{Script: []byte(script)},
		memMiB:  128, cpus: 1, timeout: 3 * time.Minute,
	})
	t.Logf("OOM job: %v in all; stdout %q", res.total, res.stdout)
	if len(res.events) != 3 || res.events[0].Kind != EventStarted ||
		res.events[1].Kind != EventOOM || res.events[2].Kind != EventExit {
		t.Fatalf("control events = %v, want STARTED OOM EXIT\nconsole:\n%s", res.events, res.console)
	}
	if !strings.Contains(res.stdout, "pipeline=137") {
		t.Errorf("stdout %q: want pipeline=137 (tail killed by SIGKILL)", res.stdout)
	}
}

func TestBootWithoutPayload(t *testing.T) {
	img, qemu := testImage(t)
	dir := t.TempDir()
	// An image booted alone (its base initramfs only) must say why it ran
	// nothing rather than hang.
	noJob := *img
	bare := filepath.Join(dir, "bare.cpio")
	raw, err := os.ReadFile(img.Initrd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bare, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	noJob.Initrd = bare
	res := bootBase(t, &noJob, qemu)
	if len(res.events) != 2 || res.events[0].Kind != EventError || res.events[1] != (Event{Kind: EventExit, Code: 127}) {
		t.Fatalf("control events = %v, want ERROR then EXIT 127", res.events)
	}
	if !strings.Contains(res.events[0].Text, "/job/script") {
		t.Errorf("error text %q does not name /job/script", res.events[0].Text)
	}
}

// bootBase boots img's initrd as it is, with no payload appended.
func bootBase(tb testing.TB, img *Image, qemu string) vmResult {
	tb.Helper()
	dir := tb.TempDir()
	ctl := filepath.Join(dir, "ctl.txt")
	cmd := exec.Command(qemu, "-M", "microvm", "-accel", "tcg", "-cpu", "max", "-m", "128",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-serial", "file:"+filepath.Join(dir, "console.txt"),
		"-chardev", "file,id=ctl,path="+ctl, "-device", ControlPort.DeviceArg("ctl"),
		"-kernel", img.Kernel, "-initrd", img.Initrd,
		"-append", KernelCmdline(hostTSCkHz(tb)))
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("qemu: %v\n%s", err, out)
	}
	raw, _ := os.ReadFile(ctl)
	var res vmResult
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if ev, ok := ParseControl(line); ok {
			res.events = append(res.events, ev)
		}
	}
	return res
}

// BenchmarkBoot boots a job that prints one line and exits, and reports the
// medians over b.N boots of QEMU start → CORRAL STARTED and STARTED → EXIT,
// and the largest peak RSS of QEMU:
//
//	go test ./vmimage -run '^$' -bench Boot -benchtime 5x
//
// CORRAL_BENCH_APPEND adds kernel parameters, to compare boot options;
// CORRAL_BENCH_CPUS sets -smp (default 2).
func BenchmarkBoot(b *testing.B) {
	img, qemu := testImage(b)
	extra := strings.Fields(os.Getenv("CORRAL_BENCH_APPEND"))
	cpus := 2
	if n, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_CPUS")); err == nil {
		cpus = n
	}
	var started, ran, total []time.Duration
	var rss int64
	for b.Loop() {
		res := boot(b, img, qemu, vmSpec{
			payload: Payload{Script: []byte("#!/bin/sh\necho hello\n")},
			memMiB:  256, cpus: cpus, extraAppend: extra,
		})
		if res.toStarted == 0 || res.toExit == 0 || res.stdout != "hello\n" {
			b.Fatalf("boot failed: events %v stdout %q\n%s", res.events, res.stdout, res.console)
		}
		started = append(started, res.toStarted)
		ran = append(ran, res.toExit-res.toStarted)
		total = append(total, res.total)
		rss = max(rss, res.maxRSSKiB)
	}
	b.ReportMetric(median(started).Seconds(), "s-to-started")
	b.ReportMetric(median(ran).Seconds(), "s-started-to-exit")
	b.ReportMetric(median(total).Seconds(), "s-qemu-total")
	b.ReportMetric(float64(rss)/1024, "MiB-peak-rss")
	b.Logf("PVH=%v kernel=%s boots=%d started=%v ran=%v total=%v", img.PVH, filepath.Base(img.Kernel), len(started), started, ran, total)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
