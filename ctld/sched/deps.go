package sched

import (
	"time"

	"corral/api"
	"corral/ctld/state"
)

// This file is the pass's dependency evaluation: which pending jobs their
// dependencies let start. A dependency's targets were parsed and resolved
// once, when the job was submitted (state.DepTarget: a job, a task of an
// array, or a whole array); DepTarget.Records finds their records here
// with the snapshot's lookups, as the state's cycle check does with its
// own.

// deps evaluates dependencies for one pass. It memoizes which pending jobs
// can never run, so a chain whose link failed is reported as
// DependencyNeverSatisfied all the way down in the same pass.
type deps struct {
	s *Snapshot
	// never caches, per pending job id, whether its own dependency can
	// never be met; inProgress marks jobs being evaluated (a cycle).
	never map[uint64]depMemo
	// singletons indexes jobs by user and name, built on first use.
	singletons map[userName]*singletonState
}

type depMemo uint8

const (
	memoUnknown depMemo = iota
	memoInProgress
	memoNever
	memoMayRun
)

type userName struct{ user, name string }

// singletonState is what a singleton clause needs to know about a user's
// jobs of one name: whether one holds resources, and which pending
// singleton job comes first.
type singletonState struct {
	active bool
	first  *state.Job
}

// notReady returns why a job may not start yet regardless of resources, and
// when that changes by itself (begin time), or "" when it is ready.
func (d *deps) notReady(j *state.Job) (api.Reason, time.Time) {
	if j.Spec.Hold {
		if j.Reason == api.ReasonInvalidJob || j.Reason == api.ReasonJobHeldAdmin {
			// Held by the controller because a pass failed on it, or by
			// an administrator (whose hold only an administrator
			// releases): the reason stays, so `corral why` can say so.
			return j.Reason, time.Time{}
		}
		return api.ReasonJobHeldUser, time.Time{}
	}
	if !j.Spec.Begin.IsZero() && d.s.Now.Before(j.Spec.Begin) {
		return api.ReasonBeginTime, j.Spec.Begin
	}
	if j.Spec.Dependency != nil {
		if r := d.reason(j); r != "" {
			return r, delayEnd(j.Spec.Dependency, d.s)
		}
	}
	return "", time.Time{}
}

// delayEnd returns the earliest future moment an after:<id>+<minutes>
// delay of d ends, so the controller wakes for it; zero when none.
func delayEnd(d *state.Dependency, s *Snapshot) time.Time {
	var wake time.Time
	for _, c := range d.Clauses {
		if c.Type != "after" || c.Minutes <= 0 || s.Lookup == nil {
			continue
		}
		for _, t := range c.Targets {
			j := s.Lookup(t.Job)
			if j == nil || j.StartTime.IsZero() {
				continue
			}
			end := j.StartTime.Add(time.Duration(c.Minutes) * time.Minute)
			if end.After(s.Now) && (wake.IsZero() || end.Before(wake)) {
				wake = end
			}
		}
	}
	return wake
}

// reason evaluates j's dependency expression: "" when satisfied,
// Dependency while it may still be, DependencyNeverSatisfied when it cannot.
func (d *deps) reason(j *state.Job) api.Reason {
	dep := j.Spec.Dependency
	anyWaiting, anyNever := false, false
	for _, c := range dep.Clauses {
		switch d.clause(j, c) {
		case depMet:
			if dep.Any {
				return ""
			}
		case depWaiting:
			anyWaiting = true
		case depNever:
			anyNever = true
		}
	}
	switch {
	case dep.Any && anyWaiting:
		return api.ReasonDependency
	case dep.Any:
		return api.ReasonDependencyNeverSatisfied
	case anyNever:
		return api.ReasonDependencyNeverSatisfied
	case anyWaiting:
		return api.ReasonDependency
	}
	return ""
}

// neverRuns reports whether a pending job's own dependency can never be
// met. A job met again while being evaluated is on a cycle: it waits on
// itself, so it never runs either.
func (d *deps) neverRuns(j *state.Job) bool {
	if j.State != api.StatePending || j.Spec.Dependency == nil {
		return false
	}
	if d.never == nil {
		d.never = map[uint64]depMemo{}
	}
	switch d.never[j.ID] {
	case memoInProgress, memoNever:
		return true
	case memoMayRun:
		return false
	}
	d.never[j.ID] = memoInProgress
	never := d.reason(j) == api.ReasonDependencyNeverSatisfied
	d.never[j.ID] = memoMayRun
	if never {
		d.never[j.ID] = memoNever
	}
	return never
}

type depOutcome int

const (
	depMet depOutcome = iota
	depWaiting
	depNever
)

// clause evaluates one clause of j over all its job ids (all must be met).
func (d *deps) clause(j *state.Job, c state.DepClause) depOutcome {
	if c.Type == "singleton" {
		return d.singleton(j)
	}
	if c.Type == "aftercorr" && j.IsArrayPending() {
		return depMet // judged task by task when the array is placed
	}
	out := depMet
	for _, t := range c.Targets {
		var o depOutcome
		switch recs := t.Records(d.lookups()); {
		case recs == nil:
			return depNever
		case t.Kind != state.DepArray:
			o = d.target(c, recs[0])
		default:
			o = d.wholeArray(c, recs)
		}
		switch o {
		case depNever:
			return depNever
		case depWaiting:
			out = depWaiting
		}
	}
	return out
}

// lookups are the snapshot's lookups, as DepTarget.Records takes them: the
// same resolution the state's cycle check uses.
func (d *deps) lookups() state.DepLookups {
	return state.DepLookups{Job: d.s.Lookup, Task: d.s.LookupTask, Array: d.s.Array}
}

// wholeArray evaluates a clause on an array as Slurm does: on every task.
// afternotok is met once all have ended and one did not complete; the
// others are met when met for every task.
func (d *deps) wholeArray(c state.DepClause, recs []*state.Job) depOutcome {
	if c.Type == "afternotok" {
		anyFailed := false
		for _, r := range recs {
			if !r.State.Terminal() {
				return depWaiting
			}
			anyFailed = anyFailed || r.State != api.StateCompleted
		}
		if anyFailed {
			return depMet
		}
		return depNever
	}
	out := depMet
	for _, r := range recs {
		switch d.target(c, r) {
		case depNever:
			return depNever
		case depWaiting:
			out = depWaiting
		}
	}
	return out
}

// corrReady reports whether task of array j may start under its
// aftercorr clauses: the same task of each target array must have
// completed successfully (a target with no such task sets no condition).
// It returns whether the task must wait, and whether it never can.
func (d *deps) corrReady(j *state.Job, task int) (wait, never bool) {
	if j.Spec.Dependency == nil || d.s.LookupTask == nil {
		return false, false
	}
	for _, c := range j.Spec.Dependency.Clauses {
		if c.Type != "aftercorr" {
			continue
		}
		for _, target := range c.Targets {
			t := d.s.LookupTask(target.Job, task)
			switch {
			case t == nil:
			case !t.State.Terminal() || t.IsArrayPending():
				wait = true
			case t.State != api.StateCompleted:
				never = true
			}
		}
	}
	return wait, never
}

// target evaluates one clause against one target job.
func (d *deps) target(c state.DepClause, t *state.Job) depOutcome {
	now := d.s.Now
	switch c.Type {
	case "after":
		if t.StartTime.IsZero() && !t.State.Terminal() {
			if d.neverRuns(t) {
				return depNever
			}
			return depWaiting
		}
		if c.Minutes > 0 && !t.StartTime.IsZero() && now.Before(t.StartTime.Add(time.Duration(c.Minutes)*time.Minute)) && !t.State.Terminal() {
			return depWaiting
		}
		return depMet
	case "afterany", "aftercorr":
		// A target that can never run may still be cancelled, which ends
		// it: these wait rather than give up.
		if t.State.Terminal() {
			return depMet
		}
		return depWaiting
	case "afterok":
		if !t.State.Terminal() {
			if d.neverRuns(t) {
				return depNever
			}
			return depWaiting
		}
		if t.State == api.StateCompleted {
			return depMet
		}
		return depNever
	case "afternotok":
		if !t.State.Terminal() {
			return depWaiting
		}
		if t.State != api.StateCompleted {
			return depMet
		}
		return depNever
	}
	return depMet
}

// singleton is met when no job of the same user and name holds resources
// and no pending singleton job of theirs comes before j (submit time, then
// id): one such job runs at a time, in submission order.
func (d *deps) singleton(j *state.Job) depOutcome {
	if d.singletons == nil {
		d.singletons = map[userName]*singletonState{}
		get := func(k userName) *singletonState {
			st := d.singletons[k]
			if st == nil {
				st = &singletonState{}
				d.singletons[k] = st
			}
			return st
		}
		for _, r := range d.s.Running {
			get(userName{r.Job.Spec.User, r.Job.Spec.Name}).active = true
		}
		for _, p := range d.s.Pending {
			if !hasSingleton(p.Spec.Dependency) {
				continue
			}
			st := get(userName{p.Spec.User, p.Spec.Name})
			if st.first == nil || p.SubmitTime.Before(st.first.SubmitTime) ||
				p.SubmitTime.Equal(st.first.SubmitTime) && p.ID < st.first.ID {
				st.first = p
			}
		}
	}
	st := d.singletons[userName{j.Spec.User, j.Spec.Name}]
	if st == nil || (!st.active && st.first == j) {
		return depMet
	}
	return depWaiting
}

func hasSingleton(d *state.Dependency) bool {
	if d == nil {
		return false
	}
	for _, c := range d.Clauses {
		if c.Type == "singleton" {
			return true
		}
	}
	return false
}
