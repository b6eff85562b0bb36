package state

import (
	"slices"
	"time"

	"corral/api"
)

// Allocation is the exact resources one node gives one run of a job: its
// CPUs and memory, and on a node that reported its inventory the exact
// CPUs, NUMA memory, hugepages, GPUs and VFs (Placement). A pending job
// has none; a running single-node job one; a multi-node job one per node
// (all made by one start, so they share their StartIndex, each with its
// Rank) and a migrating job two. A node daemon watches the allocations of
// its node and reports their ends by allocation id.
type Allocation struct {
	ID   uint64 `json:"id"`
	Job  uint64 `json:"job"`
	Node string `json:"node"`
	// Rank is the node's place in a multi-node run (SLURM_NODEID): 0 runs
	// the batch script, the others wait for the job's steps.
	Rank  int   `json:"rank,omitempty"`
	CPUs  int   `json:"cpus"`
	MemMB int64 `json:"mem_mb"`
	// OverheadMB is the node runner's own memory charged for the run.
	OverheadMB int64 `json:"overhead_mb,omitempty"`
	// TmpMB is the node-local scratch space the run holds (--tmp).
	TmpMB     int64          `json:"tmp_mb,omitempty"`
	Placement *api.Placement `json:"placement,omitempty"`

	// Desired is what the node is to do with the run; Status what is
	// known of it.
	Desired AllocDesired `json:"desired"`
	Status  AllocStatus  `json:"status"`
	// StopAs is the state the job takes once a stopping run is gone
	// (CANCELLED, PREEMPTED, TIMEOUT...; PENDING for a requeue).
	StopAs api.JobState `json:"stop_as,omitempty"`
	// EndState is how an ended run ended, as reported or concluded.
	EndState api.JobState `json:"end_state,omitempty"`

	// StartIndex is the Raft index of the plan that made the allocation:
	// with the job id it names the run on its node.
	StartIndex uint64    `json:"start_index"`
	StartTime  time.Time `json:"start_time"`
	EndTime    time.Time `json:"end_time,omitempty"`
	// SuspendedFor accumulates the time the run spent suspended;
	// SuspendTime is when the current suspension began.
	SuspendedFor time.Duration `json:"suspended_for,omitempty"`
	SuspendTime  time.Time     `json:"suspend_time,omitempty"`
	// CPUsLent is set while the run is suspended by preemption: its CPUs
	// are lent to the preemptor (PreemptedBy), its memory stays held.
	CPUsLent    bool   `json:"cpus_lent,omitempty"`
	PreemptedBy uint64 `json:"preempted_by,omitempty"`
	// CPUSeconds and PeakMemKB are what the run used on its node, as its
	// node measured it (the VM's cgroup) and reported at its end; 0 when
	// not measured.
	CPUSeconds float64 `json:"cpu_s,omitempty"`
	PeakMemKB  int64   `json:"peak_mem_kb,omitempty"`
	// VMStart is how the run's VM started, as its node reported it:
	// api.VMStartWarm or api.VMStartCold; empty without a VM.
	VMStart string `json:"vm_start,omitempty"`
	// Leaving is set on an allocation a live migration gives up: the
	// source once the job switched over to its destination, the
	// destination of a migration that was aborted. Its end is not the
	// job's (migrations.go).
	Leaving bool `json:"leaving,omitempty"`
}

// AllocDesired is what the controllers want a node to do with a run.
type AllocDesired string

// Desired states of an allocation.
const (
	AllocRun     AllocDesired = "run"
	AllocSuspend AllocDesired = "suspend"
	AllocStop    AllocDesired = "stop"
)

// AllocStatus is what is known of a run.
type AllocStatus string

// Known states of an allocation.
const (
	// AllocActive: placed on its node, which runs it (or starts it once
	// it reads its desired state); it holds its resources.
	AllocActive AllocStatus = "active"
	// AllocEnded: the run is over (its node reported it, or it was lost
	// with its node) and holds nothing.
	AllocEnded AllocStatus = "ended"
)

// Active reports whether the run holds its node's resources.
func (a *Allocation) Active() bool { return a.Status == AllocActive }

// Elapsed returns how long the run has run at now, suspensions left out.
func (a *Allocation) Elapsed(now time.Time) time.Duration {
	end := now
	if !a.EndTime.IsZero() {
		end = a.EndTime
	}
	d := end.Sub(a.StartTime) - a.SuspendedFor
	if !a.SuspendTime.IsZero() {
		d -= end.Sub(a.SuspendTime)
	}
	return max(d, 0)
}

// HeldCPUs returns the CPUs the run takes from its node's count: none while
// they are lent to a preemptor or once it ended.
func (a *Allocation) HeldCPUs() int {
	if !a.Active() || a.CPUsLent {
		return 0
	}
	return a.ownCPUs()
}

// ownCPUs is what the run holds of its node's CPUs when they are not
// lent: its own and the idle threads of its cores (Placement.Idle).
func (a *Allocation) ownCPUs() int {
	if a.Placement != nil {
		return a.CPUs + len(a.Placement.Idle)
	}
	return a.CPUs
}

// HeldTmpMB returns the scratch space the run takes from its node while
// it is active.
func (a *Allocation) HeldTmpMB() int64 {
	if !a.Active() {
		return 0
	}
	return a.TmpMB
}

// HeldMemMB returns the memory the run takes from its node: its own and
// the runner's overhead, while it is active.
func (a *Allocation) HeldMemMB() int64 {
	if !a.Active() {
		return 0
	}
	return a.MemMB + a.OverheadMB
}

// jobState derives a job's state from its active allocations: COMPLETING
// while any is being stopped, SUSPENDED when all are suspended, RUNNING
// otherwise. ok is false when none is active: the job's own state stands.
func jobState(active []*Allocation) (st api.JobState, ok bool) {
	if len(active) == 0 {
		return "", false
	}
	suspended := 0
	for _, a := range active {
		switch a.Desired {
		case AllocStop:
			return api.StateCompleting, true
		case AllocSuspend:
			suspended++
		}
	}
	if suspended == len(active) {
		return api.StateSuspended, true
	}
	return api.StateRunning, true
}

// Used is what the active allocations of a node hold inside it.
type Used struct {
	CPUs map[int]bool
	Mem  map[int]int64 // MiB by NUMA node
	// Hugepages by NUMA node and page size (KiB).
	Hugepages map[[2]int64]int64
	Devices   map[string]bool // GPU and MIG UUIDs, VF addresses
}

// NewUsed returns an empty Used.
func NewUsed() *Used {
	return &Used{CPUs: map[int]bool{}, Mem: map[int]int64{}, Hugepages: map[[2]int64]int64{}, Devices: map[string]bool{}}
}

// Add records a placement as held (or, with sign -1, released).
func (u *Used) Add(p *api.Placement, sign int64) {
	for _, c := range p.CPUs {
		u.CPUs[c] = sign > 0
	}
	for _, c := range p.Idle {
		u.CPUs[c] = sign > 0
	}
	for _, m := range p.Mem {
		u.Mem[m.Node] += sign * m.MB
	}
	for _, h := range p.Hugepages {
		u.Hugepages[[2]int64{int64(h.Node), h.SizeKB}] += sign * h.Count
	}
	for _, d := range slices.Concat(p.GPUs, p.MIG, p.VFs) {
		u.Devices[d] = sign > 0
	}
}

// AddAlloc records what an active allocation holds inside its node: its
// placement, less its CPUs while they are lent to a preemptor.
func (u *Used) AddAlloc(a *Allocation) {
	if a.Placement == nil || !a.Active() {
		return
	}
	p := *a.Placement
	if a.CPUsLent {
		p.CPUs, p.Idle = nil, nil
	}
	u.Add(&p, 1)
}
