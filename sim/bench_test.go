package sim

import (
	"bytes"
	"os"
	"path/filepath"
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

// lanlTrace is the LANL CM-5 log of the Parallel Workloads Archive: 122,060
// jobs on 1,024 processors over two years.
const lanlTrace = "LANL-CM5-1994-4.1-cln.swf.gz"

// BenchmarkSimLANL replays the LANL CM-5 trace under EASY: the figure
// issue 10 sets a target for (0.5 s, 150 MB). It reports the passes and
// the bytes allocated per run.
func BenchmarkSimLANL(b *testing.B) {
	tr := openTrace(b, lanlTrace)
	b.ReportAllocs()
	var passes int
	for b.Loop() {
		res, err := Run(tr, Options{Policy: sched.PolicyEASY})
		if err != nil {
			b.Fatal(err)
		}
		passes = res.Passes
	}
	b.ReportMetric(float64(passes), "passes/op")
}

// BenchmarkReadSWFLANL reads the LANL CM-5 trace (gzip-compressed, 122,060
// job lines): what `corral sim` spends before its first pass.
func BenchmarkReadSWFLANL(b *testing.B) {
	openTrace(b, lanlTrace) // skips when the trace is absent
	dir := os.Getenv("CORRAL_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "traces")
	}
	data, err := os.ReadFile(filepath.Join(dir, lanlTrace))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadSWF(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunSWFLANL is what `corral sim` does with the LANL CM-5 trace
// under EASY: RunSWF reading the compressed file while it simulates.
func BenchmarkRunSWFLANL(b *testing.B) {
	openTrace(b, lanlTrace) // skips when the trace is absent
	dir := os.Getenv("CORRAL_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "traces")
	}
	data, err := os.ReadFile(filepath.Join(dir, lanlTrace))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var passes int
	for b.Loop() {
		res, err := RunSWF(bytes.NewReader(data), Options{Policy: sched.PolicyEASY})
		if err != nil {
			b.Fatal(err)
		}
		passes = res.Passes
	}
	b.ReportMetric(float64(passes), "passes/op")
}
