package sched

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// array makes job id an array's pending record holding the tasks of spec
// (e.g. 0-9%2), as the FSM stores a submitted array.
func (b jobB) array(ranges []api.ArrayRange, throttle int) jobB {
	return b.with(func(j *state.Job) {
		j.Spec.Array = &api.ArraySpec{Raw: "test", Ranges: ranges, Throttle: throttle}
		j.ArrayJobID, j.ArrayPending = j.ID, api.NewIndexSet(ranges)
	})
}

func TestScheduleArrays(t *testing.T) {
	r := func(first, last, step int) []api.ArrayRange {
		return []api.ArrayRange{{First: first, Last: last, Step: step}}
	}
	runScenarios(t, map[string]scenario{
		// Tasks start in index order while they fit; the rest wait.
		"tasks start one by one until the node is full": {
			scene:   at(t0).with(nodes(1).cpus(3)).queue(job(1).array(r(0, 9, 1), 0)),
			starts:  []string{"1[0]@n1", "1[1]@n1", "1[2]@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"a step skips indexes": {
			scene:   at(t0).with(nodes(1).cpus(2)).queue(job(1).array(r(0, 15, 4), 0)),
			starts:  []string{"1[0]@n1", "1[4]@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		// %2: at most two tasks at a time, counting those already running.
		"the throttle caps tasks at a time": {
			scene:   at(t0).with(nodes(1).cpus(8)).queue(job(1).array(r(0, 9, 1), 2)),
			starts:  []string{"1[0]@n1", "1[1]@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonJobArrayTaskLimit},
		},
		"running tasks count against the throttle": {
			scene: at(t0).with(nodes(1).cpus(8)).
				running("n1", time.Minute, job(7).with(func(j *state.Job) { j.ArrayJobID, j.ArrayTaskID = 1, 0 })).
				queue(job(1).array(r(1, 9, 1), 2)),
			starts:  []string{"1[1]@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonJobArrayTaskLimit},
		},
		"an array at its throttle starts nothing": {
			scene: at(t0).with(nodes(1).cpus(8)).
				running("n1", time.Minute, job(7).with(func(j *state.Job) { j.ArrayJobID, j.ArrayTaskID = 1, 0 })).
				queue(job(1).array(r(1, 9, 1), 1)),
			reasons: map[uint64]api.Reason{1: api.ReasonJobArrayTaskLimit},
		},
		"a whole array that fits starts and keeps no reason": {
			scene:  at(t0).with(nodes(1).cpus(4)).queue(job(1).array(r(0, 2, 1), 0)),
			starts: []string{"1[0]@n1", "1[1]@n1", "1[2]@n1"},
		},
	})
}

// task makes a started task record of array arr.
func task(id, arr uint64, idx int) jobB {
	return job(id).with(func(j *state.Job) { j.ArrayJobID, j.ArrayTaskID = arr, idx })
}

func TestScheduleArrayDependencies(t *testing.T) {
	r := func(first, last int) []api.ArrayRange { return []api.ArrayRange{{First: first, Last: last, Step: 1}} }
	waits := func(rs api.Reason) map[uint64]api.Reason { return map[uint64]api.Reason{1: rs} }
	runScenarios(t, map[string]scenario{
		// Array 10 has tasks 0-2: 0 and 1 completed (records 11, 12), 2
		// still pending in record 10.
		"afterok on a whole array waits while a task is pending": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterok(10)).
				known(job(10).array(r(2, 2), 0), task(11, 10, 0).completed(), task(12, 10, 1).completed()),
			reasons: waits(api.ReasonDependency),
		},
		"afterok on a whole array is met when every task completed": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterok(10)).
				known(task(10, 10, 2).completed(), task(11, 10, 0).completed(), task(12, 10, 1).completed()),
			starts: []string{"1@n1"},
		},
		"afterok on a whole array: one failed task is final": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterok(10)).
				known(job(10).array(r(2, 2), 0), task(11, 10, 0).failed(), task(12, 10, 1).completed()),
			reasons: waits(api.ReasonDependencyNeverSatisfied),
		},
		"afternotok on a whole array is met once all ended and one failed": {
			scene: at(t0).with(nodes(1)).queue(job(1).afternotok(10)).
				known(task(10, 10, 2).completed(), task(11, 10, 0).failed(), task(12, 10, 1).completed()),
			starts: []string{"1@n1"},
		},
		"a dependency on one task (10_1) looks at that task only": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterokRaw("10_1")).
				known(job(10).array(r(2, 2), 0), task(11, 10, 0).failed(), task(12, 10, 1).completed()),
			starts: []string{"1@n1"},
		},
		"a dependency on a task not started yet waits": {
			scene: at(t0).with(nodes(1)).queue(job(1).afterokRaw("10_2")).
				known(job(10).array(r(2, 2), 0), task(11, 10, 0).completed()),
			reasons: waits(api.ReasonDependency),
		},
		// aftercorr: task i of array 1 waits for task i of array 10. Tasks
		// 0 and 1 of 10 completed, 2 runs: array 1 starts 0 and 1 only.
		"aftercorr starts the tasks whose counterpart completed": {
			scene: at(t0).with(nodes(1).cpus(4)).queue(job(1).array(r(0, 2), 0).aftercorr(10)).
				known(task(11, 10, 0).completed(), task(12, 10, 1).completed(), task(10, 10, 2).runningFor(time.Minute)),
			starts: []string{"1[0]@n1", "1[1]@n1"},
		},
		"aftercorr: every counterpart still running means Dependency": {
			scene: at(t0).with(nodes(1).cpus(4)).queue(job(1).array(r(0, 0), 0).aftercorr(10)).
				known(task(10, 10, 0).runningFor(time.Minute)),
			reasons: waits(api.ReasonDependency),
		},
	})
}
