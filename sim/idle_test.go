package sim

import (
	"fmt"
	"testing"

	"corral/api"
	"corral/ctld/sched"
)

// TestIdlePassesLeftOut replays traces with and without the passes that
// start nothing (simulation.startsNothing) and requires every job's
// outcome to be the same: leaving them out is only a saving. It also
// checks that some were left out, and none where they may not be (under
// conservative backfill, or when a QoS may preempt).
func TestIdlePassesLeftOut(t *testing.T) {
	type run struct {
		trace string
		opts  Options
		idle  bool // whether passes may be left out
	}
	runs := map[string]run{}
	for seed := range uint64(3) {
		text, _ := randomTrace(seed, 16, 300)
		for _, p := range []sched.Policy{sched.PolicyFCFS, sched.PolicyEASY, sched.PolicyConservative} {
			runs[fmt.Sprintf("random %d %s", seed, p)] = run{text, Options{Policy: p}, p != sched.PolicyConservative}
		}
	}
	preempt := Options{Policy: sched.PolicyEASY, QOS: []api.QOS{{Name: "high", Priority: 100, Preempt: []string{"low"}},
		{Name: "low", PreemptMode: api.PreemptRequeue}}, QOSByQueue: map[int64]string{1: "high", 2: "low"}}
	text, _ := randomTrace(7, 16, 300)
	runs["random preemption"] = run{text, preempt, false}
	for name, tc := range runs {
		t.Run(name, func(t *testing.T) {
			compareIdle(t, readTrace(t, tc.trace), tc.opts, tc.idle)
		})
	}
	if testing.Short() {
		return // the archive's traces below take seconds each
	}
	for _, tc := range []struct {
		trace  string
		policy sched.Policy
	}{{lanlTrace, sched.PolicyEASY}, {kthTrace, sched.PolicyEASY}} {
		t.Run(fmt.Sprintf("%s %s", tc.trace, tc.policy), func(t *testing.T) {
			compareIdle(t, openTrace(t, tc.trace), Options{Policy: tc.policy}, true)
		})
	}
}

// compareIdle runs tr with every pass and with the idle ones left out and
// compares the outcomes.
func compareIdle(t *testing.T, tr *Trace, opts Options, mayIdle bool) {
	t.Helper()
	all := opts
	all.runIdle = true
	want, err := Run(tr, all)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want.IdlePasses != 0 {
		t.Fatalf("with every pass run, %d were left out", want.IdlePasses)
	}
	switch {
	case mayIdle && got.IdlePasses == 0:
		t.Errorf("no pass was left out (%d run)", got.Passes)
	case !mayIdle && got.IdlePasses != 0:
		t.Errorf("%d passes were left out where none may be", got.IdlePasses)
	}
	if got.Passes+got.IdlePasses != want.Passes {
		t.Errorf("%d passes run and %d left out; with every pass, %d", got.Passes, got.IdlePasses, want.Passes)
	}
	if len(got.Outcomes) != len(want.Outcomes) {
		t.Fatalf("%d outcomes, want %d", len(got.Outcomes), len(want.Outcomes))
	}
	for i := range want.Outcomes {
		if got.Outcomes[i] != want.Outcomes[i] {
			t.Fatalf("job %d: %+v with idle passes left out, %+v with every pass run", want.Outcomes[i].ID, got.Outcomes[i], want.Outcomes[i])
		}
	}
	t.Logf("%d passes, %d left out", got.Passes, got.IdlePasses)
}
