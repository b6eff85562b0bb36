package submit

import (
	"path/filepath"
	"strconv"
	"strings"

	"corral/api"
)

// DefaultOutputPattern is where a batch job's output goes when -o is not
// given, as in sbatch.
const DefaultOutputPattern = "slurm-%j.out"

// DefaultArrayOutputPattern is sbatch's default for a task of an array.
const DefaultArrayOutputPattern = "slurm-%A_%a.out"

// noArrayTask is what %a expands to for a job that is not an array task:
// Slurm's NO_VAL, so file names match what Slurm would produce.
const noArrayTask = "4294967294"

// maxPadWidth bounds the zero-padding width of a pattern field ("%4j").
const maxPadWidth = 10

// PathVars are the values an output or error pattern may refer to.
type PathVars struct {
	JobID uint64 // %j
	// ArrayJobID is %A: the array's master job id, or the job's own id when
	// it is not part of an array.
	ArrayJobID uint64
	// ArrayTaskID is %a; a negative value means the job is not an array task
	// and %a expands to 4294967294, as in Slurm.
	ArrayTaskID int64
	Name        string // %x
	User        string // %u
	Node        string // %N
	// WorkDir anchors relative results.
	WorkDir string
}

// VarsFor returns the pattern values of job running on node. api.Job has no
// array fields yet, so %A is the job's id and %a is 4294967294.
func VarsFor(job *api.Job, node string) PathVars {
	v := PathVars{
		JobID:       job.ID,
		ArrayJobID:  job.ID,
		ArrayTaskID: -1,
		Name:        job.Spec.Name,
		User:        job.Spec.User,
		Node:        node,
		WorkDir:     job.Spec.WorkDir,
	}
	if job.IsArrayTask() {
		v.ArrayJobID, v.ArrayTaskID = job.ArrayJobID, int64(job.ArrayTaskID)
	}
	return v
}

// ExpandPath expands an output or error pattern for job on node; an empty
// pattern is DefaultOutputPattern. See PathVars.Expand for the syntax.
func ExpandPath(pattern string, job *api.Job, node string) string {
	return VarsFor(job, node).Expand(pattern)
}

// OutputPaths returns the files a batch job's standard output and standard
// error go to on node. When the job gave no -e, errPath equals out: both
// streams share one file, as with sbatch.
func OutputPaths(job *api.Job, node string) (out, errPath string) {
	v := VarsFor(job, node)
	pattern := job.Spec.Output
	if pattern == "" && job.IsArrayTask() {
		pattern = DefaultArrayOutputPattern
	}
	out = v.Expand(pattern)
	if job.Spec.Error == "" {
		return out, out
	}
	return out, v.Expand(job.Spec.Error)
}

// InputPath returns the file a batch job's standard input comes from on
// node: its -i pattern expanded as -o's is, or "" for /dev/null.
func InputPath(job *api.Job, node string) string {
	if job.Spec.Input == "" {
		return ""
	}
	return VarsFor(job, node).Expand(job.Spec.Input)
}

// Expand replaces Slurm's filename pattern fields in pattern:
//
//	%j  job id             %x  job name         %u  user name
//	%N  node name          %A  array job id     %a  array task id
//	%%  a literal "%"
//
// A number between % and j, A or a zero-pads the id to that width ("%4j"
// gives 0042), up to 10; other letters ignore it. Other % sequences are kept as written. A
// pattern that contains a backslash is not expanded at all and loses its
// backslashes, as in Slurm ("out\%j" names the file "out%j"). A relative
// result is joined to WorkDir; an empty pattern is DefaultOutputPattern.
func (v PathVars) Expand(pattern string) string {
	if pattern == "" {
		pattern = DefaultOutputPattern
	}
	var out string
	if strings.Contains(pattern, `\`) {
		out = strings.ReplaceAll(pattern, `\`, "")
	} else {
		out = v.expandFields(pattern)
	}
	if !filepath.IsAbs(out) && v.WorkDir != "" {
		out = filepath.Join(v.WorkDir, out)
	}
	return out
}

func (v PathVars) expandFields(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c != '%' || i+1 >= len(pattern) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(pattern) && pattern[j] >= '0' && pattern[j] <= '9' {
			j++
		}
		if j >= len(pattern) {
			b.WriteString(pattern[i:])
			break
		}
		width, _ := strconv.Atoi(pattern[i+1 : j])
		value, ok := v.field(pattern[j])
		if !ok || (pattern[j] == '%' && j > i+1) {
			b.WriteString(pattern[i : j+1])
			i = j
			continue
		}
		if n := min(width, maxPadWidth) - len(value); n > 0 && strings.IndexByte("jAa", pattern[j]) >= 0 {
			b.WriteString(strings.Repeat("0", n))
		}
		b.WriteString(value)
		i = j
	}
	return b.String()
}

// field returns the value of one pattern letter.
func (v PathVars) field(c byte) (string, bool) {
	switch c {
	case 'j':
		return strconv.FormatUint(v.JobID, 10), true
	case 'A':
		return strconv.FormatUint(v.ArrayJobID, 10), true
	case 'a':
		if v.ArrayTaskID < 0 {
			return noArrayTask, true
		}
		return strconv.FormatInt(v.ArrayTaskID, 10), true
	case 'x':
		return v.Name, true
	case 'u':
		return v.User, true
	case 'N':
		return v.Node, true
	case '%':
		return "%", true
	}
	return "", false
}
