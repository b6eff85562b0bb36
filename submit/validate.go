package submit

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"corral/api"
)

// The limits of a job request. They are the one source of truth: Parse
// applies them at the end of every submission and the controller applies
// them to every request it receives (ValidateSpec), so the CLI and the API
// accept exactly the same jobs. Each bound is chosen so that no arithmetic
// on an accepted request can overflow: CPUs × memory per CPU fits in an
// int64, a time limit converts to a time.Duration, a priority stays far
// inside an int64.
const (
	// MaxScriptBytes is the largest batch script (4 MiB, the default of
	// Slurm's max_script_size).
	MaxScriptBytes = 4 << 20
	// MaxTasks bounds --ntasks, MaxCPUsPerTask --cpus-per-task, and MaxCPUs
	// their product, the CPUs a job asks for on its node.
	MaxTasks       = 1_000_000
	MaxCPUsPerTask = 1_000_000
	MaxCPUs        = 1_000_000
	// MaxNodes bounds --nodes, the names of --nodelist and --exclude, and
	// the counts of --constraint.
	MaxNodes = 100_000
	// MaxHostListBytes bounds the text of --nodelist and --exclude (and
	// the file -F names).
	MaxHostListBytes = 1 << 20
	// MaxMemoryMiB (1 EiB) bounds --mem, --mem-per-cpu, and --mem-per-cpu
	// × CPUs.
	MaxMemoryMiB = 1 << 40
	// MaxTimeLimit is the longest time limit in seconds: 100 years. Any
	// longer limit would overflow a time.Duration (292 years) once added to
	// a start time; use UNLIMITED (0) for none.
	MaxTimeLimit = 100 * 365 * 24 * 3600
	// MaxNice bounds --nice both ways. It spans every priority the default
	// weights give (at most 23,000), so a nice value can move a job to
	// either end of the queue, and keeps the priority sum exact.
	MaxNice = 10_000
	// MaxBeginAhead is how far in the future --begin may be.
	MaxBeginAhead = 10 * 365 * 24 * time.Hour
	// MaxArrayIndex is the largest index an --array expression may name.
	MaxArrayIndex = 1_000_000
	// MaxArrayRanges bounds the comma-separated items of an --array list.
	MaxArrayRanges = api.MaxIndexRanges
	// MaxGresCount bounds the count of one --gres entry, MaxGresEntries
	// the entries.
	MaxGresCount   = 1_000_000
	MaxGresEntries = 16
	// MaxDependencyJobs bounds the job ids of a --dependency expression.
	MaxDependencyJobs = 1000
	// MaxDelayMinutes bounds after:ID+MINUTES.
	MaxDelayMinutes = MaxTimeLimit / 60
	// MaxExpressionBytes bounds the text of an --array or --dependency
	// expression.
	MaxExpressionBytes = 64 << 10
	// MaxNameBytes bounds every name and one-line text field (name, user,
	// account, partition, qos, comment, image); MaxPathBytes every path
	// (output, error, submit and work directories); MaxRequestIDBytes the
	// idempotency key.
	MaxNameBytes      = 256
	MaxPathBytes      = 4096
	MaxRequestIDBytes = 128
	// MaxEnvEntries and MaxEnvBytes bound the exported environment: its
	// KEY=VALUE entries and their total size.
	MaxEnvEntries = 10_000
	MaxEnvBytes   = 1 << 20
	// MaxArgs and MaxArgsBytes bound the script's arguments.
	MaxArgs      = 10_000
	MaxArgsBytes = 1 << 20
)

// Hugepage sizes a job may ask for, in KiB (--hugepages=2M:N, 1G:N).
const (
	Hugepage2M = 2048
	Hugepage1G = 1 << 20
)

// ValidateSpec checks the stateless rules every job request must follow,
// whoever sent it: bounds on every number and on their products, text that
// is valid UTF-8 without control characters, well-formed names, the
// script, the environment, arrays (sized arithmetically, never by listing
// their indexes), dependencies, generic resources and hugepages. now
// anchors the bound on --begin. It returns nil or an *Error whose Field is
// the request's JSON field (e.g. "cpus_per_task"), whose Value is the bad
// value and whose Message says what would be valid.
//
// Checks that need the cluster's state (the partition, QoS, account,
// image and dependency targets exist; some node could hold the job) are
// the controller's.
func ValidateSpec(sp *api.JobSpec, now time.Time) error {
	for _, check := range specChecks {
		if err := check(sp, now); err != nil {
			return err
		}
	}
	return nil
}

var specChecks = []func(*api.JobSpec, time.Time) error{
	checkTexts, checkScriptField, checkEnv, checkArgs, checkCounts, checkNodes, checkMemory,
	checkTimes, checkNice, checkGres, checkLicenses, checkHugepages, checkNUMA, checkDependency, checkArray, checkWarnSignal,
	checkMail, checkLaunch,
}

// checkLaunch checks how the node is to start the job: --open-mode, -i and
// --propagate.
func checkLaunch(sp *api.JobSpec, _ time.Time) error {
	if sp.OpenMode != "" && sp.OpenMode != api.OpenModeAppend {
		return fieldErr("open_mode", sp.OpenMode, ErrInvalid, "--open-mode must be append or truncate")
	}
	if sp.Input != "" {
		if why := TextProblem(sp.Input, MaxPathBytes); why != "" {
			return fieldErr("input", sp.Input, ErrInvalid, "--input %s", why)
		}
	}
	if err := api.CheckRlimits(sp.Rlimits); err != nil {
		return fieldErr("rlimits", "", ErrInvalid, "--propagate: %v", err)
	}
	if sp.TmpMB < 0 || sp.TmpMB > MaxMemoryMiB {
		return fieldErr("tmp_mb", strconv.FormatInt(sp.TmpMB, 10), ErrInvalid, "--tmp must be from 0 to %d MiB", int64(MaxMemoryMiB))
	}
	switch sp.Hint {
	case "", api.HintNoMultithread, api.HintComputeBound, api.HintMemoryBound:
	default:
		return fieldErr("hint", sp.Hint, ErrInvalid, "--hint must be nomultithread, compute_bound or memory_bound")
	}
	if sp.ThreadsPerCore < 0 || sp.ThreadsPerCore > 1024 || sp.NTasksPerCore < 0 || sp.NTasksPerCore > MaxTasks {
		return fieldErr("threads_per_core", strconv.Itoa(sp.ThreadsPerCore), ErrInvalid, "--threads-per-core must be from 1 to 1024 and --ntasks-per-core from 1 to %d", MaxTasks)
	}
	if len(sp.MemNodes) > 64 || !slices.IsSorted(sp.MemNodes) || len(sp.MemNodes) > 0 && (sp.MemNodes[0] < 0 || sp.MemNodes[len(sp.MemNodes)-1] > MaxNUMANodeID) {
		return fieldErr("mem_nodes", "", ErrInvalid, "--mem-bind names at most 64 NUMA nodes, ids from 0 to %d, sorted", MaxNUMANodeID)
	}
	for i := 1; i < len(sp.MemNodes); i++ {
		if sp.MemNodes[i] == sp.MemNodes[i-1] {
			return fieldErr("mem_nodes", strconv.Itoa(sp.MemNodes[i]), ErrInvalid, "--mem-bind names NUMA node %d twice", sp.MemNodes[i])
		}
	}
	if why := TextProblem(sp.MemBind, MaxNameBytes); why != "" {
		return fieldErr("mem_bind", sp.MemBind, ErrInvalid, "--mem-bind %s", why)
	}
	if sp.Priority < 0 || sp.Priority > api.MaxPriority {
		return fieldErr("priority", strconv.FormatInt(sp.Priority, 10), ErrInvalid, "--priority must be from 1 to %d (0: none)", int64(api.MaxPriority))
	}
	if n := sp.CPUsPerGPU; n != 0 {
		switch gpus := sp.GPUCount(); {
		case n < 0 || n > MaxCPUsPerTask:
			return fieldErr("cpus_per_gpu", strconv.Itoa(n), ErrInvalid, "--cpus-per-gpu must be from 1 to %d", MaxCPUsPerTask)
		case gpus == 0:
			return fieldErr("cpus_per_gpu", strconv.Itoa(n), ErrInvalid, "--cpus-per-gpu needs GPUs: add --gpus=N or --gres=gpu:N")
		case sp.CPUs() < gpus*n:
			return fieldErr("cpus_per_gpu", strconv.Itoa(n), ErrInvalid, "--cpus-per-gpu=%d with %d GPUs needs %d CPUs; the job asks for %d", n, gpus, gpus*n, sp.CPUs())
		}
	}
	return nil
}

// checkMail checks the notification request (--mail-type, --mail-user).
func checkMail(sp *api.JobSpec, _ time.Time) error {
	if err := api.CheckMailTypes(sp.MailType); err != nil {
		return fieldErr("mail_type", strings.Join(sp.MailType, ","), ErrInvalid, "--mail-type: %v", err)
	}
	if sp.MailUser != "" {
		if why := api.MailUserProblem(sp.MailUser); why != "" {
			return fieldErr("mail_user", sp.MailUser, ErrInvalid, "--mail-user %s", why)
		}
	}
	return nil
}

// checkWarnSignal checks the time-limit warning (--signal).
func checkWarnSignal(sp *api.JobSpec, _ time.Time) error {
	w := sp.Signal
	if w == nil {
		return nil
	}
	if w.Signal < 1 || w.Signal > 64 {
		return fieldErr("signal", strconv.Itoa(w.Signal), ErrInvalid, "--signal: signal %d must be from 1 to 64", w.Signal)
	}
	if w.BeforeS < 0 || w.BeforeS > api.MaxWarnBefore {
		return fieldErr("signal", strconv.FormatInt(w.BeforeS, 10), ErrInvalid, "--signal: TIME %d must be from 0 to %d seconds", w.BeforeS, api.MaxWarnBefore)
	}
	return nil
}

// fieldErr builds a refusal of field (a JSON field name) with value.
func fieldErr(field, value string, cause error, format string, args ...any) *Error {
	return &Error{Field: field, Value: Shown(value), Message: fmt.Sprintf(format, args...), Err: cause}
}

// ErrInvalid marks a request that breaks one of ValidateSpec's rules.
var ErrInvalid = errors.New("invalid job request")

// Shown cuts a value for an error message: the first 64 bytes (whole
// characters) and how long it was, so that a megabyte-long value does not
// make a megabyte-long message.
func Shown(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// TextProblem says what is wrong with s as a one-line text value of at
// most limit bytes, or "" when nothing is: too long, not valid UTF-8, or a
// control character (C0, DEL or C1) in it.
func TextProblem(s string, limit int) string {
	if len(s) > limit {
		return fmt.Sprintf("is %d bytes long; the most is %d", len(s), limit)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return fmt.Sprintf("contains the control character %q at byte %d; use printable text on one line", c, i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return fmt.Sprintf("is not valid UTF-8 (byte %d is %#x); use UTF-8 text", i, c)
		case r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("contains the control character %U at byte %d; use printable text on one line", r, i)
		}
		i += size
	}
	return ""
}

// NameProblem says what is wrong with s as a name (of a node, partition,
// account, QoS, image or generic resource), or "": it must be 1 to limit
// bytes of letters, digits, '.', '-' and '_', start with a letter, digit
// or '_', and so can never be a path such as "../x".
func NameProblem(s string, limit int) string {
	switch {
	case s == "":
		return "is empty; give a name"
	case len(s) > limit:
		return fmt.Sprintf("is %d bytes long; the most is %d", len(s), limit)
	case s[0] == '.' || s[0] == '-':
		return "must start with a letter, a digit or '_'"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Sprintf("may hold only letters, digits, '.', '-' and '_' (byte %d is %q)", i, c)
		}
	}
	return ""
}

// checkTexts checks the names, free text and paths of a request.
func checkTexts(sp *api.JobSpec, _ time.Time) error {
	texts := []struct {
		field, value string
		limit        int
		word         bool // no white space (an identifier)
		name         bool // NameProblem's character set
		abs          bool // an absolute path when given
	}{
		{field: "request_id", value: sp.RequestID, limit: MaxRequestIDBytes},
		{field: "name", value: sp.Name, limit: MaxNameBytes},
		{field: "user", value: sp.User, limit: MaxNameBytes, word: true},
		{field: "account", value: sp.Account, limit: MaxNameBytes, name: true},
		{field: "partition", value: sp.Partition, limit: MaxNameBytes, name: true},
		{field: "qos", value: sp.QOS, limit: MaxNameBytes, name: true},
		{field: "reservation", value: sp.Reservation, limit: MaxNameBytes, name: true},
		{field: "comment", value: sp.Comment, limit: MaxNameBytes},
		{field: "image", value: sp.Image, limit: MaxNameBytes, name: true},
		{field: "output", value: sp.Output, limit: MaxPathBytes},
		{field: "error", value: sp.Error, limit: MaxPathBytes},
		{field: "submit_dir", value: sp.SubmitDir, limit: MaxPathBytes, abs: true},
		{field: "work_dir", value: sp.WorkDir, limit: MaxPathBytes, abs: true},
	}
	if sp.User == "" {
		return fieldErr("user", "", ErrInvalid, "no user: every job belongs to a user")
	}
	for _, t := range texts {
		if t.value == "" {
			continue
		}
		why := TextProblem(t.value, t.limit)
		switch {
		case why != "":
		case t.name:
			why = NameProblem(t.value, t.limit)
		case t.word && strings.ContainsAny(t.value, " \u00a0"):
			why = "must not contain spaces"
		case t.abs && !filepath.IsAbs(t.value):
			why = "must be an absolute path, e.g. /home/alice/run1"
		}
		if why != "" {
			return fieldErr(t.field, t.value, ErrInvalid, "%s", why)
		}
	}
	return nil
}

func checkScriptField(sp *api.JobSpec, _ time.Time) error {
	if cause, why := ScriptProblem(sp.Script, "the batch script"); why != "" {
		return &Error{Field: "script", Message: why, Err: cause}
	}
	return nil
}

// ScriptProblem says what is wrong with a batch script's text, naming it
// as what (e.g. "the batch script"), with the sentinel that classifies it;
// "" when nothing is. The checks are sbatch's (empty, DOS line breaks, no
// #! line) and the ones the transport needs (at most MaxScriptBytes, no
// NUL byte, valid UTF-8).
func ScriptProblem(text, what string) (error, string) {
	switch {
	case len(text) > MaxScriptBytes:
		return ErrScriptTooLarge, fmt.Sprintf("%s is larger than %d bytes (4 MiB); keep data in files the script reads", what, MaxScriptBytes)
	case strings.TrimSpace(text) == "":
		return ErrEmptyScript, what + " is empty or only white space; give a script that starts with #!/bin/sh or similar"
	case strings.Contains(text, "\r\n"):
		return ErrInvalid, what + " has DOS line breaks (\\r\\n) instead of UNIX ones (\\n); convert it, e.g. with dos2unix"
	case strings.IndexByte(text, 0) >= 0:
		return ErrInvalid, fmt.Sprintf("%s contains a NUL byte (line %d); a batch script must be text", what, strings.Count(text[:strings.IndexByte(text, 0)], "\n")+1)
	case !utf8.ValidString(text):
		return ErrInvalid, fmt.Sprintf("%s is not valid UTF-8 (line %d); convert it, e.g. with iconv -t UTF-8", what, invalidUTF8Line(text))
	case !strings.HasPrefix(text, "#!"):
		return ErrNotBatchScript, "This does not look like a batch script. The first line must start with #! followed by the path to an interpreter, e.g. #!/bin/bash"
	}
	return nil, ""
}

// invalidUTF8Line returns the 1-based line of the first invalid UTF-8 byte.
func invalidUTF8Line(text string) int {
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			return strings.Count(text[:i], "\n") + 1
		}
		i += size
	}
	return 0
}

// checkEnv checks the exported environment: KEY=VALUE entries whose key is
// printable text without '=' (bash's exported functions, BASH_FUNC_f%%,
// are keys too) and whose value holds no NUL byte, within MaxEnvEntries
// and MaxEnvBytes.
func checkEnv(sp *api.JobSpec, _ time.Time) error {
	if len(sp.Env) > MaxEnvEntries {
		return fieldErr("env", "", ErrInvalid, "%d variables; the most is %d: export fewer (e.g. --export=NONE,VAR1,VAR2)", len(sp.Env), MaxEnvEntries)
	}
	total := 0
	for i, kv := range sp.Env {
		total += len(kv)
		if total > MaxEnvBytes {
			return fieldErr("env", "", ErrInvalid, "the environment is over %d bytes (1 MiB); export fewer or smaller variables (e.g. --export=NONE,VAR1,VAR2)", MaxEnvBytes)
		}
		key, value, ok := strings.Cut(kv, "=")
		why := ""
		switch {
		case !ok || key == "":
			why = "is not KEY=VALUE"
		case TextProblem(key, MaxNameBytes) != "" || strings.ContainsAny(key, " "):
			why = "has a key that is not a variable name (printable text without spaces, at most 256 bytes)"
		case strings.IndexByte(value, 0) >= 0:
			why = "holds a NUL byte"
		}
		if why != "" {
			return fieldErr("env", kv, ErrInvalid, "entry %d %s", i+1, why)
		}
	}
	return nil
}

func checkArgs(sp *api.JobSpec, _ time.Time) error {
	if len(sp.Args) > MaxArgs {
		return fieldErr("args", "", ErrInvalid, "%d script arguments; the most is %d", len(sp.Args), MaxArgs)
	}
	total := 0
	for i, a := range sp.Args {
		total += len(a)
		switch {
		case total > MaxArgsBytes:
			return fieldErr("args", "", ErrInvalid, "the script arguments are over %d bytes (1 MiB) together; pass data in a file", MaxArgsBytes)
		case strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a):
			return fieldErr("args", a, ErrInvalid, "argument %d must be UTF-8 text without NUL bytes", i+1)
		}
	}
	return nil
}

// checkCounts checks tasks and CPUs per task: CPUs per task at least 1,
// tasks at least 1 unless --ntasks-per-node gives them (0: that many on
// each node the job gets), and the CPUs in all within MaxCPUs. The nodes
// are checkNodes'.
func checkCounts(sp *api.JobSpec, _ time.Time) error {
	switch {
	case sp.NTasks < 0 || sp.NTasks > MaxTasks || sp.NTasks == 0 && sp.NTasksPerNode < 1:
		return fieldErr("ntasks", strconv.Itoa(sp.NTasks), ErrInvalid, "--ntasks must be between 1 and %d (or 0 with ntasks_per_node: that many on each node)", MaxTasks)
	case sp.CPUsPerTask < 1 || sp.CPUsPerTask > MaxCPUsPerTask:
		return fieldErr("cpus_per_task", strconv.Itoa(sp.CPUsPerTask), ErrInvalid, "--cpus-per-task must be between 1 and %d", MaxCPUsPerTask)
	case sp.NTasks > MaxCPUs/sp.CPUsPerTask:
		return fieldErr("cpus_per_task", strconv.Itoa(sp.CPUsPerTask), ErrInvalid,
			"ntasks × cpus_per_task = %d × %d CPUs: the most a job may ask for is %d", sp.NTasks, sp.CPUsPerTask, MaxCPUs)
	}
	return nil
}

// checkMemory checks --mem and --mem-per-cpu (0 is unset; not both), and
// that memory per CPU times the CPUs stays within MaxMemoryMiB. It needs
// checkCounts first.
func checkMemory(sp *api.JobSpec, _ time.Time) error {
	for _, m := range []struct {
		field string
		v     int64
	}{{"mem_per_node_mb", sp.MemPerNode}, {"mem_per_cpu_mb", sp.MemPerCPU}} {
		if m.v < 0 || m.v > MaxMemoryMiB {
			return fieldErr(m.field, strconv.FormatInt(m.v, 10), ErrInvalid, "memory must be between 1 and %d MiB (1 EiB), or 0 for the default", int64(MaxMemoryMiB))
		}
	}
	switch {
	case sp.MemPerNode > 0 && sp.MemPerCPU > 0:
		return fieldErr("mem_per_cpu_mb", strconv.FormatInt(sp.MemPerCPU, 10), ErrInvalid, "--mem and --mem-per-cpu are mutually exclusive; give only one of them")
	case sp.MemAll && (sp.MemPerNode > 0 || sp.MemPerCPU > 0):
		return fieldErr("mem_all", "true", ErrInvalid, "--mem=0 (all of a node's memory) excludes a memory amount; give one or the other")
	case sp.MemPerCPU > MaxMemoryMiB/int64(sp.CPUs()):
		return fieldErr("mem_per_cpu_mb", strconv.FormatInt(sp.MemPerCPU, 10), ErrInvalid,
			"mem_per_cpu × %d CPUs is more than %d MiB (1 EiB)", sp.CPUs(), int64(MaxMemoryMiB))
	}
	return nil
}

// checkTimes checks the time limit and the begin time.
func checkTimes(sp *api.JobSpec, now time.Time) error {
	if sp.TimeLimit < 0 || sp.TimeLimit > MaxTimeLimit {
		return fieldErr("time_limit_s", strconv.FormatInt(sp.TimeLimit, 10), ErrInvalid,
			"the time limit must be between 1 and %d seconds (100 years), or 0 for the partition's limit (--time=UNLIMITED)", MaxTimeLimit)
	}
	if b := sp.Begin; !b.IsZero() {
		if b.Before(time.Unix(0, 0)) || b.After(now.Add(MaxBeginAhead)) {
			return fieldErr("begin", b.Format(time.RFC3339), ErrInvalid,
				"the begin time must be after 1970 and at most 10 years ahead (before %s)", now.Add(MaxBeginAhead).Format(time.RFC3339))
		}
	}
	if d := sp.Deadline; !d.IsZero() {
		switch {
		case !d.After(now):
			return fieldErr("deadline", d.Format(time.RFC3339), ErrInvalid,
				"--deadline %s has passed (it is %s now): give a later time, e.g. --deadline=now+2hours", d.Format(time.RFC3339), now.Format(time.RFC3339))
		case d.Before(time.Unix(0, 0)) || d.After(now.Add(MaxBeginAhead)):
			return fieldErr("deadline", d.Format(time.RFC3339), ErrInvalid,
				"--deadline must be after 1970 and at most 10 years ahead (before %s)", now.Add(MaxBeginAhead).Format(time.RFC3339))
		case !sp.Begin.IsZero() && !d.After(sp.Begin):
			return fieldErr("deadline", d.Format(time.RFC3339), ErrInvalid,
				"--deadline %s is not after --begin %s: the job could never run", d.Format(time.RFC3339), sp.Begin.Format(time.RFC3339))
		}
	}
	return nil
}

func checkNice(sp *api.JobSpec, _ time.Time) error {
	if sp.Nice < -MaxNice || sp.Nice > MaxNice {
		return fieldErr("nice", strconv.Itoa(sp.Nice), ErrInvalid, "--nice must be between -%d and %d", MaxNice, MaxNice)
	}
	return nil
}

// checkGres allows gpu, gpu:TYPE (a model or a MIG profile) and vf, each
// name and type at most once, with counts from 1 to MaxGresCount.
// MaxLicenseEntries bounds the licenses one job names.
const MaxLicenseEntries = 32

// checkLicenses checks --licenses as the controllers take it.
func checkLicenses(sp *api.JobSpec, _ time.Time) error {
	if len(sp.Licenses) > MaxLicenseEntries {
		return fieldErr("licenses", "", ErrInvalid, "%d licenses; the most is %d", len(sp.Licenses), MaxLicenseEntries)
	}
	if err := api.CheckLicenses(sp.Licenses); err != nil {
		return fieldErr("licenses", api.FormatLicenses(sp.Licenses), ErrInvalid, "%v", err)
	}
	return nil
}

func checkGres(sp *api.JobSpec, _ time.Time) error {
	if len(sp.Gres) > MaxGresEntries {
		return fieldErr("gres", "", ErrInvalid, "%d generic resources; the most is %d", len(sp.Gres), MaxGresEntries)
	}
	for i, g := range sp.Gres {
		text := g.Name
		if g.Type != "" {
			text += ":" + g.Type
		}
		key := text
		text += ":" + strconv.Itoa(g.Count)
		switch {
		case g.Name != "gpu" && g.Name != "vf":
			return fieldErr("gres", text, ErrInvalid, "unknown generic resource %q (corral knows gpu, gpu:TYPE, gpu:MIGPROFILE and vf)", Shown(g.Name))
		case g.Type != "" && !gresWord(g.Type), len(g.Type) > 64:
			return fieldErr("gres", text, ErrInvalid, "type %q must be at most 64 letters, digits, '_', '-' or '.', starting with a letter or digit", Shown(g.Type))
		case g.Name == "vf" && g.Type != "":
			return fieldErr("gres", text, ErrInvalid, "vf takes no type; ask for vf:COUNT")
		case g.Count < 1 || g.Count > MaxGresCount:
			return fieldErr("gres", text, ErrInvalid, "the count must be between 1 and %d", MaxGresCount)
		}
		for _, o := range sp.Gres[:i] {
			if o.Name == g.Name && o.Type == g.Type {
				return fieldErr("gres", text, ErrInvalid, "%q is listed twice; give one entry with the total count", key)
			}
		}
	}
	return nil
}

// checkHugepages allows 2M and 1G pages, each size once, at least one page
// and at most MaxMemoryMiB of them.
func checkHugepages(sp *api.JobSpec, _ time.Time) error {
	for i, h := range sp.Hugepages {
		text := strconv.FormatInt(h.SizeKB, 10) + "K:" + strconv.FormatInt(h.Count, 10)
		switch {
		case h.SizeKB != Hugepage2M && h.SizeKB != Hugepage1G:
			return fieldErr("hugepages", text, ErrInvalid, "the page size must be 2M (size_kb 2048) or 1G (size_kb 1048576)")
		case h.Count < 1 || h.Count > MaxMemoryMiB*1024/h.SizeKB:
			return fieldErr("hugepages", text, ErrInvalid, "the count must be between 1 and %d pages of this size (1 EiB)", MaxMemoryMiB*1024/h.SizeKB)
		}
		for _, o := range sp.Hugepages[:i] {
			if o.SizeKB == h.SizeKB {
				return fieldErr("hugepages", text, ErrInvalid, "this page size is listed twice; give one entry with the total count")
			}
		}
	}
	return nil
}

func checkNUMA(sp *api.JobSpec, _ time.Time) error {
	switch sp.NUMA {
	case "", api.NUMAPrefer, api.NUMAStrict, api.NUMANone:
		return nil
	}
	return fieldErr("numa", sp.NUMA, ErrInvalid, "use prefer, strict or none")
}

// checkDependency validates a dependency clause by clause; Raw, when
// given, must say the same as the clauses.
func checkDependency(sp *api.JobSpec, _ time.Time) error {
	return ValidateDependency(sp.Dependency)
}

// ValidateDependency checks a dependency as ValidateSpec does (nil is
// none); the controller also uses it for `corral update --dependency`.
func ValidateDependency(d *api.Dependency) error {
	if d == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fieldErr("dependency", d.Raw, ErrInvalid, format, args...)
	}
	if why := TextProblem(d.Raw, MaxExpressionBytes); why != "" {
		return bad("the expression %s", why)
	}
	if len(d.Clauses) == 0 {
		return bad("no clauses: give TYPE:JOBID, e.g. afterok:12")
	}
	ids := 0
	for _, c := range d.Clauses {
		if !slices.Contains(dependencyTypes, c.Type) {
			return bad("unknown dependency type %q (use after, afterany, afterok, afternotok, aftercorr or singleton)", Shown(c.Type))
		}
		ids += len(c.JobIDs)
		switch {
		case ids > MaxDependencyJobs:
			return bad("more than %d job ids", MaxDependencyJobs)
		case c.Type == "singleton" && (len(c.JobIDs) > 0 || c.Minutes != 0):
			return bad("singleton takes no job ids and no delay")
		case c.Type != "singleton" && len(c.JobIDs) == 0:
			return bad("%s needs at least one job id, e.g. %s:12", c.Type, c.Type)
		case c.Minutes != 0 && c.Type != "after":
			return bad("only after takes a +minutes delay (got %s with %d)", c.Type, c.Minutes)
		case c.Minutes < 0 || c.Minutes > MaxDelayMinutes:
			return bad("the delay must be between 0 and %d minutes", MaxDelayMinutes)
		}
		for _, id := range c.JobIDs {
			if len(id) > 40 || !validJobID(id) {
				return bad("%q is not a job id (use 12, or 12_3 for an array element)", Shown(id))
			}
		}
	}
	if d.Raw != "" {
		parsed, err := ParseDependency(d.Raw)
		if err != nil || parsed.Any != d.Any || !slices.EqualFunc(parsed.Clauses, d.Clauses, sameClause) {
			return bad("the expression does not say what the clauses say; send the clauses ParseDependency gives, or no raw text")
		}
	}
	return nil
}

func sameClause(a, b api.DepClause) bool {
	return a.Type == b.Type && a.Minutes == b.Minutes && slices.Equal(a.JobIDs, b.JobIDs)
}

// checkArray validates an array arithmetically: indexes 0..MaxArrayIndex,
// steps ≥ 1, FIRST ≤ LAST, at most MaxArrayRanges ranges that merge within
// api.BuildIndexSet's limits, and a task limit ≥ 0. Raw, when given, must
// be what the ranges and limit were parsed from.
func checkArray(sp *api.JobSpec, _ time.Time) error {
	a := sp.Array
	if a == nil {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fieldErr("array", a.Raw, ErrInvalid, format, args...)
	}
	if why := TextProblem(a.Raw, MaxExpressionBytes); why != "" {
		return bad("the expression %s", why)
	}
	switch {
	case len(a.Ranges) == 0:
		return bad("names no task: give indexes such as 0-99")
	case len(a.Ranges) > MaxArrayRanges:
		return bad("%d ranges; the most is %d", len(a.Ranges), MaxArrayRanges)
	case a.Throttle < 0 || a.Throttle > MaxArrayIndex+1:
		return bad("the %%N task limit must be between 0 (no limit) and %d", MaxArrayIndex+1)
	}
	for _, r := range a.Ranges {
		switch {
		case r.First < 0 || r.Last > MaxArrayIndex:
			return bad("range %d-%d: indexes must be 0 to %d", r.First, r.Last, MaxArrayIndex)
		case r.Last < r.First:
			return bad("range %d-%d: the last index is below the first", r.First, r.Last)
		case r.Step < 1 || r.Step > MaxArrayIndex:
			return bad("range %d-%d: the step %d must be between 1 and %d", r.First, r.Last, r.Step, MaxArrayIndex)
		}
	}
	if _, err := api.BuildIndexSet(a.Ranges); err != nil {
		return bad("%v", err)
	}
	if a.Raw != "" {
		parsed, err := ParseArray(a.Raw)
		if err != nil || parsed.Throttle != a.Throttle || !slices.Equal(parsed.Ranges, a.Ranges) {
			return bad("the expression does not say what the ranges say; send the ranges ParseArray gives, or no raw text")
		}
	}
	return nil
}
