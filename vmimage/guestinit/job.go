package guestinit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"corral/vmimage"
)

// Job is what the payload under /job asks for.
type Job struct {
	Argv []string // the program and its arguments
	// ScriptArg is the index in Argv of the script's path.
	ScriptArg int
	Env       []string // KEY=VALUE, exactly the job's environment
	WorkDir   string
	// User is whom the job runs as; nil is root.
	User *vmimage.User
	// FS, when set, makes the host's tree the job's root (see vmimage.FS).
	FS *vmimage.FS
	// Input is the file, in the job's root, that the script reads as its
	// standard input; "" is /dev/null.
	Input string
	// Rlimits are the soft limits the job's processes get.
	Rlimits []vmimage.Rlimit
	// Net, when set, is the job's private network (see vmimage.Net).
	Net *vmimage.Net
}

// ErrNoPayload says the initramfs holds no job: the image was booted alone.
var ErrNoPayload = errors.New("no job payload: /job/script is missing")

// ReadJob reads the payload under dir (/job in the guest). The script runs
// directly when it starts with "#!", else through /bin/sh. Entries of the
// environment without a name ("=x") or without "=" are dropped, as env(1)
// would misread them.
func ReadJob(dir string) (Job, error) {
	script := filepath.Join(dir, "script")
	head := make([]byte, 2)
	f, err := os.Open(script)
	if errors.Is(err, fs.ErrNotExist) {
		return Job{}, ErrNoPayload
	}
	if err != nil {
		return Job{}, fmt.Errorf("job script: %w", err)
	}
	n, _ := f.Read(head)
	f.Close()
	var j Job
	if n == 2 && string(head) == "#!" {
		j.Argv = []string{script}
	} else {
		j.Argv = []string{"/bin/sh", script}
		j.ScriptArg = 1
	}
	args, err := readNULList(filepath.Join(dir, "args"))
	if err != nil {
		return Job{}, err
	}
	j.Argv = append(j.Argv, args...)
	env, err := readNULList(filepath.Join(dir, "env"))
	if err != nil {
		return Job{}, err
	}
	for _, kv := range env {
		if i := strings.IndexByte(kv, '='); i > 0 {
			j.Env = append(j.Env, kv)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "user")); err == nil {
		u, err := vmimage.ParseUser(b)
		if err != nil {
			return Job{}, err
		}
		j.User = &u
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Job{}, fmt.Errorf("job user: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "fs")); err == nil {
		f, err := vmimage.ParseFS(b)
		if err != nil {
			return Job{}, err
		}
		j.FS = &f
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Job{}, fmt.Errorf("job fs: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "input")); err == nil {
		j.Input, _, _ = strings.Cut(string(b), "\n")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Job{}, fmt.Errorf("job input: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "rlimits")); err == nil {
		if j.Rlimits, err = ParseRlimits(string(b)); err != nil {
			return Job{}, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Job{}, fmt.Errorf("job rlimits: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "net")); err == nil {
		n, err := vmimage.ParseNet(b)
		if err != nil {
			return Job{}, err
		}
		j.Net = &n
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Job{}, fmt.Errorf("job net: %w", err)
	}
	j.WorkDir = "/"
	if b, err := os.ReadFile(filepath.Join(dir, "workdir")); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		if line != "" {
			j.WorkDir = line
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Job{}, fmt.Errorf("job workdir: %w", err)
	}
	return j, nil
}

// readNULList reads a file of NUL-terminated entries; a missing file is an
// empty list, and a last entry without its NUL still counts.
func readNULList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", filepath.Base(path), err)
	}
	return SplitNUL(b), nil
}

// SplitNUL splits NUL-terminated entries. A last entry without its NUL
// still counts; empty input is no entries, and a lone NUL is one empty
// entry.
func SplitNUL(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")
}

// Options are the corral.* parameters of the kernel command line.
type Options struct {
	Debug    bool   // corral.debug=1: log each step on the console
	Hostname string // corral.hostname=NAME
	Agent    bool   // corral.agent=1: the VM has the agent port
	// Warm is the stage of corral.warm=STAGE (vmimage.WarmNet or
	// vmimage.WarmRoot): the VM is booted for a warm start's snapshot, and
	// its job comes over the agent. Empty for a job's own boot.
	Warm string
}

// ParseCmdline reads the corral.* parameters from /proc/cmdline's text.
func ParseCmdline(cmdline string) Options {
	var o Options
	for _, arg := range strings.Fields(cmdline) {
		switch {
		case arg == "corral.debug=1":
			o.Debug = true
		case arg == "corral.agent=1":
			o.Agent = true
		case strings.HasPrefix(arg, "corral.hostname="):
			o.Hostname = strings.TrimPrefix(arg, "corral.hostname=")
		case arg == "corral.warm="+vmimage.WarmNet || arg == "corral.warm="+vmimage.WarmRoot:
			o.Warm = strings.TrimPrefix(arg, "corral.warm=")
		}
	}
	return o
}

// ExitCode turns how the job ended into the status a shell reports: its
// exit status, or 128+N when signal N killed it.
func ExitCode(exited bool, status int, signal int) int {
	if exited {
		return status & 0xff
	}
	return 128 + signal
}

// StartFailureCode is the status for a script that could not be executed,
// as a shell reports it: 126 when it exists but cannot run, 127 otherwise.
func StartFailureCode(err error) int {
	if errors.Is(err, fs.ErrNotExist) {
		return 127
	}
	return 126
}

// ParseRlimits reads job/rlimits: NAME=VALUE lines.
func ParseRlimits(text string) ([]vmimage.Rlimit, error) {
	var out []vmimage.Rlimit
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		v, err := strconv.ParseUint(value, 10, 64)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("job rlimits: %q is not NAME=VALUE", line)
		}
		out = append(out, vmimage.Rlimit{Name: name, Value: v})
	}
	return out, nil
}

// FormatRlimits writes limits as the stub's argument: NAME=VALUE,...
func FormatRlimits(ls []vmimage.Rlimit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Name + "=" + strconv.FormatUint(l.Value, 10)
	}
	return strings.Join(parts, ",")
}
