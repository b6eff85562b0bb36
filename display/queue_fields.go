package display

import (
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// This file is the table of squeue's -o field codes: for each letter, its
// header, whether squeue truncates it, and how corral fills it. Values squeue
// prints for concepts corral does not have (features, reservations, wckeys,
// licenses, socket layouts) are the ones squeue prints for a job that never
// set them, so that scripts written for Slurm keep parsing.

// cutMode says when a right-justified value is truncated to its width
// (left-justified values always are; see appendCell).
type cutMode uint8

const (
	cutAlways cutMode = iota
	cutNever          // times and node lists: squeue passes cut_output=false
	cutReason         // %R: a "(Reason)" is cut, a node list is not
)

// rowCtx carries what a value needs besides the job.
type rowCtx struct {
	now time.Time
	loc *time.Location
	// prio is QueueOptions.Priority, or nil.
	prio func(*api.Job) int64
}

// priority is a job's priority as the row shows it (%Q, %p).
func (c *rowCtx) priority(j *api.Job) int64 {
	if c.prio != nil {
		return c.prio(j)
	}
	return j.Priority
}

type fieldDef struct {
	header string
	// headerNoCut marks the node-list headers squeue never truncates.
	headerNoCut bool
	cut         cutMode
	value       func(dst []byte, j *api.Job, c *rowCtx) []byte
}

// unsupportedCodes are squeue letters corral cannot fill honestly.
var unsupportedCodes = map[byte]string{
	'g': "corral records no group for a job",
	'G': "corral records no group id for a job",
	'U': "corral records user names, not numeric uids",
	's': "corral has no select plugin",
}

// fieldDefs is indexed by the code letter.
var fieldDefs [128]*fieldDef

// validCodes lists the supported letters in the order error messages show
// them.
const validCodes = "aAbBcCdDeEfFhHiIjJkKlLmMnNoOpPqQrRStTuvVwWxXyYzZ"

func fixed(s string) func([]byte, *api.Job, *rowCtx) []byte {
	return func(dst []byte, _ *api.Job, _ *rowCtx) []byte { return append(dst, s...) }
}

func str(get func(*api.Job) string) func([]byte, *api.Job, *rowCtx) []byte {
	return func(dst []byte, j *api.Job, _ *rowCtx) []byte { return append(dst, get(j)...) }
}

// jobRef is squeue's %i: "12", "12_5" for a task of an array, and
// "12_[3-99%10]" for an array's pending tasks, folded into one line.
func jobRef(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if j.ArrayJobID == 0 {
		return strconv.AppendUint(dst, j.ID, 10)
	}
	return append(dst, j.Ref()...)
}

// arrayJobID is %A and %F: the array's id, or the job's own.
func arrayJobID(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if j.ArrayJobID != 0 {
		return strconv.AppendUint(dst, j.ArrayJobID, 10)
	}
	return strconv.AppendUint(dst, j.ID, 10)
}

// arrayTaskID is %K: the task's index, the pending set in brackets, or N/A.
func arrayTaskID(dst []byte, j *api.Job, _ *rowCtx) []byte {
	switch {
	case j.IsArrayTask():
		return strconv.AppendInt(dst, int64(j.ArrayTaskID), 10)
	case j.IsArrayPending():
		ref := j.Ref()
		return append(dst, ref[strings.IndexByte(ref, '_')+1:]...)
	}
	return append(dst, "N/A"...)
}

func init() {
	defs := map[byte]*fieldDef{
		'a': {header: "ACCOUNT", value: str(func(j *api.Job) string { return orNull(j.Spec.Account) })},
		'A': {header: "JOBID", value: arrayJobID},
		'b': {header: "TRES_PER_NODE", value: valueGres},
		'B': {header: "EXEC_HOST", value: valueExecHost},
		'c': {header: "MIN_CPUS", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return appendUnits(dst, float64(cpusOf(j)), unitNone)
		}},
		'C': {header: "CPUS", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return strconv.AppendInt(dst, int64(cpusOf(j)), 10)
		}},
		// squeue prints --tmp as it prints --mem (convert_num_unit).
		'd': {header: "MIN_TMP_DISK", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return appendMemMB(dst, j.Spec.TmpMB)
		}},
		'D': {header: "NODES", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return strconv.AppendInt(dst, int64(nodeCountOf(j)), 10)
		}},
		'e': {header: "END_TIME", value: valueEndTime},
		'E': {header: "DEPENDENCY", value: str(func(j *api.Job) string { return orNull(dependencyOf(j)) })},
		'f': {header: "FEATURES", value: str(func(j *api.Job) string { return orNull(j.Spec.Constraint) })},
		'F': {header: "ARRAY_JOB_ID", value: arrayJobID},
		'h': {header: "OVER_SUBSCRIBE", value: str(func(j *api.Job) string { return map[bool]string{true: "NO", false: "OK"}[j.Spec.Exclusive] })},
		'H': {header: "SOCKETS_PER_NODE", value: fixed("*")},
		'i': {header: "JOBID", value: jobRef},
		'I': {header: "CORES_PER_SOCKET", value: fixed("*")},
		'j': {header: "NAME", value: str(func(j *api.Job) string { return j.Spec.Name })},
		'J': {header: "THREADS_PER_CORE", value: fixed("*")},
		'k': {header: "COMMENT", value: str(func(j *api.Job) string { return orNull(j.Spec.Comment) })},
		'K': {header: "ARRAY_TASK_ID", value: arrayTaskID},
		'l': {header: "TIME_LIMIT", cut: cutNever, value: valueTimeLimit},
		'L': {header: "TIME_LEFT", cut: cutNever, value: valueTimeLeft},
		'm': {header: "MIN_MEMORY", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return appendMemMB(dst, memOf(j))
		}},
		'M': {header: "TIME", cut: cutNever, value: func(dst []byte, j *api.Job, c *rowCtx) []byte {
			return appendSqueueSecs(dst, elapsedSecs(j, c.now))
		}},
		'n': {header: "REQ_NODES", cut: cutNever, value: str(func(j *api.Job) string { return j.Spec.NodeList })},
		'N': {header: "NODELIST", headerNoCut: true, cut: cutNever, value: valueNodes},
		'o': {header: "COMMAND", value: str(commandOf)},
		'O': {header: "CONTIGUOUS", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return strconv.AppendInt(dst, boolInt(j.Spec.Contiguous), 10)
		}},
		'p': {header: "PRIORITY", value: valuePriorityFraction},
		'P': {header: "PARTITION", value: str(partitionOf)},
		'q': {header: "QOS", value: str(func(j *api.Job) string { return orNull(j.Spec.QOS) })},
		'Q': {header: "PRIORITY", value: func(dst []byte, j *api.Job, c *rowCtx) []byte {
			return strconv.AppendInt(dst, c.priority(j), 10)
		}},
		'r': {header: "REASON", value: str(reasonOf)},
		'R': {header: "NODELIST(REASON)", headerNoCut: true, cut: cutReason, value: valueReasonList},
		// A pending job shows when its reservation expects it to start.
		'S': {header: "START_TIME", value: func(dst []byte, j *api.Job, c *rowCtx) []byte {
			if j.State == api.StatePending {
				return appendTime(dst, j.EstStart, c.loc, "N/A")
			}
			return appendTime(dst, j.StartTime, c.loc, "N/A")
		}},
		't': {header: "ST", value: str(func(j *api.Job) string { return j.State.Short() })},
		'T': {header: "STATE", value: str(func(j *api.Job) string { return string(j.State) })},
		'u': {header: "USER", value: str(func(j *api.Job) string { return j.Spec.User })},
		'v': {header: "RESERVATION", value: str(func(j *api.Job) string { return orNull(j.Spec.Reservation) })},
		'V': {header: "SUBMIT_TIME", value: func(dst []byte, j *api.Job, c *rowCtx) []byte {
			return appendTime(dst, j.SubmitTime, c.loc, "N/A")
		}},
		'w': {header: "WCKEY", value: fixed(nullStr)},
		'W': {header: "LICENSES", value: fixed(nullStr)},
		'x': {header: "EXC_NODES", cut: cutNever, value: fixed("")},
		'X': {header: "CORE_SPEC", value: fixed("N/A")},
		'y': {header: "NICE", value: func(dst []byte, j *api.Job, _ *rowCtx) []byte {
			return strconv.AppendInt(dst, int64(j.Spec.Nice), 10)
		}},
		'Y': {header: "SCHEDNODES", headerNoCut: true, cut: cutNever, value: fixed(nullStr)},
		'z': {header: "S:C:T", value: fixed("*:*:*")},
		'Z': {header: "WORK_DIR", value: str(func(j *api.Job) string { return orNull(j.Spec.WorkDir) })},
	}
	for code, d := range defs {
		fieldDefs[code] = d
	}
	initQueueLongFields()
}

func valueGres(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if len(j.Spec.Gres) == 0 {
		return append(dst, "N/A"...)
	}
	return appendGres(dst, j.Spec.Gres)
}

func valueExecHost(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if j.Node == "" || pendingLike(j.State) {
		return append(dst, "n/a"...)
	}
	return append(dst, j.Node...)
}

// nodeCountOf is %D: the nodes a job asks for (the fewest of a range).
func nodeCountOf(j *api.Job) int {
	lo, _ := j.Spec.NodeRange()
	return lo
}

func valueNodes(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if pendingLike(j.State) {
		return dst
	}
	return append(dst, j.Node...)
}

// valueEndTime is %e: the end, the expected end of a running job, "NONE" for
// a running job without a time limit, else N/A.
func valueEndTime(dst []byte, j *api.Job, c *rowCtx) []byte {
	if t, ok := expectedEnd(j); ok {
		return appendTime(dst, t, c.loc, "N/A")
	}
	if !j.StartTime.IsZero() && j.State.Active() && j.Spec.TimeLimit <= 0 {
		return append(dst, "NONE"...)
	}
	return append(dst, "N/A"...)
}

func valueTimeLimit(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if j.Spec.TimeLimit <= 0 {
		return append(dst, "UNLIMITED"...)
	}
	return appendSqueueSecs(dst, j.Spec.TimeLimit)
}

func valueTimeLeft(dst []byte, j *api.Job, c *rowCtx) []byte {
	if j.Spec.TimeLimit <= 0 {
		return append(dst, "UNLIMITED"...)
	}
	return appendSqueueSecs(dst, j.Spec.TimeLimit-elapsedSecs(j, c.now))
}

// valuePriorityFraction is %p: the priority as a fraction of 2^32-1, printed
// with squeue's "%16.14f".
func valuePriorityFraction(dst []byte, j *api.Job, c *rowCtx) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, float64(c.priority(j))/float64(uint32(0xffffffff)), 'f', 14, 64)
	return appendCell(dst, start, 16, true, false)
}

func valueReasonList(dst []byte, j *api.Job, _ *rowCtx) []byte {
	if !showsReason(j.State) {
		return append(dst, j.Node...)
	}
	dst = append(dst, '(')
	dst = append(dst, reasonOf(j)...)
	return append(dst, ')')
}
