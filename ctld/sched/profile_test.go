package sched

import (
	"math/rand/v2"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// TestExpectedEndNanos checks the integer form of a run's expected end
// against expectedEnd, on runs of every kind: running, ended, suspended,
// suspended before, with and without a limit, started in the future, and
// with times at the edges of what the integer form takes.
func TestExpectedEndNanos(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	part := &api.Partition{Name: "p", DefaultTime: 3600}
	times := []time.Time{t0, t0.Add(-time.Hour), t0.Add(time.Hour), t0.Add(-400 * 24 * time.Hour), {},
		time.Unix(0, 0), time.Unix(unixSec2200, 0), time.Unix(unixSec2200+1, 0), time.Unix(-1, 999), time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range 20_000 {
		now := pick(r, t0, t0.Add(time.Duration(r.Int64N(int64(time.Hour)))), pick(r, times...))
		a := &state.Allocation{StartTime: pick(r, times...).Add(time.Duration(r.Int64N(int64(48 * time.Hour)))), Status: state.AllocActive}
		if r.IntN(4) == 0 {
			a.SuspendedFor = time.Duration(r.Int64N(int64(time.Hour)))
		}
		if r.IntN(8) == 0 {
			a.SuspendTime = a.StartTime.Add(time.Minute)
		}
		if r.IntN(8) == 0 {
			a.EndTime = a.StartTime.Add(time.Hour)
		}
		j := &state.Job{Spec: &state.JobSpec{TimeLimit: pick(r, 0, 1, 60, 7200, int64(Horizon/time.Second), 1<<40)}}
		p := pick(r, part, nil)
		run := Run{Alloc: a, Job: j}
		want := expectedEnd(run, p, now).UnixNano()
		if got := expectedEndNanos(run, p, now, now.UnixNano()); got != want {
			t.Fatalf("case %d: run %+v, limit %d s, now %v: expectedEndNanos %d, expectedEnd %d", i, a, j.Spec.TimeLimit, now, got, want)
		}
	}
}
