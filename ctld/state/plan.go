package state

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
)

// PlanResult says what a plan did.
type PlanResult struct {
	Started  []uint64
	Rejected []uint64
}

// CheckStart says why a start cannot be applied to the current state, or ""
// when it can. used tracks CPUs and memory already taken by earlier starts
// of the same plan that are not applied yet (nil when they are).
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
	if st.CPUs < j.Spec.CPUs() {
		return "fewer CPUs than the job asked for"
	}
	if st.Placement != nil {
		return s.checkPlacement(n, st.Placement)
	}
	return ""
}

// NodeUsed returns what the active allocations on node n hold inside it.
func (s *State) NodeUsed(n *Node) *Used {
	used := NewUsed()
	for _, id := range n.Allocs {
		if a := s.Allocs[id]; a != nil {
			used.AddAlloc(a)
		}
	}
	return used
}

// checkPlacement says why a placement cannot be applied on node n: a CPU,
// GPU, MIG instance or VF it names does not exist there or is already held
// by another allocation, or a NUMA node lacks the memory or hugepages. The
// plan's apply refuses a start that double-books anything.
func (s *State) checkPlacement(n *Node, p *api.Placement) string {
	inv := n.Inventory
	if inv == nil || inv.Topology == nil {
		return fmt.Sprintf("node %s reported no topology", n.Name)
	}
	used := s.NodeUsed(n)
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
func (s *State) splitTask(arr *Job, task int, newID uint64) *Job {
	rest := arr.ArrayPending.Without(task)
	if rest.Empty() {
		arr.ArrayPending, arr.ArrayTaskID = nil, task
		return arr
	}
	arr.ArrayPending = rest
	s.putJob(arr)
	t := *arr
	t.ID, t.ArrayPending, t.ArrayTaskID, t.Allocs = newID, nil, task, nil
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
		s.newAlloc(j, st, c.Now, index)
		j.State, j.Reason = api.StateRunning, api.ReasonNone
		j.StartTime, j.EstStart, j.EndTime = c.Now, time.Time{}, time.Time{}
		j.ExitCode, j.Signal, j.Message = 0, 0, ""
		s.putJob(j)
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
