package api

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// JobState is a job's lifecycle state. The names are Slurm's, so scripts and
// people that read squeue output keep working.
type JobState string

// Job states. Append only: these strings are stored in Raft logs.
const (
	StatePending     JobState = "PENDING"
	StateRunning     JobState = "RUNNING"
	StateSuspended   JobState = "SUSPENDED"
	StateCompleting  JobState = "COMPLETING"
	StateCompleted   JobState = "COMPLETED"
	StateFailed      JobState = "FAILED"
	StateCancelled   JobState = "CANCELLED"
	StateTimeout     JobState = "TIMEOUT"
	StatePreempted   JobState = "PREEMPTED"
	StateNodeFail    JobState = "NODE_FAIL"
	StateOutOfMemory JobState = "OUT_OF_MEMORY"
	StateRequeued    JobState = "REQUEUED"
	StateMigrating   JobState = "MIGRATING"
	// StateDeadline: cancelled while pending because it could no longer
	// end by its --deadline.
	StateDeadline JobState = "DEADLINE"
)

// AllJobStates lists every state in display order.
var AllJobStates = []JobState{
	StatePending, StateRunning, StateSuspended, StateCompleting, StateCompleted,
	StateFailed, StateCancelled, StateTimeout, StatePreempted, StateNodeFail,
	StateOutOfMemory, StateRequeued, StateMigrating, StateDeadline,
}

var shortStates = map[JobState]string{
	StatePending: "PD", StateRunning: "R", StateSuspended: "S", StateCompleting: "CG",
	StateCompleted: "CD", StateFailed: "F", StateCancelled: "CA", StateTimeout: "TO",
	StatePreempted: "PR", StateNodeFail: "NF", StateOutOfMemory: "OOM", StateRequeued: "RQ",
	StateMigrating: "MG", StateDeadline: "DL",
}

// Short returns squeue's compact state code (%t), e.g. "PD" or "R".
func (s JobState) Short() string {
	if c, ok := shortStates[s]; ok {
		return c
	}
	return string(s)
}

// Terminal reports whether a job in state s will never run again.
func (s JobState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateTimeout, StatePreempted,
		StateNodeFail, StateOutOfMemory, StateDeadline:
		return true
	}
	return false
}

// Active reports whether a job in state s holds resources on a node.
func (s JobState) Active() bool {
	switch s {
	case StateRunning, StateSuspended, StateCompleting, StateMigrating:
		return true
	}
	return false
}

// ParseJobState accepts a full state name or its squeue short code, in any
// case, as squeue's --states does.
func ParseJobState(s string) (JobState, error) {
	for _, st := range AllJobStates {
		if strings.EqualFold(s, string(st)) || strings.EqualFold(s, st.Short()) {
			return st, nil
		}
	}
	if strings.EqualFold(s, "CANCELED") {
		return StateCancelled, nil
	}
	return "", fmt.Errorf("unknown job state %q (use one of PENDING, RUNNING, SUSPENDED, COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY or their short codes PD, R, S, CD, CA, F, TO, NF, PR, OOM)", s)
}

// Reason explains why a job is pending (squeue's REASON column). The names
// are Slurm's.
type Reason string

// Pending reasons. Append only.
const (
	ReasonNone                     Reason = "None"
	ReasonPriority                 Reason = "Priority"
	ReasonResources                Reason = "Resources"
	ReasonDependency               Reason = "Dependency"
	ReasonDependencyNeverSatisfied Reason = "DependencyNeverSatisfied"
	ReasonBeginTime                Reason = "BeginTime"
	ReasonJobHeldUser              Reason = "JobHeldUser"
	ReasonJobHeldAdmin             Reason = "JobHeldAdmin"
	ReasonJobArrayTaskLimit        Reason = "JobArrayTaskLimit"
	ReasonPartitionTimeLimit       Reason = "PartitionTimeLimit"
	ReasonPartitionDown            Reason = "PartitionDown"
	ReasonPartitionNodeLimit       Reason = "PartitionNodeLimit"
	ReasonNodeDown                 Reason = "NodeDown"
	ReasonBadConstraints           Reason = "BadConstraints"
	ReasonQOSLimit                 Reason = "QOSLimit"
	ReasonGresUnavailable          Reason = "GresUnavailable"
	ReasonLicenses                 Reason = "Licenses"
	ReasonHugepagesUnavailable     Reason = "HugepagesUnavailable"
	ReasonQOSMaxJobsPerUserLimit   Reason = "QOSMaxJobsPerUserLimit"
	ReasonQOSGrpCpuLimit           Reason = "QOSGrpCpuLimit"
	ReasonQOSMaxWallDurationLimit  Reason = "QOSMaxWallDurationPerJobLimit"
	ReasonNodeFail                 Reason = "NodeFail"
	// ReasonInvalidJob holds a job the scheduler cannot handle: its
	// request is outside what a pass computes with (see sched.CheckJob),
	// or placing it failed. The job's Message says why.
	ReasonInvalidJob Reason = "InvalidJob"
	// ReasonPartitionInactive: the job's partition is INACTIVE.
	ReasonPartitionInactive Reason = "PartitionInactive"
	// ReasonReservation: the job waits for its reservation's window to
	// open, or for room inside it.
	ReasonReservation Reason = "Reservation"
	// ReasonReservationDeleted: the reservation the job names was deleted
	// (or ended); it cannot start until it names another (or none).
	ReasonReservationDeleted Reason = "ReservationDeleted"
	// ReasonReservedForMaint: the only nodes that could hold the job now
	// are in a maintenance reservation it would overlap.
	ReasonReservedForMaint Reason = "ReqNodeNotAvail, Reserved for maintenance"
	// ReasonDeadline: the job was cancelled because it could no longer
	// end by its --deadline (Slurm's DeadLine).
	ReasonDeadline Reason = "DeadLine"
)

// Dependency is a parsed --dependency expression. Clauses are joined by
// "all of" (",") unless Any is set ("?" in Slurm's syntax).
type Dependency struct {
	Any     bool        `json:"any,omitempty"`
	Clauses []DepClause `json:"clauses"`
	Raw     string      `json:"raw"`
}

// DepClause is one dependency type with its job ids, e.g. afterok:12:13.
type DepClause struct {
	// Type is after, afterany, afterok, afternotok, aftercorr, aftersingleton
	// is spelled "singleton" and has no job ids.
	Type string `json:"type"`
	// JobIDs names the jobs; an element of an array is "12_3".
	JobIDs []string `json:"job_ids,omitempty"`
	// Minutes is the optional +time of after:<id>+<minutes>.
	Minutes int `json:"minutes,omitempty"`
}

// ArraySpec is a parsed --array expression such as 0-15:4%2.
type ArraySpec struct {
	Raw      string       `json:"raw"`
	Ranges   []ArrayRange `json:"ranges"`
	Throttle int          `json:"throttle,omitempty"`
}

// WithThrottle returns a with its %N task limit set to n (0: none), its
// expression saying so.
func (a ArraySpec) WithThrottle(n int) *ArraySpec {
	if i := strings.IndexByte(a.Raw, '%'); i >= 0 {
		a.Raw = a.Raw[:i]
	}
	if n > 0 && a.Raw != "" {
		a.Raw += "%" + strconv.Itoa(n)
	}
	a.Throttle = n
	return &a
}

// ArrayRange is First..Last (inclusive) in steps of Step.
type ArrayRange struct {
	First int `json:"first"`
	Last  int `json:"last"`
	Step  int `json:"step"`
}

// Count returns how many indices the spec expands to (duplicates counted),
// computed without listing them and at most MaxInt; ranges with a Step
// below 1 or a Last below their First count none.
func (a *ArraySpec) Count() int {
	n := 0
	for _, r := range a.Ranges {
		if r.Step > 0 && r.Last >= r.First {
			c := r.count()
			if c > math.MaxInt-n {
				return math.MaxInt
			}
			n += c
		}
	}
	return n
}

// Gres is one generic-resource request, e.g. gpu:a100:2.
type Gres struct {
	Name  string `json:"name"`
	Type  string `json:"type,omitempty"`
	Count int    `json:"count"`
}

// JobSpec is what a user submits: the script and every request that came with
// it, after #SBATCH directives and command-line options were merged and
// validated (package submit).
type JobSpec struct {
	// RequestID is the client's idempotency key: a retried submission with
	// the same key returns the original job instead of creating another.
	RequestID string `json:"request_id,omitempty"`

	Name      string   `json:"name"`
	User      string   `json:"user"`
	Account   string   `json:"account,omitempty"`
	Partition string   `json:"partition,omitempty"`
	QOS       string   `json:"qos,omitempty"`
	Script    string   `json:"script"`
	Args      []string `json:"args,omitempty"`
	// SubmitDir is where the user ran submit; WorkDir is -D (defaults to it).
	SubmitDir string `json:"submit_dir"`
	WorkDir   string `json:"work_dir"`
	// Env holds the exported environment as KEY=VALUE lines, sorted.
	Env []string `json:"env,omitempty"`

	// NTasks is the job's tasks in all, CPUsPerTask each one's CPUs.
	NTasks      int `json:"ntasks"`
	CPUsPerTask int `json:"cpus_per_task"`
	// Nodes is the fewest nodes the job runs on (-N MIN[-MAX]; 0 is
	// unset: one node), NodesMax the most (0: Nodes).
	Nodes    int `json:"nodes,omitempty"`
	NodesMax int `json:"nodes_max,omitempty"`
	// NTasksPerNode is --ntasks-per-node: the tasks on each node (with
	// NTasks given too, the most on one node); 0 is unset.
	NTasksPerNode int `json:"ntasks_per_node,omitempty"`
	// MemPerNode is --mem, the memory on each node of the job;
	// MemPerCPU is --mem-per-cpu.
	MemPerNode int64 `json:"mem_per_node_mb,omitempty"` // MiB; 0 means unset
	MemPerCPU  int64 `json:"mem_per_cpu_mb,omitempty"`  // MiB; 0 means unset
	// Exclusive asks for whole nodes (--exclusive): no other job shares
	// them, and the job gets all their CPUs and memory.
	Exclusive bool `json:"exclusive,omitempty"`
	// NodeList is -w/--nodelist, nodes the job must include, and Exclude
	// is -x/--exclude, nodes it must not use; both are host lists
	// ("n[1-4]"), written compressed.
	NodeList string `json:"nodelist,omitempty"`
	Exclude  string `json:"exclude,omitempty"`
	// Constraint is -C/--constraint, the node features the job needs, in
	// Slurm's syntax (submit.ParseConstraint).
	Constraint string `json:"constraint,omitempty"`
	// Distribution is -m/--distribution: how tasks are laid out over the
	// nodes, "block" (the default) or "cyclic".
	Distribution string `json:"distribution,omitempty"`
	// SpreadJob spreads the job over as many nodes as it may have
	// (--spread-job); Contiguous asks for nodes with consecutive names
	// (--contiguous).
	SpreadJob  bool `json:"spread_job,omitempty"`
	Contiguous bool `json:"contiguous,omitempty"`
	// TimeLimit is in seconds; 0 means the partition's limit.
	TimeLimit int64 `json:"time_limit_s,omitempty"`
	// Signal is the time-limit warning (sbatch --signal=[B:]SIG[@TIME]):
	// nil sends none.
	Signal *WarnSignal `json:"signal,omitempty"`

	Output  string `json:"output,omitempty"`
	Error   string `json:"error,omitempty"`
	Requeue bool   `json:"requeue,omitempty"`
	Hold    bool   `json:"hold,omitempty"`
	// KillOnInvalidDep cancels the job when its dependency can never be
	// met (--kill-on-invalid-dep=yes); otherwise it stays pending with
	// DependencyNeverSatisfied.
	KillOnInvalidDep bool `json:"kill_on_invalid_dep,omitempty"`
	// Begin is the earliest start time; zero means now.
	Begin time.Time `json:"begin,omitempty"`
	// Deadline (sbatch --deadline) cancels the job, as DEADLINE, once it
	// is pending and could no longer end by then; zero means none.
	Deadline time.Time `json:"deadline,omitzero"`
	Comment  string    `json:"comment,omitempty"`
	Nice     int       `json:"nice,omitempty"`

	// Gres are the generic resources on each node of the job (Slurm's
	// --gres is per node).
	Gres []Gres `json:"gres,omitempty"`
	// Licenses are the cluster licenses the job holds while it runs
	// (sbatch -L), sorted by name.
	Licenses []License `json:"licenses,omitempty"`
	// Hugepages and NUMA are --hugepages and --numa (NUMAPrefer when
	// empty).
	Hugepages  []HugepageRequest `json:"hugepages,omitempty"`
	NUMA       string            `json:"numa,omitempty"`
	Dependency *Dependency       `json:"dependency,omitempty"`
	Array      *ArraySpec        `json:"array,omitempty"`
	// Image names the guest image for the vm runner; empty is the default.
	Image string `json:"image,omitempty"`
	// NoMigrate gives up live migration for speed (--no-migrate): the vm
	// runner shares the host's files over virtiofs, which QEMU cannot
	// migrate, instead of NFS.
	NoMigrate bool `json:"no_migrate,omitempty"`
	// NoWarm has the vm runner boot the job's VM (--no-warm) rather than
	// restore it from a warm start's snapshot of a guest booted earlier.
	NoWarm bool `json:"no_warm,omitempty"`
	// Reservation names the advance reservation the job runs in
	// (--reservation): only inside it, on its nodes and within its
	// window.
	Reservation string `json:"reservation,omitempty"`
	// MailType lists the events the job's notifications are sent for
	// (sbatch --mail-type, canonical: see ParseMailType); MailUser is
	// their recipient, the job's user when empty (--mail-user).
	MailType []string `json:"mail_type,omitempty"`
	MailUser string   `json:"mail_user,omitempty"`
	// OpenMode is OpenModeAppend when the output files are appended to
	// (sbatch --open-mode=append); "" truncates them.
	OpenMode string `json:"open_mode,omitempty"`
	// Input is the batch script's standard input (sbatch -i), a path
	// pattern as Output's; "" is /dev/null.
	Input string `json:"input,omitempty"`
	// Rlimits are the submitting shell's soft resource limits that the
	// job's processes get (sbatch --propagate), sorted by name.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
	// GetUserEnv adds the user's login environment on the node under the
	// exported one (sbatch --get-user-env).
	GetUserEnv bool `json:"get_user_env,omitempty"`
	// Priority, when not 0, is the job's fixed priority instead of the
	// multifactor one (sbatch --priority; operators and admins only).
	Priority int64 `json:"priority,omitempty"`
	// CPUsPerGPU is sbatch --cpus-per-gpu: the job asks for at least this
	// many CPUs per GPU (the CLI sets CPUsPerTask from it).
	CPUsPerGPU int `json:"cpus_per_gpu,omitempty"`
	// Overcommit (sbatch -O) allocates CPUsPerTask CPUs for the job, as
	// for one task, however many tasks it runs.
	Overcommit bool `json:"overcommit,omitempty"`
	// MemAll (sbatch --mem=0) gives the job all of its node's memory;
	// MemPerNode and MemPerCPU are then 0.
	MemAll bool `json:"mem_all,omitempty"`
	// Hint, ThreadsPerCore and NTasksPerCore are sbatch --hint,
	// --threads-per-core and --ntasks-per-core: with nomultithread,
	// compute_bound or memory_bound, or one thread or task per core, the
	// job runs on one thread of each core it gets and holds the others
	// idle; memory_bound also spreads it over NUMA nodes (OneThreadPerCore).
	Hint           string `json:"hint,omitempty"`
	ThreadsPerCore int    `json:"threads_per_core,omitempty"`
	NTasksPerCore  int    `json:"ntasks_per_core,omitempty"`
	// MemBind is sbatch --mem-bind as given; MemNodes are the NUMA nodes
	// its map_mem or mask_mem names (the job's memory and CPUs come from
	// those only); its none, local and prefer set NUMA.
	MemBind  string `json:"mem_bind,omitempty"`
	MemNodes []int  `json:"mem_nodes,omitempty"`
	// TmpMB is the node-local scratch space the job holds (sbatch --tmp,
	// MiB) out of its node's TmpMB.
	TmpMB int64 `json:"tmp_mb,omitempty"`
}

// Hints sbatch --hint takes.
const (
	HintMultithread   = "multithread"
	HintNoMultithread = "nomultithread"
	HintComputeBound  = "compute_bound"
	HintMemoryBound   = "memory_bound"
)

// OneThreadPerCore reports whether the job runs on one thread of each
// core it gets (see Hint).
func (s *JobSpec) OneThreadPerCore() bool {
	return oneThreadPerCore(s.Hint, s.ThreadsPerCore, s.NTasksPerCore, s.CPUsPerTask)
}

func oneThreadPerCore(hint string, threads, tasksPerCore, cpusPerTask int) bool {
	switch {
	case hint == HintNoMultithread || hint == HintComputeBound || hint == HintMemoryBound:
		return true
	case threads == 1:
		return true
	}
	return tasksPerCore == 1 && cpusPerTask <= 1
}

// OneThreadPerCore is JobSpec.OneThreadPerCore for the state's copy of a
// request, which holds the same fields.
func OneThreadPerCore(hint string, threads, tasksPerCore, cpusPerTask int) bool {
	return oneThreadPerCore(hint, threads, tasksPerCore, cpusPerTask)
}

// MaxPriority is the highest --priority (TOP), Slurm's 32-bit range less
// its reserved values.
const MaxPriority = 4294967293

// GPUCount returns the whole GPUs and MIG slices a request asks for.
func (s *JobSpec) GPUCount() int {
	n := 0
	for _, g := range s.Gres {
		if g.Name == "gpu" {
			n += g.Count
		}
	}
	return n
}

// OpenModeAppend is JobSpec.OpenMode for --open-mode=append.
const OpenModeAppend = "append"

// NodeRange returns the fewest and the most nodes the job may run on.
func (s *JobSpec) NodeRange() (lo, hi int) {
	return NodeRange(s.Nodes, s.NodesMax)
}

// NodeRange returns the node range of -N MIN[-MAX] as a request records
// it: nodes 0 is one node, max 0 is nodes.
func NodeRange(nodes, nodesMax int) (lo, hi int) {
	lo = max(nodes, 1)
	return lo, max(nodesMax, lo)
}

// TasksOn returns the tasks of a job with ntasks (0: perNode on each of
// its nodes) on k nodes.
func TasksOn(ntasks, perNode, k int) int {
	if ntasks > 0 {
		return ntasks
	}
	return k * max(perNode, 1)
}

// CPUs returns the number of CPUs the job asks for in all: on its node,
// for a job of one node; at the most nodes it may have, for a job of a
// node range. With Overcommit a node runs all its tasks on one task's CPUs.
func (s *JobSpec) CPUs() int {
	_, hi := s.NodeRange()
	tasks := max(TasksOn(s.NTasks, s.NTasksPerNode, hi), 1)
	if s.Overcommit {
		tasks = hi
	}
	return tasks * max(s.CPUsPerTask, 1)
}

// MemMB returns the memory the job asks for on its node in MiB, or 0 when it
// asked for none (the node's default applies).
func (s *JobSpec) MemMB() int64 {
	if s.MemPerNode > 0 {
		return s.MemPerNode
	}
	if s.MemPerCPU > 0 {
		return s.MemPerCPU * int64(s.CPUs())
	}
	return 0
}

// Job is a submitted job as the controllers hold it.
type Job struct {
	ID   uint64  `json:"id"`
	Spec JobSpec `json:"spec"`

	State  JobState `json:"state"`
	Reason Reason   `json:"reason,omitempty"`
	// FinalState is the state a COMPLETING job takes once its node confirms
	// the job's processes are gone.
	FinalState JobState `json:"final_state,omitempty"`

	SubmitTime time.Time `json:"submit_time"`
	StartTime  time.Time `json:"start_time,omitempty"`
	// EstStart is when a pending job that holds a backfill reservation is
	// expected to start (squeue --start); zero when it holds none.
	EstStart time.Time `json:"est_start,omitempty"`
	EndTime  time.Time `json:"end_time,omitempty"`
	// SuspendedFor accumulates time spent SUSPENDED, so elapsed time stops
	// counting while a job is paused.
	SuspendedFor time.Duration `json:"suspended_for,omitempty"`
	SuspendTime  time.Time     `json:"suspend_time,omitempty"`

	Node string `json:"node,omitempty"`
	// Nodes are the nodes of a multi-node job's current (or last) run in
	// rank order, Node (the batch script's) first; a node's desired state
	// names them for every run, and NodeRank is there the rank of that
	// node's part (SLURM_NODEID). CPUs is then that node's; elsewhere the
	// run's in all.
	Nodes    []string `json:"nodes,omitempty"`
	NodeRank int      `json:"node_rank,omitempty"`
	CPUs     int      `json:"cpus"`
	MemMB    int64    `json:"mem_mb"`
	// OverheadMB is the runner's own memory charged to the node for this
	// job on top of MemMB (see NodeInfo.OverheadMB).
	OverheadMB int64 `json:"overhead_mb,omitempty"`

	ExitCode int `json:"exit_code"`
	Signal   int `json:"signal,omitempty"`
	// CPUSeconds and PeakMemKB are what the job's run used on its node, as
	// the node measured it (its VM's cgroup); 0 when not measured.
	CPUSeconds float64 `json:"cpu_s,omitempty"`
	PeakMemKB  int64   `json:"peak_mem_kb,omitempty"`
	// VMStart says how the job's last run's VM started, as its node
	// reported at the run's end: VMStartWarm or VMStartCold; empty before
	// that, or for a run without a VM.
	VMStart string `json:"vm_start,omitempty"`
	// Message carries the node's explanation of an abnormal end.
	Message  string `json:"message,omitempty"`
	Priority int64  `json:"priority"`
	// Migratable says whether the job's run could live-migrate: "yes",
	// "no" (MigrationBlocker says why), or "" when that is not known (a
	// pending job nothing in its request blocks, an ended job). Like
	// Priority it is derived when the job is read, from the job's
	// request, its partition's share and its node's runner; never stored.
	Migratable       string `json:"migratable,omitempty"`
	MigrationBlocker string `json:"migration_blocker,omitempty"`
	// Migrations are the job's live migrations, oldest first: each one's
	// nodes, phase and figures (only `corral show job` reads them).
	Migrations []Migration `json:"migrations,omitempty"`
	// Checkpoint is the job's checkpoint, when it has one (only `corral
	// show job` reads it).
	Checkpoint *JobCheckpoint `json:"checkpoint,omitempty"`
	Restarts   int            `json:"restarts,omitempty"`
	// StartIndex is the Raft index of the plan that started the job; the
	// node daemon uses it to tell a new run of a requeued job from an old one.
	StartIndex uint64 `json:"start_index,omitempty"`

	// Arrays. A submitted array is one record (ArrayJobID == ID) whose
	// ArrayPending holds the tasks not started yet. Each task that starts
	// is split off as a record of its own (a new ID, ArrayJobID, and
	// ArrayTaskID); the last one to start is the original record itself.
	ArrayJobID   uint64    `json:"array_job_id,omitempty"`
	ArrayTaskID  int       `json:"array_task_id,omitempty"`
	ArrayPending *IndexSet `json:"array_pending,omitempty"`

	// Placement is the exact set of CPUs, NUMA nodes, devices and
	// hugepages the job got on a node that reported its inventory.
	Placement *Placement `json:"placement,omitempty"`
	// Net is a multi-node job's private network as its node needs it (see
	// JobNet), in the job of a desired allocation; nil for a job of one
	// node.
	Net *JobNet `json:"net,omitempty"`

	// CPUsLent is set while the job is suspended by preemption: its CPUs
	// are lent to the preemptor (its memory stays held) until it resumes.
	CPUsLent bool `json:"cpus_lent,omitempty"`
	// PreemptedBy is the job that suspended this one by preemption; it
	// resumes once that job is gone and its CPUs are free.
	PreemptedBy uint64 `json:"preempted_by,omitempty"`

	// Allocs are the job's allocations, oldest first: its current run's
	// and its earlier runs'. Node, CPUs, MemMB, Placement, StartIndex and
	// the suspension fields above describe the newest one.
	Allocs []uint64 `json:"allocs,omitempty"`
}

// IsArrayTask reports whether the record is one task of an array.
func (j *Job) IsArrayTask() bool { return j.ArrayJobID != 0 && j.ArrayPending == nil }

// IsArrayPending reports whether the record holds an array's unstarted
// tasks.
func (j *Job) IsArrayPending() bool { return j.ArrayPending != nil }

// Ref returns how users name the job: "12" for a plain job, "12_5" for
// task 5 of array 12, "12_[3-99%10]" for array 12's unstarted tasks.
func (j *Job) Ref() string {
	return RecordRef(j.ID, j.ArrayJobID, j.ArrayTaskID, j.ArrayPending, j.Spec.Array)
}

// Elapsed returns how long the job has run at now (squeue's TIME, %M).
func (j *Job) Elapsed(now time.Time) time.Duration {
	if j.StartTime.IsZero() {
		return 0
	}
	end := now
	if !j.EndTime.IsZero() {
		end = j.EndTime
	}
	d := end.Sub(j.StartTime) - j.SuspendedFor
	if j.State == StateSuspended && !j.SuspendTime.IsZero() {
		d -= end.Sub(j.SuspendTime)
	}
	if d < 0 {
		d = 0
	}
	return d
}
