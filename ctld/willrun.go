package ctld

import (
	"slices"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// willRun answers sbatch --test-only for jobs already admitted (defaults
// filled in, validated): each is added, as a pending job with the id it
// would have been given, to a snapshot of the state, and one pass runs
// over it under conservative backfill, which gives every job it cannot
// start now the start it reserves it (EASY would give only the first
// waiting job one). Nothing is proposed: the pass's plan is read and
// dropped.
func (c *Controller) willRun(specs []state.JobSpec, now time.Time) []api.WillRun {
	var snap *sched.Snapshot
	first := uint64(0)
	c.fsm.Read(func(s *state.State) {
		snap = sched.NewSnapshot(s, now)
		first = s.NextJobID
		// The snapshot's list may share its array with the state's:
		// the trial jobs go into a copy.
		pending := slices.Clip(snap.Pending)
		for i := range specs {
			spec := specs[i]
			spec.Dependency = s.ResolveDependency(spec.Dependency)
			j := &state.Job{ID: first + uint64(i), Spec: &spec, State: api.StatePending, SubmitTime: now}
			if spec.Hold {
				j.Reason = api.ReasonJobHeldUser
			}
			pending = append(pending, j)
		}
		snap.Pending = pending
	})
	snap.Policy = sched.PolicyConservative
	plan := sched.Schedule(snap)
	out := make([]api.WillRun, len(specs))
	for i := range specs {
		id := first + uint64(i)
		w := api.WillRun{JobID: id, Partition: specs[i].Partition, CPUs: specs[i].CPUs()}
		if k := slices.IndexFunc(plan.Starts, func(st sched.Start) bool { return st.JobID == id }); k >= 0 {
			w.Start, w.Node = now, plan.Starts[k].Node
		} else if r, ok := plan.Reservations[id]; ok {
			w.Start, w.Node = r.Start, r.Node
		} else {
			w.Reason = plan.Reasons[id]
		}
		out[i] = w
	}
	return out
}
