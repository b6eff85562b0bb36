package sim

import (
	"testing"

	"corral/ctld/sched"
)

// BenchmarkSimKTH replays the whole KTH trace (28,475 jobs, about 50,000
// passes) once per iteration under each policy. It skips when the trace is
// not found (see openTrace).
func BenchmarkSimKTH(b *testing.B) {
	tr := openTrace(b, kthTrace)
	for _, p := range []sched.Policy{sched.PolicyFCFS, sched.PolicyEASY, sched.PolicyConservative} {
		b.Run(string(p), func(b *testing.B) {
			var passes int
			for b.Loop() {
				res, err := Run(tr, Options{Policy: p})
				if err != nil {
					b.Fatal(err)
				}
				passes = res.Passes
			}
			b.ReportMetric(float64(passes), "passes/op")
		})
	}
}
