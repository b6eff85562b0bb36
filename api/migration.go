package api

import "time"

// StateMigrated is how a run that moved to another node ended: the source
// allocation of a completed live migration, as accounting records it. No
// job takes this state (the job goes on, RUNNING on its new node).
const StateMigrated JobState = "MIGRATED"

// Roles of an allocation in a live migration (AllocMigration.Role).
const (
	MigrationSource      = "source"
	MigrationDestination = "destination"
)

// AllocMigration is an allocation's part in a live migration, in a node's
// desired state: what its daemon does for it (see docs/migration.md).
type AllocMigration struct {
	// ID names the migration; the node's reports carry it.
	ID uint64 `json:"id"`
	// Role is "source" or "destination".
	Role string `json:"role"`
	// Phase is where the migration stands (requested, placed, prepared,
	// streaming, switchover, released).
	Phase string `json:"phase"`
	// Peer is the node on the other side; PeerAddr, for the source, is
	// the destination's job API, which the stream goes to.
	Peer     string `json:"peer"`
	PeerAddr string `json:"peer_addr,omitempty"`
	// Token is the stream's credential: the source shows it, the
	// destination takes the stream only with it.
	Token string `json:"token"`
	// DowntimeMS, BandwidthMiB and MaxTimeS bound the stream (the
	// source's).
	DowntimeMS   int64 `json:"downtime_ms"`
	BandwidthMiB int64 `json:"bandwidth_mib"`
	MaxTimeS     int64 `json:"max_time_s"`
	// RanS, for the destination once the migration switched over, is how
	// long the job had run (suspensions left out) when it did: the job's
	// time limit counts on from there.
	RanS float64 `json:"ran_s,omitempty"`
}

// MigrationReport is what a node daemon says of a migration it takes part
// in: one event (prepared, streaming, sent, loaded, resumed, failed) with
// its figures.
type MigrationReport struct {
	Migration uint64 `json:"migration"`
	// Alloc is the reporting node's allocation in it.
	Alloc uint64 `json:"alloc"`
	Event string `json:"event"`
	// TotalMS, StopMS and Bytes come with sent (the source's figures),
	// SwitchMS with resumed (the destination's wait for the word).
	TotalMS  int64 `json:"total_ms,omitempty"`
	StopMS   int64 `json:"stop_ms,omitempty"`
	SwitchMS int64 `json:"switch_ms,omitempty"`
	Bytes    int64 `json:"bytes,omitempty"`
	// Message says why, with failed.
	Message string `json:"message,omitempty"`
}

// MaxMigrationReports bounds NodeStatus.Migrations.
const MaxMigrationReports = 256

// Migration is one live migration of a job, as `corral show job` shows it.
type Migration struct {
	ID    uint64 `json:"id"`
	From  string `json:"from"`
	To    string `json:"to,omitempty"`
	Phase string `json:"phase"`
	// Cause is request, drain or preempt; By who asked.
	Cause       string    `json:"cause"`
	By          string    `json:"by,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	EndAt       time.Time `json:"end_at,omitzero"`
	// TotalMS is the stream's time, DowntimeMS how long the guest stood
	// still (StopMS at the source plus SwitchMS, the destination's wait
	// for the word to continue), Bytes the memory sent.
	TotalMS    int64 `json:"total_ms,omitempty"`
	DowntimeMS int64 `json:"downtime_ms,omitempty"`
	StopMS     int64 `json:"stop_ms,omitempty"`
	SwitchMS   int64 `json:"switch_ms,omitempty"`
	Bytes      int64 `json:"bytes,omitempty"`
	// Error says why an aborted migration was aborted.
	Error string `json:"error,omitempty"`
}

// MigrateRequest asks for live migrations (POST /v1/jobs/migrate): each
// job moves to node To (any node that fits when empty), or, with Cancel,
// its migration under way is aborted. The answer is a HoldResponse.
type MigrateRequest struct {
	IDs    []uint64 `json:"ids"`
	To     string   `json:"to,omitempty"`
	Cancel bool     `json:"cancel,omitempty"`
}
