package state

import (
	"slices"
	"time"

	"corral/api"
)

// This file holds what the applies do to allocations: make one for a start,
// change what its node is to do with it, and end it (reported, or lost with
// its node), deriving the job's state from its allocations each time.

// activeAllocs returns job j's active allocations.
func (s *State) activeAllocs(j *Job) []*Allocation {
	var out []*Allocation
	for _, id := range j.Allocs {
		if a := s.Allocs[id]; a != nil && a.Active() {
			out = append(out, a)
		}
	}
	return out
}

// LastAlloc returns the newest allocation of job j, active or ended; nil
// when it never had one.
func (s *State) LastAlloc(j *Job) *Allocation {
	if len(j.Allocs) == 0 {
		return nil
	}
	return s.Allocs[j.Allocs[len(j.Allocs)-1]]
}

// ActiveAllocs returns job j's active allocations.
func (s *State) ActiveAllocs(j *Job) []*Allocation { return s.activeAllocs(j) }

// deriveState sets a job's state from its active allocations, when it has
// any (those a migration gives up left out): a running job with a live
// migration under way is MIGRATING.
func (s *State) deriveState(j *Job) {
	st, ok := jobState(s.runningAllocs(j))
	if !ok {
		return
	}
	if st == api.StateRunning && s.LiveMigration(j) != nil {
		st = api.StateMigrating
	}
	j.State = st
}

// changeAlloc stores a changed copy of allocation a and marks its node's
// allocations changed at index, so its daemon sees the change.
func (s *State) changeAlloc(a *Allocation, index uint64, change func(a *Allocation)) *Allocation {
	c := *a
	change(&c)
	s.Allocs[c.ID] = &c
	if n := s.editNode(c.Node); n != nil {
		s.putNode(n, index)
	}
	return &c
}

// newAlloc makes the allocation of one node's part of a start of job j (a
// private copy) at index, as the node of that rank, charges it to its node
// and lists it on the job and the node.
func (s *State) newAlloc(j *Job, st PlanPart, rank int, now time.Time, index uint64) *Allocation {
	a := &Allocation{
		ID: s.NextAllocID, Job: j.ID, Node: s.intern(st.Node), Rank: rank, CPUs: st.CPUs, MemMB: st.MemMB,
		OverheadMB: st.OverheadMB, TmpMB: st.TmpMB, Placement: st.Placement, Desired: AllocRun, Status: AllocActive,
		StartIndex: index, StartTime: now,
	}
	s.NextAllocID++
	s.Allocs[a.ID] = a
	j.Allocs = append(slices.Clip(j.Allocs), a.ID)
	n := s.appendNode(st.Node)
	n.Allocs = append(n.Allocs, a.ID)
	n.AllocCPUs += a.HeldCPUs()
	n.AllocMemMB += a.HeldMemMB()
	n.AllocTmpMB += a.HeldTmpMB()
	s.putNode(n, index)
	return a
}

// endAlloc ends an active allocation as ended (how the run ended, as
// reported or concluded) at now: its suspension stops counting, its usage
// is charged, and its node gets its resources back.
func (s *State) endAlloc(a *Allocation, ended api.JobState, now time.Time, index uint64) *Allocation {
	j := s.Jobs[a.Job]
	held := [3]int64{int64(a.HeldCPUs()), a.HeldMemMB(), a.HeldTmpMB()}
	c := *a
	if !c.SuspendTime.IsZero() {
		c.SuspendedFor += now.Sub(c.SuspendTime)
		c.SuspendTime = time.Time{}
	}
	if j != nil {
		s.chargeUsage(j, &c, now)
	}
	c.Status, c.EndState, c.EndTime = AllocEnded, ended, now
	c.CPUsLent = false
	s.Allocs[c.ID] = &c
	s.noteAllocEnd(c.ID)
	if n := s.editNode(c.Node); n != nil {
		if i := slices.Index(n.Allocs, c.ID); i >= 0 {
			n.Allocs = slices.Delete(n.Allocs, i, i+1)
			n.AllocCPUs -= int(held[0])
			n.AllocMemMB -= held[1]
			n.AllocTmpMB -= held[2]
		}
		s.putNode(n, index)
	}
	return &c
}

// finishRun gives job j (a private copy) the outcome of its run once its
// last active allocation ended: final, or PENDING again for another run
// when it is requeued.
//
// Allocations a migration gives up (Leaving) do not keep the job going:
// their guest has moved on, or never ran.
func (s *State) finishRun(j *Job, final api.JobState, now time.Time) {
	if len(s.runningAllocs(j)) > 0 {
		s.deriveState(j)
		return
	}
	stepsEnd := final
	if !stepsEnd.Terminal() {
		stepsEnd = api.StateCancelled // the run was requeued
	}
	s.endRunSteps(j, stepsEnd, now)
	j.State = final
	if final == api.StatePending {
		s.requeue(j)
		return
	}
	j.EndTime = now
}

// loseAlloc ends an allocation whose run was lost (its node went DOWN, or
// restarted without it): a job being stopped takes the state it was
// stopped for, a --requeue job goes back to the queue, any other ends
// NODE_FAIL.
func (s *State) loseAlloc(a *Allocation, now time.Time, msg string, index uint64) {
	j := s.editJob(a.Job)
	if j == nil {
		s.endAlloc(a, api.StateNodeFail, now, index)
		return
	}
	if a.Leaving {
		s.endLeaving(j, a, api.StateNodeFail, msg, now, index)
		return
	}
	final := api.StateNodeFail
	switch {
	case a.Desired == AllocStop && a.StopAs != "":
		final = a.StopAs
	case j.Spec.Requeue:
		final = api.StatePending
	}
	ended := s.endAlloc(a, api.StateNodeFail, now, index)
	s.migrationAllocEnded(j, ended, msg, now, index)
	decides := a.Desired != AllocStop && j.Spec.MultiNode()
	if decides {
		// A multi-node run ends on every node with this one's loss.
		s.stopRun(j, final, index)
	}
	s.finishRun(j, final, now)
	s.checkpointRunEnded(j, index)
	if !j.State.Active() || decides {
		// The job ended (or went back to the queue) with this run; a job
		// that runs on elsewhere (its migration was aborted) keeps its
		// message.
		j.Message = msg
	}
	s.putJob(j)
}

// endLeaving ends an allocation a migration gives up (see Allocation's
// Leaving), reported or lost as ended: the source of a switched-over
// migration ends MIGRATED (its guest runs on at the destination) and
// releases the migration, the destination of an aborted one ends as its
// node said. Neither is the job's outcome.
func (s *State) endLeaving(j *Job, a *Allocation, ended api.JobState, why string, now time.Time, index uint64) {
	if a.StopAs == api.StateMigrated || a.StopAs == api.StateSuspended {
		// Moved on, or parked in a checkpoint: as it was stopped for.
		ended = a.StopAs
	}
	c := s.endAlloc(a, ended, now, index)
	s.migrationAllocEnded(j, c, why, now, index)
	s.deriveState(j)
	s.putJob(j)
}

// stopRun tells the nodes of job j's other active allocations to stop
// them, as final: a multi-node job runs on all its nodes or on none, so
// one node's end (its batch script done, its node lost) ends the run on
// every node, and the job takes final once they confirm.
func (s *State) stopRun(j *Job, final api.JobState, index uint64) {
	for _, o := range s.activeAllocs(j) {
		if o.Desired != AllocStop {
			s.changeAlloc(o, index, func(o *Allocation) { o.Desired, o.StopAs = AllocStop, final })
		}
	}
}

// RunAllocs returns the allocations of job j's current run, or its last
// one when none is active, in rank order: one for a single-node run, one
// per node for a multi-node run (they share their start index).
func (s *State) RunAllocs(j *Job) []*Allocation {
	last := s.LastAlloc(j)
	if last == nil {
		return nil
	}
	var out []*Allocation
	for i := len(j.Allocs) - 1; i >= 0; i-- {
		a := s.Allocs[j.Allocs[i]]
		if a == nil || a.StartIndex != last.StartIndex {
			break
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Allocation) int { return a.Rank - b.Rank })
	return out
}

// requeue resets a job whose run ended to PENDING for another run; a job
// held meanwhile (scontrol requeuehold) keeps its hold's reason.
func (s *State) requeue(j *Job) {
	reason := api.ReasonNone
	if j.Spec.Hold && (j.Reason == api.ReasonJobHeldUser || j.Reason == api.ReasonJobHeldAdmin) {
		reason = j.Reason
	}
	j.State, j.Reason = api.StatePending, reason
	j.Restarts++
	j.Mailed &^= mailedTimeBits
	j.StartTime, j.EndTime, j.EstStart, j.EstNode = time.Time{}, time.Time{}, time.Time{}, ""
	j.ExitCode, j.Signal = 0, 0
}

// joinNonEmpty joins the non-empty ones of a and b with "; ".
func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
