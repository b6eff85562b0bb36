package sched

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestPropertyPassReuse runs one Pass over a run of random scenes of every
// policy, one after another, and checks that each plan is the one a fresh
// Schedule makes: nothing a pass leaves in the Pass's buffers reaches the
// next. Empty and nil lists count as equal (a Pass reuses its arrays).
func TestPropertyPassReuse(t *testing.T) {
	var p Pass
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		for _, sc := range []*scene{randomScene(r), randomPreemptionScene(r)} {
			sc.policy(pick(r, PolicyEASY, PolicyFCFS, PolicyConservative))
			s := sc.snapshot()
			want := Schedule(s)
			got := p.Schedule(s)
			if len(got.Starts) == 0 && len(want.Starts) == 0 {
				got.Starts, want.Starts = nil, nil
			}
			if len(got.Estimates) == 0 && len(want.Estimates) == 0 {
				got.Estimates, want.Estimates, got.Reservations, want.Reservations = nil, nil, nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("a reused Pass planned otherwise than Schedule:\n got %+v\nwant %+v", got, want)
			}
		}
	})
}

// BenchmarkPassShortQueue is the simulator's case: many passes over a short
// queue (a dozen jobs, a few running) on one node, with a fresh Schedule
// each time and with one Pass kept between passes.
func BenchmarkPassShortQueue(b *testing.B) {
	sc := at(t0).with(node("n1").cpus(1024).mem(1 << 30))
	for i := range 5 {
		sc.running("n1", time.Duration(i)*time.Minute, job(uint64(100+i)).cpus(150).limit(time.Hour))
	}
	for i := range 12 {
		sc.queue(job(uint64(i + 1)).cpus(64 + 32*i).limit(2 * time.Hour))
	}
	s := sc.snapshot()
	b.Run("Schedule", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Schedule(s)
		}
	})
	b.Run("Pass", func(b *testing.B) {
		b.ReportAllocs()
		var p Pass
		for b.Loop() {
			_ = p.Schedule(s)
		}
	})
}
