package vmrun

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// BenchmarkCheckpoint saves a running guest (the default VM, 1 vCPU, its
// counter idle) to a file and restores it from the file b.N times, for a
// 256 MiB and a 1 GiB guest, each restore in a state directory of its own
// as on another node: the save is the guest stopped and its state written
// (QEMU's stream to the file), the restore QEMU's start loading the file
// until the guest can be continued. It reports p50 and p95 of each, and
// the file's size.
//
//	go test ./noded/vmrun -run '^$' -bench Checkpoint -benchtime 5x
func BenchmarkCheckpoint(b *testing.B) {
	for _, mem := range []int64{256, 1024} {
		b.Run(strconv.FormatInt(mem, 10)+"MiB", func(b *testing.B) {
			guestOnly(b)
			r := testRunner(b)
			spec := jobSpec(b, counterScript(0), 1, mem)
			v := start(b, r, spec)
			waitFor(b, "the counter", 2*time.Minute, func() bool { return lineCount(spec.Stdout) >= 5 })
			var save, restore []time.Duration
			var size int64
			b.ResetTimer()
			for range b.N {
				file := filepath.Join(b.TempDir(), "job.ckpt")
				f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if _, err := v.SaveCheckpoint(context.Background(), f); err != nil {
					b.Fatal(err)
				}
				save = append(save, time.Since(t0))
				fi, _ := f.Stat()
				size = fi.Size()
				v.Kill(0)
				waitResult(b, v, 30*time.Second)
				if _, err := f.Seek(0, 0); err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				h, err := r.StartFromCheckpoint(context.Background(), withDir(spec, b.TempDir()), f)
				if err != nil {
					b.Fatal(err)
				}
				restore = append(restore, time.Since(t0))
				f.Close()
				v = h.(*VM)
				if err := v.Continue(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			at := lineCount(spec.Stdout)
			waitFor(b, "the restored counter", time.Minute, func() bool { return lineCount(spec.Stdout) > at })
			v.Kill(0)
			waitResult(b, v, 30*time.Second)
			slices.Sort(save)
			slices.Sort(restore)
			pct := func(d []time.Duration, p int) float64 { return float64(d[(len(d)-1)*p/100].Milliseconds()) }
			b.ReportMetric(pct(save, 50), "save-p50-ms")
			b.ReportMetric(pct(save, 95), "save-p95-ms")
			b.ReportMetric(pct(restore, 50), "restore-p50-ms")
			b.ReportMetric(pct(restore, 95), "restore-p95-ms")
			b.ReportMetric(float64(size>>20), "file-MiB")
		})
	}
}
