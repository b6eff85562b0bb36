package api

import "time"

// NodeState is a node's state as sinfo shows it.
type NodeState string

// Node states. Append only.
const (
	NodeIdle      NodeState = "IDLE"
	NodeMixed     NodeState = "MIXED"
	NodeAllocated NodeState = "ALLOCATED"
	NodeDown      NodeState = "DOWN"
	NodeDrained   NodeState = "DRAINED"
	NodeDraining  NodeState = "DRAINING"
	NodeUnknown   NodeState = "UNKNOWN"
	// NodeMaint is a node in a maintenance reservation that is in force
	// (sinfo's maint); NodeReserved an idle node in another reservation
	// that is in force (resv).
	NodeMaint    NodeState = "MAINT"
	NodeReserved NodeState = "RESERVED"
)

// NodeInfo is what a node daemon reports about itself when it registers.
type NodeInfo struct {
	Name       string   `json:"name"`
	CPUs       int      `json:"cpus"`
	MemMB      int64    `json:"mem_mb"`
	Partitions []string `json:"partitions,omitempty"`
	Runner     string   `json:"runner"`
	// BootID changes every time the daemon starts; the controller uses it to
	// tell a restart from a heartbeat.
	BootID  string `json:"boot_id"`
	Version string `json:"version,omitempty"`
	// Running lists the jobs of which the daemon holds a run: one that is
	// still running, or one that ended and whose report did not fit in
	// Reports (it follows as a report). The controllers fail the other
	// jobs they placed on the node when its boot id changed: those runs
	// were lost with the daemon's previous incarnation.
	Running []uint64 `json:"running,omitempty"`
	// Reports are the daemon's reports not acknowledged yet, at most
	// MaxRegisterReports of them: how the runs that ended while no daemon
	// (or no controller) listened ended. The controllers apply them as
	// reports before they decide what the node lost, and a successful
	// registration acknowledges exactly these. They are not kept in the
	// node's record.
	Reports []JobReport `json:"reports,omitempty"`
	// Images and Accel describe what the vm runner offers (empty for the
	// process runner).
	Images []string `json:"images,omitempty"`
	// Inventory is the node's NUMA topology, GPUs and SR-IOV functions;
	// nil when the daemon reported none.
	Inventory *Inventory `json:"inventory,omitempty"`
	Accel     string     `json:"accel,omitempty"`
	// OverheadMB is the memory the runner itself uses per job beyond the
	// job's own (QEMU's per-VM overhead); the scheduler counts it so a
	// node never over-commits its RAM.
	OverheadMB int64 `json:"overhead_mb,omitempty"`
	// TmpMB is the size of the node's local scratch file system (MiB;
	// Slurm's TmpDisk): jobs ask for it with sbatch --tmp, and the
	// scheduler hands it out as a consumable resource.
	TmpMB int64 `json:"tmp_mb,omitempty"`
	// APIAddr is the node daemon's job API (http://HOST:PORT), which the
	// controllers proxy exec, signals, files and output to; empty when the
	// daemon serves none.
	APIAddr string `json:"api_addr,omitempty"`
	// Probing says the node's runner is still testing the host (the vm
	// runner boots a test guest to choose its accelerator and measure its
	// memory per VM), so Accel and OverheadMB are not known yet: the
	// controllers place no new job on the node until it registers again
	// without it. The jobs it already runs keep running. A daemon probes
	// after it registered, so that a restarted one re-adopts its jobs
	// within their lease however slow the probe is.
	Probing bool `json:"probing,omitempty"`
	// Migrate says the daemon can be either side of a live migration (its
	// runner can, and it serves the job API the stream comes in through):
	// the controllers migrate no job to or from a node without it.
	Migrate bool `json:"migrate,omitempty"`
	// CheckpointDir is the shared directory the node writes checkpoints
	// to (noded --checkpoint-dir with --checkpoint-shared): a checkpoint
	// there can be restored on any node with the same; empty when the
	// node keeps its checkpoints to itself.
	CheckpointDir string `json:"checkpoint_dir,omitempty"`
	// Overlay is where the node's end of its multi-node jobs' private
	// networks listens, "ADDR:PORT" (UDP, VXLAN): an address of the node
	// on the network between the nodes; empty when the node offers none
	// (ParseOverlay reads it).
	Overlay string `json:"overlay,omitempty"`
	// Features are the node's features as its daemon reports them
	// (`corral noded --features a,b`), which jobs ask for with
	// --constraint; an operator may replace them (SetNodeFeatures).
	Features []string `json:"features,omitempty"`
}

// MaxNodeFeatures bounds the features of one node.
const MaxNodeFeatures = 64

// NodeFeaturesRequest sets the features of a node in place of those its
// daemon reports (`corral node update NAME Features=a,b`), or, with Reset,
// gives them back to the daemon's report.
type NodeFeaturesRequest struct {
	Node     string   `json:"node"`
	Features []string `json:"features"`
	Reset    bool     `json:"reset,omitempty"`
}

// MaxRegisterReports bounds NodeInfo.Reports; a daemon with more pending
// reports names the rest's jobs in NodeInfo.Running and sends them after it
// registered.
const MaxRegisterReports = 512

// MaxReportMessage bounds JobReport.Message in bytes; a daemon shortens a
// longer one.
const MaxReportMessage = 1024

// NodeAck is the controllers' answer to a registration or a heartbeat: the
// node's lease, and for a registration the Raft index it was applied at.
type NodeAck struct {
	// Index is the Raft index at or after which the node's registration is
	// applied (0 in a heartbeat's answer). The daemon reads its desired
	// state at this index or later, so that a member that lags cannot hand
	// a restarted daemon a state from before its registration.
	Index uint64 `json:"index,omitempty"`
	// LeaseMS is the node's lease in milliseconds: a node that has not had
	// a registration, heartbeat or report acknowledged by a leader for
	// that long stops its jobs itself. 0 means the controllers did not say
	// (the daemon keeps what it knew).
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// NodeTimeoutMS is how long after the last message they acknowledged
	// the controllers declare the node DOWN and requeue its jobs. The
	// daemon sizes its kill grace so that a stopped job is gone well
	// before then.
	NodeTimeoutMS int64 `json:"node_timeout_ms,omitempty"`
	// StartTimes says the controllers take JobReport.StartSeconds; the
	// daemon sends it only then (a controller of an earlier release
	// refuses fields it does not know).
	StartTimes bool `json:"start_times,omitempty"`
}

// Node is a node as the controllers hold it.
type Node struct {
	NodeInfo
	// Down is set by liveness when heartbeats stop; Drain by an operator.
	Down   bool   `json:"down,omitempty"`
	Drain  bool   `json:"drain,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DrainMigrate says the drain moves the node's jobs away by live
	// migration; DrainNote says which of them stay, and why (the drain
	// waits for them).
	DrainMigrate bool   `json:"drain_migrate,omitempty"`
	DrainNote    string `json:"drain_note,omitempty"`
	// ReasonUser and ReasonTime are who set Reason and when (sinfo -R's
	// USER and TIMESTAMP): the operator who drained the node, or "root"
	// for what the controllers decided themselves.
	ReasonUser string    `json:"reason_user,omitempty"`
	ReasonTime time.Time `json:"reason_time,omitempty"`
	Registered time.Time `json:"registered"`
	LastSeen   time.Time `json:"last_seen"`
	// AllocCPUs and AllocMemMB sum the active jobs placed on the node.
	AllocCPUs int `json:"alloc_cpus"`
	// AllocTmpMB is the scratch space (TmpMB) its jobs hold (--tmp).
	AllocTmpMB int64 `json:"alloc_tmp_mb,omitempty"`
	AllocMemMB int64 `json:"alloc_mem_mb"`
	// AllocIndex is the Raft index at which the node's allocation list
	// last changed; node daemons wait on it.
	AllocIndex uint64 `json:"alloc_index"`
	// Jobs are the jobs of the node's active allocations; Allocs the
	// allocations themselves.
	Jobs   []uint64 `json:"jobs,omitempty"`
	Allocs []uint64 `json:"allocs,omitempty"`
	// ActiveFeatures are the features jobs' constraints are matched
	// against: an operator's (FeaturesBy names who set them), else the
	// daemon's (NodeInfo.Features).
	ActiveFeatures []string `json:"active_features,omitempty"`
	FeaturesBy     string   `json:"features_by,omitempty"`
	// Reservations are the reservations whole of the node that are in
	// force when the controllers answer, and Maint says one of them is a
	// maintenance reservation. The controllers fill them in for each
	// listing; the state does not keep them.
	Reservations []string `json:"reservations,omitempty"`
	Maint        bool     `json:"maint,omitempty"`
}

// State derives the sinfo state from the node's flags and load. A node
// whose runner is still probing the host is UNKNOWN, as Slurm shows a node
// whose slurmd has not finished registering. A node in a maintenance
// reservation in force is MAINT, an idle one in another reservation in
// force RESERVED, as sinfo shows them (maint, resv).
func (n *Node) State() NodeState {
	switch {
	case n.Down:
		return NodeDown
	case n.Drain && n.AllocCPUs > 0:
		return NodeDraining
	case n.Drain:
		return NodeDrained
	case n.Probing:
		return NodeUnknown
	case n.Maint:
		return NodeMaint
	case n.AllocCPUs == 0 && len(n.Reservations) > 0:
		return NodeReserved
	case n.AllocCPUs == 0:
		return NodeIdle
	case n.AllocCPUs >= n.CPUs:
		return NodeAllocated
	default:
		return NodeMixed
	}
}

// FreeCPUs returns the CPUs not held by active jobs.
func (n *Node) FreeCPUs() int { return n.CPUs - n.AllocCPUs }

// FreeMemMB returns the memory not held by active jobs.
func (n *Node) FreeMemMB() int64 { return n.MemMB - n.AllocMemMB }

// Allocation is one run a node should hold: its part of the node's desired
// state. Job is the job as the run needs it (its request, script and
// environment), with the allocation's node, resources, placement, start
// index and desired state (RUNNING, SUSPENDED, or COMPLETING with the
// FinalState it stops for) filled in.
type Allocation struct {
	// ID names the allocation; reports of its end carry it.
	ID  uint64 `json:"id,omitempty"`
	Job Job    `json:"job"`
	// Migration is set while the allocation takes part in a live
	// migration (its source or its destination).
	Migration *AllocMigration `json:"migration,omitempty"`
	// Checkpoint is set while the run is to be saved to a checkpoint, or
	// started from one.
	Checkpoint *AllocCheckpoint `json:"checkpoint,omitempty"`
}

// Desired is a node's desired state at a Raft index.
type Desired struct {
	Node        string       `json:"node"`
	Index       uint64       `json:"index"`
	Allocations []Allocation `json:"allocations"`
	// Known is false when the controllers have no record of the node; the
	// daemon must register again.
	Known bool `json:"known"`
	// Checkpoints are the checkpoint files the node keeps (of jobs that
	// have not ended); it removes the others of its checkpoint directory.
	Checkpoints []CheckpointFile `json:"checkpoints,omitempty"`
}

// JobReport is what a node says about one of its runs.
type JobReport struct {
	// Alloc is the allocation the run belongs to. A daemon that predates
	// allocation ids sends 0; JobID and StartIndex name the run then.
	Alloc uint64 `json:"alloc,omitempty"`
	JobID uint64 `json:"job_id"`
	// StartIndex identifies the run (see Job.StartIndex).
	StartIndex uint64   `json:"start_index"`
	State      JobState `json:"state"`
	ExitCode   int      `json:"exit_code"`
	Signal     int      `json:"signal,omitempty"`
	Message    string   `json:"message,omitempty"`
	// CPUSeconds and PeakMemKB are the run's CPU time and peak memory on
	// the node, everything its runner ran for it included (a VM's QEMU and
	// virtiofsd); 0 when the runner does not measure them.
	CPUSeconds float64 `json:"cpu_s,omitempty"`
	PeakMemKB  int64   `json:"peak_mem_kb,omitempty"`
	// StartSeconds is how long the node's runner took to start the run (a
	// VM's boot until the job's script ran); 0 when unknown (a run an
	// earlier daemon started). The controllers observe it in their
	// metrics (corral_vm_start_seconds) and do not keep it.
	StartSeconds float64 `json:"start_s,omitempty"`
	// VMStart says how the run's VM started: VMStartWarm (restored from
	// a snapshot of a guest the node booted earlier) or VMStartCold
	// (booted); empty for a run without a VM.
	VMStart string `json:"vm_start,omitempty"`
}

// The values of JobReport.VMStart and Job.VMStart.
const (
	VMStartWarm = "warm"
	VMStartCold = "cold"
)

// NodeStatus is a node daemon's report: its identity and what happened to
// its jobs since the last report.
type NodeStatus struct {
	Name    string      `json:"name"`
	BootID  string      `json:"boot_id"`
	Reports []JobReport `json:"reports,omitempty"`
	// Health is the result of the node's health check (noded
	// --health-check, Slurm's HealthCheckProgram), when it ran one.
	Health *HealthReport `json:"health,omitempty"`
	// Migrations are the node's reports on the live migrations it takes
	// part in (at most MaxMigrationReports); Checkpoints its reports on
	// checkpoints (as many at most).
	Migrations  []MigrationReport  `json:"migrations,omitempty"`
	Checkpoints []CheckpointReport `json:"checkpoints,omitempty"`
}

// HealthReport is one run of a node's health check: whether it passed,
// and what it printed (a failing check's output is the node's drain
// reason).
type HealthReport struct {
	OK     bool   `json:"ok"`
	Output string `json:"output,omitempty"`
}

// HealthCheckUser is who a drain by the health check is recorded as (its
// ReasonUser): a passing check resumes only a node it drained itself.
const HealthCheckUser = "healthcheck"

// MaxHealthOutput bounds a health report's output.
const MaxHealthOutput = 256
