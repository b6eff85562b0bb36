package api

import "time"

// ReasonCheckpointed is the reason of a job parked in a checkpoint file
// (SUSPENDED, holding no allocation): corral restore brings it back.
const ReasonCheckpointed Reason = "Checkpointed"

// CheckpointRequest asks for checkpoints of running jobs (POST
// /v1/jobs/checkpoint) or, with Restore, for checkpointed jobs to run
// again from their checkpoints (on node To, or any node that may take the
// file when empty). The answer is a HoldResponse.
type CheckpointRequest struct {
	IDs     []uint64 `json:"ids"`
	Restore bool     `json:"restore,omitempty"`
	To      string   `json:"to,omitempty"`
}

// CheckpointFile is a checkpoint a node holds: the job and the allocation
// it saved, its path on the node, its size and SHA-256 (hex), checked
// before a restore.
type CheckpointFile struct {
	Job    uint64 `json:"job"`
	Alloc  uint64 `json:"alloc"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// AllocCheckpoint is an allocation's checkpoint work in its node's desired
// state: Save the run to a checkpoint (the run ends once it is saved), or
// start it from the checkpoint Restore names, the job's time limit counting
// on from RanS.
type AllocCheckpoint struct {
	Save    bool            `json:"save,omitempty"`
	Restore *CheckpointFile `json:"restore,omitempty"`
	RanS    float64         `json:"ran_s,omitempty"`
}

// CheckpointReport is what a node says of a checkpoint: saved (with its
// file), restored, or failed (with why).
type CheckpointReport struct {
	Job    uint64 `json:"job"`
	Alloc  uint64 `json:"alloc"`
	Event  string `json:"event"`
	Path   string `json:"path,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// TookMS is how long the save or the restore took.
	TookMS  int64  `json:"took_ms,omitempty"`
	Message string `json:"message,omitempty"`
}

// JobCheckpoint is a job's checkpoint as `corral show job` shows it.
type JobCheckpoint struct {
	Phase       string    `json:"phase"`
	Node        string    `json:"node"`
	Path        string    `json:"path,omitempty"`
	Size        int64     `json:"size,omitempty"`
	SavedAt     time.Time `json:"saved_at,omitzero"`
	SaveMS      int64     `json:"save_ms,omitempty"`
	RestoredAt  time.Time `json:"restored_at,omitzero"`
	RestoreMS   int64     `json:"restore_ms,omitempty"`
	RestoredOn  string    `json:"restored_on,omitempty"`
	Error       string    `json:"error,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	// By is who asked for the save: a user, or "job N" for a job of a
	// QoS that preempts by checkpoint.
	By string `json:"by,omitempty"`
}
