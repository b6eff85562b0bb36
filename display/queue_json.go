package display

import (
	"encoding/json"
	"io"
	"time"

	"corral/api"
)

// JSONQueue is the document QueueJSON writes: {"jobs":[...]}.
type JSONQueue struct {
	Jobs []JSONJob `json:"jobs"`
}

// JSONJob is one job of `corral queue --json`. Its field names are a
// published, append-only contract, independent of api.Job's wire layout: a
// field is never renamed or removed. It leaves out the script and the
// environment, which can be large or secret.
type JSONJob struct {
	JobID       uint64 `json:"job_id"`
	Name        string `json:"name"`
	User        string `json:"user_name"`
	Account     string `json:"account"`
	Partition   string `json:"partition"`
	QOS         string `json:"qos"`
	State       string `json:"job_state"`
	StateShort  string `json:"job_state_short"`
	Reason      string `json:"state_reason"`
	Priority    int64  `json:"priority"`
	Nice        int    `json:"nice"`
	SubmitTime  string `json:"submit_time,omitempty"`
	StartTime   string `json:"start_time,omitempty"`
	EndTime     string `json:"end_time,omitempty"`
	TimeLimitS  int64  `json:"time_limit_s"`
	Nodes       string `json:"nodes"`
	NodeCount   int    `json:"node_count"`
	CPUs        int    `json:"cpus"`
	Tasks       int    `json:"tasks"`
	CPUsPerTask int    `json:"cpus_per_task"`
	MemoryMB    int64  `json:"memory_mb"`
	ExitCode    int    `json:"exit_code"`
	Signal      int    `json:"signal"`
	Restarts    int    `json:"restarts"`
	Command     string `json:"command"`
	WorkDir     string `json:"work_dir"`
	StdOut      string `json:"standard_output"`
	StdErr      string `json:"standard_error"`
	Comment     string `json:"comment,omitempty"`
	Dependency  string `json:"dependency,omitempty"`
	Array       string `json:"array,omitempty"`
	Gres        string `json:"gres,omitempty"`
	Image       string `json:"image,omitempty"`
	Message     string `json:"message,omitempty"`
}

// rfc3339 renders t in UTC, or "" for the zero time so that it is omitted.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// NewJSONJob converts a job to its JSON record. Times are RFC 3339 in UTC;
// TimeLimitS 0 means no limit of the job's own.
func NewJSONJob(j *api.Job) JSONJob {
	nodes := j.Node
	if pendingLike(j.State) {
		nodes = ""
	}
	return JSONJob{
		JobID: j.ID, Name: j.Spec.Name, User: j.Spec.User, Account: j.Spec.Account,
		Partition: partitionOf(j), QOS: j.Spec.QOS,
		State: string(j.State), StateShort: j.State.Short(), Reason: reasonOf(j),
		Priority: j.Priority, Nice: j.Spec.Nice,
		SubmitTime: rfc3339(j.SubmitTime), StartTime: rfc3339(j.StartTime), EndTime: rfc3339(j.EndTime),
		TimeLimitS: j.Spec.TimeLimit, Nodes: nodes, NodeCount: nodeCountOf(j),
		CPUs: cpusOf(j), Tasks: max(api.TasksOn(j.Spec.NTasks, j.Spec.NTasksPerNode, nodeCountOf(j)), 1), CPUsPerTask: max(j.Spec.CPUsPerTask, 1),
		MemoryMB: memOf(j), ExitCode: j.ExitCode, Signal: j.Signal, Restarts: j.Restarts,
		Command: commandOf(j), WorkDir: j.Spec.WorkDir, StdOut: stdoutOf(j), StdErr: stderrOf(j),
		Comment: j.Spec.Comment, Dependency: dependencyOf(j), Array: arrayOf(j),
		Gres: string(appendGres(nil, j.Spec.Gres)), Image: j.Spec.Image, Message: j.Message,
	}
}

// QueueJSON writes jobs as the JSONQueue document, one job per line so that
// the output streams and greps well; the order is the one given.
func QueueJSON(w io.Writer, jobs []api.Job) error {
	rw := newRowWriter(w)
	rw.buf = append(rw.buf, `{"jobs":[`...)
	for i := range jobs {
		rec, err := json.Marshal(NewJSONJob(&jobs[i]))
		if err != nil {
			return err
		}
		if i > 0 {
			rw.buf = append(rw.buf, ',')
		}
		rw.buf = append(rw.buf, '\n')
		rw.buf = append(rw.buf, rec...)
		if err := rw.maybeFlush(); err != nil {
			return err
		}
	}
	if len(jobs) > 0 {
		rw.buf = append(rw.buf, '\n')
	}
	rw.buf = append(rw.buf, "]}\n"...)
	return rw.flush()
}
