package noded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/api"
	"corral/internal/ident"
	"corral/internal/procref"
	"corral/internal/rlimit"
)

// Files the process runner keeps in a job's state directory.
const (
	scriptFile = "script"     // the job script, 0700
	stateFile  = "state.json" // launchState of the shim
	exitFile   = "exit"       // the script's status, written by the shim
)

// shimScript runs the job script as its only child and records the script's
// wait status in the run's exit file as one newline-terminated number, so
// that a daemon that was not running when the job ended still learns how it
// ended.
//
// The shim runs as the job's user, and the run's state directory (with the
// directories above it) need not be open to that user: the daemon opens the
// script and the exit file itself and hands them over as descriptors, the
// script as fd 3 (run as /dev/fd/3, which the kernel reopens without looking
// at the directories on the way) and the exit file as fd 4 (opened for
// appending). The script keeps fd 3, which an interpreter reading
// /dev/fd/3 needs; nothing else of the job gets fd 4.
//
// The script runs in the foreground: a background child of dash ignores
// SIGINT and SIGQUIT for good, and a foreground wait is not cut short by
// signals, so $? is always the real status. The price is that the shim
// cannot forward signals while it waits; it does not need to, since Kill
// signals every process of the job's session itself. The shim traps the
// common signals (its child gets them at their defaults) so that it outlives
// them and records the status; a SIGTERM that arrives before the script
// started stops the script from starting. The record is a single write by
// shell builtins (no tmp+rename through mv): a helper process would be in the
// job's session, and Kill's SIGKILL sweep could catch it and lose the record.
// A record without its newline counts as absent. The record is appended, not
// written over: the file may exist already, emptied for reuse (see runDirs),
// and ext4 flushes a file that was truncated and then written when it is
// closed, which costs more than all of a trivial job's other file writes
// together. The daemon never hands the shim a non-empty exit file, and two
// lines would not parse. The shim's own stderr goes to /dev/null so shells
// that report a signalled child do not write into the job's error file.
//
// The shim starts the script only once the daemon has recorded it (its
// state file): it first reads "go" from the gate, fd 6, whose other end
// only the daemon holds. A daemon that dies between starting the shim and
// recording it closes the gate unwritten, and the shim exits at once
// without a record, so the job never runs unknown to the next daemon
// (which finds it never started).
const shimScript = `exec 5>&2 2>/dev/null
_corral_go=
read -r _corral_go <&6
exec 6<&-
[ "$_corral_go" = go ] || exit 0
_corral_term=0
trap : HUP INT QUIT USR1 USR2
trap _corral_term=1 TERM
_corral_st=143
[ "$_corral_term" = 1 ] || { "$@" 2>&5 5>&- 4>&-; _corral_st=$?; }
printf '%s\n' "$_corral_st" >&4
`

// launchState is what Recover needs to find the shim again. Pid and start
// time together name one process on one boot; a pid alone may be reused.
type launchState struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start_ticks"`
	BootID string `json:"boot_id"`
}

// processRunner runs each job as a process tree on the host.
type processRunner struct{}

// NewProcessRunner returns the runner that runs jobs as plain processes, in
// their own session, as their user (LaunchSpec.User).
func NewProcessRunner() Runner { return processRunner{} }

func (processRunner) Name() string { return "process" }

// ReusableState says that the process runner keeps the rules of
// ReusableState: its files are written whole and in place (state.json,
// script) or appended to (exit), readers take an empty state.json or exit
// file as absent, and Recover reads the status the shim recorded, which is
// where Wait's Result without Message comes from.
func (processRunner) ReusableState() {}

// Start starts the job's shim as the job's user and returns once it runs; it
// takes microseconds and does not look at ctx.
func (processRunner) Start(_ context.Context, spec LaunchSpec) (Handle, error) {
	if err := checkWorkDir(spec.WorkDir); err != nil {
		return nil, err
	}
	script, exit, err := jobFiles(spec)
	if err != nil {
		return nil, err
	}
	defer script.Close()
	defer exit.Close()
	stdout, stderr, err := openOutputs(spec)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	defer stderr.Close()
	stdin, err := openInput(spec)
	if err != nil {
		return nil, err
	}
	if stdin != nil {
		defer stdin.Close()
	}

	env := spec.Env
	if env == nil {
		env = []string{} // nil would hand the daemon's own environment to the job
	}
	gate, opened, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("making the job's start gate: %w", err)
	}
	defer gate.Close()
	defer opened.Close()
	args := append([]string{"/bin/sh", "-c", shimScript, "corral-job", "/dev/fd/3"}, spec.Args...)
	attr := &syscall.SysProcAttr{Setsid: true}
	if switchUser(spec.User) {
		attr.Credential = spec.User.Credential()
	}
	cmd := &exec.Cmd{
		Path:   "/bin/sh",
		Args:   args,
		Dir:    spec.WorkDir,
		Env:    env,
		Stdout: stdout,
		Stderr: stderr,
		Stdin:  stdin,
		// fd 5 is the shim's own (its stderr, saved); fd 6 the gate.
		ExtraFiles: []*os.File{script, exit, nil, gate},
		// A session of its own: the job outlives the daemon, and its
		// processes can be found by session id.
		SysProcAttr: attr,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the job as %s: %w", spec.User.Name, err)
	}
	h, err := adoptChild(cmd, spec.Dir)
	if err != nil {
		// Without a record a restarted daemon could not find the job, so it
		// must not run. The shim is an unreaped child: its group is ours.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		return nil, err
	}
	// The shim waits at its gate: limits set on it now are the script's.
	if err := applyRlimits(cmd.Process.Pid, spec.Rlimits, stderr); err != nil {
		h.Kill(0)
		return nil, err
	}
	// Recorded: the shim may start the script.
	if _, err := opened.Write([]byte("go\n")); err != nil {
		h.Kill(0) // the shim died before it could start the script
		return nil, fmt.Errorf("opening the job's start gate: %w", err)
	}
	return h, nil
}

// switchUser reports whether a job of u needs credentials other than the
// daemon's: never when the daemon is not root (the daemon refused other
// users already).
func switchUser(u ident.User) bool {
	return os.Geteuid() == 0 && u.Name != "" && u.UID != 0
}

// jobFiles writes the job script and opens it for the shim to run, and
// opens the exit file for it to append to; both belong to the job's user,
// whose shim could otherwise neither run the one nor write the other (a
// reused directory's files may belong to an earlier job's user).
func jobFiles(spec LaunchSpec) (script, exit *os.File, err error) {
	path := filepath.Join(spec.Dir, scriptFile)
	if err := writeScript(path, spec.Script); err != nil {
		return nil, nil, fmt.Errorf("writing the job script: %w", err)
	}
	exit, err = os.OpenFile(filepath.Join(spec.Dir, exitFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the job's exit file: %w", err)
	}
	script, err = os.Open(path)
	if err == nil && switchUser(spec.User) {
		err = errors.Join(script.Chown(int(spec.User.UID), int(spec.User.GID)),
			exit.Chown(int(spec.User.UID), int(spec.User.GID)))
	}
	if err != nil {
		exit.Close()
		if script != nil {
			script.Close()
		}
		return nil, nil, fmt.Errorf("handing the job script to %s: %w", spec.User.Name, err)
	}
	return script, exit, nil
}

// writeScript writes an executable file, in place if it exists (see
// procref.WriteInPlace). It holds syscall.ForkLock for reading while the file is
// open for writing: a process forked meanwhile (to start another job) would
// inherit the descriptor until it execs, and executing the script while
// anyone holds it open for writing fails with ETXTBSY (the job would end with
// exit code 126).
func writeScript(path, content string) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	return procref.WriteInPlace(path, []byte(content), 0o700)
}

// adoptChild records a freshly started shim in dir and returns its handle.
func adoptChild(cmd *exec.Cmd, dir string) (*procHandle, error) {
	pid := cmd.Process.Pid
	st, err := procref.ReadStat(pid) // an unreaped child cannot vanish
	if err != nil {
		return nil, fmt.Errorf("reading the job's process: %w", err)
	}
	ref, err := procref.Open(pid, st.Start, true)
	if err != nil {
		return nil, fmt.Errorf("watching the job's process: %w", err)
	}
	ls := launchState{PID: pid, Start: st.Start, BootID: procref.BootID()}
	if err := procref.WriteJSON(filepath.Join(dir, stateFile), ls); err != nil {
		ref.Close()
		return nil, fmt.Errorf("recording the job's process: %w", err)
	}
	return newProcHandle(dir, ref, cmd), nil
}

// checkWorkDir fails like Slurm does when the working directory is missing
// on the node, rather than running the job somewhere else.
func checkWorkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("working directory %s does not exist on this node (create it, or submit with -D naming one that does)", dir)
	case err != nil:
		return fmt.Errorf("working directory %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("working directory %s is not a directory", dir)
	}
	return nil
}

// OpenOutputFile creates or truncates one of a job's output files, as
// Slurm does by default. Runners call it as the job's user (ident.User.Do),
// so the file is the user's and a directory the user may not write to fails
// the job. A missing directory is not created: it fails the
// job with a message that says so. Every runner opens outputs through it,
// so the message is the same whatever runs the job.
func OpenOutputFile(p string) (*os.File, error) {
	return openOutput(p, os.O_TRUNC)
}

// AppendOutputFile opens one of a job's output files for appending,
// creating it when missing but never truncating it: the destination of a
// live migration carries on the file the source wrote, so that the job's
// output ends up once, in order. It is called as the job's user, as
// OpenOutputFile is, and fails with the same messages.
func AppendOutputFile(p string) (*os.File, error) {
	return openOutput(p, os.O_APPEND)
}

func openOutput(p string, mode int) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|mode, 0o666)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		hint := ""
		if errors.Is(err, fs.ErrNotExist) {
			hint = " (its directory must exist on the node; it is not created)"
		}
		return nil, fmt.Errorf("cannot open output file %s: %v%s", p, err, hint)
	}
	return f, nil
}

// openOutputs opens the job's output files, truncating them. Missing parent
// directories are not created: as in Slurm, that fails the job.
func openOutputs(spec LaunchSpec) (stdout, stderr *os.File, err error) {
	outPath, errPath := spec.Stdout, spec.Stderr
	if outPath == "" {
		outPath = os.DevNull
	}
	if errPath == "" {
		errPath = outPath
	}
	open := func(p string) (f *os.File, err error) {
		openFile := OpenOutputFile
		if spec.AppendOutput {
			openFile = AppendOutputFile
		}
		spec.User.Do(func() error { f, err = openFile(p); return nil })
		return f, err
	}
	if stdout, err = open(outPath); err != nil {
		return nil, nil, err
	}
	if filepath.Clean(errPath) == filepath.Clean(outPath) {
		// One file description, so both streams share one offset.
		if stderr, err = dupFile(stdout); err != nil {
			stdout.Close()
			return nil, nil, err
		}
		return stdout, stderr, nil
	}
	if stderr, err = open(errPath); err != nil {
		stdout.Close()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// dupFile returns a second descriptor of f's open file description, so the
// two can be closed independently.
func dupFile(f *os.File) (*os.File, error) {
	var fd int
	rc, err := f.SyscallConn()
	if err == nil {
		// Close-on-exec from the start: a job started meanwhile must not
		// inherit it.
		cerr := rc.Control(func(old uintptr) { fd, err = unix.FcntlInt(old, unix.F_DUPFD_CLOEXEC, 0) })
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("duplicating %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

func (processRunner) Recover(dir string) (Handle, *Result, error) {
	var ls launchState
	err := procref.ReadJSON(filepath.Join(dir, stateFile), &ls)
	if err != nil {
		if res, ok := readExitFile(dir); ok {
			return nil, &res, fmt.Errorf("%s: job ended while no daemon watched: %w", dir, ErrGone)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, procref.ErrIncomplete) {
			// Empty: a reused directory whose shim was never started.
			return nil, nil, fmt.Errorf("%s: job was never started: %w", dir, ErrGone)
		}
		return nil, nil, fmt.Errorf("%s: %v: %w", dir, err, ErrGone)
	}
	if ls.BootID == procref.BootID() {
		ref, err := procref.Open(ls.PID, ls.Start, false)
		switch {
		case err == nil:
			return newProcHandle(dir, ref, nil), nil, nil
		case !errors.Is(err, os.ErrProcessDone):
			// Not known to be gone (out of descriptors, say): not ErrGone.
			return nil, nil, fmt.Errorf("%s: watching the job's process: %w", dir, err)
		}
	}
	if res, ok := readExitFile(dir); ok {
		return nil, &res, fmt.Errorf("%s: job ended while no daemon watched: %w", dir, ErrGone)
	}
	if ls.BootID != procref.BootID() {
		return nil, nil, fmt.Errorf("%s: the node rebooted while the job ran: %w", dir, ErrGone)
	}
	return nil, nil, fmt.Errorf("%s: the job's processes are gone and left no exit status: %w", dir, ErrGone)
}

// readExitFile reads the status the shim recorded.
func readExitFile(dir string) (Result, bool) {
	b, err := os.ReadFile(filepath.Join(dir, exitFile))
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return Result{}, false
	}
	st, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || st < 0 {
		return Result{}, false
	}
	return decodeShellStatus(st), true
}

// decodeShellStatus turns a shell's $? into a Result. The shell reports a
// child killed by signal S as 128+S, which a script's own `exit 128+S` cannot
// be told from; statuses 129..192 (signals 1..64) are taken as signals.
func decodeShellStatus(st int) Result {
	if st > 128 && st <= 128+64 {
		return Result{Signal: st - 128}
	}
	return Result{ExitCode: st}
}

// procHandle is a job run by the process runner: its shim, either a child of
// this daemon (cmd set) or one re-attached by Recover.
type procHandle struct {
	dir      string
	ref      *procref.Ref
	cmd      *exec.Cmd
	killOnce sync.Once
	done     chan struct{}
	res      Result
	// execs are the commands run beside the job (agentproc.go).
	execMu sync.Mutex
	execs  map[*procExec]bool
}

func newProcHandle(dir string, ref *procref.Ref, cmd *exec.Cmd) *procHandle {
	h := &procHandle{dir: dir, ref: ref, cmd: cmd, done: make(chan struct{})}
	go h.watch()
	return h
}

func (h *procHandle) Wait() Result {
	<-h.done
	return h.res
}

// watch waits for the shim to end, removes what the job left running (as
// Slurm does when a batch script ends), reaps the shim and reads the status.
func (h *procHandle) watch() {
	h.ref.Wait()
	h.sweep()
	var ws *os.ProcessState
	if h.cmd != nil {
		h.cmd.Wait()
		ws = h.cmd.ProcessState
	}
	h.ref.Close()
	res, ok := readExitFile(h.dir)
	switch {
	case ok:
	case ws != nil && ws.Sys().(syscall.WaitStatus).Signaled():
		sig := ws.Sys().(syscall.WaitStatus).Signal()
		res = Result{Signal: int(sig), Message: fmt.Sprintf("the job's wrapper shell was killed by signal %d before it recorded the script's exit status", int(sig))}
	case ws != nil:
		res = Result{ExitCode: ws.ExitCode(), Message: "the job's wrapper shell ended without recording the script's exit status"}
	default:
		res = Result{Message: "the job's wrapper shell vanished without recording the script's exit status"}
	}
	h.res = res
	close(h.done)
}

// sweep SIGKILLs the processes left in the job's session after its shim
// ended. The shim's session id stays reserved while any member lives, and an
// unreaped shim holds its pid; a recovered shim may already be reaped by
// init, so a pid that now names another process stops the sweep.
func (h *procHandle) sweep() {
	if h.cmd == nil {
		if st, err := procref.ReadStat(h.ref.PID()); err == nil && st.Start != h.ref.StartTicks() {
			return
		}
	}
	f := sessionFilter{sid: h.ref.PID(), minStart: h.ref.StartTicks(), except: h.ref.PID()}
	for i := 0; i < 100 && signalSession(f, syscall.SIGKILL) > 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
}

// ProcessGroup names the shim, which leads the job's session and process
// group, for the lease keeper.
func (h *procHandle) ProcessGroup() (int, uint64) { return h.ref.PID(), h.ref.StartTicks() }

func (h *procHandle) Kill(grace time.Duration) {
	h.killOnce.Do(func() {
		if h.ref.Exited() {
			return
		}
		// The shim takes SIGTERM as "do not start the script" and otherwise
		// survives it; every other process of the job gets it once.
		h.ref.Signal(syscall.SIGTERM)
		signalSession(sessionFilter{sid: h.ref.PID(), minStart: h.ref.StartTicks(), except: h.ref.PID()}, syscall.SIGTERM)
		// A suspended job's processes hold the SIGTERM until they are
		// continued; SIGCONT after it lets them act on it at once (Slurm
		// does the same). A job that was not stopped ignores SIGCONT.
		h.ref.Signal(syscall.SIGCONT)
		signalSession(h.sessionAll(), syscall.SIGCONT)
		go h.escalate(grace)
	})
}

// sessionAll selects every process of the job, its shim included.
func (h *procHandle) sessionAll() sessionFilter {
	return sessionFilter{sid: h.ref.PID(), minStart: h.ref.StartTicks(), except: -1}
}

// Pause suspends the job: SIGSTOP to every process of its session, the shim
// included, repeated until none is left running, so that a process forked
// while the first pass ran is stopped too. A process that cannot take the
// signal because its vfork child was stopped before it exec'd counts as
// stopped: it cannot run until the job is continued.
func (h *procHandle) Pause() error {
	if h.ref.Exited() {
		return errJobEnded
	}
	// A process shows as stopped only once it is scheduled to take the
	// signal (or leaves an uninterruptible sleep): on a loaded node that
	// can take far longer than the rounds themselves.
	wait := 2 * time.Millisecond
	for deadline := time.Now().Add(pauseTimeout); ; {
		all := sessionMembers(h.sessionAll())
		running := 0
		for _, m := range all {
			if m.st.Stopped() {
				continue
			}
			syscall.Kill(m.pid, syscall.SIGSTOP)
			if !heldByStoppedVforkChild(m, all) {
				running++
			}
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the job's processes did not all stop within %v of SIGSTOP", pauseTimeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// pauseTimeout bounds how long Pause keeps stopping a job's processes.
const pauseTimeout = 10 * time.Second

// Continue resumes a suspended job: SIGCONT to every process of its session.
func (h *procHandle) Continue() error {
	if h.ref.Exited() {
		return errJobEnded
	}
	signalSession(h.sessionAll(), syscall.SIGCONT)
	return nil
}

// Paused reports whether any process of the job is stopped; a daemon that
// re-attached after a crash learns from it that the job is suspended.
func (h *procHandle) Paused() (bool, error) {
	if h.ref.Exited() {
		return false, errJobEnded
	}
	f := h.sessionAll()
	f.stopped = true
	return signalSession(f, 0) > 0, nil
}

// errJobEnded is returned by Pause, Continue and Paused when the job's shim
// is gone.
var errJobEnded = errors.New("the job has ended")

// escalate SIGKILLs whatever of the job is left after grace, sparing the
// shim so that it records the status; a shim that still has not ended after
// another grace (stopped, say) is killed too.
func (h *procHandle) escalate(grace time.Duration) {
	select {
	case <-h.done:
		return
	case <-time.After(grace):
	}
	f := sessionFilter{sid: h.ref.PID(), minStart: h.ref.StartTicks(), except: h.ref.PID()}
	deadline := time.Now().Add(grace + time.Second)
	for !h.ref.Exited() && signalSession(f, syscall.SIGKILL) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-h.done:
	case <-time.After(grace + time.Second):
		h.ref.Signal(syscall.SIGKILL)
	}
}

// openInput opens the job's standard input file (sbatch -i) as its user;
// nil when it has none (the shim's stdin is /dev/null).
func openInput(spec LaunchSpec) (*os.File, error) {
	if spec.Stdin == "" {
		return nil, nil
	}
	var f *os.File
	var err error
	spec.User.Do(func() error { f, err = os.Open(spec.Stdin); return nil })
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot open the input file (-i) %s: %w", spec.Stdin, err)
	}
	return f, nil
}

// applyRlimits gives process pid the job's soft limits (sbatch
// --propagate); one above the node's hard limit is lowered to it, and the
// job's error file says so.
func applyRlimits(pid int, ls []api.Rlimit, stderr io.Writer) error {
	for _, l := range ls {
		lowered, hard, err := rlimit.Set(pid, l.Name, l.Value)
		if err != nil {
			return fmt.Errorf("applying the job's resource limits (--propagate): %w", err)
		}
		if lowered {
			fmt.Fprintf(stderr, "corral: --propagate: %s lowered to %d, the node's hard limit\n", l.Name, hard)
		}
	}
	return nil
}
