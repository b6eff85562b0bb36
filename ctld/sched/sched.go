package sched

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
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
	// never gets later. Other policies ignore them.
	Reservations map[uint64]Reservation

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
}

// Preemption is one victim: the job to preempt, how, and for which job.
type Preemption struct {
	Victim    uint64
	Preemptor uint64
	Mode      api.PreemptMode
}

// MemRequest returns the memory a job is allocated on its node.
func MemRequest(j *state.Job, defPerCPU int64) int64 {
	if m := j.Spec.MemMB(); m > 0 {
		return m
	}
	return defPerCPU * int64(j.Spec.CPUs())
}

// Schedule runs one pass over the snapshot. A job or node the pass cannot
// handle (see CheckJob and CheckNode) is left out and named in
// Plan.Invalid or Plan.InvalidNodes; a failure while handling one job is
// contained the same way, so one record never stops the pass.
func Schedule(s *Snapshot) Plan {
	plan := Plan{Reasons: make(map[uint64]api.Reason, len(s.Pending))}
	s = checkSnapshot(s, &plan)
	ready := make([]*state.Job, 0, len(s.Pending))
	dp := &deps{s: s}
	prio := make(map[uint64]int64, len(s.Pending))
	total := totalCPUs(s.Nodes)
	for _, j := range s.Pending {
		var r api.Reason
		var wake time.Time
		if err := contained(func() {
			if r, wake = dp.notReady(j); r == "" {
				prio[j.ID] = Priority(j, s, total).Priority
			}
		}); err != nil {
			plan.invalid(j.ID, err)
			continue
		}
		if r != "" {
			plan.Reasons[j.ID] = r
			if r == api.ReasonDependencyNeverSatisfied && j.Spec.KillOnInvalidDep {
				plan.Cancels = append(plan.Cancels, j.ID)
			}
			if !wake.IsZero() && (plan.NextWake.IsZero() || wake.Before(plan.NextWake)) {
				plan.NextWake = wake
			}
			continue
		}
		ready = append(ready, j)
	}
	pl := newPlacer(s)
	// Jobs of a higher partition tier come first (Slurm's PriorityTier),
	// then higher priority, then earlier submission, then lower id.
	tier := make(map[uint64]int, len(ready))
	for _, j := range ready {
		tier[j.ID] = tierOf(j, pl.parts, pl.defPart)
	}
	sort.Slice(ready, func(a, b int) bool {
		ja, jb := ready[a], ready[b]
		if ta, tb := tier[ja.ID], tier[jb.ID]; ta != tb {
			return ta > tb
		}
		if pa, pb := prio[ja.ID], prio[jb.ID]; pa != pb {
			return pa > pb
		}
		return before(ja, jb)
	})

	pl.prio, pl.deps = prio, dp
	if err := contained(func() { pl.resume(&plan) }); err != nil {
		plan.Resumes = nil // retried by the next pass
	}
	if err := contained(func() { pl.keepReservations(ready) }); err != nil {
		pl.kept = nil
	}
	for _, j := range ready {
		pl.placeContained(j, &plan)
	}
	if len(pl.estimates) > 0 {
		plan.Estimates = pl.estimates
		plan.Reservations = pl.reservations
	}
	slices.Sort(plan.Cancels)
	return plan
}

// before orders jobs by priority, then submit time, then id.
func before(a, b *state.Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.SubmitTime.Equal(b.SubmitTime) {
		return a.SubmitTime.Before(b.SubmitTime)
	}
	return a.ID < b.ID
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

// deps evaluates dependencies for one pass. It memoizes which pending jobs
// can never run, so a chain whose link failed is reported as
// DependencyNeverSatisfied all the way down in the same pass.
type deps struct {
	s *Snapshot
	// never caches, per pending job id, whether its own dependency can
	// never be met; inProgress marks jobs being evaluated (a cycle).
	never map[uint64]depMemo
	// singletons indexes jobs by user and name, built on first use.
	singletons map[userName]*singletonState
}

type depMemo uint8

const (
	memoUnknown depMemo = iota
	memoInProgress
	memoNever
	memoMayRun
)

type userName struct{ user, name string }

// singletonState is what a singleton clause needs to know about a user's
// jobs of one name: whether one holds resources, and which pending
// singleton job comes first.
type singletonState struct {
	active bool
	first  *state.Job
}

// notReady returns why a job may not start yet regardless of resources, and
// when that changes by itself (begin time), or "" when it is ready.
func (d *deps) notReady(j *state.Job) (api.Reason, time.Time) {
	if j.Spec.Hold {
		if j.Reason == api.ReasonInvalidJob {
			// Held by the controller because a pass failed on it: the
			// reason stays, so `corral why` can say so.
			return api.ReasonInvalidJob, time.Time{}
		}
		return api.ReasonJobHeldUser, time.Time{}
	}
	if !j.Spec.Begin.IsZero() && d.s.Now.Before(j.Spec.Begin) {
		return api.ReasonBeginTime, j.Spec.Begin
	}
	if j.Spec.Dependency != nil {
		if r := d.reason(j); r != "" {
			return r, delayEnd(j.Spec.Dependency, d.s)
		}
	}
	return "", time.Time{}
}

// delayEnd returns the earliest future moment an after:<id>+<minutes>
// delay of d ends, so the controller wakes for it; zero when none.
func delayEnd(d *state.Dependency, s *Snapshot) time.Time {
	var wake time.Time
	for _, c := range d.Clauses {
		if c.Type != "after" || c.Minutes <= 0 || s.Lookup == nil {
			continue
		}
		for _, raw := range c.JobIDs {
			id, err := strconv.ParseUint(strings.SplitN(raw, "_", 2)[0], 10, 64)
			if err != nil {
				continue
			}
			j := s.Lookup(id)
			if j == nil || j.StartTime.IsZero() {
				continue
			}
			end := j.StartTime.Add(time.Duration(c.Minutes) * time.Minute)
			if end.After(s.Now) && (wake.IsZero() || end.Before(wake)) {
				wake = end
			}
		}
	}
	return wake
}

// reason evaluates j's dependency expression: "" when satisfied,
// Dependency while it may still be, DependencyNeverSatisfied when it cannot.
func (d *deps) reason(j *state.Job) api.Reason {
	dep := j.Spec.Dependency
	anyWaiting, anyNever := false, false
	for _, c := range dep.Clauses {
		switch d.clause(j, c) {
		case depMet:
			if dep.Any {
				return ""
			}
		case depWaiting:
			anyWaiting = true
		case depNever:
			anyNever = true
		}
	}
	switch {
	case dep.Any && anyWaiting:
		return api.ReasonDependency
	case dep.Any:
		return api.ReasonDependencyNeverSatisfied
	case anyNever:
		return api.ReasonDependencyNeverSatisfied
	case anyWaiting:
		return api.ReasonDependency
	}
	return ""
}

// neverRuns reports whether a pending job's own dependency can never be
// met. A job met again while being evaluated is on a cycle: it waits on
// itself, so it never runs either.
func (d *deps) neverRuns(j *state.Job) bool {
	if j.State != api.StatePending || j.Spec.Dependency == nil {
		return false
	}
	if d.never == nil {
		d.never = map[uint64]depMemo{}
	}
	switch d.never[j.ID] {
	case memoInProgress, memoNever:
		return true
	case memoMayRun:
		return false
	}
	d.never[j.ID] = memoInProgress
	never := d.reason(j) == api.ReasonDependencyNeverSatisfied
	d.never[j.ID] = memoMayRun
	if never {
		d.never[j.ID] = memoNever
	}
	return never
}

type depOutcome int

const (
	depMet depOutcome = iota
	depWaiting
	depNever
)

// clause evaluates one clause of j over all its job ids (all must be met).
func (d *deps) clause(j *state.Job, c state.DepClause) depOutcome {
	if c.Type == "singleton" {
		return d.singleton(j)
	}
	if c.Type == "aftercorr" && j.IsArrayPending() {
		return depMet // judged task by task when the array is placed
	}
	out := depMet
	for _, raw := range c.JobIDs {
		var o depOutcome
		switch recs := d.records(raw); {
		case recs == nil:
			return depNever
		case len(recs) == 1 && !isWholeArray(raw, recs[0]):
			o = d.target(c, recs[0])
		default:
			o = d.wholeArray(c, recs)
		}
		switch o {
		case depNever:
			return depNever
		case depWaiting:
			out = depWaiting
		}
	}
	return out
}

// records returns what a dependency id names: the job, a task of an array
// ("12_5"), or every record of an array; nil when unknown.
func (d *deps) records(raw string) []*state.Job {
	base, task, hasTask := strings.Cut(raw, "_")
	id, err := strconv.ParseUint(base, 10, 64)
	if err != nil {
		return nil
	}
	if hasTask {
		n, err := strconv.Atoi(task)
		if err == nil && d.s.LookupTask != nil {
			if t := d.s.LookupTask(id, n); t != nil {
				return []*state.Job{t}
			}
		}
		// Without task lookups, an element names its array's record.
		if d.s.LookupTask == nil && d.s.Lookup != nil {
			if t := d.s.Lookup(id); t != nil {
				return []*state.Job{t}
			}
		}
		return nil
	}
	if d.s.Lookup == nil {
		return nil
	}
	t := d.s.Lookup(id)
	if t == nil {
		return nil
	}
	if t.ArrayJobID == t.ID && d.s.Array != nil {
		if recs := d.s.Array(id); len(recs) > 0 {
			return recs
		}
	}
	return []*state.Job{t}
}

// isWholeArray reports whether raw names all of an array (not one task).
func isWholeArray(raw string, rec *state.Job) bool {
	return !strings.Contains(raw, "_") && rec.ArrayJobID != 0 && rec.IsArrayPending()
}

// wholeArray evaluates a clause on an array as Slurm does: on every task.
// afternotok is met once all have ended and one did not complete; the
// others are met when met for every task.
func (d *deps) wholeArray(c state.DepClause, recs []*state.Job) depOutcome {
	if c.Type == "afternotok" {
		anyFailed := false
		for _, r := range recs {
			if !r.State.Terminal() {
				return depWaiting
			}
			anyFailed = anyFailed || r.State != api.StateCompleted
		}
		if anyFailed {
			return depMet
		}
		return depNever
	}
	out := depMet
	for _, r := range recs {
		switch d.target(c, r) {
		case depNever:
			return depNever
		case depWaiting:
			out = depWaiting
		}
	}
	return out
}

// corrReady reports whether task of array j may start under its
// aftercorr clauses: the same task of each target array must have
// completed successfully (a target with no such task sets no condition).
// It returns whether the task must wait, and whether it never can.
func (d *deps) corrReady(j *state.Job, task int) (wait, never bool) {
	if j.Spec.Dependency == nil || d.s.LookupTask == nil {
		return false, false
	}
	for _, c := range j.Spec.Dependency.Clauses {
		if c.Type != "aftercorr" {
			continue
		}
		for _, raw := range c.JobIDs {
			id, err := strconv.ParseUint(strings.SplitN(raw, "_", 2)[0], 10, 64)
			if err != nil {
				return false, true
			}
			t := d.s.LookupTask(id, task)
			switch {
			case t == nil:
			case !t.State.Terminal() || t.IsArrayPending():
				wait = true
			case t.State != api.StateCompleted:
				never = true
			}
		}
	}
	return wait, never
}

// target evaluates one clause against one target job.
func (d *deps) target(c state.DepClause, t *state.Job) depOutcome {
	now := d.s.Now
	switch c.Type {
	case "after":
		if t.StartTime.IsZero() && !t.State.Terminal() {
			if d.neverRuns(t) {
				return depNever
			}
			return depWaiting
		}
		if c.Minutes > 0 && !t.StartTime.IsZero() && now.Before(t.StartTime.Add(time.Duration(c.Minutes)*time.Minute)) && !t.State.Terminal() {
			return depWaiting
		}
		return depMet
	case "afterany", "aftercorr":
		// A target that can never run may still be cancelled, which ends
		// it: these wait rather than give up.
		if t.State.Terminal() {
			return depMet
		}
		return depWaiting
	case "afterok":
		if !t.State.Terminal() {
			if d.neverRuns(t) {
				return depNever
			}
			return depWaiting
		}
		if t.State == api.StateCompleted {
			return depMet
		}
		return depNever
	case "afternotok":
		if !t.State.Terminal() {
			return depWaiting
		}
		if t.State != api.StateCompleted {
			return depMet
		}
		return depNever
	}
	return depMet
}

// singleton is met when no job of the same user and name holds resources
// and no pending singleton job of theirs comes before j (submit time, then
// id): one such job runs at a time, in submission order.
func (d *deps) singleton(j *state.Job) depOutcome {
	if d.singletons == nil {
		d.singletons = map[userName]*singletonState{}
		get := func(k userName) *singletonState {
			st := d.singletons[k]
			if st == nil {
				st = &singletonState{}
				d.singletons[k] = st
			}
			return st
		}
		for _, r := range d.s.Running {
			get(userName{r.Job.Spec.User, r.Job.Spec.Name}).active = true
		}
		for _, p := range d.s.Pending {
			if !hasSingleton(p.Spec.Dependency) {
				continue
			}
			st := get(userName{p.Spec.User, p.Spec.Name})
			if st.first == nil || p.SubmitTime.Before(st.first.SubmitTime) ||
				p.SubmitTime.Equal(st.first.SubmitTime) && p.ID < st.first.ID {
				st.first = p
			}
		}
	}
	st := d.singletons[userName{j.Spec.User, j.Spec.Name}]
	if st == nil || (!st.active && st.first == j) {
		return depMet
	}
	return depWaiting
}

func hasSingleton(d *state.Dependency) bool {
	if d == nil {
		return false
	}
	for _, c := range d.Clauses {
		if c.Type == "singleton" {
			return true
		}
	}
	return false
}
