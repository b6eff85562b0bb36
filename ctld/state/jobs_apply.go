package state

import (
	"fmt"
	"time"

	"corral/api"
	"corral/qos"
)

// Business outcomes of applying a command. They are returned to the
// proposer as the apply result; they never stop a replica.

// SubmitResult answers SubmitJobs, one entry per job.
type SubmitResult struct {
	Results []api.SubmitResult
	// Missing lists the jobs (by position in the entry) refused because
	// the entry named a script or environment by key that the state no
	// longer held (its last job was purged after the leader looked): the
	// leader proposes them again with their content.
	Missing []int
}

// IDsResult lists the jobs a command changed and why others were skipped.
type IDsResult struct {
	Changed []uint64
	Errors  map[uint64]string
}

func (s *State) applySubmit(c *SubmitJobs, index uint64) *SubmitResult {
	res := &SubmitResult{Results: make([]api.SubmitResult, len(c.Jobs))}
	recs := blobRecordMap(c.Blobs)
	for i := range c.Jobs {
		// spec is read in the entry; the job's record gets its own copy,
		// the only one made.
		spec := &c.Jobs[i]
		id := c.FirstID + uint64(i)
		if spec.RequestID != "" {
			// Within the retention window a retry gets its job's id back,
			// even when the job was purged since (it ended MinJobAge ago).
			if prev, ok := s.Requests.Lookup(spec.User, spec.RequestID); ok {
				res.Results[i] = api.SubmitResult{JobID: prev, Duplicate: true}
				continue
			}
		}
		if _, taken := s.Jobs[id]; taken || id == 0 {
			// A leader that reserved ids it should not have: skip rather
			// than overwrite, and make the mistake visible.
			res.Results[i] = api.SubmitResult{}
			continue
		}
		// The QoS's MaxSubmitPerUser counts what is committed: the
		// user's jobs before this entry and the ones before this job in
		// it, so no batch, however large, passes the limit.
		if err := qos.SubmitLimit(s.QOS[spec.QOS], spec.User, s.ActiveInQOS(spec.User, spec.QOS)); err != nil {
			res.Results[i] = api.SubmitResult{Error: fmt.Sprintf("job %d of the batch: %v", i+1, err)}
			continue
		}
		own := *spec
		j := &Job{ID: id, Spec: &own, State: api.StatePending, Reason: api.ReasonNone, SubmitTime: c.Now}
		if err := s.resolveBlobs(j.Spec, recs); err != nil {
			res.Results[i] = api.SubmitResult{Error: fmt.Sprintf("job %d of the batch: %v", i+1, err)}
			res.Missing = append(res.Missing, i)
			continue
		}
		s.internSpec(j.Spec)
		j.Spec.Dependency = s.ResolveDependency(j.Spec.Dependency)
		if j.Spec.Hold {
			j.Reason = api.ReasonJobHeldUser
		}
		if a := j.Spec.Array; a != nil {
			j.ArrayJobID = id
			j.ArrayPending = api.NewIndexSet(a.Ranges)
		}
		s.putJob(j)
		if j.Spec.RequestID != "" {
			s.Requests.add(j.Spec.User, j.Spec.RequestID, id, c.Now, s.Config.RequestIDRetention)
		}
		res.Results[i] = api.SubmitResult{JobID: id}
	}
	if end := c.FirstID + uint64(len(c.Jobs)); end > s.NextJobID {
		s.NextJobID = end
	}
	return res
}

func (s *State) applyCancel(c *CancelJobs, index uint64) *IDsResult {
	res := s.cancelIDs(c, index)
	for _, t := range c.Tasks {
		arr := s.Jobs[t.Array]
		if arr == nil || arr.State != api.StatePending || !arr.ArrayPending.Contains(t.Task) {
			if res.Errors == nil {
				res.Errors = map[uint64]string{}
			}
			res.Errors[t.Array] = fmt.Sprintf("task %s is not pending", t)
			continue
		}
		j := s.editJob(t.Array)
		if rest := j.ArrayPending.Without(t.Task); !rest.Empty() {
			j.ArrayPending = rest
		} else {
			// The array's last pending task: its record becomes the
			// task's, cancelled.
			j.ArrayPending, j.ArrayTaskID = nil, t.Task
			j.State, j.Reason, j.EndTime = api.StateCancelled, api.ReasonNone, c.Now
			if c.By != "" {
				j.Message = "cancelled by " + c.By
			}
		}
		s.putJob(j)
		res.Changed = append(res.Changed, t.Array)
	}
	return res
}

func (s *State) cancelIDs(c *CancelJobs, index uint64) *IDsResult {
	return s.eachJob(c.IDs, func(j *Job) string { return s.cancelJob(j, c, index) })
}

// cancelJob cancels job j (a private copy) as c says, or says why it
// cannot.
func (s *State) cancelJob(j *Job, c *CancelJobs, index uint64) string {
	switch {
	case j.State.Terminal():
		return fmt.Sprintf("already finished (%s)", j.State)
	case j.State == api.StateCompleting:
		return "already completing"
	}
	if c.By != "" {
		j.Message = "cancelled by " + c.By
	}
	final := api.StateCancelled
	switch c.Preempt {
	case api.PreemptCancel:
		final = api.StatePreempted
		j.Message = "preempted by " + c.By
	case api.PreemptRequeue:
		if !j.State.Active() {
			return "not running: nothing to requeue"
		}
		final = api.StatePending
		j.Message = "requeued: preempted by " + c.By
	}
	s.stopJob(j, final, c.Now, index)
	return ""
}

// stopJob ends job j (a private copy) as final: at once when it holds no
// allocation, else by telling the nodes of its active allocations to stop
// them; the job is COMPLETING until they confirm, and takes final then.
func (s *State) stopJob(j *Job, final api.JobState, now time.Time, index uint64) {
	if final != api.StatePending {
		j.EndTime = now
	}
	s.abortForStop(j, final, now, index)
	active := s.runningAllocs(j)
	if len(active) == 0 {
		// A checkpointed job holds only its file: it ends (or goes
		// back to the queue, to start afresh) at once, and so does the
		// file.
		if final.Terminal() {
			s.endRunSteps(j, final, now)
		}
		j.State, j.Reason = final, api.ReasonNone
		s.dropCheckpoint(j, index)
		if final == api.StatePending {
			j.Checkpoint = nil
		}
		return
	}
	for _, a := range active {
		s.changeAlloc(a, index, func(a *Allocation) { a.Desired, a.StopAs = AllocStop, final })
	}
	s.deriveState(j)
}

func (s *State) applyHold(c *HoldRelease) *IDsResult {
	return s.eachJob(c.IDs, func(j *Job) string {
		if j.State != api.StatePending {
			return fmt.Sprintf("is %s; only pending jobs can be held or released", j.State)
		}
		if !c.Hold && j.Reason == api.ReasonJobHeldAdmin && !c.Admin {
			return "was held by an administrator; only an administrator may release it"
		}
		j.editSpec().Hold = c.Hold
		switch {
		case c.Hold && c.Admin:
			j.Reason = api.ReasonJobHeldAdmin
		case c.Hold:
			j.Reason = api.ReasonJobHeldUser
		case j.Reason == api.ReasonJobHeldUser || j.Reason == api.ReasonJobHeldAdmin:
			j.Reason = api.ReasonNone
		}
		return ""
	})
}

func (s *State) applyRequeue(c *RequeueJobs, index uint64) *IDsResult {
	return s.eachJob(c.IDs, func(j *Job) string { return s.requeueJob(j, c, index) })
}

// requeueJob puts job j (a private copy) back in the queue as c says, or
// says why it cannot.
func (s *State) requeueJob(j *Job, c *RequeueJobs, index uint64) string {
	switch {
	case j.State == api.StatePending:
		return "is pending already; hold it instead (scontrol hold)"
	case j.State == api.StateCompleting:
		return "is completing; requeue it once it has ended"
	case j.State == api.StateMigrating:
		return "is migrating; requeue it once it runs on its new node"
	}
	if c.Hold {
		j.editSpec().Hold = true
		j.Reason = api.ReasonJobHeldUser
		if c.Admin {
			j.Reason = api.ReasonJobHeldAdmin
		}
	}
	if j.State.Active() {
		s.stopJob(j, api.StatePending, c.Now, index)
	} else {
		s.requeue(j)
	}
	j.Message = "requeued"
	if c.By != "" {
		j.Message = "requeued by " + c.By
	}
	return ""
}

func (s *State) applySuspend(c *SuspendJobs, index uint64) *IDsResult {
	return s.eachJob(c.IDs, func(j *Job) string { return s.suspendJob(j, c, index) })
}

// suspendJob suspends or resumes job j (a private copy) as c says, or says
// why it cannot.
func (s *State) suspendJob(j *Job, c *SuspendJobs, index uint64) string {
	switch {
	case c.Suspend && j.State != api.StateRunning:
		return fmt.Sprintf("is %s; only running jobs can be suspended", j.State)
	case !c.Suspend && j.State != api.StateSuspended:
		return fmt.Sprintf("is %s; only suspended jobs can be resumed", j.State)
	case !c.Suspend && Checkpointed(j):
		// scontrol resume of a job parked in a checkpoint restores it,
		// on any node that can read the file.
		return s.restoreJob(j, "")
	}
	active := s.activeAllocs(j)
	for _, a := range active {
		if why := s.canResume(a, c); why != "" {
			return why
		}
	}
	for _, a := range active {
		s.suspendAlloc(a, c, index)
	}
	s.deriveState(j)
	return ""
}

// canResume says why allocation a cannot be resumed by c, or "".
func (s *State) canResume(a *Allocation, c *SuspendJobs) string {
	switch {
	case c.Suspend || !a.CPUsLent:
		return ""
	case !c.Preempt:
		return "is suspended by preemption; it resumes when its CPUs are free"
	}
	// Take the lent CPUs back, if they are free: as many as it holds and,
	// when it was placed on exact CPUs, those very CPUs (the preemptor, or
	// a run started on them since, may still hold one while it stops).
	n := s.Nodes[a.Node]
	if n == nil || n.FreeCPUs() < a.ownCPUs() {
		return "its CPUs are still in use"
	}
	if a.Placement != nil {
		used := s.NodeUsed(n)
		for _, c := range a.Placement.CPUs {
			if used.CPUs[c] {
				return fmt.Sprintf("its CPU %d is still in use", c)
			}
		}
	}
	return ""
}

// suspendAlloc suspends or resumes one allocation as c says; a preemption
// lends its CPUs to the preemptor (or takes them back).
func (s *State) suspendAlloc(a *Allocation, c *SuspendJobs, index uint64) {
	lend := 0
	s.changeAlloc(a, index, func(a *Allocation) {
		if c.Suspend {
			a.Desired, a.SuspendTime = AllocSuspend, c.Now
		} else {
			a.Desired = AllocRun
			a.SuspendedFor += c.Now.Sub(a.SuspendTime)
			a.SuspendTime = time.Time{}
		}
		if c.Preempt && c.Suspend != a.CPUsLent {
			a.CPUsLent = c.Suspend
			a.PreemptedBy = 0
			lend = a.ownCPUs()
			if c.Suspend {
				a.PreemptedBy = c.By
				lend = -a.ownCPUs()
			}
		}
	})
	if lend != 0 {
		if n := s.editNode(a.Node); n != nil {
			n.AllocCPUs += lend
			s.putNode(n, index)
		}
	}
}
