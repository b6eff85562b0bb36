//go:build linux

package guestinit

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/vmimage"
)

// The guest's serial ports (8250.nr_uarts=4 on the kernel command line).
// ttyS0 is the kernel console, which init's own messages go to.
const (
	stdoutTTY  = "ttyS1" // the job's stdout
	stderrTTY  = "ttyS2" // the job's stderr; absent means stderr goes to ttyS1
	controlTTY = "ttyS3" // CORRAL STARTED / ERROR / OOM / EXIT lines
	jobDir     = "/job"
)

// guest is init's state while it runs one job.
type guest struct {
	debug         bool
	start         time.Time
	out, err, ctl *os.File
	ports         []*os.File // the UARTs opened, drained before EXIT
	oomBefore     int64
	// root is the job's root: "" for the initramfs, newRoot when the
	// host's tree is.
	root string
	// shareNIC is the NFS share's card, once it is up.
	shareNIC string
	// reaper collects init's children; agent serves the node's requests
	// (nil without an agent port).
	reaper *reaper
	agent  *Agent
	// stage is how far prepareRoot went, for the share prepared.
	stage    int
	prepared *vmimage.FS
}

// Main is PID 1. It never returns: it powers the VM off.
func Main() {
	if len(os.Args) > 1 && os.Args[1] == limitsArg {
		runLimitStub(os.Args[2:])
	}
	g := &guest{start: time.Now(), oomBefore: -1, reaper: newReaper()}
	// Signals to PID 1 are dropped unless it has a handler. Catching them
	// (rather than ignoring them) keeps init alive when the job signals
	// everything and leaves the job's own dispositions at their defaults.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	unix.Umask(0o022)
	g.mountAll()
	cmdline, _ := os.ReadFile("/proc/cmdline")
	opts := ParseCmdline(string(cmdline))
	g.debug = opts.Debug
	if opts.Hostname != "" {
		if err := unix.Sethostname([]byte(opts.Hostname)); err != nil {
			g.logf("sethostname %s: %v", opts.Hostname, err)
		}
	}
	g.loopbackUp()
	g.openPorts()
	g.logf("setup done")
	if opts.Warm != "" {
		// Booted for a warm start's snapshot: this returns in a copy of
		// the guest, restored for a job, once the job is in /job.
		g.warmUp(opts.Warm)
	}

	job, err := ReadJob(jobDir)
	if err != nil {
		g.finish(127, err.Error())
	}
	os.Chmod(jobDir+"/script", 0o755)
	if job.FS != nil {
		if err := g.hostRoot(job.FS); err != nil {
			g.finish(127, err.Error())
		}
		// The script stays in the initramfs, which the job's root does
		// not show: init hands it over as a descriptor (see run).
		g.logf("host root ready")
	} else if err := os.MkdirAll(job.WorkDir, 0o755); err != nil {
		g.finish(127, "cannot enter working directory "+job.WorkDir)
	}
	if job.Net != nil {
		if err := g.jobNet(job.Net); err != nil {
			g.finish(127, err.Error())
		}
	}
	if st, err := os.Stat(g.root + job.WorkDir); err != nil || !st.IsDir() {
		g.finish(127, "cannot enter working directory "+job.WorkDir+" (it must exist on the host, and the job's user must be allowed in)")
	}
	g.newMachineID(g.root)
	if opts.Agent {
		g.startAgent()
	}
	g.finish(g.run(job), "")
}

// logf writes one of init's own messages to the console when corral.debug=1.
func (g *guest) logf(format string, args ...any) {
	if g.debug {
		fmt.Fprintf(os.Stderr, "init: %6.3fs "+format+"\n", append([]any{time.Since(g.start).Seconds()}, args...)...)
	}
}

// mountAll mounts what a job expects and points init's own stdio at the
// console (the kernel may have found no /dev/console before devtmpfs).
func (g *guest) mountAll() {
	mount := func(fstype, target string, flags uintptr, data string) {
		if err := unix.Mount(fstype, target, fstype, flags, data); err != nil && !errors.Is(err, unix.EBUSY) {
			fmt.Fprintf(os.Stderr, "init: mount %s on %s: %v\n", fstype, target, err)
		}
	}
	mount("devtmpfs", "/dev", unix.MS_NOSUID, "mode=0755")
	if c, err := os.OpenFile("/dev/console", os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			unix.Dup3(int(c.Fd()), fd, 0)
		}
		c.Close()
	}
	mount("proc", "/proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	mount("sysfs", "/sys", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	for _, d := range []string{"/dev/pts", "/dev/shm", "/tmp"} {
		os.MkdirAll(d, 0o755)
	}
	mount("devpts", "/dev/pts", 0, "gid=5,mode=620,ptmxmode=000")
	mount("tmpfs", "/dev/shm", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	mount("tmpfs", "/tmp", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
	for link, target := range map[string]string{
		"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2",
	} {
		os.Symlink(target, link)
	}
}

// loopbackUp sets lo up, as `ip link set lo up` would.
func (g *guest) loopbackUp() {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		g.logf("lo: %v", err)
		return
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	}
	if err == nil {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	if err != nil {
		g.logf("lo: %v", err)
	}
}

// openPorts opens the job's UARTs in raw mode. The 8250 driver registers
// nr_uarts ports whether or not the hardware exists and reports type 0 for
// the missing ones; a missing port falls back as the protocol says.
func (g *guest) openPorts() {
	g.out, g.err, g.ctl = os.Stdout, os.Stdout, os.Stdout
	if f := g.openPort(stdoutTTY); f != nil {
		g.out, g.err = f, f
	}
	if f := g.openPort(stderrTTY); f != nil {
		g.err = f
	}
	if f := g.openPort(controlTTY); f != nil {
		g.ctl = f
	}
}

func (g *guest) openPort(tty string) *os.File {
	b, err := os.ReadFile("/sys/class/tty/" + tty + "/type")
	if t := strings.TrimSpace(string(b)); err != nil || t == "" || t == "0" {
		return nil
	}
	f, err := os.OpenFile("/dev/"+tty, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		g.logf("%s: %v", tty, err)
		return nil
	}
	if err := makeRaw(int(f.Fd())); err != nil {
		g.logf("%s raw: %v", tty, err)
	}
	g.ports = append(g.ports, f)
	return f
}

// makeRaw turns off every translation (no CRLF, no echo) so the host
// receives the job's bytes unchanged; CLOCAL because no modem lines exist.
func makeRaw(fd int) error {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return err
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8 | unix.CLOCAL
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	return unix.IoctlSetTermios(fd, unix.TCSETS, t)
}

// run starts the job and waits for it, reaping any orphan that is
// reparented to init meanwhile. It returns the job's exit status.
func (g *guest) run(job Job) int {
	devnull, err := os.Open("/dev/null")
	if err != nil {
		g.finish(127, "open /dev/null: "+err.Error())
	}
	g.oomBefore = oomKills()
	stdin := devnull
	if job.Input != "" {
		in, err := openAs(job.User, g.root+job.Input)
		if err != nil {
			fmt.Fprintf(g.err, "corral: cannot open the input file (-i) %s: %v\n", job.Input, err)
			return 1
		}
		defer in.Close()
		stdin = in
	}
	files := []uintptr{stdin.Fd(), g.out.Fd(), g.err.Fd()}
	attr := &syscall.SysProcAttr{Setsid: true}
	argv := job.Argv
	if g.root != "" {
		// The job's root does not hold /job: the script goes as fd 3 and
		// runs as /dev/fd/3 (the kernel reopens it there without a path).
		script, err := os.Open(job.Argv[job.ScriptArg])
		if err != nil {
			g.finish(127, "open the job script: "+err.Error())
		}
		defer script.Close()
		files = append(files, script.Fd())
		argv = append([]string(nil), job.Argv...)
		argv[job.ScriptArg] = "/dev/fd/3"
		attr.Chroot = g.root
	}
	if u := job.User; u != nil {
		attr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	if len(job.Rlimits) > 0 {
		var bin *os.File
		if argv, files, bin, err = withLimits(argv, files, job.Rlimits); err != nil {
			g.finish(127, err.Error())
		}
		defer bin.Close()
	}
	fmt.Fprintln(g.ctl, "CORRAL STARTED")
	g.logf("starting %v in %s", argv, job.WorkDir)
	pid, wait, err := g.reaper.spawn(func() (int, error) {
		return syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
			Dir:   job.WorkDir,
			Env:   job.Env,
			Files: files,
			Sys:   attr,
		})
	})
	devnull.Close()
	if err != nil {
		// What a shell would print for a script it cannot execute.
		fmt.Fprintf(g.err, "%s: %v\n", job.Argv[0], err)
		return StartFailureCode(err)
	}
	if g.agent != nil {
		g.agent.setJob(pid)
	}
	// The reaper reaps orphans reparented to init meanwhile.
	ws := <-wait
	return ExitCode(ws.Exited(), ws.ExitStatus(), int(ws.Signal()))
}

// finish ends the VM: it kills what the job left running, waits until the
// UARTs have sent everything queued, syncs, reports on the control port and
// powers off.
func (g *guest) finish(code int, errText string) {
	unix.Kill(-1, unix.SIGKILL)
	reapAll(time.Second)
	g.drain()
	unix.Sync()
	if g.ctl == nil {
		g.ctl = os.Stdout
	}
	if errText != "" {
		fmt.Fprintf(g.ctl, "CORRAL ERROR %s\n", strings.ReplaceAll(errText, "\n", " "))
	}
	if g.oomBefore >= 0 && oomKills() > g.oomBefore {
		fmt.Fprintln(g.ctl, "CORRAL OOM")
	}
	fmt.Fprintf(g.ctl, "CORRAL EXIT %d\n", code)
	g.drain()
	g.logf("power off")
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	// Reached only when power-off fails: PID 1 exiting panics the kernel,
	// and panic=-1 with QEMU's -no-reboot ends the VM.
	os.Exit(code)
}

// drain waits until every UART has sent what is queued (tcdrain).
func (g *guest) drain() {
	for _, f := range g.ports {
		unix.IoctlSetInt(int(f.Fd()), unix.TCSBRK, 1)
	}
}

// reapAll collects killed children until none is left or d has passed (a
// process stuck in the kernel must not keep the VM up).
func reapAll(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.ECHILD) {
			return
		}
		if pid <= 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// oomKills returns the oom_kill count of /proc/vmstat, -1 when unknown.
func oomKills() int64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
