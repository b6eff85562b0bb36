package sched

import (
	"time"

	"corral/api"
	"corral/ctld/state"
)

// NewSnapshot builds the snapshot of one pass over s at now. Every list is
// built in a sorted order (pending jobs by id, nodes by name, runs by node
// then allocation id), never in map order, so the same state gives the
// same snapshot, and the pass the same plan, on every member and in the
// simulator. It reads s's maps: the controller calls it under its read
// lock; the snapshot keeps only immutable records.
//
// Everything the pass decides with comes from the state: its partitions
// and the scheduler configuration (the memory per CPU of jobs that ask for
// none, the policy) are replicated, so every member plans alike.
func NewSnapshot(s *state.State, now time.Time) *Snapshot {
	snap := &Snapshot{}
	fillSnapshot(snap, s, now)
	return snap
}

// fillSnapshot builds the snapshot of s at now into snap, reusing the
// arrays of its lists (Pending, Nodes, Running, Moves) and its
// Reservations, Going and Stuck maps; every other field is rebuilt.
func fillSnapshot(snap *Snapshot, s *state.State, now time.Time) {
	policy := Policy(s.Config.SchedulerPolicy)
	switch policy {
	case PolicyFCFS, PolicyEASY, PolicyConservative:
	default:
		var err error
		if policy, err = ParsePolicy(s.Config.SchedulerPolicy); err != nil {
			policy = PolicyEASY
		}
	}
	resv := snap.Reservations
	clear(resv)
	*snap = Snapshot{Now: now, DefMemPerCPU: s.Config.DefMemPerCPU, Policy: policy, Partitions: s.PartitionList(), Config: s.Config,
		Pending: snap.Pending[:0], Nodes: snap.Nodes[:0], Running: snap.Running[:0], Advance: snap.Advance[:0], Moves: snap.Moves[:0],
		Going: snap.Going, Stuck: snap.Stuck}
	if policy == PolicyConservative {
		snap.Reservations = resv // made when the first is found
	}
	fillMoves(snap, s)
	if len(s.Reservations) > 0 {
		for _, name := range s.ResvNames() {
			snap.Advance = append(snap.Advance, s.Reservations[name])
		}
	}
	var deps depTargets
	if snap.Pending == nil || cap(snap.Pending) < len(s.Pending) {
		snap.Pending = make([]*state.Job, 0, len(s.Pending))
	}
	s.EachPending(func(j *state.Job) {
		snap.Pending = append(snap.Pending, j)
		if j.Spec.Dependency != nil {
			deps.collect(j.Spec.Dependency, s)
		}
		if j.EstNode != "" && policy == PolicyConservative {
			// The reservations are replicated with the plans that made
			// them, so a new leader keeps every one of them. Only
			// conservative backfill reads them back.
			if snap.Reservations == nil {
				snap.Reservations = map[uint64]Reservation{}
			}
			snap.Reservations[j.ID] = Reservation{Start: j.EstStart, Node: j.EstNode}
		}
	})
	if snap.Nodes == nil || cap(snap.Nodes) < len(s.Nodes) {
		snap.Nodes = make([]*state.Node, 0, len(s.Nodes))
	}
	clear(snap.Going)
	clear(snap.Stuck)
	movers := moversOf(s)
	for _, name := range s.NodeNames() {
		n := s.Nodes[name]
		snap.Nodes = append(snap.Nodes, n)
		for _, id := range n.Allocs {
			if a := s.Allocs[id]; a != nil && a.Active() {
				if j := s.Jobs[a.Job]; j != nil {
					snap.Running = append(snap.Running, Run{Alloc: a, Job: j})
					if len(j.Migrations) > 0 || j.Checkpoint != nil || movers.may(j) {
						noteGoing(snap, s, j, a, movers) // most runs have none of these
					}
				}
			}
		}
	}
	snap.QOS = s.QOS // replaced, never changed, by the entries that change it
	snap.Fairshare = s.FairshareFactors(now)
	deps.install(snap)
}

// depTargets is what a pass needs to evaluate dependencies: the jobs named,
// every record of the arrays named, and single tasks named as 12_5. The
// maps are made when the first dependency is collected: most passes have
// none.
type depTargets struct {
	jobs   map[uint64]*state.Job
	arrays map[uint64][]*state.Job
	tasks  map[api.TaskRef]*state.Job
}

// collect records the targets of dependency d.
func (t *depTargets) collect(d *state.Dependency, s *state.State) {
	if t.jobs == nil {
		t.jobs, t.arrays, t.tasks = map[uint64]*state.Job{}, map[uint64][]*state.Job{}, map[api.TaskRef]*state.Job{}
	}
	for _, cl := range d.Clauses {
		for _, tg := range cl.Targets {
			switch tg.Kind {
			case state.DepTask:
				tr := api.TaskRef{Array: tg.Job, Task: tg.Task}
				if j, _ := s.ResolveTask(tr); j != nil {
					t.tasks[tr] = j
				}
				continue
			case state.DepArray:
				if _, done := t.arrays[tg.Job]; !done {
					t.arrays[tg.Job] = s.ArrayRecords(tg.Job)
				}
			}
			if j := s.Jobs[tg.Job]; j != nil {
				t.jobs[tg.Job] = j
			}
		}
	}
}

// install sets the snapshot's lookups over the collected targets; when no
// pending job has a dependency, lookups that find nothing.
func (t *depTargets) install(snap *Snapshot) {
	if t.jobs == nil {
		snap.Lookup, snap.Array, snap.LookupTask = noJob, noArray, noTask
		return
	}
	// The lookups keep a copy of their own: t is the caller's, made
	// for every pass, and stays off the heap when no job has a
	// dependency.
	c := &depTargets{jobs: t.jobs, arrays: t.arrays, tasks: t.tasks}
	snap.Lookup = func(id uint64) *state.Job { return c.jobs[id] }
	snap.Array = func(id uint64) []*state.Job { return c.arrays[id] }
	var byTask map[api.TaskRef]*state.Job // the arrays' records by task, built on first use
	snap.LookupTask = func(array uint64, task int) *state.Job {
		ref := api.TaskRef{Array: array, Task: task}
		if j := c.tasks[ref]; j != nil {
			return j
		}
		if byTask == nil {
			byTask = map[api.TaskRef]*state.Job{}
			for id, recs := range c.arrays {
				for _, j := range recs {
					if j.IsArrayTask() {
						byTask[api.TaskRef{Array: id, Task: j.ArrayTaskID}] = j
					}
				}
			}
		}
		if j := byTask[ref]; j != nil {
			return j
		}
		if recs := c.arrays[array]; len(recs) > 0 && recs[0].IsArrayPending() && recs[0].ArrayPending.Contains(task) {
			return recs[0]
		}
		return nil
	}
}

// The lookups of a pass whose jobs name no dependency.
func noJob(uint64) *state.Job       { return nil }
func noArray(uint64) []*state.Job   { return nil }
func noTask(uint64, int) *state.Job { return nil }
