package state

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
)

// applyRegister records a node daemon's registration. The reports it
// carries are applied first, exactly as reports are (see applyReport): how
// the runs that ended while no daemon or no controller listened ended. Then,
// when the daemon is a new incarnation (another boot id), every allocation
// on the node whose job it neither holds a run of (Running) nor reported
// was lost with the previous one. The same daemon registering again (its
// inventory changed, or a controller forgot it) keeps all its allocations.
func (s *State) applyRegister(c *RegisterNode, index uint64) error {
	info := c.Info
	reports := info.Reports
	old := s.Nodes[info.Name]
	if err := s.CheckNodeKey(info.Name, c.Key); err != nil {
		return err
	}
	n := nodeFromInfo(&info)
	n.Registered, n.LastSeen, n.Key = c.Now, c.Now, c.Key
	n.Name = s.intern(n.Name)
	if old != nil {
		if n.Key == "" {
			n.Key = old.Key
		}
		// Operator state and the node's allocations and checkpoints
		// stay; a node that was DOWN holds no allocation (applyNodeDown
		// ended them).
		n.Drain, n.Checkpoints = old.Drain, old.Checkpoints
		n.DrainMigrate, n.DrainNote = old.DrainMigrate, old.DrainNote
		n.OpFeatures, n.OpFeaturesBy = old.OpFeatures, old.OpFeaturesBy
		n.setReason(old.Reason, old.ReasonUser, old.ReasonTime)
		if old.Down && !old.Drain {
			n.setReason("", "", time.Time{})
		}
		for _, id := range old.Allocs {
			if a := s.Allocs[id]; a != nil && a.Active() {
				n.Allocs = append(n.Allocs, id)
				n.AllocCPUs += a.HeldCPUs()
				n.AllocMemMB += a.HeldMemMB()
				n.AllocTmpMB += a.HeldTmpMB()
			}
		}
	}
	s.putNode(n, index)
	s.noteNode(n.Name, c.Now)
	for _, r := range reports {
		s.applyReport(n.Name, r, c.Now, index)
	}
	if old == nil || old.BootID == info.BootID {
		return nil
	}
	for _, id := range slices.Clone(s.Nodes[n.Name].Allocs) {
		if a := s.Allocs[id]; a != nil && !slices.Contains(info.Running, a.Job) {
			s.loseAlloc(a, c.Now, "node "+info.Name+" restarted without the job", index)
		}
	}
	return nil
}

// CheckNodeKey says why node may not act with the key of fingerprint key:
// it registered with another. Nil when the node is new, has no key yet, or
// key is empty (a cluster without TLS proves none).
func (s *State) CheckNodeKey(node, key string) error {
	n := s.Nodes[node]
	if n == nil || n.Key == "" || key == "" || n.Key == key {
		return nil
	}
	return fmt.Errorf("node %s registered with another key (%s…); this one (%s…) is refused: if the node was reinstalled, an operator forgets the old key (corral node forget-key %s)",
		node, n.Key[:min(12, len(n.Key))], key[:min(12, len(key))], node)
}

func (s *State) applyForgetKey(c *ForgetNodeKey) error {
	n := s.editNode(c.Node)
	if n == nil {
		return fmt.Errorf("node %s: no such node", c.Node)
	}
	n.Key = ""
	s.Nodes[c.Node] = n
	return nil
}

// applySetNodeFeatures sets a node's features in place of its daemon's,
// or gives them back to the daemon's report (Reset).
func (s *State) applySetNodeFeatures(c *SetNodeFeatures) error {
	n := s.editNode(c.Node)
	if n == nil {
		return fmt.Errorf("node %s: no such node", c.Node)
	}
	n.OpFeatures, n.OpFeaturesBy = nil, ""
	if !c.Reset {
		n.OpFeatures, n.OpFeaturesBy = sortedFeatures(c.Features), c.By
		if n.OpFeaturesBy == "" {
			n.OpFeaturesBy = controllerUser
		}
	}
	s.Nodes[c.Node] = n
	return nil
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
	// Errors is made for the first stale report: most entries have none.
	res := &IDsResult{Changed: make([]uint64, 0, len(c.Reports))}
	for _, r := range c.Reports {
		if !s.applyReport(c.Node, r, c.Now, index) {
			// A stale or duplicate report: the daemon may forget it.
			if res.Errors == nil {
				res.Errors = map[uint64]string{}
			}
			res.Errors[r.JobID] = "stale report"
			continue
		}
		res.Changed = append(res.Changed, r.JobID)
	}
	return res
}

// reportedAlloc returns the active allocation on node that report r names:
// by its allocation id, or, from a daemon that predates allocation ids, by
// its job and start index.
func (s *State) reportedAlloc(node string, r api.JobReport) *Allocation {
	if r.Alloc != 0 {
		if a := s.Allocs[r.Alloc]; a != nil && a.Active() && a.Node == node && a.Job == r.JobID {
			return a
		}
		return nil
	}
	n := s.Nodes[node]
	if n == nil {
		return nil
	}
	for _, id := range n.Allocs {
		if a := s.Allocs[id]; a != nil && a.Active() && a.Job == r.JobID && a.StartIndex == r.StartIndex {
			return a
		}
	}
	return nil
}

// applyReport applies node's report of how one run ended and says whether
// it changed anything: a report of a run that is not active on the node (a
// duplicate, or a run the controllers already took as lost) changes
// nothing. A run being stopped takes the state it was stopped for. A run
// reported NODE_FAIL was lost to the node (its daemon lost it, or stopped
// it when its lease ran out), as on a node declared DOWN: a job that asked
// for it is requeued. Any other outcome is final: a job that completed is
// never requeued. A run reported in a state that is not an end (no daemon
// sends one) is taken as FAILED, so that a job never stays active without
// a run.
func (s *State) applyReport(node string, r api.JobReport, now time.Time, index uint64) bool {
	a := s.reportedAlloc(node, r)
	if a == nil {
		return false
	}
	j := s.editJob(a.Job)
	if j == nil {
		return false
	}
	if !r.State.Terminal() {
		r.State, r.Message = api.StateFailed, joinNonEmpty(r.Message, fmt.Sprintf("node %s reported the run %q, which is not an end", node, r.State))
	}
	if a.Leaving {
		s.endLeaving(j, a, r.State, r.Message, now, index)
		return true
	}
	final := r.State
	decides := a.Desired != AllocStop
	switch {
	case !decides && a.StopAs != "":
		final = a.StopAs
	case r.State == api.StateNodeFail && j.Spec.Requeue:
		final = api.StatePending
		j.Message = r.Message
	}
	ended := s.endAlloc(a, r.State, now, index)
	ended.CPUSeconds, ended.PeakMemKB = r.CPUSeconds, r.PeakMemKB
	if r.VMStart == api.VMStartWarm || r.VMStart == api.VMStartCold {
		ended.VMStart = r.VMStart
	}
	if s.LiveMigration(j) != nil {
		// Only then is how it ended told (formatting it for every report
		// cost the simulator a tenth of its applies).
		s.migrationAllocEnded(j, ended, fmt.Sprintf("%s %s", r.State, r.Message), now, index)
	}
	if decides && j.Spec.MultiNode() {
		s.stopRun(j, final, index)
	}
	s.finishRun(j, final, now)
	s.checkpointRunEnded(j, index)
	switch {
	case j.State == api.StatePending:
	case j.Spec.MultiNode():
		// The batch script's node says how the job ended; another node's
		// report says why only when its end ended the job.
		if a.Rank == 0 {
			j.ExitCode, j.Signal = r.ExitCode, r.Signal
		}
		if r.Message != "" && (a.Rank == 0 || decides) {
			j.Message = r.Message
		}
	case !j.State.Active():
		j.ExitCode, j.Signal = r.ExitCode, r.Signal
		if r.Message != "" {
			j.Message = r.Message
		}
	}
	s.putJob(j)
	return true
}

func (s *State) applyNodeDown(c *NodeDown, index uint64) {
	for _, name := range c.Nodes {
		n := s.editNode(name)
		if n == nil || n.Down {
			continue
		}
		n.Down = true
		n.setReason(c.Reason, controllerUser, c.Now)
		s.putNode(n, index)
		s.noteNode(name, c.Now)
		for _, id := range n.Allocs {
			if a := s.Allocs[id]; a != nil && a.Active() {
				s.loseAlloc(a, c.Now, "node "+name+" stopped responding", index)
			}
		}
	}
}

func (s *State) applyDrain(c *NodeDrain) error {
	n := s.editNode(c.Node)
	if n == nil {
		return fmt.Errorf("node %s: no such node", c.Node)
	}
	byHealth := n.Drain && n.ReasonUser == api.HealthCheckUser
	if c.Health && (c.Drain && n.Drain && !byHealth || !c.Drain && !byHealth) {
		return nil // another's drain stays; only the check's own is undone
	}
	n.Drain = c.Drain
	n.DrainMigrate, n.DrainNote = c.Drain && c.Migrate, ""
	n.setReason(c.Reason, c.By, c.Now)
	if !c.Drain {
		n.setReason("", "", time.Time{})
	}
	s.Nodes[c.Node] = n
	s.noteNode(c.Node, c.Now)
	return nil
}
