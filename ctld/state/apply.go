package state

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
	"corral/ctld/sched"
)

// Business outcomes of applying a command. They are returned to the
// proposer as the apply result; they never stop the FSM.

// SubmitResult answers SubmitJobs, one entry per job.
type SubmitResult struct {
	Results []api.SubmitResult
}

// IDsResult lists the jobs a command changed and why others were skipped.
type IDsResult struct {
	Changed []uint64
	Errors  map[uint64]string
}

// PlanResult counts what a plan did.
type PlanResult struct {
	Started  []uint64
	Rejected []uint64
}

func (s *State) applySubmit(c *SubmitJobs, index uint64) *SubmitResult {
	res := &SubmitResult{Results: make([]api.SubmitResult, len(c.Jobs))}
	for i := range c.Jobs {
		spec := c.Jobs[i]
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
		s.internSpec(&spec)
		j := &api.Job{
			ID:         id,
			Spec:       spec,
			State:      api.StatePending,
			Reason:     api.ReasonNone,
			SubmitTime: c.Now,
			CPUs:       spec.CPUs(),
		}
		if spec.Hold {
			j.Reason = api.ReasonJobHeldUser
		}
		if spec.Array != nil {
			j.ArrayJobID = id
			j.ArrayPending = api.NewIndexSet(spec.Array.Ranges)
		}
		s.putJob(j)
		if spec.RequestID != "" {
			s.Requests.add(spec.User, spec.RequestID, id, c.Now, s.Config.RequestIDRetention)
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
	return s.eachJob(c.IDs, func(j *api.Job) string {
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
		if final != api.StatePending {
			j.EndTime = c.Now
		}
		if !j.State.Active() {
			j.State, j.Reason = final, api.ReasonNone
			return ""
		}
		// The node must confirm the job's end before its resources free.
		j.FinalState, j.State = final, api.StateCompleting
		s.bumpNode(j.Node, index)
		return ""
	})
}

func (s *State) applyHold(c *HoldRelease) *IDsResult {
	return s.eachJob(c.IDs, func(j *api.Job) string {
		if j.State != api.StatePending {
			return fmt.Sprintf("is %s; only pending jobs can be held or released", j.State)
		}
		j.Spec.Hold = c.Hold
		if c.Hold {
			j.Reason = api.ReasonJobHeldUser
		} else if j.Reason == api.ReasonJobHeldUser || j.Reason == api.ReasonJobHeldAdmin {
			j.Reason = api.ReasonNone
		}
		return ""
	})
}

// CheckStart says why a start cannot be applied to the current state, or ""
// when it can. free tracks CPUs and memory already taken by earlier starts
// of the same plan.
func (s *State) CheckStart(st PlanStart, used map[string][2]int64) string {
	j, ok := s.Jobs[st.JobID]
	if !ok {
		return "no such job"
	}
	if j.State != api.StatePending || j.Spec.Hold {
		return fmt.Sprintf("job is %s", j.State)
	}
	if st.Array != j.IsArrayPending() {
		return "array task mismatch"
	}
	if st.Array {
		if !j.ArrayPending.Contains(st.Task) {
			return fmt.Sprintf("task %d of array %d is not pending", st.Task, j.ID)
		}
		if j.ArrayPending.Len() > 1 {
			if _, taken := s.Jobs[st.NewID]; taken || st.NewID == 0 {
				return fmt.Sprintf("id %d for task %d of array %d is taken", st.NewID, st.Task, j.ID)
			}
		}
	}
	n, ok := s.Nodes[st.Node]
	if !ok {
		return "no such node"
	}
	if n.Down || n.Drain {
		return fmt.Sprintf("node %s is %s", n.Name, n.State())
	}
	u := used[st.Node]
	if st.OverheadMB < n.OverheadMB {
		return fmt.Sprintf("node %s charges %d MiB per job, the plan %d", n.Name, n.OverheadMB, st.OverheadMB)
	}
	if int64(n.FreeCPUs())-u[0] < int64(st.CPUs) || n.FreeMemMB()-u[1] < st.MemMB+st.OverheadMB {
		return fmt.Sprintf("node %s lacks resources", n.Name)
	}
	if st.CPUs < j.CPUs {
		return "fewer CPUs than the job asked for"
	}
	if st.Placement != nil {
		return s.checkPlacement(n, st.Placement)
	}
	return ""
}

// checkPlacement says why a placement cannot be applied on node n: a CPU,
// GPU, MIG instance or VF it names does not exist there or is already held
// by another job, or a NUMA node lacks the memory or hugepages. The plan
// applier refuses a plan that double-books anything.
func (s *State) checkPlacement(n *api.Node, p *api.Placement) string {
	inv := n.Inventory
	if inv == nil || inv.Topology == nil {
		return fmt.Sprintf("node %s reported no topology", n.Name)
	}
	used := sched.NewUsed()
	for _, id := range n.Jobs {
		if j := s.Jobs[id]; j != nil {
			used.AddJob(j)
		}
	}
	cpus, mem, huge := map[int]bool{}, map[int]int64{}, map[[2]int64]int64{}
	for _, node := range inv.Topology.Nodes {
		for _, c := range node.CPUs {
			cpus[c.ID] = true
		}
		mem[node.ID] = node.MemMB
		for size, h := range node.Hugepages {
			huge[[2]int64{int64(node.ID), size}] = h.Free
		}
	}
	for _, c := range p.CPUs {
		if !cpus[c] || used.CPUs[c] {
			return fmt.Sprintf("CPU %d of node %s is missing or held", c, n.Name)
		}
	}
	for _, m := range p.Mem {
		if used.Mem[m.Node]+m.MB > mem[m.Node] {
			return fmt.Sprintf("NUMA node %d of node %s lacks %d MiB", m.Node, n.Name, m.MB)
		}
	}
	for _, h := range p.Hugepages {
		k := [2]int64{int64(h.Node), h.SizeKB}
		if used.Hugepages[k]+h.Count > huge[k] {
			return fmt.Sprintf("NUMA node %d of node %s lacks %d hugepages of %d KiB", h.Node, n.Name, h.Count, h.SizeKB)
		}
	}
	devices := map[string]bool{}
	for _, g := range inv.GPUs {
		devices[g.UUID] = true
		for _, m := range g.MIG {
			devices[m.UUID] = true
		}
	}
	for _, pf := range inv.PFs {
		for _, vf := range pf.VFs {
			devices[vf.Addr] = true
		}
	}
	for _, d := range slices.Concat(p.GPUs, p.MIG, p.VFs) {
		if !devices[d] || used.Devices[d] {
			return fmt.Sprintf("device %s of node %s is missing or held", d, n.Name)
		}
	}
	return ""
}

// splitTask takes task out of the array's pending record arr (a private
// copy) and returns the record to start for it: a new one with id newID,
// or arr itself when task was the last one pending.
func (s *State) splitTask(arr *api.Job, task int, newID uint64) *api.Job {
	rest := arr.ArrayPending.Without(task)
	if rest.Empty() {
		arr.ArrayPending, arr.ArrayTaskID = nil, task
		return arr
	}
	arr.ArrayPending = rest
	s.putJob(arr)
	t := *arr
	t.ID, t.ArrayPending, t.ArrayTaskID = newID, nil, task
	if newID >= s.NextJobID {
		s.NextJobID = newID + 1
	}
	return &t
}

func (s *State) applyPlan(c *ApplyPlan, index uint64) *PlanResult {
	res := &PlanResult{}
	for _, st := range c.Starts {
		// State is updated start by start, so each check sees the
		// earlier starts of this plan.
		if why := s.CheckStart(st, nil); why != "" {
			res.Rejected = append(res.Rejected, st.JobID)
			continue
		}
		j := s.editJob(st.JobID)
		if st.Array {
			j = s.splitTask(j, st.Task, st.NewID)
		}
		j.State = api.StateRunning
		j.Reason = api.ReasonNone
		j.Node = s.intern(st.Node)
		j.CPUs = st.CPUs
		j.MemMB = st.MemMB
		j.OverheadMB = st.OverheadMB
		j.Placement = st.Placement
		j.StartTime = c.Now
		j.EstStart = time.Time{}
		j.EndTime = time.Time{}
		j.StartIndex = index
		j.ExitCode, j.Signal, j.Message = 0, 0, ""
		s.putJob(j)
		n := s.editNode(st.Node)
		n.Jobs = append(n.Jobs, j.ID)
		n.AllocCPUs += st.CPUs
		n.AllocMemMB += st.MemMB + st.OverheadMB
		s.putNode(n, index)
		res.Started = append(res.Started, j.ID)
	}
	for _, r := range c.Reasons {
		if cur := s.Jobs[r.JobID]; cur == nil || cur.State != api.StatePending || (cur.Reason == r.Reason && cur.EstStart.Equal(r.Start)) {
			continue
		}
		j := s.editJob(r.JobID)
		j.Reason = r.Reason
		j.EstStart = r.Start
		if r.Reason == api.ReasonInvalidJob {
			// The scheduler cannot handle the job: hold it, so no pass
			// tries again until someone releases it.
			j.Spec.Hold = true
			j.Message = r.Message
		}
		s.putJob(j)
	}
	return res
}

// applyRegister records a node daemon's registration. The reports it
// carries are applied first, exactly as reports are (see applyReport): how
// the runs that ended while no daemon or no controller listened ended. Then,
// when the daemon is a new incarnation (another boot id), every job placed on
// the node that it neither holds a run of (Running) nor reported was lost
// with the previous one and fails. The same daemon registering again (its
// inventory changed, or a controller forgot it) keeps all its jobs.
func (s *State) applyRegister(c *RegisterNode, index uint64) {
	info := c.Info
	reports := info.Reports
	info.Reports = nil // applied here, not kept in the node's record
	old := s.Nodes[info.Name]
	n := &api.Node{NodeInfo: info, Registered: c.Now, LastSeen: c.Now}
	n.Name = s.intern(n.Name)
	if old != nil {
		// Operator state and the node's jobs stay; a node that was DOWN
		// holds none (applyNodeDown took them off).
		n.Drain, n.Reason = old.Drain, old.Reason
		if old.Down && !old.Drain {
			n.Reason = ""
		}
		for _, id := range old.Jobs {
			j := s.Jobs[id]
			if j == nil {
				continue
			}
			n.Jobs = append(n.Jobs, id)
			if !j.CPUsLent {
				n.AllocCPUs += j.CPUs
			}
			n.AllocMemMB += j.MemMB + j.OverheadMB
		}
	}
	s.putNode(n, index)
	for _, r := range reports {
		s.applyReport(n.Name, r, c.Now, index)
	}
	if old == nil || old.BootID == info.BootID {
		return
	}
	for _, id := range slices.Clone(s.Nodes[n.Name].Jobs) {
		if slices.Contains(info.Running, id) {
			continue
		}
		if j := s.Jobs[id]; j != nil {
			s.releaseJob(j, index)
			s.failJob(j, c.Now, "node "+info.Name+" restarted without the job", index)
		}
	}
}

// failJob ends an active job whose node lost it: requeued when it asked for
// it, NODE_FAIL otherwise. A COMPLETING job takes its final state.
func (s *State) failJob(old *api.Job, now time.Time, msg string, index uint64) {
	s.chargeUsage(old, now)
	j := *old
	switch {
	case j.State == api.StateCompleting:
		j.State = j.FinalState
		j.FinalState = ""
	case j.Spec.Requeue:
		j.State = api.StatePending
	default:
		j.State = api.StateNodeFail
	}
	j.CPUsLent = false
	if j.State == api.StatePending {
		s.requeue(&j)
	} else {
		j.EndTime = now
	}
	j.Message = msg
	s.putJob(&j)
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

// requeue resets a job that held a node to PENDING for another run.
func (s *State) requeue(j *api.Job) {
	j.State, j.Reason = api.StatePending, api.ReasonNone
	j.Restarts++
	j.Node, j.StartIndex = "", 0
	j.StartTime, j.EndTime, j.EstStart = time.Time{}, time.Time{}, time.Time{}
	j.SuspendedFor, j.SuspendTime = 0, time.Time{}
	j.ExitCode, j.Signal = 0, 0
}

func (s *State) applyHeartbeats(c *NodeHeartbeats) {
	for name, t := range c.Seen {
		if n := s.editNode(name); n != nil && t.After(n.LastSeen) {
			n.LastSeen = t
			s.Nodes[name] = n
		}
	}
}

func (s *State) applyReports(c *JobReports, index uint64) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, r := range c.Reports {
		if !s.applyReport(c.Node, r, c.Now, index) {
			// A stale or duplicate report: the daemon may forget it.
			res.Errors[r.JobID] = "stale report"
			continue
		}
		res.Changed = append(res.Changed, r.JobID)
	}
	return res
}

// applyReport applies node's report of how one run ended and says whether
// it changed anything: a report of a run the job no longer has (its node or
// StartIndex differ: a duplicate, or a run the controllers already took as
// lost) changes nothing. A job being stopped (COMPLETING) takes the state it
// was stopped for. A run reported NODE_FAIL was lost to the node (its daemon
// lost it, or stopped it when its lease ran out), as on a node declared
// DOWN: a job that asked for it is requeued, as failJob does. Any other
// outcome is final: a job that completed is never requeued. A run reported
// in a state that is not an end (no daemon sends one) is taken as FAILED,
// so that the job never stays active without a run.
func (s *State) applyReport(node string, r api.JobReport, now time.Time, index uint64) bool {
	old := s.Jobs[r.JobID]
	if old == nil || old.Node != node || old.StartIndex != r.StartIndex || !old.State.Active() {
		return false
	}
	if !r.State.Terminal() {
		r.State, r.Message = api.StateFailed, joinNonEmpty(r.Message, fmt.Sprintf("node %s reported the run %q, which is not an end", node, r.State))
	}
	j := *old
	switch {
	case j.State == api.StateCompleting && j.FinalState != "":
		j.State = j.FinalState
	case r.State == api.StateNodeFail && j.Spec.Requeue:
		j.State = api.StatePending
		j.Message = r.Message
	default:
		j.State = r.State
	}
	j.FinalState = ""
	if !j.SuspendTime.IsZero() {
		j.SuspendedFor += now.Sub(j.SuspendTime)
		j.SuspendTime = time.Time{}
	}
	s.chargeUsage(&j, now)
	s.releaseJob(&j, index)
	j.CPUsLent = false
	if j.State == api.StatePending {
		// Requeued (by preemption, or a lost run): back in the queue with
		// its original submit time, ready to run again at once.
		s.requeue(&j)
		s.putJob(&j)
		return true
	}
	j.ExitCode, j.Signal = r.ExitCode, r.Signal
	if r.Message != "" {
		j.Message = r.Message
	}
	j.EndTime = now
	s.putJob(&j)
	return true
}

func (s *State) applyNodeDown(c *NodeDown, index uint64) {
	for _, name := range c.Nodes {
		n := s.editNode(name)
		if n == nil || n.Down {
			continue
		}
		n.Down = true
		n.Reason = c.Reason
		jobs := n.Jobs
		n.Jobs = nil
		n.AllocCPUs, n.AllocMemMB = 0, 0
		s.putNode(n, index)
		for _, id := range jobs {
			if j := s.Jobs[id]; j != nil && j.State.Active() {
				s.failJob(j, c.Now, "node "+name+" stopped responding", index)
			}
		}
	}
}

func (s *State) applyDrain(c *NodeDrain) error {
	n := s.editNode(c.Node)
	if n == nil {
		return fmt.Errorf("node %s: no such node", c.Node)
	}
	n.Drain = c.Drain
	n.Reason = c.Reason
	if !c.Drain {
		n.Reason = ""
	}
	s.Nodes[c.Node] = n
	return nil
}

func (s *State) applySuspend(c *SuspendJobs, index uint64) *IDsResult {
	return s.eachJob(c.IDs, func(j *api.Job) string {
		switch {
		case c.Suspend && j.State != api.StateRunning:
			return fmt.Sprintf("is %s; only running jobs can be suspended", j.State)
		case !c.Suspend && j.State != api.StateSuspended:
			return fmt.Sprintf("is %s; only suspended jobs can be resumed", j.State)
		}
		if !c.Suspend && j.CPUsLent && !c.Preempt {
			return "is suspended by preemption; it resumes when its CPUs are free"
		}
		if !c.Suspend && j.CPUsLent {
			// Take the lent CPUs back, if they are free.
			n := s.Nodes[j.Node]
			if n == nil || n.FreeCPUs() < j.CPUs {
				return "its CPUs are still in use"
			}
		}
		if c.Suspend {
			j.State, j.SuspendTime = api.StateSuspended, c.Now
		} else {
			j.State = api.StateRunning
			j.SuspendedFor += c.Now.Sub(j.SuspendTime)
			j.SuspendTime = time.Time{}
		}
		if c.Preempt && c.Suspend != j.CPUsLent {
			j.CPUsLent = c.Suspend
			j.PreemptedBy = 0
			if c.Suspend {
				j.PreemptedBy = c.By
			}
			if n := s.editNode(j.Node); n != nil {
				if c.Suspend {
					n.AllocCPUs -= j.CPUs
				} else {
					n.AllocCPUs += j.CPUs
				}
				s.putNode(n, index)
				return ""
			}
		}
		s.bumpNode(j.Node, index)
		return ""
	})
}
