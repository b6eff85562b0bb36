package sched

import (
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

	free := newCapacity(s.Nodes)
	defPart := defaultPartition(s.Partitions)
	for _, j := range ready {
		part := j.Spec.Partition
		if part == "" {
			part = defPart
		}
		cpus, mem := j.Spec.CPUs(), MemRequest(j, s.DefMemPerCPU)
		if !free.anyCouldFit(part, cpus, mem) {
			plan.Reasons[j.ID] = api.ReasonResources
			continue
		}
		if free.held(part) {
			// First come, first served: nothing overtakes the first job
			// that is waiting for resources on the nodes it could use.
			plan.Reasons[j.ID] = api.ReasonPriority
			continue
		}
		node, overhead := free.firstFit(part, cpus, mem)
		if node == "" {
			plan.Reasons[j.ID] = api.ReasonResources
			free.hold(part)
			continue
		}
		free.take(node, cpus, mem)
		plan.Starts = append(plan.Starts, Start{JobID: j.ID, Node: node, CPUs: cpus, MemMB: mem, OverheadMB: overhead})
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
