package state

import (
	"fmt"
	"maps"
	"slices"

	"corral/api"
	"corral/migrate"
)

// CheckInvariants says what is wrong with the state's allocations, or nil:
// every active allocation is listed by its job and its node, and by no other
// node; no CPU id, GPU, MIG instance or VF is held by two active
// allocations of a node; a node's allocated CPUs and memory are the sum of
// what its allocations hold; a job's state agrees with its allocations'
// (RUNNING, SUSPENDED or COMPLETING exactly while one is active), and the
// pending index holds exactly the pending jobs. Tests and fuzz targets call
// it after every entry; it reads every record, so it is not for the
// controller's hot path.
func (s *State) CheckInvariants() error {
	for _, name := range sortedKeys(s.Nodes) {
		if err := s.checkNode(s.Nodes[name]); err != nil {
			return err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Allocs)) {
		a := s.Allocs[id]
		j := s.Jobs[a.Job]
		switch {
		case a.ID != id:
			return fmt.Errorf("allocation %d is stored as %d", a.ID, id)
		case j == nil:
			return fmt.Errorf("allocation %d names job %d, which is not in the state", id, a.Job)
		case !slices.Contains(j.Allocs, id):
			return fmt.Errorf("allocation %d of job %d is not in the job's list %v", id, a.Job, j.Allocs)
		}
		if n := s.Nodes[a.Node]; a.Active() && (n == nil || !slices.Contains(n.Allocs, id)) {
			return fmt.Errorf("active allocation %d of job %d is not listed by its node %s", id, a.Job, a.Node)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Jobs)) {
		if err := s.checkJob(s.Jobs[id]); err != nil {
			return err
		}
	}
	return s.checkPendingList()
}

// checkPendingList checks the ordered pending list the pass reads against
// the pending index: the same jobs, the current record of each, by id.
func (s *State) checkPendingList() error {
	n := 0
	for i, j := range s.pendingJobs {
		if i > 0 && s.pendingIDs[i-1] >= s.pendingIDs[i] {
			return fmt.Errorf("the pending list is out of order at job %d", s.pendingIDs[i])
		}
		if j == nil {
			continue
		}
		n++
		if j.ID != s.pendingIDs[i] || s.Jobs[j.ID] != j || j.State != api.StatePending {
			return fmt.Errorf("the pending list holds job %d (%s), not the state's pending record", j.ID, j.State)
		}
	}
	if n != len(s.Pending) {
		return fmt.Errorf("the pending list holds %d jobs, the pending index %d", n, len(s.Pending))
	}
	return nil
}

// checkNode checks one node's allocation list and sums.
func (s *State) checkNode(n *Node) error {
	cpus, mem := 0, int64(0)
	held := map[string]uint64{} // "cpu 3", "dev GPU-1" → the allocation holding it
	for _, id := range n.Allocs {
		a := s.Allocs[id]
		if a == nil || !a.Active() || a.Node != n.Name {
			return fmt.Errorf("node %s lists allocation %d, which is not an active allocation on it", n.Name, id)
		}
		cpus += a.HeldCPUs()
		mem += a.HeldMemMB()
		if a.Placement == nil {
			continue
		}
		var things []string
		if !a.CPUsLent {
			for _, c := range a.Placement.CPUs {
				things = append(things, fmt.Sprint("CPU ", c))
			}
		}
		for _, d := range slices.Concat(a.Placement.GPUs, a.Placement.MIG, a.Placement.VFs) {
			things = append(things, "device "+d)
		}
		for _, t := range things {
			if other, ok := held[t]; ok {
				return fmt.Errorf("node %s: %s is held by allocations %d and %d", n.Name, t, other, id)
			}
			held[t] = id
		}
	}
	if cpus != n.AllocCPUs || mem != n.AllocMemMB {
		return fmt.Errorf("node %s counts %d CPUs and %d MiB allocated; its allocations hold %d and %d", n.Name, n.AllocCPUs, n.AllocMemMB, cpus, mem)
	}
	return nil
}

// checkMigration checks a job's migration under way against its
// allocations: a source (and a placed destination) active and not given up
// before the switch; and that every allocation given up (Leaving) is the
// source of a switched-over migration of the job, the destination of an
// aborted one, or a run saved to a checkpoint.
func (s *State) checkMigration(j *Job) error {
	if m := s.LiveMigration(j); m != nil && m.Phase.BeforeSwitch() {
		for _, id := range []uint64{m.Source, m.Dest} {
			if a := s.Allocs[id]; id != 0 && (a == nil || !a.Active() || a.Leaving) {
				return fmt.Errorf("job %d's migration %d (%s) has allocation %d, which is not active and its own", j.ID, m.ID, m.Phase, id)
			}
		}
	}
	for _, a := range s.activeAllocs(j) {
		if !a.Leaving {
			continue
		}
		// A run saved to a checkpoint is stopped as SUSPENDED; its job
		// may be in the queue already, or restored elsewhere.
		given := a.Desired == AllocStop && a.StopAs == api.StateSuspended
		for _, id := range j.Migrations {
			m := s.Migrations[id]
			given = given || m != nil && (m.Source == a.ID && !m.Phase.BeforeSwitch() && m.Phase != migrate.Aborted ||
				m.Dest == a.ID && m.Phase == migrate.Aborted)
		}
		if !given {
			return fmt.Errorf("job %d's allocation %d is given up by no migration of the job", j.ID, a.ID)
		}
	}
	return nil
}

// checkJob checks that a job's state agrees with its allocations.
func (s *State) checkJob(j *Job) error {
	for _, id := range j.Allocs {
		if a := s.Allocs[id]; a == nil || a.Job != j.ID {
			return fmt.Errorf("job %d lists allocation %d, which is not one of its own", j.ID, id)
		}
	}
	running := s.runningAllocs(j)
	// A live migration's source and destination both run until the
	// switch (on two nodes, both of rank 0: checkMigration checks them).
	var pair [2]uint64
	if m := s.LiveMigration(j); m != nil && m.Phase.BeforeSwitch() {
		pair = [2]uint64{m.Source, m.Dest}
	}
	for i, a := range running {
		for _, b := range running[:i] {
			if pair[1] != 0 && (pair == [2]uint64{b.ID, a.ID} || pair == [2]uint64{a.ID, b.ID}) && a.Node != b.Node {
				continue
			}
			if a.Node == b.Node || a.Rank == b.Rank {
				return fmt.Errorf("job %d has two running allocations, %d and %d, on node %s / %s of ranks %d / %d", j.ID, b.ID, a.ID, b.Node, a.Node, b.Rank, a.Rank)
			}
		}
	}
	want, ok := jobState(s.runningAllocs(j))
	if ok && want == api.StateRunning && s.LiveMigration(j) != nil {
		want = api.StateMigrating
	}
	if err := s.checkMigration(j); err != nil {
		return err
	}
	switch {
	case ok && j.State != want:
		return fmt.Errorf("job %d is %s; its active allocations make it %s", j.ID, j.State, want)
	case !ok && j.State.Active() && !Checkpointed(j):
		return fmt.Errorf("job %d is %s without an active allocation", j.ID, j.State)
	case !ok && j.State != api.StatePending && !j.State.Terminal() && !Checkpointed(j):
		return fmt.Errorf("job %d is %s, neither pending nor finished, without an active allocation", j.ID, j.State)
	}
	if _, indexed := s.Pending[j.ID]; indexed != (j.State == api.StatePending) {
		return fmt.Errorf("job %d is %s but the pending index says %v", j.ID, j.State, indexed)
	}
	return nil
}
