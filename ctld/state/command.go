package state

import (
	"time"

	"corral/api"
)

// CommandType tags a Raft log entry. The values are stored in logs forever:
// never renumber, never reuse; a retired type keeps its decoder.
type CommandType uint8

// Command types.
const (
	CmdSubmitJobs     CommandType = 1
	CmdCancelJobs     CommandType = 2
	CmdHoldRelease    CommandType = 3
	CmdApplyPlan      CommandType = 4
	CmdRegisterNode   CommandType = 5
	CmdNodeHeartbeats CommandType = 6
	CmdJobReports     CommandType = 7
	CmdNodeDown       CommandType = 8
	CmdNodeDrain      CommandType = 9
	CmdSetMember      CommandType = 10
	CmdSuspendJobs    CommandType = 11
	CmdSetConfig      CommandType = 12
	CmdPutQOS         CommandType = 13
	CmdPutAccount     CommandType = 14
	CmdPutUser        CommandType = 15
	CmdUpdateJob      CommandType = 16
	CmdPurgeJobs      CommandType = 17
	CmdPutPartition   CommandType = 18
	CmdSeedConfig     CommandType = 19
	CmdPutToken       CommandType = 20
	CmdRevokeToken    CommandType = 21
	CmdSetRole        CommandType = 22
	CmdAuditRecords   CommandType = 23
	CmdForgetNodeKey  CommandType = 24
	CmdUseJoinToken   CommandType = 25
	CmdNodeAttest     CommandType = 26
	CmdRequeueJobs    CommandType = 27
	// 28 to 34 belong to live migration and checkpoints (migrations.go).
	CmdMigrateJobs      CommandType = 28
	CmdMigrationReports CommandType = 29
	CmdExpireMigrations CommandType = 30
	CmdCancelMigrations CommandType = 31
	// Checkpoints (checkpoints.go).
	CmdCheckpointJobs    CommandType = 32
	CmdCheckpointReports CommandType = 33
	CmdRestoreJobs       CommandType = 34
	// 35 to 45 belong to other features (35, 36: reservations.go); 46 to 49
	// to multi-node jobs and steps.
	CmdSetNodeFeatures CommandType = 46
	CmdSteps           CommandType = 47
	// Job notifications (mail.go) have the numbers from 50 to 53.
	CmdMailTimeEvents CommandType = 50
	CmdClaimNotices   CommandType = 51
	CmdNoticesDone    CommandType = 52
	// scontrol top (top.go).
	CmdTopJobs CommandType = 53
)

// SubmitJobs creates jobs. The leader assigns consecutive ids starting at
// FirstID; a job whose request id was seen before is not created again and
// its reserved id stays unused.
type SubmitJobs struct {
	Now     time.Time `json:"now"`
	FirstID uint64    `json:"first_id"`
	Jobs    []JobSpec `json:"jobs"`
	// Blobs are the scripts, environments and chunks the jobs name that
	// the state may not hold yet, each once (see Blob).
	Blobs []BlobRecord `json:"blobs,omitempty"`
}

// CancelJobs cancels jobs by id; pending ones end at once, running ones go
// COMPLETING until their node confirms.
type CancelJobs struct {
	Now time.Time `json:"now"`
	IDs []uint64  `json:"ids"`
	By  string    `json:"by,omitempty"`
	// Tasks are array tasks not started yet, taken out of their array's
	// pending record (started tasks have records of their own, in IDs).
	Tasks []api.TaskRef `json:"tasks,omitempty"`
	// Preempt is set when the scheduler preempts the jobs: they end
	// PREEMPTED (cancel) or go back to the queue (requeue).
	Preempt api.PreemptMode `json:"preempt,omitempty"`
}

// HoldRelease holds or releases pending jobs. By is who asked; Admin says
// they are an administrator, whose hold (JobHeldAdmin) only an
// administrator may release, as in Slurm.
type HoldRelease struct {
	Now   time.Time `json:"now"`
	IDs   []uint64  `json:"ids"`
	Hold  bool      `json:"hold"`
	By    string    `json:"by,omitempty"`
	Admin bool      `json:"admin,omitempty"`
}

// RequeueJobs puts jobs back in the queue for another run, as Slurm's
// scontrol requeue does: a running or suspended job is stopped and becomes
// PENDING once its nodes confirm, a finished one (not yet purged) becomes
// PENDING at once; its Restarts count grows. Hold holds it as well
// (requeuehold), as a user's hold, or an administrator's when Admin. By is
// who asked.
type RequeueJobs struct {
	Now   time.Time `json:"now"`
	IDs   []uint64  `json:"ids"`
	Hold  bool      `json:"hold,omitempty"`
	By    string    `json:"by,omitempty"`
	Admin bool      `json:"admin,omitempty"`
}

// RegisterNode adds a node or records its daemon's restart. Key is the
// fingerprint of the key its daemon proved itself with (its certificate's
// public key; empty without TLS), stamped by the leader: the first one a
// node registers with is its key from then on, and a registration with
// another is refused until an operator forgets it (ForgetNodeKey).
type RegisterNode struct {
	Now  time.Time    `json:"now"`
	Info api.NodeInfo `json:"info"`
	Key  string       `json:"key,omitempty"`
}

// SetNodeFeatures sets a node's features in place of those its daemon
// reports (an operator's `corral node update NAME Features=...`), or with
// Reset gives them back to the daemon's. By is who asked.
type SetNodeFeatures struct {
	Node     string   `json:"node"`
	Features []string `json:"features,omitempty"`
	Reset    bool     `json:"reset,omitempty"`
	By       string   `json:"by,omitempty"`
}

// ForgetNodeKey lets a node's next registration bring a new key (a
// reinstalled node's).
type ForgetNodeKey struct {
	Node string `json:"node"`
	By   string `json:"by,omitempty"`
}

// NodeHeartbeats records when the leader last heard from nodes; the leader
// coalesces many heartbeats into one entry.
type NodeHeartbeats struct {
	Seen map[string]time.Time `json:"seen"`
}

// JobReports records what node daemons said about their jobs.
type JobReports struct {
	Now     time.Time `json:"now"`
	Node    string    `json:"node"`
	BootID  string    `json:"boot_id"`
	Reports []api.JobReport
}

// NodeDown marks nodes that stopped answering as DOWN.
type NodeDown struct {
	Now    time.Time `json:"now"`
	Nodes  []string  `json:"nodes"`
	Reason string    `json:"reason"`
}

// NodeDrain drains or resumes a node.
type NodeDrain struct {
	Now    time.Time `json:"now"`
	Node   string    `json:"node"`
	Drain  bool      `json:"drain"`
	Reason string    `json:"reason,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
	// Health marks the node's health check's drain or resume: a drain
	// leaves a node someone else drained as it is, a resume applies only
	// to a node the health check drained (By api.HealthCheckUser).
	Health bool `json:"health,omitempty"`
	// Migrate drains the node by moving its jobs to other nodes (live
	// migration) rather than waiting for them to end.
	Migrate bool `json:"migrate,omitempty"`
}

// SuspendJobs pauses running jobs (Suspend) or continues suspended ones.
// Suspended jobs keep their allocation; their elapsed time stops.
type SuspendJobs struct {
	Now     time.Time `json:"now"`
	IDs     []uint64  `json:"ids"`
	Suspend bool      `json:"suspend"`
	// Preempt suspends for preemption (the job's CPUs are lent to the
	// preemptor, By) or resumes such a job (it takes them back).
	Preempt bool   `json:"preempt,omitempty"`
	By      uint64 `json:"by,omitempty"`
	// ByUser is who asked for a suspend or resume a user requested (the
	// request's principal).
	ByUser string `json:"by_user,omitempty"`
}

// SetConfig changes scheduler settings by name (`corral config set`).
type SetConfig struct {
	Settings [][2]string `json:"settings"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// PutQOS adds, replaces or deletes a QoS.
type PutQOS struct {
	QOS    api.QOS `json:"qos"`
	Delete bool    `json:"delete,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// PutAccount adds, replaces or deletes an account of the fair-share tree.
type PutAccount struct {
	Account api.Account `json:"account"`
	Delete  bool        `json:"delete,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// PutUser adds, replaces or deletes a user's association with an account.
type PutUser struct {
	User   api.AccountUser `json:"user"`
	Delete bool            `json:"delete,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// SetMember records a controller's HTTP address so followers can forward
// writes to whichever member leads.
type SetMember struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}
