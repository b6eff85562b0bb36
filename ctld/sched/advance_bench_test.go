package sched

import (
	"fmt"
	"testing"
	"time"

	"corral/api"
)

// BenchmarkScheduleReservations is BenchmarkSchedule's EASY scene with
// advance reservations over it: a maintenance of a tenth of the nodes in an
// hour, fifty daily reservations of ten nodes for alice (in force now), and
// twenty capacity blocks of 32 CPUs; one job in twenty names one of them.
func BenchmarkScheduleReservations(b *testing.B) {
	for _, size := range []struct{ nodes, jobs int }{{1_000, 10_000}, {10_000, 100_000}} {
		b.Run(fmt.Sprintf("nodes=%d/jobs=%d", size.nodes, size.jobs), func(b *testing.B) {
			s := benchScene(size.nodes, size.jobs)
			s.Config = api.DefaultSchedConfig()
			name := func(i int) string { return fmt.Sprintf("n%05d", i) }
			maint := &api.Reservation{Name: "maint", StartTime: t0.Add(time.Hour), EndTime: t0.Add(3 * time.Hour),
				Users: []string{"root"}, Flags: []api.ResvFlag{api.ResvMaint}}
			for i := 0; i < size.nodes; i += 10 {
				maint.Nodes = append(maint.Nodes, name(i))
			}
			s.Advance = append(s.Advance, maint)
			var names []string
			for k := range 50 {
				r := &api.Reservation{Name: fmt.Sprintf("daily%02d", k), StartTime: t0.Add(-48 * time.Hour), EndTime: t0.Add(-46 * time.Hour),
					Users: []string{"alice"}, Flags: []api.ResvFlag{api.ResvDaily}}
				for i := range 10 {
					r.Nodes = append(r.Nodes, name(1+k*10+i))
				}
				s.Advance, names = append(s.Advance, r), append(names, r.Name)
			}
			for k := range 20 {
				n := name(size.nodes/2 + k)
				r := &api.Reservation{Name: fmt.Sprintf("cap%02d", k), StartTime: t0.Add(-time.Hour), EndTime: t0.Add(10 * time.Hour),
					Accounts: []string{"chem"}, Nodes: []string{n}, CPUs: 32, Parts: []api.ResvPart{{Node: n, CPUs: 32, MemMB: 128 << 10}}}
				s.Advance, names = append(s.Advance, r), append(names, r.Name)
			}
			for i, j := range s.Pending {
				if i%20 == 0 {
					j.Spec.Reservation = names[i/20%len(names)]
				}
			}
			var p Plan
			for b.Loop() {
				p = Schedule(s)
			}
			b.ReportMetric(float64(len(p.Starts)), "starts")
		})
	}
}
