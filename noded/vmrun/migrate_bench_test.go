package vmrun

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkMigrationDowntime moves a 256 MiB guest (1 vCPU, the bare
// guest running counterScript: idle, or rewriting 64 MiB) b.N times on
// the loopback, each time to a new destination started with -incoming as
// on another node, and reports QEMU's figures: the downtime (the source's
// vCPUs stopped at the stream's end; the controllers' word to continue
// comes on top, SwitchMS in a cluster) and the stream's total time, p50
// and p95. Under TCG the stream is stop-and-copy (docs/migration.md), so
// the downtime is the whole stream.
//
//	go test ./noded/vmrun -run '^$' -bench MigrationDowntime -benchtime 5x
func BenchmarkMigrationDowntime(b *testing.B) {
	for _, bc := range []struct {
		name string
		mib  int
	}{{"idle", 0}, {"busy64MiB", 64}} {
		b.Run(bc.name, func(b *testing.B) {
			r := testRunner(b)
			spec := jobSpec(b, counterScript(bc.mib), 1, 256)
			v, err := r.start(context.Background(), spec, startOpts{accel: r.Accel()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { v.Kill(0); v.Wait() })
			waitFor(b, "the counter", 2*time.Minute, func() bool { return lineCount(spec.Stdout) >= 5 })
			var down, total []time.Duration
			var bytes int64
			b.ResetTimer()
			for range b.N {
				dv := incoming(b, r, spec, startOpts{})
				stats, serr, rerr := migrate(b, v, dv, migrationParams)
				if serr != nil || rerr != nil {
					b.Fatalf("migration: source %v, destination %v", serr, rerr)
				}
				switchOver(b, v, dv)
				down, total, bytes = append(down, stats.Downtime), append(total, stats.Total), stats.RAMBytes
				v = dv
			}
			b.StopTimer()
			slices.Sort(down)
			slices.Sort(total)
			pct := func(d []time.Duration, p int) float64 { return float64(d[(len(d)-1)*p/100].Milliseconds()) }
			b.ReportMetric(pct(down, 50), "downtime-p50-ms")
			b.ReportMetric(pct(down, 95), "downtime-p95-ms")
			b.ReportMetric(pct(total, 50), "total-p50-ms")
			b.ReportMetric(pct(total, 95), "total-p95-ms")
			b.ReportMetric(float64(bytes>>20), "MiB-sent")
			if n := lineCount(spec.Stdout); n < 5 {
				b.Fatalf("the counter stopped at %d lines", n)
			}
		})
	}
}
