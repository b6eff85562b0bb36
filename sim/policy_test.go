package sim

import (
	"fmt"
	"strings"
	"testing"

	"corral/api"
	"corral/ctld/sched"
)

// swfLine writes one SWF job line: number, submit, run, processors,
// requested time, user, group and queue.
func swfLine(n, submit, run, procs, req, user, group, queue int) string {
	return fmt.Sprintf("%d %d -1 %d %d -1 -1 %d %d -1 1 %d %d -1 %d -1 -1 -1\n", n, submit, run, procs, procs, req, user, group, queue)
}

// TestRunPreemptsByQoS replays a low job that fills the machine and a high
// job that arrives while it runs, under each preemption mode of the low
// QoS: the state machine stops, requeues or suspends the low job exactly as
// the controller's apply does, and the simulation follows.
func TestRunPreemptsByQoS(t *testing.T) {
	trace := "; MaxProcs: 4\n" +
		swfLine(1, 0, 100, 4, 200, 1, 1, 2) + // low, fills the machine
		swfLine(2, 10, 10, 4, 20, 2, 1, 1) // high, preempts it
	tests := map[string]struct {
		mode      api.PreemptMode
		low       Outcome // what job 1 comes to
		preempted int
		requeued  int
	}{
		// Requeued at 10; it runs again once job 2 ended at 20.
		"requeue": {mode: api.PreemptRequeue, low: Outcome{Start: 20, End: 120, Restarts: 1}, requeued: 1},
		// Ended at 10, preempted.
		"cancel": {mode: api.PreemptCancel, low: Outcome{Start: 0, End: 10, Preempted: true}, preempted: 1},
		// Suspended at 10 with 90 s left; resumed at 20, it ends at 110.
		"suspend": {mode: api.PreemptSuspend, low: Outcome{Start: 0, End: 110}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := runTrace(t, trace, Options{Policy: sched.PolicyEASY,
				QOS: []api.QOS{{Name: "high", Priority: 100, Preempt: []string{"low"}},
					{Name: "low", PreemptMode: tc.mode}},
				QOSByQueue: map[int64]string{1: "high", 2: "low"}})
			low, high := res.Outcomes[0], res.Outcomes[1]
			if high.Start != 10 || high.End != 20 {
				t.Errorf("the high job ran %d–%d, want 10–20", high.Start, high.End)
			}
			if low.Start != tc.low.Start || low.End != tc.low.End || low.Restarts != tc.low.Restarts || low.Preempted != tc.low.Preempted {
				t.Errorf("the low job: %+v, want start %d, end %d, restarts %d, preempted %v", low, tc.low.Start, tc.low.End, tc.low.Restarts, tc.low.Preempted)
			}
			if res.Preempted != tc.preempted || res.Requeued != tc.requeued {
				t.Errorf("preempted %d, requeued %d; want %d and %d", res.Preempted, res.Requeued, tc.preempted, tc.requeued)
			}
		})
	}
}

// TestRunFairshare replays one user's five jobs and, a second later,
// another user's one on a machine of one processor. In queue order the
// second user waits for all five; with fair-share, the state charges the
// first user's usage when its first job ends, and the pass then starts the
// second user's job.
func TestRunFairshare(t *testing.T) {
	trace := "; MaxProcs: 1\n" + swfLine(1, 0, 100, 1, 100, 1, 1, 1)
	for n := 2; n <= 5; n++ {
		trace += swfLine(n, 1, 100, 1, 100, 1, 1, 1)
	}
	trace += swfLine(6, 2, 100, 1, 100, 2, 2, 1)
	if got := starts(runTrace(t, trace, Options{Policy: sched.PolicyFCFS}))[6]; got != 500 {
		t.Errorf("in queue order the second user's job starts at %d, want 500", got)
	}
	res := runTrace(t, trace, Options{Policy: sched.PolicyFCFS, Fairshare: true})
	if got := starts(res)[6]; got != 100 {
		t.Errorf("with fair-share the second user's job starts at %d, want 100 (starts %v)", got, starts(res))
	}
}

// TestRunSettings checks that a setting reaches the state (a bad one is
// refused as the controller refuses it) and that the priority weights
// change the order: with a job-size weight, the wider job goes first.
func TestRunSettings(t *testing.T) {
	_, err := Run(readTrace(t, fcfsTrace), Options{Settings: [][2]string{{"PriorityWeightColour", "1"}}})
	if err == nil || !strings.Contains(err.Error(), "PriorityWeightColour") {
		t.Errorf("an unknown setting: %v, want it refused by name", err)
	}
	trace := "; MaxProcs: 4\n" + swfLine(1, 0, 100, 4, 100, 1, 1, 1) +
		swfLine(2, 1, 100, 1, 100, 1, 1, 1) + swfLine(3, 2, 100, 4, 100, 1, 1, 1)
	plain := starts(runTrace(t, trace, Options{Policy: sched.PolicyFCFS}))
	sized := starts(runTrace(t, trace, Options{Policy: sched.PolicyFCFS, Settings: [][2]string{{"PriorityWeightJobSize", "1000"}}}))
	if plain[2] != 100 || plain[3] != 200 || sized[3] != 100 || sized[2] != 200 {
		t.Errorf("starts in queue order %v, with a job-size weight %v; want job 2 then 3, then 3 then 2", plain, sized)
	}
}
