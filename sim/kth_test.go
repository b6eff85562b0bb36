package sim

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"corral/ctld/sched"
)

// kthTrace is the KTH SP2 log of the Parallel Workloads Archive: 28,476
// jobs on 100 processors, one without a processor count.
const kthTrace = "KTH-SP2-1996-2.1-cln.swf.gz"

// openTrace reads a trace from $CORRAL_TRACES, or from the traces folder
// beside the repository (../../shared/traces from this package), skipping
// the test when neither has it. Traces are never copied into the
// repository.
func openTrace(tb testing.TB, name string) *Trace {
	tb.Helper()
	dir := os.Getenv("CORRAL_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "traces")
	}
	f, err := os.Open(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		tb.Skipf("trace %s not found in %s: set CORRAL_TRACES to the folder holding the Parallel Workloads Archive's traces", name, dir)
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadSWF(f)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	tr.Name = name
	return tr
}

// TestKTHReference replays the KTH trace under each policy and compares the
// figures with those of a reference simulator of the same model; each must
// land within 2 %. A figure of 0 is not checked.
func TestKTHReference(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 28,475 jobs per policy; skipped with -short")
	}
	tr := openTrace(t, kthTrace)
	tests := map[string]struct {
		policy                      sched.Policy
		meanWait, meanBSLD, utilize float64
	}{
		"fcfs":         {policy: sched.PolicyFCFS, meanWait: 353_943, meanBSLD: 6_825.7},
		"easy":         {policy: sched.PolicyEASY, meanWait: 6_837, meanBSLD: 92.87, utilize: 0.697},
		"conservative": {policy: sched.PolicyConservative, meanWait: 7_320, meanBSLD: 89.2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Run(tr, Options{Policy: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d jobs, %d skipped, %d timeouts, mean wait %.1f s, median wait %.1f s, mean bsld %.2f, p95 bsld %.2f, utilization %.4f, makespan %d s, %d passes, wall %v",
				name, res.Jobs, res.Skipped.Total(), res.Timeouts, res.MeanWait, res.MedianWait, res.MeanBSLD, res.P95BSLD, res.Utilization, res.Makespan, res.Passes, res.Wall)
			for _, f := range []struct {
				what      string
				got, want float64
			}{{"mean wait", res.MeanWait, tc.meanWait}, {"mean bsld", res.MeanBSLD, tc.meanBSLD}, {"utilization", res.Utilization, tc.utilize}} {
				if f.want != 0 && math.Abs(f.got-f.want) > 0.02*f.want {
					t.Errorf("%s = %.4g, want %.4g ± 2 %%", f.what, f.got, f.want)
				}
			}
		})
	}
}
