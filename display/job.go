package display

import (
	"corral/submit"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// This file derives the job facts that several views share (squeue's
// columns, scontrol's keys, the JSON document), so that they always agree.

// nullStr is what Slurm's C tools print for an unset string.
const nullStr = "(null)"

func orNull(s string) string {
	if s == "" {
		return nullStr
	}
	return s
}

// partitionOf returns the job's partition; jobs that named none went to the
// default one.
func partitionOf(j *api.Job) string {
	if j.Spec.Partition == "" {
		return api.DefaultPartition
	}
	return j.Spec.Partition
}

// pendingLike reports whether Slurm would count the job as pending: it holds
// no node and its clock does not run.
func pendingLike(s api.JobState) bool {
	return s == api.StatePending || s == api.StateRequeued
}

// showsReason reports whether squeue's %R shows the reason rather than the
// node list: for pending, timed-out, out-of-memory and failed jobs
// (_print_job_reason_list).
func showsReason(s api.JobState) bool {
	switch s {
	case api.StatePending, api.StateRequeued, api.StateTimeout,
		api.StateOutOfMemory, api.StateFailed:
		return true
	}
	return false
}

// reasonOf returns the job's reason as squeue's %r prints it. Corral records
// reasons for pending jobs; for ended jobs without one it derives the reason
// Slurm would have recorded.
func reasonOf(j *api.Job) string {
	if j.Reason != "" && j.Reason != api.ReasonNone {
		return string(j.Reason)
	}
	switch j.State {
	case api.StateFailed:
		return "NonZeroExitCode"
	case api.StateTimeout:
		return "TimeLimit"
	case api.StateOutOfMemory:
		return "OutOfMemory"
	case api.StateNodeFail:
		return "NodeDown"
	}
	return string(api.ReasonNone)
}

// elapsedSecs is squeue's TIME: zero for pending jobs (a requeued job keeps
// its old start time but its clock is not running), else Job.Elapsed.
func elapsedSecs(j *api.Job, now time.Time) int64 {
	if pendingLike(j.State) {
		return 0
	}
	return int64(j.Elapsed(now) / time.Second)
}

// cpusOf returns the CPUs the job holds, or asks for before it runs.
func cpusOf(j *api.Job) int {
	if j.CPUs > 0 {
		return j.CPUs
	}
	return j.Spec.CPUs()
}

// memOf returns the job's memory in MiB: what it holds, else what it asks.
func memOf(j *api.Job) int64 {
	if j.MemMB > 0 {
		return j.MemMB
	}
	return j.Spec.MemMB()
}

// expectedEnd returns when the job ends or is expected to end, and false when
// that is unknown (pending, or running without a time limit).
func expectedEnd(j *api.Job) (time.Time, bool) {
	if !j.EndTime.IsZero() {
		return j.EndTime, true
	}
	if j.StartTime.IsZero() || pendingLike(j.State) || j.Spec.TimeLimit <= 0 {
		return time.Time{}, false
	}
	limit := time.Duration(j.Spec.TimeLimit) * time.Second
	return j.StartTime.Add(limit + j.SuspendedFor), true
}

// commandOf approximates Slurm's COMMAND, the path of the batch script.
// api.JobSpec carries the script's text but not its file name; a job's
// default name is the script's base name, so WorkDir/Name is the path
// whenever the user did not rename the job.
func commandOf(j *api.Job) string {
	name, dir := j.Spec.Name, j.Spec.WorkDir
	switch {
	case name == "":
		return nullStr
	case path.IsAbs(name) || dir == "":
		return name
	}
	return path.Join(dir, name)
}

// stdoutOf returns the output path as stored (patterns such as %j are not
// expanded here: that is package submit's job), or Slurm's default
// slurm-<id>.out in the work directory.
func stdoutOf(j *api.Job) string {
	out, _ := submit.OutputPaths(j, j.Node)
	return out
}

// stderrOf returns the error path, expanded; unset, it is the output path.
func stderrOf(j *api.Job) string {
	_, errPath := submit.OutputPaths(j, j.Node)
	return errPath
}

// appendGres renders the job's GRES requests in Slurm's TRES_PER_NODE
// spelling, gres/gpu:a100:2, comma separated; empty when there are none.
func appendGres(dst []byte, gres []api.Gres) []byte {
	for i, g := range gres {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, "gres/"...)
		dst = append(dst, g.Name...)
		if g.Type != "" {
			dst = append(dst, ':')
			dst = append(dst, g.Type...)
		}
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, int64(g.Count), 10)
	}
	return dst
}

func dependencyOf(j *api.Job) string {
	if j.Spec.Dependency == nil {
		return ""
	}
	return j.Spec.Dependency.Raw
}

func arrayOf(j *api.Job) string {
	if j.Spec.Array == nil {
		return ""
	}
	return j.Spec.Array.Raw
}

// SortJobs orders jobs as squeue does by default (DefaultQueueSort,
// "P,t,-p"): by partition, then compact state as text, then priority,
// highest first, then job id. It sorts an index and moves each job once,
// because api.Job is large and a swap-based sort of 100,000 jobs would
// spend its time copying.
func SortJobs(jobs []api.Job) {
	keys := make([]sortKey, len(jobs))
	for i := range jobs {
		keys[i] = keyOf(&jobs[i])
	}
	permute(jobs, sortOrder(keys))
}

// SortJobRefs is SortJobs over job pointers.
func SortJobRefs(jobs []*api.Job) {
	slices.SortFunc(jobs, func(a, b *api.Job) int { return compareKeys(keyOf(a), keyOf(b)) })
}

// SortJobRefsBy is SortJobRefs with each job's priority given by prio
// (see QueueOptions.Priority); it computes each priority once.
func SortJobRefsBy(jobs []*api.Job, prio func(*api.Job) int64) {
	if prio == nil {
		SortJobRefs(jobs)
		return
	}
	keys := make([]sortKey, len(jobs))
	for i, j := range jobs {
		keys[i] = QueueKeyOf(partitionOf(j), j.State, prio(j), j.ID)
	}
	sorted := make([]*api.Job, len(jobs))
	for i, k := range sortOrder(keys) {
		sorted[i] = jobs[k]
	}
	copy(jobs, sorted)
}

type sortKey struct {
	part, state string
	prio        int64
	id          uint64
}

func keyOf(j *api.Job) sortKey { return QueueKeyOf(partitionOf(j), j.State, j.Priority, j.ID) }

func sortOrder(keys []sortKey) []int32 {
	order := make([]int32, len(keys))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return compareKeys(keys[a], keys[b]) })
	return order
}

func compareKeys(ka, kb sortKey) int {
	if c := strings.Compare(ka.part, kb.part); c != 0 {
		return c
	}
	if c := strings.Compare(ka.state, kb.state); c != 0 {
		return c
	}
	switch {
	case ka.prio != kb.prio:
		if ka.prio > kb.prio {
			return -1
		}
		return 1
	case ka.id < kb.id:
		return -1
	case ka.id > kb.id:
		return 1
	}
	return 0
}

// permute rearranges jobs so that jobs[i] becomes the old jobs[order[i]],
// following each cycle of the permutation with one spare job.
func permute(jobs []api.Job, order []int32) {
	done := make([]bool, len(jobs))
	for i := range jobs {
		if done[i] || int(order[i]) == i {
			done[i] = true
			continue
		}
		tmp := jobs[i]
		j := i
		for {
			k := int(order[j])
			done[j] = true
			if k == i {
				jobs[j] = tmp
				break
			}
			jobs[j] = jobs[k]
			j = k
		}
	}
}

// QueueKey is what squeue's default order compares (see SortJobRefsBy): a
// job's partition, compact state, priority and id. A caller that holds
// jobs in another form sorts them with QueueKeyOf and CompareQueueKeys into
// the same order.
type QueueKey = sortKey

// QueueKeyOf returns the sort key of a job of partition part (the default
// one when empty) in state st with priority prio.
func QueueKeyOf(part string, st api.JobState, prio int64, id uint64) QueueKey {
	if part == "" {
		part = api.DefaultPartition
	}
	return sortKey{part: part, state: st.Short(), prio: prio, id: id}
}

// CompareQueueKeys orders two keys as SortJobRefsBy does.
func CompareQueueKeys(a, b QueueKey) int { return compareKeys(a, b) }
