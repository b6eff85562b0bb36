package sched

import (
	"testing"
	"time"

	"corral/api"
)

// array makes job id an array's pending record holding the tasks of spec
// (e.g. 0-9%2), as the FSM stores a submitted array.
func (b jobB) array(ranges []api.ArrayRange, throttle int) jobB {
	return b.with(func(j *api.Job) {
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
				running("n1", time.Minute, job(7).with(func(j *api.Job) { j.ArrayJobID, j.ArrayTaskID = 1, 0 })).
				queue(job(1).array(r(1, 9, 1), 2)),
			starts:  []string{"1[1]@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonJobArrayTaskLimit},
		},
		"an array at its throttle starts nothing": {
			scene: at(t0).with(nodes(1).cpus(8)).
				running("n1", time.Minute, job(7).with(func(j *api.Job) { j.ArrayJobID, j.ArrayTaskID = 1, 0 })).
				queue(job(1).array(r(1, 9, 1), 1)),
			reasons: map[uint64]api.Reason{1: api.ReasonJobArrayTaskLimit},
		},
		"a whole array that fits starts and keeps no reason": {
			scene:  at(t0).with(nodes(1).cpus(4)).queue(job(1).array(r(0, 2, 1), 0)),
			starts: []string{"1[0]@n1", "1[1]@n1", "1[2]@n1"},
		},
	})
}
