package sched

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// Snapshot is the state one pass decides over. Jobs and nodes are read only.
type Snapshot struct {
	Now time.Time
	// Pending holds the jobs in state PENDING, in any order.
	Pending []*api.Job
	// Nodes holds every node with its current allocation figures.
	Nodes []*api.Node
	// Partitions are the known partitions; the one marked Default receives
	// jobs that name none.
	Partitions []api.Partition
	// Lookup returns any job by id (for dependencies); nil when unknown.
	Lookup func(id uint64) *api.Job
	// DefMemPerCPU is the memory (MiB) given per CPU to jobs that ask for
	// none.
	DefMemPerCPU int64
	// Running holds the jobs that hold resources on a node (RUNNING,
	// SUSPENDED, COMPLETING), with Node, CPUs, MemMB, OverheadMB, StartTime
	// and Spec.TimeLimit set. Backfill reads when each frees its
	// resources from its start time and time limit.
	Running []*api.Job
	// Policy is how the pass orders starts; the zero value is PolicyEASY.
	Policy Policy
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
}

// MemRequest returns the memory a job is allocated on its node.
func MemRequest(j *api.Job, defPerCPU int64) int64 {
	if m := j.Spec.MemMB(); m > 0 {
		return m
	}
	return defPerCPU * int64(j.Spec.CPUs())
}

// Schedule runs one pass over the snapshot.
func Schedule(s *Snapshot) Plan {
	plan := Plan{Reasons: make(map[uint64]api.Reason, len(s.Pending))}
	ready := make([]*api.Job, 0, len(s.Pending))
	for _, j := range s.Pending {
		if r, wake := notReady(j, s); r != "" {
			plan.Reasons[j.ID] = r
			if !wake.IsZero() && (plan.NextWake.IsZero() || wake.Before(plan.NextWake)) {
				plan.NextWake = wake
			}
			continue
		}
		ready = append(ready, j)
	}
	sort.Slice(ready, func(a, b int) bool { return before(ready[a], ready[b]) })

	pl := newPlacer(s)
	for _, j := range ready {
		pl.place(j, &plan)
	}
	if len(pl.estimates) > 0 {
		plan.Estimates = pl.estimates
	}
	return plan
}

// before orders jobs by priority, then submit time, then id.
func before(a, b *api.Job) bool {
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

// notReady returns why a job may not start yet regardless of resources, and
// when that changes by itself (begin time), or "" when it is ready.
func notReady(j *api.Job, s *Snapshot) (api.Reason, time.Time) {
	if j.Spec.Hold {
		return api.ReasonJobHeldUser, time.Time{}
	}
	if !j.Spec.Begin.IsZero() && s.Now.Before(j.Spec.Begin) {
		return api.ReasonBeginTime, j.Spec.Begin
	}
	if j.Spec.Dependency != nil {
		if r := dependencyReason(j.Spec.Dependency, s); r != "" {
			return r, delayEnd(j.Spec.Dependency, s)
		}
	}
	return "", time.Time{}
}

// delayEnd returns the earliest future moment an after:<id>+<minutes>
// delay of d ends, so the controller wakes for it; zero when none.
func delayEnd(d *api.Dependency, s *Snapshot) time.Time {
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

// dependencyReason evaluates a dependency expression: "" when satisfied,
// Dependency while it may still be, DependencyNeverSatisfied when it cannot.
func dependencyReason(d *api.Dependency, s *Snapshot) api.Reason {
	anyWaiting, anyNever := false, false
	for _, c := range d.Clauses {
		switch clauseState(c, s) {
		case depMet:
			if d.Any {
				return ""
			}
		case depWaiting:
			anyWaiting = true
		case depNever:
			anyNever = true
		}
	}
	switch {
	case d.Any && anyWaiting:
		return api.ReasonDependency
	case d.Any:
		return api.ReasonDependencyNeverSatisfied
	case anyNever:
		return api.ReasonDependencyNeverSatisfied
	case anyWaiting:
		return api.ReasonDependency
	}
	return ""
}

type depOutcome int

const (
	depMet depOutcome = iota
	depWaiting
	depNever
)

// clauseState evaluates one clause over all its job ids (all must be met).
func clauseState(c api.DepClause, s *Snapshot) depOutcome {
	out := depMet
	for _, raw := range c.JobIDs {
		id, err := strconv.ParseUint(strings.SplitN(raw, "_", 2)[0], 10, 64)
		var j *api.Job
		if err == nil && s.Lookup != nil {
			j = s.Lookup(id)
		}
		if j == nil {
			return depNever
		}
		switch o := jobOutcome(c, j, s.Now); o {
		case depNever:
			return depNever
		case depWaiting:
			out = depWaiting
		}
	}
	return out
}

func jobOutcome(c api.DepClause, j *api.Job, now time.Time) depOutcome {
	switch c.Type {
	case "after":
		if j.StartTime.IsZero() && !j.State.Terminal() {
			return depWaiting
		}
		if c.Minutes > 0 && !j.StartTime.IsZero() && now.Before(j.StartTime.Add(time.Duration(c.Minutes)*time.Minute)) && !j.State.Terminal() {
			return depWaiting
		}
		return depMet
	case "afterany", "aftercorr":
		if j.State.Terminal() {
			return depMet
		}
		return depWaiting
	case "afterok":
		if !j.State.Terminal() {
			return depWaiting
		}
		if j.State == api.StateCompleted {
			return depMet
		}
		return depNever
	case "afternotok":
		if !j.State.Terminal() {
			return depWaiting
		}
		if j.State != api.StateCompleted {
			return depMet
		}
		return depNever
	}
	return depMet
}
