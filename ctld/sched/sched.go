package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// Snapshot is the state one pass decides over. Jobs and nodes are read only.
type Snapshot struct {
	Now time.Time
	// Pending holds the jobs in state PENDING, in any order.
	Pending []*state.Job
	// Nodes holds every node with its current allocation figures.
	Nodes []*state.Node
	// Partitions are the known partitions; the one marked Default receives
	// jobs that name none.
	Partitions []api.Partition
	// Lookup returns any job by id (for dependencies); nil when unknown.
	Lookup func(id uint64) *state.Job
	// Array returns every record of array id (its pending record, if it
	// still has tasks to start, and each started task's), for
	// dependencies on a whole array; nil for a job that is no array.
	Array func(id uint64) []*state.Job
	// LookupTask returns the record holding task of array (its own, or
	// the array's pending record when it has not started); nil when
	// unknown.
	LookupTask func(array uint64, task int) *state.Job
	// DefMemPerCPU is the memory (MiB) given per CPU to jobs that ask for
	// none.
	DefMemPerCPU int64
	// Running holds the active allocations with their jobs (RUNNING,
	// SUSPENDED, COMPLETING). Backfill reads when each frees its resources
	// from its start time and its job's time limit.
	Running []Run
	// Policy is how the pass orders starts; the zero value is PolicyEASY.
	Policy Policy
	// Reservations are the previous pass's (Plan.Reservations). Under
	// PolicyConservative a job keeps its reservation until it can move
	// earlier: each is held while the jobs before it are placed, and
	// released only when its own job is placed again, so a promised start
	// never gets later. Other policies ignore them, and NewSnapshot
	// reads them from the state only under PolicyConservative.
	Reservations map[uint64]Reservation
	// Moves are the running jobs the pass may move to other nodes by live
	// migration (migrate.go), in order.
	Moves []Move
	// Going are the active allocations given up already, without the
	// pass: the sources of placed live migrations and the runs being
	// saved to checkpoints. A preemption counts them as freed, as it does
	// the runs being stopped. Nil: none.
	Going map[uint64]bool
	// Stuck are the running jobs a preemption cannot move or park, by
	// job id (filled only for the jobs whose QoS or partition preempts
	// them by migration or checkpoint): a migration blocker, or an
	// earlier such preemption of the job failed. Nil: none.
	Stuck map[uint64]Stuck

	// Advance are the advance reservations (scontrol create
	// reservation), by name; the pass holds their nodes for the jobs that
	// name them (advance.go).
	Advance []*api.Reservation

	// Policy objects. With zero weights a job's priority is its Priority
	// field less its nice value; with no QoS nothing is limited or
	// preempted.
	Config api.SchedConfig
	QOS    map[string]*api.QOS
	// Fairshare returns an association's fair-share factor in [0,1]; nil
	// means 0 for everyone.
	Fairshare func(account, user string) float64
}

// Run is one active allocation and its job: what a running job holds on a
// node.
type Run struct {
	Alloc *state.Allocation
	Job   *state.Job
}

// Stuck says what a preemption cannot do to a running job: migrate it
// (the last preemption by migration was aborted, or it cannot migrate at
// all), or checkpoint it (its last checkpoint failed, or it cannot be
// saved at all).
type Stuck struct {
	NoMigrate, NoCheckpoint bool
}

// Reservation is where and when a pending job is expected to start.
type Reservation struct {
	Start time.Time
	Node  string
}

// Policy is the scheduling policy of a pass.
type Policy string

// Policies.
const (
	// PolicyFCFS starts jobs strictly in priority order: the first job of a
	// partition group that cannot start stops every later one.
	PolicyFCFS Policy = "fcfs"
	// PolicyEASY reserves resources for the first job of each partition
	// group that cannot start, at its earliest start; later jobs start now
	// only where they do not delay that reservation.
	PolicyEASY Policy = "easy"
	// PolicyConservative gives every pending job that cannot start a
	// reservation; a job starts now only if it delays none of them.
	PolicyConservative Policy = "conservative"
)

// ParsePolicy reads a policy name; "" is PolicyEASY.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(strings.ToLower(s)); p {
	case "":
		return PolicyEASY, nil
	case PolicyFCFS, PolicyEASY, PolicyConservative:
		return p, nil
	}
	return "", fmt.Errorf("unknown scheduling policy %q: use fcfs, easy or conservative", s)
}

// Start is one job the plan starts.
type Start struct {
	JobID uint64
	Node  string
	CPUs  int
	MemMB int64
	// OverheadMB is the node runner's own memory charged for the job.
	OverheadMB int64
	// TmpMB is the node's scratch space the job holds (--tmp).
	TmpMB int64
	// Array is set when the start is one task of an array: JobID is the
	// array's pending record and Task the task's index.
	Array bool
	Task  int
	// Placement is the exact set inside the node, for nodes that reported
	// their inventory.
	Placement *api.Placement
}

// Plan is the outcome of a pass.
type Plan struct {
	Starts []Start
	// Reasons gives every job left pending its reason.
	Reasons map[uint64]api.Reason
	// NextWake is the earliest time a pending job may become eligible by
	// the clock alone (a begin time, or the end of an after:<id>+<minutes>
	// delay); zero when none waits for one.
	NextWake time.Time
	// Estimates gives the jobs that hold a reservation their expected start
	// time (squeue --start).
	Estimates map[uint64]time.Time
	// Reservations are the same reservations with their nodes, for the
	// next pass's Snapshot.Reservations.
	Reservations map[uint64]Reservation
	// Cancels lists jobs whose dependency can never be met and that asked
	// to be cancelled then (--kill-on-invalid-dep=yes).
	Cancels []uint64
	// Deadlines lists pending jobs that could no longer end by their
	// --deadline: they end DEADLINE.
	Deadlines []uint64
	// Preemptions are running jobs to cancel, requeue or suspend so that a
	// job of a QoS allowed to preempt theirs can start; Resumes are jobs
	// suspended by preemption whose CPUs are free again.
	Preemptions []Preemption
	Resumes     []uint64
	// Invalid gives the jobs the pass cannot handle (Reasons holds
	// ReasonInvalidJob for them) and why: a request outside CheckJob's
	// bounds, or a failure while handling it. The controller holds them.
	Invalid map[uint64]string
	// InvalidNodes gives the nodes the pass left out and why (CheckNode).
	InvalidNodes map[string]string
	// Migrations are the moves the pass placed (migrate.go); DrainNotes
	// say, for each node drained with --migrate, which of its jobs stay
	// and why.
	Migrations []Migration
	DrainNotes map[string]string
}

// Preemption is one victim: the job to preempt, how, and for which job.
type Preemption struct {
	Victim    uint64
	Preemptor uint64
	Mode      api.PreemptMode
}

// MemRequest returns the memory a job is allocated on its node; MemAll for
// one that asks for all of it (--mem=0).
func MemRequest(j *state.Job, defPerCPU int64) int64 {
	if j.Spec.MemAll {
		return MemAll
	}
	if m := j.Spec.MemMB(); m > 0 {
		return m
	}
	return defPerCPU * int64(j.Spec.CPUs())
}

// Schedule runs one pass over the snapshot. A job or node the pass cannot
// handle (see CheckJob and CheckNode) is left out and named in
// Plan.Invalid or Plan.InvalidNodes; a failure while handling one job is
// contained the same way, so one record never stops the pass.
//
// Schedule keeps nothing between calls; a caller that runs passes one
// after another can keep their buffers with a Pass.
func Schedule(s *Snapshot) Plan {
	var p Pass
	return p.Schedule(s)
}

// Schedule runs one pass over the snapshot, as the package's Schedule does,
// reusing the buffers of p's previous pass. The plan's Starts and maps are
// p's own: they stay valid until p's next pass.
func (p *Pass) Schedule(s *Snapshot) Plan {
	plan := p.newPlan(len(s.Pending))
	s = checkSnapshot(s, &plan)
	p.deps = deps{s: s}
	dp := &p.deps
	p.priority = newPassPriority(s)
	pp := &p.priority
	pl := &p.placer
	pl.reset(s)
	pl.deps = dp
	// Jobs of a higher partition tier come first (Slurm's PriorityTier),
	// then higher priority, then earlier submission, then lower id.
	// The keys are read once per job, not in every comparison.
	keyed := p.keyed[:0]
	if cap(keyed) < len(s.Pending) {
		keyed = make([]orderKey, 0, len(s.Pending))
	}
	eachContained(len(s.Pending), func(i int) {
		j := s.Pending[i]
		if !j.Spec.Deadline.IsZero() {
			if late, at := pl.pastDeadline(j); late {
				plan.Deadlines = append(plan.Deadlines, j.ID)
				plan.Reasons[j.ID] = api.ReasonDeadline
				return
			} else if plan.NextWake.IsZero() || at.Before(plan.NextWake) {
				plan.NextWake = at
			}
		}
		r, wake := dp.notReady(j)
		if r == "" {
			keyed = append(keyed, orderKey{j: j, tier: pl.tier(j), prio: pp.of(j)})
			return
		}
		plan.Reasons[j.ID] = r
		if r == api.ReasonDependencyNeverSatisfied && j.Spec.KillOnInvalidDep {
			plan.Cancels = append(plan.Cancels, j.ID)
		}
		if !wake.IsZero() && (plan.NextWake.IsZero() || wake.Before(plan.NextWake)) {
			plan.NextWake = wake
		}
	}, func(i int, err error) { plan.invalid(s.Pending[i].ID, err) })
	slices.SortFunc(keyed, compareOrder)
	ready := p.ready[:0]
	if cap(ready) < len(keyed) {
		ready = make([]*state.Job, 0, len(keyed))
	}
	for i := range keyed {
		ready = append(ready, keyed[i].j)
	}
	p.keyed, p.ready = keyed, ready

	if err := contained(func() { pl.resume(&plan) }); err != nil {
		plan.Resumes = nil // retried by the next pass
	}
	pl.placeMoves(&plan)
	if err := contained(func() { pl.keepReservations(ready) }); err != nil {
		pl.kept = nil
	}
	pl.placeAll(ready, &plan)
	if len(pl.estimates) > 0 {
		plan.Estimates = pl.estimates
		plan.Reservations = pl.reservations
	}
	if pl.adv != nil && pl.adv.wake > 0 && len(s.Pending) > 0 {
		// A window that opens or closes may let a job start.
		if w := time.Unix(0, pl.adv.wake).UTC(); plan.NextWake.IsZero() || w.Before(plan.NextWake) {
			plan.NextWake = w
		}
	}
	slices.Sort(plan.Cancels)
	slices.Sort(plan.Deadlines)
	p.starts = plan.Starts
	return plan
}

// compareOrder orders ready jobs: higher tier, then higher priority, then
// as before does.
func compareOrder(a, b orderKey) int {
	switch {
	case a.tier != b.tier:
		return cmp.Compare(b.tier, a.tier) // higher first
	case a.prio != b.prio:
		return cmp.Compare(b.prio, a.prio)
	}
	return compareJobs(a.j, b.j)
}

// before orders jobs by priority, then submit time, then id.
func before(a, b *state.Job) bool { return compareJobs(a, b) < 0 }

// compareJobs is before as a comparison. Submit times compare as
// wall-clock times, in Unix seconds and nanoseconds (what the log
// replicates), which costs a fraction of time.Time's comparisons: with
// equal priorities, as in a simulated trace, every comparison of the
// pass's sort comes here.
func compareJobs(a, b *state.Job) int {
	if a.Priority != b.Priority {
		return cmp.Compare(b.Priority, a.Priority) // higher first
	}
	if as, bs := a.SubmitTime.Unix(), b.SubmitTime.Unix(); as != bs {
		return cmp.Compare(as, bs)
	}
	if an, bn := a.SubmitTime.Nanosecond(), b.SubmitTime.Nanosecond(); an != bn {
		return cmp.Compare(an, bn)
	}
	return cmp.Compare(a.ID, b.ID)
}

func defaultPartition(parts []api.Partition) string {
	for _, p := range parts {
		if p.Default {
			return p.Name
		}
	}
	if len(parts) > 0 {
		return parts[0].Name
	}
	return api.DefaultPartition
}

// orderKey is a ready job with what the pass orders it by, read once per
// job rather than in every comparison. It stays small: the sort of a
// 100,000-job queue moves it about.
type orderKey struct {
	j    *state.Job
	tier int
	prio int64
}

// pastDeadline reports whether pending job j could no longer end by its
// --deadline if it started now, as Slurm judges it: its time limit (or its
// partition's default or maximum) from now ends after the deadline; a job
// without any limit only once the deadline itself has passed. It also
// returns a second past the last moment the job could still make it, when
// the pass is to look again (NextWake).
func (pl *placer) pastDeadline(j *state.Job) (bool, time.Time) {
	now := time.Unix(0, pl.now)
	limit := jobLimit(j, pl.partition(pl.partitionOf(j)))
	if limit >= Horizon {
		limit = 0
	}
	at := j.Spec.Deadline.Add(-limit)
	return now.After(at), at.Add(time.Second)
}
