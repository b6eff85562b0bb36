package api

import (
	"strconv"
	"time"
)

// SubmitRequest carries a batch of jobs; the batch is accepted or refused
// whole.
type SubmitRequest struct {
	Jobs []JobSpec `json:"jobs"`
	// TestOnly asks when and where the jobs would start, as sbatch
	// --test-only does: they are validated and given to one scheduling
	// pass over the current state, and nothing is stored.
	TestOnly bool `json:"test_only,omitempty"`
}

// WillRun is what a test-only submission answers for one job: when it
// would start (now, or the start the pass reserves it), on which node and
// in which partition, or why no start is known.
type WillRun struct {
	// JobID is the id the job would have been given (not taken).
	JobID     uint64    `json:"job_id"`
	Partition string    `json:"partition"`
	CPUs      int       `json:"cpus"`
	Start     time.Time `json:"start,omitempty"`
	Node      string    `json:"node,omitempty"`
	// Reason is set when the pass gives no start: why the job would wait.
	Reason Reason `json:"reason,omitempty"`
}

// SubmitResult is the outcome for one job of a batch.
type SubmitResult struct {
	JobID uint64 `json:"job_id"`
	// Duplicate is set when the request id had been seen before and JobID is
	// the job created then.
	Duplicate bool `json:"duplicate,omitempty"`
	// Error says why the job was refused when it was committed (JobID is
	// 0): a limit its QoS sets on the user's jobs, counted with the jobs
	// committed before it, in the same batch or another.
	Error string `json:"error,omitempty"`
}

// SubmitResponse answers a SubmitRequest, one result per job in order.
type SubmitResponse struct {
	Results []SubmitResult `json:"results"`
	// WillRun answers a test-only request, job by job (Results is empty).
	WillRun []WillRun `json:"will_run,omitempty"`
}

// JobFilter selects jobs for listing and cancelling, like squeue/scancel
// options. Empty fields match everything.
type JobFilter struct {
	// IDs selects jobs by id; an array's id selects all its tasks.
	IDs []uint64 `json:"ids,omitempty"`
	// Tasks selects single tasks of arrays ("12_5").
	Tasks      []TaskRef  `json:"tasks,omitempty"`
	Users      []string   `json:"users,omitempty"`
	Names      []string   `json:"names,omitempty"`
	States     []JobState `json:"states,omitempty"`
	Partitions []string   `json:"partitions,omitempty"`
	Accounts   []string   `json:"accounts,omitempty"`
	// QOS selects jobs by their QoS (squeue -q), Nodes by the node they
	// run or ran on (squeue -w).
	QOS   []string `json:"qos,omitempty"`
	Nodes []string `json:"nodes,omitempty"`
	// Reservations selects jobs by the reservation they name (squeue -R,
	// scancel --reservation).
	Reservations []string `json:"reservations,omitempty"`
}

// TaskRef names one task of an array: 12_5 is {12, 5}.
type TaskRef struct {
	Array uint64 `json:"array"`
	Task  int    `json:"task"`
}

// String writes the reference as users do, "12_5".
func (t TaskRef) String() string {
	return strconv.FormatUint(t.Array, 10) + "_" + strconv.Itoa(t.Task)
}

// HasJobs reports whether the filter names jobs by id or task.
func (f *JobFilter) HasJobs() bool { return len(f.IDs) > 0 || len(f.Tasks) > 0 }

// CancelRequest cancels the jobs matching Filter that are not finished yet.
// Filter.User restricts by owner; an empty filter is refused.
type CancelRequest struct {
	Filter JobFilter `json:"filter"`
	// By is the identity asking; recorded in the job's message.
	By string `json:"by,omitempty"`
}

// CancelResponse lists what was cancelled and what could not be.
type CancelResponse struct {
	Cancelled []uint64          `json:"cancelled"`
	Errors    map[uint64]string `json:"errors,omitempty"`
}

// HoldRequest holds (Hold=true) or releases pending jobs.
type HoldRequest struct {
	IDs  []uint64 `json:"ids"`
	Hold bool     `json:"hold"`
}

// HoldResponse lists the jobs changed and the ones refused.
type HoldResponse struct {
	Changed []uint64          `json:"changed"`
	Errors  map[uint64]string `json:"errors,omitempty"`
}

// SuspendRequest suspends (Suspend=true) or resumes running jobs, as
// scontrol suspend/resume do. A suspended job keeps its allocation.
type SuspendRequest struct {
	IDs     []uint64 `json:"ids"`
	Suspend bool     `json:"suspend"`
}

// RequeueRequest puts running, suspended or finished jobs back in the
// queue, as scontrol requeue does; Hold holds them too (requeuehold).
type RequeueRequest struct {
	IDs  []uint64 `json:"ids"`
	Hold bool     `json:"hold,omitempty"`
}

// TopRequest moves pending jobs to the top of their user's queue, in the
// order given, as scontrol top does (TopJobs).
type TopRequest struct {
	IDs []uint64 `json:"ids"`
}

// DrainRequest drains (Drain=true) or resumes a node.
type DrainRequest struct {
	Node   string `json:"node"`
	Drain  bool   `json:"drain"`
	Reason string `json:"reason,omitempty"`
	// Migrate drains the node by moving its running jobs to other nodes
	// (live migration) instead of waiting for them to end.
	Migrate bool `json:"migrate,omitempty"`
}

// Member is one controller of the Raft cluster.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}

// ClusterStatus is what `corral status` shows.
type ClusterStatus struct {
	Self         string         `json:"self"`
	Leader       string         `json:"leader"`
	State        string         `json:"state"`
	Term         uint64         `json:"term"`
	CommitIndex  uint64         `json:"commit_index"`
	AppliedIndex uint64         `json:"applied_index"`
	LastIndex    uint64         `json:"last_index"`
	Members      []Member       `json:"members"`
	Nodes        map[string]int `json:"nodes"`
	Jobs         map[string]int `json:"jobs"`
	// StateHash digests the replicated state at AppliedIndex (only when
	// asked for: it costs a pass over every job).
	StateHash string `json:"state_hash,omitempty"`
}

// Error is the body of every failed API call.
type Error struct {
	Error string `json:"error"`
	// Field names the offending field or option when there is one.
	Field string `json:"field,omitempty"`
	// Errno names the system error behind a failure inside a job (EACCES,
	// ENOENT) on the job I/O routes.
	Errno string `json:"errno,omitempty"`
}
