package state

import "time"

// This file reports what each apply ended, for the controller's accounting
// records (package accounting builds them): the allocations that ended, the
// jobs that finished, the jobs a purge removed with their allocations, and
// the nodes whose registration, liveness or drain changed (when each node's
// time starts counting as up, down or drained).
// It is scratch, never replicated, and it decides nothing: a state that
// does not track ends (the simulator, tests) keeps none.

// Ends is what the applies since the last TakeEnds ended or removed.
type Ends struct {
	// Allocs are the allocations that ended, in the order they did.
	Allocs []uint64
	// Jobs are the jobs that finished (took a terminal state).
	Jobs []uint64
	// Purged are the finished jobs a PurgeJobs entry removed, as they
	// were, with their allocations: their records must exist before the
	// state forgets them.
	Purged []PurgedJob
	// Nodes are the nodes an apply registered, declared down, drained,
	// resumed or attested, at the entry's time.
	Nodes []NodeChange
}

// NodeChange is an apply's change to node Node at time At.
type NodeChange struct {
	Node string
	At   time.Time
}

// Empty reports whether nothing ended.
func (e Ends) Empty() bool {
	return len(e.Allocs) == 0 && len(e.Jobs) == 0 && len(e.Purged) == 0 && len(e.Nodes) == 0
}

// PurgedJob is a finished job a purge removed and its allocations.
type PurgedJob struct {
	Job    *Job
	Allocs []*Allocation
}

// endTracker collects Ends while tracking is on.
type endTracker struct {
	on   bool
	ends Ends
}

// TrackEnds turns the collection of Ends on or off.
func (s *State) TrackEnds(on bool) {
	s.endTrack.on = on
	if !on {
		s.endTrack.ends = Ends{}
	}
}

// TakeEnds returns what ended since the last call and forgets it.
func (s *State) TakeEnds() Ends {
	e := s.endTrack.ends
	s.endTrack.ends = Ends{}
	return e
}

func (s *State) noteAllocEnd(id uint64) {
	if s.endTrack.on {
		s.endTrack.ends.Allocs = append(s.endTrack.ends.Allocs, id)
	}
}

func (s *State) noteJobEnd(id uint64) {
	if s.endTrack.on {
		s.endTrack.ends.Jobs = append(s.endTrack.ends.Jobs, id)
	}
}

// noteNode records that an apply at time at changed node name.
func (s *State) noteNode(name string, at time.Time) {
	if s.endTrack.on {
		s.endTrack.ends.Nodes = append(s.endTrack.ends.Nodes, NodeChange{Node: name, At: at})
	}
}

// notePurge keeps job j and its allocations before removeJob drops them.
func (s *State) notePurge(j *Job) {
	if !s.endTrack.on {
		return
	}
	p := PurgedJob{Job: j}
	for _, id := range j.Allocs {
		if a := s.Allocs[id]; a != nil {
			p.Allocs = append(p.Allocs, a)
		}
	}
	s.endTrack.ends.Purged = append(s.endTrack.ends.Purged, p)
}
