package submit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"corral/api"
	"corral/internal/getopt"
)

// Context is everything Parse may know about the submitting environment;
// the CLI fills it from the process (os.Environ(), os.Getwd(), $USER,
// os.Stdin, time.Now()).
type Context struct {
	// Env is the submitting environment as KEY=VALUE entries.
	Env []string
	// Cwd is the absolute directory the user submitted from.
	Cwd string
	// User is the submitting user's name.
	User string
	// Stdin supplies the script when neither a script path nor --wrap is
	// given; nil means there is none.
	Stdin io.Reader
	// Now anchors --begin; the zero time means time.Now().
	Now time.Time
	// ReadFile reads the script file; nil means ReadScriptFile, which
	// reads at most MaxScriptBytes+1 bytes of a regular file. Relative
	// script paths are joined to Cwd before it is called.
	ReadFile func(path string) ([]byte, error)
	// Privileged says the submitting user may give a negative --nice,
	// which raises a job's priority: the CLI sets it when its effective
	// uid is 0 (the controller allows it for user root only).
	Privileged bool
	// Rlimit returns the submitting process's soft resource limit by
	// Slurm's name (api.RlimitNames), for --propagate; false when it
	// cannot be read. Nil reads none.
	Rlimit func(name string) (uint64, bool)
}

// Request is a parsed submission.
type Request struct {
	// Spec is the validated job request, ready to send to the controller.
	Spec api.JobSpec
	// Parsable asks the CLI to print only the job id (--parsable).
	Parsable bool
	// Wait asks the CLI to wait for the job to end (-W/--wait).
	Wait bool
	// TestOnly asks when and where the job would start, storing nothing
	// (--test-only).
	TestOnly bool
	// Warnings are the options accepted that have no effect under corral,
	// each with why, for the CLI to print on stderr unless Quiet.
	Warnings []string
	// Quiet (-Q) silences the warnings; Verbose (-v, repeatable) asks for
	// more of what sbatch says.
	Quiet   bool
	Verbose int
	// Version (-V) and Usage (--usage) ask for the version or a short
	// usage line instead of a submission.
	Version, Usage bool
	// ScriptPath is the script path as the user gave it; empty for --wrap
	// and for a script read from standard input.
	ScriptPath string
	// Cluster is -M/--clusters: the cluster the user named, which the CLI
	// checks is this one's (and --parsable then prints ID;NAME).
	Cluster string
}

// layer says where an option came from; a higher layer overrides a lower.
type layer int

const (
	layerNone layer = iota
	layerScript
	layerCLI
)

// builder accumulates options into a JobSpec.
type builder struct {
	spec  api.JobSpec
	layer layer
	now   time.Time

	// memLayer and memPerCPULayer record where --mem and --mem-per-cpu
	// were set, to apply sbatch's rule between them (see setMemory).
	memLayer, memPerCPULayer layer

	export    string
	exportSet bool
	wrap      string
	wrapSet   bool
	chdir     string
	parsable  bool
	wait      bool
	testOnly  bool
	warnings  []string
	quiet     bool
	verbose   int
	version   bool
	usage     bool
	// gpusPerTask is --gpus-per-task ([TYPE:]N), multiplied by the final
	// tasks per node in finish.
	gpusPerTask string
	// propagate names the limits --propagate gives the job, read from
	// Context.Rlimit in finish.
	propagate    []string
	propagateSet bool
	// cpusPerTaskSet says -c was given (it excludes --cpus-per-gpu);
	// exportFile is --export-file; clusters is -M.
	cpusPerTaskSet bool
	exportFile     string
	clusters       string
	// gpusTotal is --gpus ([TYPE:]N) when it is the last GPU option,
	// spread over a multi-node job's nodes in finish.
	gpusTotal string
	// ntasksSet records that -n was given.
	ntasksSet bool
	// ctx is the submission's context (for the files -w and -F name).
	ctx Context
}

// warn records that option has no effect under corral, and why; an option
// given twice (in the script and on the command line) is said once.
func (b *builder) warn(option, why string) {
	line := option + ": " + why
	if !slices.Contains(b.warnings, line) {
		b.warnings = append(b.warnings, line)
	}
}

// setMemory applies --mem or --mem-per-cpu. As in sbatch, giving both at
// the same level (both on the command line, or both in the script) is an
// error, while one on the command line replaces the other from the script.
func (b *builder) setMemory(field, v string) error {
	mib, err := ParseMemory(v)
	if err != nil {
		return wrapValueError(field, v, err)
	}
	if field == "--mem" {
		if b.memPerCPULayer == b.layer {
			return optionError(field, v, nil, "--mem and --mem-per-cpu are mutually exclusive; give only one of them")
		}
		// 0 is Slurm's "all of the node's memory".
		b.spec.MemPerNode, b.spec.MemAll, b.memLayer = mib, mib == 0, b.layer
		return nil
	}
	if mib == 0 {
		return optionError(field, v, nil, "give an amount per CPU, e.g. --mem-per-cpu=2G; --mem=0 asks for all of a node's memory")
	}
	if b.memLayer == b.layer {
		return optionError(field, v, nil, "--mem and --mem-per-cpu are mutually exclusive; give only one of them")
	}
	b.spec.MemPerCPU, b.memPerCPULayer = mib, b.layer
	return nil
}

// resolveMemory keeps only the memory option from the higher layer.
func (b *builder) resolveMemory() {
	switch {
	case b.memLayer == layerNone || b.memPerCPULayer == layerNone:
	case b.memLayer > b.memPerCPULayer:
		b.spec.MemPerCPU = 0
	default:
		b.spec.MemPerNode, b.spec.MemAll = 0, false
	}
}

// applyAll applies parsed options in order at layer l.
func (b *builder) applyAll(l layer, opts []getopt.Parsed) error {
	b.layer = l
	for _, p := range opts {
		def := optionsByLong[p.Option.Long]
		if err := def.apply(b, p.Value, p.HasValue); err != nil {
			return err
		}
	}
	return nil
}

// Parse parses an sbatch command line (without the program name) and the
// script it names, merging the script's #SBATCH and #CORRAL directives with
// the command line as sbatch does: directives first, in order, then the
// command line, so the command line wins. -h/--help returns ErrHelp. Every
// other failure is an *Error that says what to change.
func Parse(args []string, c Context) (*Request, error) {
	if c.Now.IsZero() {
		c.Now = time.Now()
	}
	cli, err := cliParser.Parse(args)
	if err != nil {
		return nil, grammarError(err)
	}
	// Check the command line on its own first, so its mistakes are reported
	// before the script is even read (sbatch's first pass does the same).
	first := &builder{now: c.Now, ctx: c}
	if err := first.applyAll(layerCLI, cli.Options); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(c.Cwd) {
		return nil, &Error{Field: "Context.Cwd", Value: c.Cwd,
			Message: "the submit directory must be an absolute path (the CLI sets it from os.Getwd)"}
	}
	src, err := loadScript(cli.Args, first, c)
	if err != nil {
		return nil, err
	}
	var directives []directive
	if !first.wrapSet {
		if directives, err = scanDirectives(src.text, src.file); err != nil {
			return nil, err
		}
	}
	b := &builder{now: c.Now, ctx: c}
	b.spec = api.JobSpec{
		Name: src.name, User: c.User, Script: src.text, Args: src.args,
		SubmitDir: c.Cwd, NTasks: 1, CPUsPerTask: 1,
	}
	for _, d := range directives {
		if err := b.applyAll(layerScript, d.options); err != nil {
			return nil, d.locate(err)
		}
	}
	if err := b.applyAll(layerCLI, cli.Options); err != nil {
		return nil, err
	}
	return b.finish(c, src.path)
}

// finish settles what depends on every option: memory precedence, the work
// directory and the exported environment.
func (b *builder) finish(c Context, scriptPath string) (*Request, error) {
	b.resolveMemory()
	if err := b.settleNodes(); err != nil {
		return nil, err
	}
	b.spec.WorkDir = c.Cwd
	if b.chdir != "" {
		b.spec.WorkDir = b.chdir
		if !filepath.IsAbs(b.chdir) {
			b.spec.WorkDir = filepath.Join(c.Cwd, b.chdir)
		}
	}
	env, err := ExportEnv(b.export, c.Env)
	if err != nil {
		return nil, err
	}
	if b.exportFile != "" {
		if env, err = withExportFile(env, b.exportFile, c); err != nil {
			return nil, err
		}
	}
	b.spec.Env = env
	if err := b.cpusPerGPU(); err != nil {
		return nil, err
	}
	if b.propagateSet {
		b.spec.Rlimits = nil
		for _, name := range b.propagate {
			if c.Rlimit == nil {
				break
			}
			if v, ok := c.Rlimit(name); ok {
				b.spec.Rlimits = append(b.spec.Rlimits, api.Rlimit{Name: name, Value: v})
			}
		}
	}
	if b.spec.Nice < 0 && !c.Privileged {
		return nil, optionError("--nice", strconv.Itoa(b.spec.Nice), nil,
			"only root may give a negative nice, which raises the job's priority (this command does not run with effective uid 0); use 0 or more")
	}
	if err := ValidateSpec(&b.spec, c.Now); err != nil {
		return nil, err
	}
	return &Request{Spec: b.spec, Parsable: b.parsable, Wait: b.wait, TestOnly: b.testOnly, ScriptPath: scriptPath,
		Warnings: b.warnings, Quiet: b.quiet, Verbose: b.verbose, Cluster: b.clusters}, nil
}

// script is the batch script and where it came from.
type script struct {
	text string
	args []string
	path string // as given on the command line; empty otherwise
	file string // names the script in error messages
	name string // the default job name
}

// loadScript finds the script: --wrap, a path on the command line, or
// standard input, in that order, as sbatch does.
func loadScript(positional []string, b *builder, c Context) (script, error) {
	if b.wrapSet {
		if len(positional) > 0 {
			return script{}, &Error{Field: "--wrap", Value: b.wrap,
				Message: fmt.Sprintf("cannot be combined with a script file or script arguments (got %q); put the whole command in --wrap, or drop --wrap and submit the script", positional)}
		}
		return script{text: "#!/bin/sh\n" + b.wrap + "\n", file: "--wrap", name: "wrap"}, nil
	}
	if len(positional) > 0 {
		path := positional[0]
		data, err := readScriptFile(path, c)
		if err != nil {
			return script{}, err
		}
		s := script{text: string(data), path: path, file: path, name: filepath.Base(path)}
		if len(positional) > 1 {
			s.args = append([]string(nil), positional[1:]...)
		}
		return s, checkScript(s.text, path)
	}
	if c.Stdin == nil {
		return script{}, &Error{Field: "script", Err: ErrNoScript,
			Message: "no batch script: give a script path, use --wrap=COMMAND, or pipe the script on standard input"}
	}
	data, err := io.ReadAll(io.LimitReader(c.Stdin, MaxScriptBytes+1))
	if err != nil {
		return script{}, &Error{Field: "script", Err: err,
			Message: fmt.Sprintf("cannot read the batch script from standard input: %v", err)}
	}
	s := script{text: string(data), file: "stdin", name: "sbatch"}
	return s, checkScript(s.text, "")
}

func readScriptFile(path string, c Context) ([]byte, error) {
	read := c.ReadFile
	if read == nil {
		read = ReadScriptFile
	}
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(c.Cwd, full)
	}
	data, err := read(full)
	if err != nil {
		why := "check the path"
		switch {
		case errors.Is(err, os.ErrNotExist):
			why = "no such file; check the path, which is relative to " + c.Cwd
		case errors.Is(err, ErrNotRegularFile):
			why = "give the path of a batch script file, or pipe the script on standard input"
		}
		return nil, &Error{Field: "script", Value: path, Err: err,
			Message: fmt.Sprintf("cannot read the batch script: %v (%s)", err, why)}
	}
	return data, nil
}

// ErrNotRegularFile marks a script path that names a directory, a device
// (such as /dev/zero), a FIFO or a socket.
var ErrNotRegularFile = errors.New("not a regular file")

// ReadScriptFile reads a batch script from a regular file, at most
// MaxScriptBytes+1 bytes of it (one byte more than a script may have, so
// that an oversize script is reported as such): `corral submit /dev/zero`
// fails at once instead of reading forever.
func ReadScriptFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (it is %s)", path, ErrNotRegularFile, fileKind(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegularFile)
	}
	return io.ReadAll(io.LimitReader(f, MaxScriptBytes+1))
}

// fileKind names a non-regular file's type for an error message.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// checkScript applies sbatch's checks on a script's text; path is the
// script's path as given, or empty for standard input.
func checkScript(text, path string) error {
	what := "the batch script"
	if path == "" {
		what = "the batch script read from standard input"
	}
	if cause, why := ScriptProblem(text, what); why != "" {
		return &Error{Field: "script", Value: path, Message: why, Err: cause}
	}
	return nil
}

// SplitCommand splits a command line of sbatch options followed by a
// command and its arguments (salloc's and srun's form) into the options
// and the command; an option the grammar does not know is an error.
func SplitCommand(args []string) (options, command []string, err error) {
	p, err := cliParser.Parse(args)
	if err != nil {
		return nil, nil, grammarError(err)
	}
	n := len(args) - len(p.Args)
	if n > 0 && args[n-1] == "--" {
		return args[: n-1 : n-1], p.Args, nil
	}
	return args[:n:n], p.Args, nil
}
