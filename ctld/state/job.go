package state

import (
	"strconv"
	"time"

	"corral/api"
)

// JobSpec is a job's request as the state records it: what the user asked
// for, after the controller filled in its defaults and validated it. It is
// the state's own type (api.JobSpec is the wire's); the JSON names are
// those every log entry since the first was written with, and the golden
// log (testdata/golden.log) fails when one changes.
type JobSpec struct {
	// RequestID is the client's idempotency key (see RequestIDs).
	RequestID string `json:"request_id,omitempty"`

	Name      string `json:"name"`
	User      string `json:"user"`
	Account   string `json:"account,omitempty"`
	Partition string `json:"partition,omitempty"`
	QOS       string `json:"qos,omitempty"`
	// InlineScript and InlineEnv are a script and environment written
	// inline, by entries and snapshots older than Script and Env (and in
	// their place, so those encode as they did); the state moves them out
	// of line when it takes them, so no record keeps them.
	*InlineScript
	Args      []string `json:"args,omitempty"`
	SubmitDir string   `json:"submit_dir"`
	WorkDir   string   `json:"work_dir"`
	*InlineEnv

	// NTasks is the job's tasks in all (0: NTasksPerNode on each node it
	// gets); Nodes and NodesMax its node range (0: one node; 0: Nodes).
	NTasks        int   `json:"ntasks"`
	CPUsPerTask   int   `json:"cpus_per_task"`
	Nodes         int   `json:"nodes,omitempty"`
	NodesMax      int   `json:"nodes_max,omitempty"`
	NTasksPerNode int   `json:"ntasks_per_node,omitempty"`
	MemPerNode    int64 `json:"mem_per_node_mb,omitempty"`
	MemPerCPU     int64 `json:"mem_per_cpu_mb,omitempty"`
	// Exclusive asks for whole nodes; NodeList and Exclude are host lists
	// of nodes the job must include and must not use; Constraint is the
	// node features it needs (submit.ParseConstraint); Distribution lays
	// its tasks out over its nodes ("block" or "cyclic"); SpreadJob asks
	// for as many nodes as it may have, Contiguous for nodes with
	// consecutive names. See api.JobSpec.
	Exclusive    bool   `json:"exclusive,omitempty"`
	NodeList     string `json:"nodelist,omitempty"`
	Exclude      string `json:"exclude,omitempty"`
	Constraint   string `json:"constraint,omitempty"`
	Distribution string `json:"distribution,omitempty"`
	SpreadJob    bool   `json:"spread_job,omitempty"`
	Contiguous   bool   `json:"contiguous,omitempty"`
	// TimeLimit is in seconds; 0 means the partition's limit.
	TimeLimit int64 `json:"time_limit_s,omitempty"`
	// Signal is the time-limit warning (sbatch --signal); nil sends none.
	Signal *api.WarnSignal `json:"signal,omitempty"`

	Output           string    `json:"output,omitempty"`
	Error            string    `json:"error,omitempty"`
	Requeue          bool      `json:"requeue,omitempty"`
	Hold             bool      `json:"hold,omitempty"`
	KillOnInvalidDep bool      `json:"kill_on_invalid_dep,omitempty"`
	Begin            time.Time `json:"begin,omitempty"`
	Deadline         time.Time `json:"deadline,omitzero"`
	Comment          string    `json:"comment,omitempty"`
	Nice             int       `json:"nice,omitempty"`

	Gres       []api.Gres            `json:"gres,omitempty"`
	Licenses   []api.License         `json:"licenses,omitempty"`
	Hugepages  []api.HugepageRequest `json:"hugepages,omitempty"`
	NUMA       string                `json:"numa,omitempty"`
	Dependency *Dependency           `json:"dependency,omitempty"`
	Array      *api.ArraySpec        `json:"array,omitempty"`
	Image      string                `json:"image,omitempty"`
	// NoMigrate gives up live migration for speed (--no-migrate): the vm
	// runner shares files over virtiofs instead of NFS.
	NoMigrate bool `json:"no_migrate,omitempty"`
	// NoWarm has the vm runner boot the job's VM (--no-warm) rather than
	// restore it from a warm start's snapshot.
	NoWarm bool `json:"no_warm,omitempty"`
	// Reservation names the advance reservation the job runs in
	// (--reservation).
	Reservation string `json:"reservation,omitempty"`
	// MailType lists the events the job's notifications are sent for, in
	// api.MailTypes' order; MailUser is their recipient (the job's user
	// when empty). See mail.go.
	MailType []string `json:"mail_type,omitempty"`
	MailUser string   `json:"mail_user,omitempty"`
	// OpenMode, Input, Rlimits and GetUserEnv are how the node starts the
	// job (see api.JobSpec).
	OpenMode   string       `json:"open_mode,omitempty"`
	Input      string       `json:"input,omitempty"`
	Rlimits    []api.Rlimit `json:"rlimits,omitempty"`
	GetUserEnv bool         `json:"get_user_env,omitempty"`
	// Priority fixes the job's priority (--priority); CPUsPerGPU is
	// --cpus-per-gpu; Overcommit (-O) allocates one task's CPUs.
	Priority   int64 `json:"priority,omitempty"`
	CPUsPerGPU int   `json:"cpus_per_gpu,omitempty"`
	Overcommit bool  `json:"overcommit,omitempty"`
	// MemAll (--mem=0) gives the job all of its node's memory.
	MemAll bool `json:"mem_all,omitempty"`
	// Hint, ThreadsPerCore, NTasksPerCore, MemBind and MemNodes say how
	// the job's CPUs and memory are placed in its node (see api.JobSpec).
	Hint           string `json:"hint,omitempty"`
	ThreadsPerCore int    `json:"threads_per_core,omitempty"`
	NTasksPerCore  int    `json:"ntasks_per_core,omitempty"`
	MemBind        string `json:"mem_bind,omitempty"`
	MemNodes       []int  `json:"mem_nodes,omitempty"`
	// TmpMB is the node-local scratch space the job holds (--tmp).
	TmpMB int64 `json:"tmp_mb,omitempty"`

	// Script is the job's script and Env its exported environment (sorted
	// KEY=VALUE lines), out of line: shared with every job of the same
	// content, named by key in entries and snapshots (see Blob).
	Script *Blob `json:"script_ref,omitempty"`
	Env    *Blob `json:"env_ref,omitempty"`
}

// CPUs returns the number of CPUs the job asks for in all: on its node,
// for a job of one node (see api.JobSpec.CPUs). With Overcommit a node
// runs all its tasks on one task's CPUs.
func (s *JobSpec) CPUs() int {
	_, hi := api.NodeRange(s.Nodes, s.NodesMax)
	tasks := max(api.TasksOn(s.NTasks, s.NTasksPerNode, hi), 1)
	if s.Overcommit {
		tasks = hi
	}
	return tasks * max(s.CPUsPerTask, 1)
}

// CPUsPerNode returns the CPUs each node of the job holds when it runs on
// k nodes: the most tasks one of them runs (one with Overcommit), times
// CPUs per task.
func (s *JobSpec) CPUsPerNode(k int) int {
	if s.Overcommit {
		return max(s.CPUsPerTask, 1)
	}
	return max(api.MostTasksPerNode(s.NTasks, s.NTasksPerNode, k), 1) * max(s.CPUsPerTask, 1)
}

// MultiNode reports whether the job may run on more than one node.
func (s *JobSpec) MultiNode() bool {
	_, hi := api.NodeRange(s.Nodes, s.NodesMax)
	return hi > 1
}

// OneThreadPerCore reports whether the job runs on one thread of each
// core it gets (api.JobSpec.OneThreadPerCore).
func (s *JobSpec) OneThreadPerCore() bool {
	return api.OneThreadPerCore(s.Hint, s.ThreadsPerCore, s.NTasksPerCore, s.CPUsPerTask)
}

// MemMB returns the memory the job asks for on its node in MiB, or 0 when it
// asked for none (the default per CPU applies).
func (s *JobSpec) MemMB() int64 {
	if s.MemPerNode > 0 {
		return s.MemPerNode
	}
	if s.MemPerCPU > 0 {
		return s.MemPerCPU * int64(s.CPUs())
	}
	return 0
}

// Dependency is a parsed --dependency expression. Clauses are joined by
// "all of" unless Any is set.
type Dependency struct {
	Any     bool        `json:"any,omitempty"`
	Clauses []DepClause `json:"clauses"`
	Raw     string      `json:"raw"`
}

// DepClause is one dependency type with its targets, e.g. afterok:12:13.
type DepClause struct {
	// Type is after, afterany, afterok, afternotok, aftercorr or
	// singleton (which names no job).
	Type string `json:"type"`
	// Targets are the jobs the clause names, parsed and resolved once,
	// when the job is submitted (or its dependency updated).
	Targets []DepTarget `json:"targets,omitempty"`
	// JobIDs is how entries written before typed targets named them ("12",
	// "12_5"); the apply resolves them into Targets when it takes such an
	// entry, and no record keeps them.
	JobIDs []string `json:"job_ids,omitempty"`
	// Minutes is the +time of after:<id>+<minutes>.
	Minutes int `json:"minutes,omitempty"`
}

// DepKind is what a dependency target names.
type DepKind string

// Dependency target kinds.
const (
	// DepJob names one job ("12").
	DepJob DepKind = "job"
	// DepTask names one task of an array ("12_5"): the task's own record
	// once it started, the array's pending record until then.
	DepTask DepKind = "task"
	// DepArray names every task of an array ("12", when job 12 is one).
	DepArray DepKind = "array"
)

// DepTarget is one job a dependency names.
type DepTarget struct {
	Kind DepKind `json:"kind"`
	Job  uint64  `json:"job"`
	Task int     `json:"task,omitempty"`
}

// String writes the target as users name it.
func (t DepTarget) String() string {
	if t.Kind == DepTask {
		return strconv.FormatUint(t.Job, 10) + "_" + strconv.Itoa(t.Task)
	}
	return strconv.FormatUint(t.Job, 10)
}

// DepLookups are how a target's records are found: a job by id, the record
// holding a task of an array, every record of an array. The state and the
// scheduling pass each give their own, and both resolve targets with
// Records, so the pass and the cycle check read dependencies alike.
type DepLookups struct {
	Job   func(id uint64) *Job
	Task  func(array uint64, task int) *Job
	Array func(id uint64) []*Job
}

// Records returns the records target t names: nil when it names nothing
// known (the dependency can never be met).
func (t DepTarget) Records(l DepLookups) []*Job {
	switch t.Kind {
	case DepTask:
		if l.Task != nil {
			if j := l.Task(t.Job, t.Task); j != nil {
				return []*Job{j}
			}
			return nil
		}
	case DepArray:
		if l.Array != nil {
			if recs := l.Array(t.Job); len(recs) > 0 {
				return recs
			}
			return nil
		}
	}
	if l.Job == nil {
		return nil
	}
	if j := l.Job(t.Job); j != nil {
		return []*Job{j}
	}
	return nil
}

// Job is a job as the state records it: the request and its lifecycle.
// Where and how it runs is in its allocations (Allocs); its State is
// derived from theirs while any is active, and is its own (PENDING, or the
// outcome) otherwise.
type Job struct {
	ID uint64 `json:"id"`
	// Spec is immutable once the job is stored, shared by every version
	// of the record (an edit copies the job, not its request); a change
	// to it goes through editSpec.
	Spec *JobSpec `json:"spec"`

	State  api.JobState `json:"state"`
	Reason api.Reason   `json:"reason,omitempty"`

	SubmitTime time.Time `json:"submit_time"`
	// StartTime is when the job's current or last run started.
	StartTime time.Time `json:"start_time,omitempty"`
	// EstStart and EstNode are a pending job's reservation: when and on
	// which node it is expected to start; zero when it holds none. They
	// are replicated with the plan that made them, so a new leader's
	// conservative backfill keeps every promised start (see
	// sched.Snapshot.Reservations).
	EstStart time.Time `json:"est_start,omitempty"`
	EstNode  string    `json:"est_node,omitempty"`
	EndTime  time.Time `json:"end_time,omitempty"`

	// Steps are the job's steps (srun), nil until its first (steps.go).
	Steps *JobSteps `json:"steps,omitempty"`

	// The outcome of the last run.
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal,omitempty"`
	Message  string `json:"message,omitempty"`
	Priority int64  `json:"priority"`
	Restarts int    `json:"restarts,omitempty"`
	// Mailed marks the notices sent at most once per run (the time-limit
	// warnings, which a requeue clears) or once (INVALID_DEPEND).
	Mailed uint8 `json:"mailed,omitempty"`

	// Arrays: a submitted array is one record (ArrayJobID == ID) whose
	// ArrayPending holds the tasks not started yet; each task that starts
	// is split off as a record of its own, the last one keeping the
	// array's record.
	ArrayJobID   uint64        `json:"array_job_id,omitempty"`
	ArrayTaskID  int           `json:"array_task_id,omitempty"`
	ArrayPending *api.IndexSet `json:"array_pending,omitempty"`

	// Allocs are the job's allocations, oldest first: the active ones and
	// those of its earlier runs (kept until the job is purged).
	Allocs []uint64 `json:"allocs,omitempty"`
	// Migrations are the job's live migrations, oldest first (their
	// records are in State.Migrations until the job is purged); the last
	// one is under way while it is live.
	Migrations []uint64 `json:"migrations,omitempty"`
	// Checkpoint is the job's checkpoint (checkpoints.go), nil when it
	// never had one.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Net is the private network of the job's multi-node run (jobnet.go),
	// assigned when the run starts; nil for a run of one node.
	Net *JobNet `json:"net,omitempty"`
}

// IsArrayTask reports whether the record is one task of an array.
func (j *Job) IsArrayTask() bool { return j.ArrayJobID != 0 && j.ArrayPending == nil }

// IsArrayPending reports whether the record holds an array's unstarted
// tasks.
func (j *Job) IsArrayPending() bool { return j.ArrayPending != nil }

// Ref returns how users name the job: "12", "12_5" for task 5 of array 12,
// "12_[3-99%10]" for array 12's unstarted tasks.
func (j *Job) Ref() string {
	return api.RecordRef(j.ID, j.ArrayJobID, j.ArrayTaskID, j.ArrayPending, j.Spec.Array)
}
