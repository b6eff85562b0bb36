package sched

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// TestScheduleDependencies checks each dependency type against its target's
// state. Each case queues job 1 on an idle node; it either starts ("ready")
// or waits with the given reason. Targets (jobs 5, 6, ...) are known to
// Lookup but not pending unless a case queues them.
func TestScheduleDependencies(t *testing.T) {
	ready := []string{"1@n1"}
	waits := func(r api.Reason) map[uint64]api.Reason { return map[uint64]api.Reason{1: r} }
	dependency, never := waits(api.ReasonDependency), waits(api.ReasonDependencyNeverSatisfied)
	one := func(j jobB, targets ...jobB) *scene {
		return at(t0).with(nodes(1)).queue(j).known(targets...)
	}
	runScenarios(t, map[string]scenario{
		// after: the target has started (or ended without starting).
		"after: target not started yet":        {scene: one(job(1).after(5), job(5)), reasons: dependency},
		"after: target running":                {scene: one(job(1).after(5), job(5).runningFor(time.Second)), starts: ready},
		"after: target cancelled while queued": {scene: one(job(1).after(5), job(5).cancelledWhilePending()), starts: ready},
		"after: target failed":                 {scene: one(job(1).after(5), job(5).failed()), starts: ready},

		// after:<id>+<minutes>: the target has run that long, or ended.
		"after+10: target started 5 minutes ago": {
			// The delay ends 5 minutes from now: the controller wakes then.
			scene: one(job(1).afterPlus(5, 10), job(5).runningFor(5*time.Minute)), reasons: dependency,
			wake: t0.Add(5 * time.Minute),
		},
		"after+10: target started exactly 10 minutes ago": {
			scene: one(job(1).afterPlus(5, 10), job(5).runningFor(10*time.Minute)), starts: ready,
		},
		"after+10: target ended before 10 minutes": {
			scene:  one(job(1).afterPlus(5, 10), job(5).state(api.StateCompleted).startedAt(t0.Add(-time.Minute))),
			starts: ready,
		},
		"after+10: target not started yet": {
			scene: one(job(1).afterPlus(5, 10), job(5)), reasons: dependency,
		},

		// afterany: the target ended, however.
		"afterany: target running":   {scene: one(job(1).afterany(5), job(5).runningFor(time.Hour)), reasons: dependency},
		"afterany: target completed": {scene: one(job(1).afterany(5), job(5).completed()), starts: ready},
		"afterany: target failed":    {scene: one(job(1).afterany(5), job(5).failed()), starts: ready},
		"afterany: target timed out": {scene: one(job(1).afterany(5), job(5).terminal(api.StateTimeout)), starts: ready},
		"afterany: target requeued":  {scene: one(job(1).afterany(5), job(5).state(api.StateRequeued)), reasons: dependency},

		// aftercorr is treated as afterany: the pass has no array-element
		// correspondence.
		"aftercorr: target running":   {scene: one(job(1).aftercorr(5), job(5).runningFor(time.Hour)), reasons: dependency},
		"aftercorr: target completed": {scene: one(job(1).aftercorr(5), job(5).completed()), starts: ready},

		// afterok: the target completed; any other end can never be undone.
		"afterok: target running":       {scene: one(job(1).afterok(5), job(5).runningFor(time.Hour)), reasons: dependency},
		"afterok: target completed":     {scene: one(job(1).afterok(5), job(5).completed()), starts: ready},
		"afterok: target failed":        {scene: one(job(1).afterok(5), job(5).failed()), reasons: never},
		"afterok: target cancelled":     {scene: one(job(1).afterok(5), job(5).cancelledWhilePending()), reasons: never},
		"afterok: target timed out":     {scene: one(job(1).afterok(5), job(5).terminal(api.StateTimeout)), reasons: never},
		"afterok: target out of memory": {scene: one(job(1).afterok(5), job(5).terminal(api.StateOutOfMemory)), reasons: never},

		// afternotok: the target ended in anything but COMPLETED.
		"afternotok: target running":   {scene: one(job(1).afternotok(5), job(5).runningFor(time.Hour)), reasons: dependency},
		"afternotok: target failed":    {scene: one(job(1).afternotok(5), job(5).failed()), starts: ready},
		"afternotok: target cancelled": {scene: one(job(1).afternotok(5), job(5).cancelledWhilePending()), starts: ready},
		"afternotok: target completed": {scene: one(job(1).afternotok(5), job(5).completed()), reasons: never},

		// singleton is not implemented by the pass: the clause has no job
		// ids, so it counts as met and the job starts even while a job of
		// the same name and user runs (see doc.go).
		"singleton is ignored by the pass": {
			scene: one(job(1).named("sim", "alice").singleton(),
				job(5).named("sim", "alice").runningFor(time.Hour)),
			starts: ready,
		},

		// Targets the pass cannot find never satisfy anything.
		"unknown target":                              {scene: one(job(1).afterok(99)), reasons: never},
		"unknown target of afterany":                  {scene: one(job(1).afterany(99)), reasons: never},
		"an id that is not a number":                  {scene: one(job(1).afterokRaw("x5"), job(5).completed()), reasons: never},
		"a snapshot without Lookup":                   {scene: one(job(1).afterok(5), job(5).completed()).noLookup(), reasons: never},
		"a task of a job that is no array is unknown": {scene: one(job(1).afterokRaw("5_3"), job(5).completed()), reasons: never},

		// All of (","): every clause, and every id within a clause.
		"all-of waits while one clause waits": {
			scene: one(job(1).afterok(5).afterany(6), job(5).completed(), job(6).runningFor(time.Hour)), reasons: dependency,
		},
		"all-of is met when every clause is": {
			scene: one(job(1).afterok(5).afterany(6), job(5).completed(), job(6).failed()), starts: ready,
		},
		"all-of fails when one clause can never be met, even while another waits": {
			scene: one(job(1).afterok(5).afterany(6), job(5).failed(), job(6).runningFor(time.Hour)), reasons: never,
		},
		"ids within one clause are all-of": {
			scene: one(job(1).afterok(5, 6), job(5).completed(), job(6).runningFor(time.Hour)), reasons: dependency,
		},
		"ids within one clause: one failure is final": {
			scene: one(job(1).afterok(5, 6), job(5).runningFor(time.Hour), job(6).failed()), reasons: never,
		},

		// Any of ("?"): one met clause is enough.
		"any-of is met by one clause": {
			scene: one(job(1).afterok(5).afterok(6).anyOf(), job(5).runningFor(time.Hour), job(6).completed()), starts: ready,
		},
		"any-of waits while one clause may still be met": {
			scene: one(job(1).afterok(5).afterok(6).anyOf(), job(5).failed(), job(6).runningFor(time.Hour)), reasons: dependency,
		},
		"any-of fails when no clause can be met": {
			scene: one(job(1).afterok(5).afterok(6).anyOf(), job(5).failed(), job(6).completed().state(api.StateCancelled)), reasons: never,
		},
		"any-of with an unknown target and a met one": {
			scene: one(job(1).afterok(99).afterany(5).anyOf(), job(5).completed()), starts: ready,
		},

		// Scheduling around dependencies.
		"a job waiting on a dependency blocks no one": {
			scene: at(t0).with(nodes(1)).queue(job(1).priority(9).afterok(5), job(2)).
				known(job(5).runningFor(time.Hour)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonDependency},
		},
		"a dependency on a job pending in the same pass waits for the next pass": {
			scene:   at(t0).with(nodes(2)).queue(job(1).after(2), job(2)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonDependency},
		},
		// Never-satisfied propagates down a chain in one pass: job 2 can
		// never run, so job 1 (afterok:2) can never be satisfied either, and
		// job 3 (after:1) never sees job 1 start.
		"a chain below a never-satisfied job is never satisfied": {
			scene: at(t0).with(nodes(1)).queue(job(3).after(1), job(1).afterok(2), job(2).afterok(99)),
			reasons: map[uint64]api.Reason{
				1: api.ReasonDependencyNeverSatisfied, 2: api.ReasonDependencyNeverSatisfied,
				3: api.ReasonDependencyNeverSatisfied,
			},
		},
		// afterany is met when the target ends, which cancelling the
		// never-satisfied target would do: it keeps waiting.
		"afterany on a job that can never run waits": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterany(2), job(2).afterok(99)),
			reasons: map[uint64]api.Reason{
				1: api.ReasonDependency, 2: api.ReasonDependencyNeverSatisfied,
			},
		},
		// Each job of an afterok cycle waits for the other to complete:
		// neither ever can.
		"an afterok cycle is never satisfied": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterok(2), job(2).afterok(1)),
			reasons: map[uint64]api.Reason{
				1: api.ReasonDependencyNeverSatisfied, 2: api.ReasonDependencyNeverSatisfied,
			},
		},
		// --kill-on-invalid-dep=yes asks for the job to be cancelled.
		"a never-satisfied job that asked to be killed is cancelled": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterok(99).with(func(j *state.Job) { j.Spec.KillOnInvalidDep = true }),
				job(2).afterok(99)),
			reasons: map[uint64]api.Reason{
				1: api.ReasonDependencyNeverSatisfied, 2: api.ReasonDependencyNeverSatisfied,
			},
			cancels: []uint64{1},
		},
	})
}
