package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"corral/ctld/sched"
)

// Columns of the hand-written traces below (the 18 SWF fields):
//
//	job submit wait run alloc cpu mem req-procs req-time req-mem status user group exe queue part prev think

// fcfsTrace is a 4-processor machine whose FCFS schedule is worked out in
// TestRunFCFSMetrics. Job 3 gives no requested processors or time (its
// allocated processors and run time stand in); job 5 runs past its
// requested time and is killed at it; jobs 6, 7 and 8 are skipped (no
// processors, no run time, larger than the machine).
const fcfsTrace = `; MaxProcs: 4
; UnixStartTime: 1000000000
1   0  -1 100  4  -1 -1  4 100 -1 1 1 1 -1 -1 -1 -1 -1
2  10  -1  50  2  -1 -1  2  60 -1 1 1 1 -1 -1 -1 -1 -1
3  20  -1  30  3  -1 -1 -1  -1 -1 1 1 1 -1 -1 -1 -1 -1
4  30  -1   5  1  -1 -1  1 200 -1 1 1 1 -1 -1 -1 -1 -1
5  40  -1 300  2  -1 -1  2 100 -1 0 1 1 -1 -1 -1 -1 -1
6  50  -1  10 -1  -1 -1 -1  10 -1 1 1 1 -1 -1 -1 -1 -1
7  60  -1  -1  1  -1 -1  1  10 -1 1 1 1 -1 -1 -1 -1 -1
8  70  -1  10  8  -1 -1  8  10 -1 1 1 1 -1 -1 -1 -1 -1
`

// backfillTrace is the classic case where the three policies differ, on 4
// processors (runs equal requested times):
//
//	A (job 1)  t=0  2 procs 100 s   starts at once
//	B (job 2)  t=1  3 procs 100 s   waits for A: it can start at 100
//	C (job 3)  t=2  4 procs 100 s   the whole machine
//	D (job 4)  t=3  1 proc  400 s   long and narrow
//	E (job 5)  t=4  1 proc   50 s   short and narrow
//
// FCFS: B at 100, C at 200, D and E at 300 (both fit once C ends).
//
// EASY: only B holds a reservation, at 100 for 3 of the 4 processors,
// leaving 1 over. D fits now (2 free) and needs just that 1 over: it starts
// at 3 although it runs until 403. E (ends at 54, before 100) starts at 4 in
// the last free processor. B still starts at 100; C then needs all 4 and D
// holds one until 403: C starts at 403.
//
// Conservative: every waiting job holds a reservation: B at [100, 200), C
// at [200, 300). D would hold a processor during C's: it is reserved at
// 300. E fits in [4, 54) with 2 free, delaying no one: it starts at 4.
const backfillTrace = `; MaxProcs: 4
1 0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1 100 3 -1 -1 3 100 -1 1 1 1 -1 -1 -1 -1 -1
3 2 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1
4 3 -1 400 1 -1 -1 1 400 -1 1 1 1 -1 -1 -1 -1 -1
5 4 -1  50 1 -1 -1 1  50 -1 1 1 1 -1 -1 -1 -1 -1
`

// keepTrace tells conservative backfilling that keeps reservations (a
// job's reservation, once made, only ever moves earlier) from one that
// plans the whole queue afresh at every pass, on 4 processors:
//
//	job 1  t=0  2 procs 20 s                starts at 0, holds 2 until 20
//	job 2  t=1  3 procs 10 s                reserved at [20, 30)
//	job 3  t=3  2 procs limit 10 s, runs 5  starts at 3, planned until 13
//	job 4  t=4  2 procs limit 10 s, runs 5  2 are free during [13, 20)
//	                                        but 1 during [20, 30): reserved
//	                                        at [30, 40)
//	job 5  t=6  1 proc  50 s                1 free from 13 on: reserved at
//	                                        [13, 63)
//
// At 8 job 3 ends early and frees 2 processors until 13. Kept reservations:
// each waiting job in queue order moves to its earliest slot around all
// the others' reservations. Job 2 stays at 20. Job 4 would need 2 during
// [8, 18) but job 5 holds 1 from 13: it stays at 30. Job 5 moves to 8 and
// starts. Planning afresh instead starts job 4 at 8 (2 free until 20),
// over job 5's reservation, and job 5 at 13, when job 4 ends. The
// reference simulator keeps reservations: that variant reproduces its KTH
// figures (see TestKTHReference).
const keepTrace = `; MaxProcs: 4
1 0 -1 20 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1 10 3 -1 -1 3 10 -1 1 1 1 -1 -1 -1 -1 -1
3 3 -1  5 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
4 4 -1  5 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1
5 6 -1 50 1 -1 -1 1 50 -1 1 1 1 -1 -1 -1 -1 -1
`

func readTrace(t *testing.T, text string) *Trace {
	t.Helper()
	tr, err := ReadSWF(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func runTrace(t *testing.T, text string, opts Options) Result {
	t.Helper()
	res, err := Run(readTrace(t, text), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// starts maps each job of a result to its start second.
func starts(r Result) map[uint64]int64 {
	m := make(map[uint64]int64, len(r.Outcomes))
	for _, o := range r.Outcomes {
		m[o.ID] = o.Start
	}
	return m
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }

// TestRunFCFSMetrics checks every figure of one schedule worked out by hand.
//
//	t=0    job 1 starts (4 procs) and runs until 100.
//	t=100  job 1 ends; job 2 starts (2 of 4); job 3 (3) does not fit and
//	       holds the queue: 4 and 5 wait behind it.
//	t=150  job 2 ends; job 3 starts (3), then job 4 (1): the machine is full.
//	t=155  job 4 ends (ran 5 s); job 5 (2) does not fit in 1.
//	t=180  job 3 ends; job 5 starts and is killed at its limit, at 280.
//
//	job  submit start  wait  run  bsld = max(1, (wait+run)/max(run,10))
//	 1      0     0      0   100   100/100 = 1
//	 2     10   100     90    50   140/50  = 2.8
//	 3     20   150    130    30   160/30  = 5.333…
//	 4     30   150    120     5   125/10  = 12.5
//	 5     40   180    140   100   240/100 = 2.4
//
//	mean wait 480/5 = 96; median wait 120
//	mean bsld 24.0333…/5 = 4.80666…; p95 bsld: rank ⌈0.95×5⌉ = 5 of 5 = 12.5
//	makespan 280 − 0 = 280
//	utilization (4×100 + 2×50 + 3×30 + 1×5 + 2×100) / (4×280) = 795/1120
//	passes: seconds 0, 100, 150 and 180; left out, because no pending job
//	fits in the free processors: 10, 20, 30, 40 (the machine is full) and
//	155 (job 5 needs 2, 1 is free); at 280 the queue is empty, so no pass
//	runs
func TestRunFCFSMetrics(t *testing.T) {
	res := runTrace(t, fcfsTrace, Options{Policy: sched.PolicyFCFS})
	if got, want := starts(res), map[uint64]int64{1: 0, 2: 100, 3: 150, 4: 150, 5: 180}; !mapsEqual(got, want) {
		t.Errorf("starts = %v, want %v", got, want)
	}
	ints := []struct {
		what      string
		got, want int64
	}{
		{"procs", int64(res.Procs), 4},
		{"jobs", int64(res.Jobs), 5},
		{"skipped without processors", int64(res.Skipped.NoSize), 1},
		{"skipped without run time", int64(res.Skipped.NoRunTime), 1},
		{"skipped as too large", int64(res.Skipped.TooLarge), 1},
		{"timeouts", int64(res.Timeouts), 1},
		{"makespan", res.Makespan, 280},
		{"passes", int64(res.Passes), 4},
		{"passes left out", int64(res.IdlePasses), 5},
	}
	for _, c := range ints {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}
	floats := []struct {
		what      string
		got, want float64
	}{
		{"mean wait", res.MeanWait, 96},
		{"median wait", res.MedianWait, 120},
		{"mean bsld", res.MeanBSLD, (1 + 2.8 + 160.0/30 + 12.5 + 2.4) / 5},
		{"p95 bsld", res.P95BSLD, 12.5},
		{"utilization", res.Utilization, 795.0 / 1120},
	}
	for _, c := range floats {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if res.Policy != sched.PolicyFCFS {
		t.Errorf("policy = %q, want fcfs", res.Policy)
	}
}

func mapsEqual(a, b map[uint64]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRunPolicies pins the start of every job under each policy.
func TestRunPolicies(t *testing.T) {
	tests := map[string]struct {
		trace    string
		policy   sched.Policy
		starts   map[uint64]int64
		meanWait float64
		makespan int64
	}{
		"backfill trace, fcfs": {
			trace: backfillTrace, policy: sched.PolicyFCFS,
			starts:   map[uint64]int64{1: 0, 2: 100, 3: 200, 4: 300, 5: 300},
			meanWait: (0 + 99 + 198 + 297 + 296) / 5.0, makespan: 700,
		},
		"backfill trace, easy: D and E jump ahead without delaying B": {
			trace: backfillTrace, policy: sched.PolicyEASY,
			starts:   map[uint64]int64{1: 0, 2: 100, 3: 403, 4: 3, 5: 4},
			meanWait: (0 + 99 + 401 + 0 + 0) / 5.0, makespan: 503,
		},
		"backfill trace, conservative: E jumps ahead, D may not delay C": {
			trace: backfillTrace, policy: sched.PolicyConservative,
			starts:   map[uint64]int64{1: 0, 2: 100, 3: 200, 4: 300, 5: 4},
			meanWait: (0 + 99 + 198 + 297 + 0) / 5.0, makespan: 700,
		},
		// See keepTrace: job 4 waits for its reservation at 30, job 5
		// moves up to 8. Waits 0, 19, 0, 26, 2; job 4 ends at 35, job 5
		// at 58.
		"keep trace, conservative: reservations only move earlier": {
			trace: keepTrace, policy: sched.PolicyConservative,
			starts:   map[uint64]int64{1: 0, 2: 20, 3: 3, 4: 30, 5: 8},
			meanWait: (0 + 19 + 0 + 26 + 2) / 5.0, makespan: 58,
		},
		// At 100 job 3 holds a reservation at 160 (job 2's limit) for 3 of
		// 4 processors; job 4 (1 proc) uses the one left over and starts.
		// It ends at 105; job 5 (2 procs, 100 s) then fits now but would
		// need 2 at 160 where 1 is over: it waits for job 3 to end at 180.
		"fcfs trace, easy: job 4 backfills": {
			trace: fcfsTrace, policy: sched.PolicyEASY,
			starts:   map[uint64]int64{1: 0, 2: 100, 3: 150, 4: 100, 5: 180},
			meanWait: (0 + 90 + 130 + 70 + 140) / 5.0, makespan: 280,
		},
		// As EASY: job 4 delays neither job 3 (reserved at 160) nor job 5
		// (reserved at 190, after job 3).
		"fcfs trace, conservative: job 4 backfills": {
			trace: fcfsTrace, policy: sched.PolicyConservative,
			starts:   map[uint64]int64{1: 0, 2: 100, 3: 150, 4: 100, 5: 180},
			meanWait: (0 + 90 + 130 + 70 + 140) / 5.0, makespan: 280,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := runTrace(t, tc.trace, Options{Policy: tc.policy})
			if got := starts(res); !mapsEqual(got, tc.starts) {
				t.Errorf("starts = %v, want %v", got, tc.starts)
			}
			if !near(res.MeanWait, tc.meanWait) {
				t.Errorf("mean wait = %v, want %v", res.MeanWait, tc.meanWait)
			}
			if res.Makespan != tc.makespan {
				t.Errorf("makespan = %d, want %d", res.Makespan, tc.makespan)
			}
		})
	}
}

// TestRunEventOrder pins how events of one second are applied.
func TestRunEventOrder(t *testing.T) {
	tests := map[string]struct {
		trace  string
		starts map[uint64]int64
		passes int
	}{
		// Job 1 ends at 10, the second job 2 arrives: the end is applied
		// first, so job 2 starts at once.
		"an end frees processors for a submit of the same second": {
			trace: "; MaxProcs: 2\n" +
				"1  0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n" +
				"2 10 -1  5 2 -1 -1 2  5 -1 1 1 1 -1 -1 -1 -1 -1\n",
			starts: map[uint64]int64{1: 0, 2: 10},
			passes: 2,
		},
		// Job 1 runs 0 s: it ends the second it starts, and that end is
		// one more event of second 0, so a second pass starts job 2 then.
		"a job of 0 s frees its processors in the same second": {
			trace: "; MaxProcs: 2\n" +
				"1 0 -1  0 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1\n" +
				"2 0 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 -1 -1 -1 -1\n",
			starts: map[uint64]int64{1: 0, 2: 0},
			passes: 2,
		},
		// The file's order does not matter: the queue is by submit time,
		// then job number, so job 1 (submitted last) runs last. Passes
		// run at 0, 10 and 20 (ends); at 5 job 1 arrives on a full
		// machine, and that pass is left out.
		"queue order is submit time, then job number": {
			trace: "; MaxNodes: 1\n" +
				"5 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n" +
				"3 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n" +
				"1 5 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n",
			starts: map[uint64]int64{3: 0, 5: 10, 1: 20},
			passes: 3,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := runTrace(t, tc.trace, Options{Policy: sched.PolicyFCFS})
			if got := starts(res); !mapsEqual(got, tc.starts) {
				t.Errorf("starts = %v, want %v", got, tc.starts)
			}
			if res.Passes != tc.passes {
				t.Errorf("passes = %d, want %d", res.Passes, tc.passes)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	const job = "1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n"
	tests := map[string]struct {
		trace  string
		policy sched.Policy
		want   string
	}{
		"no machine size":           {trace: job, want: `add a header line such as "; MaxProcs: 128"`},
		"a machine of 0 processors": {trace: "; MaxProcs: 0\n; MaxNodes: 0\n" + job, want: "gives no machine size"},
		"a repeated job":            {trace: "; MaxProcs: 2\n" + job + job, want: "line 3: field 1 (job number): job 1 is also on line 2"},
		"a job number of 0":         {trace: "; MaxProcs: 2\n0" + job[1:], want: "line 2: field 1 (job number): 0 is not a positive job number"},
		// The first repeat in the file is named, with the line the
		// number first was on; an error on a later line waits.
		"repeats": {trace: "; MaxProcs: 2\n" + "7" + job[1:] + "5" + job[1:] + "5" + job[1:] + "7" + job[1:] + "5" + job[1:] + "0" + job[1:],
			want: "line 4: field 1 (job number): job 5 is also on line 3"},
		"a repeat after a job number of 0": {trace: "; MaxProcs: 2\n" + job + "0" + job[1:] + job, want: "line 3: field 1 (job number): 0 is not a positive job number"},
		"an unknown policy":                {trace: "; MaxProcs: 2\n" + job, policy: "sjf", want: `unknown scheduling policy "sjf"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Run(readTrace(t, tc.trace), Options{Policy: tc.policy})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRunStopAndProgress(t *testing.T) {
	stop := make(chan struct{})
	close(stop)
	_, err := Run(readTrace(t, fcfsTrace), Options{Stop: stop})
	if !errors.Is(err, ErrStopped) {
		t.Errorf("Run with Stop closed: error = %v, want ErrStopped", err)
	}

	var calls [][2]int
	_, err = Run(readTrace(t, fcfsTrace), Options{Policy: sched.PolicyFCFS, Progress: func(done, total int) {
		calls = append(calls, [2]int{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	// Jobs end at 100, 150, 155, 180 and 280: one call each.
	want := [][2]int{{1, 5}, {2, 5}, {3, 5}, {4, 5}, {5, 5}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("progress calls = %v, want %v", calls, want)
	}
}

// TestRunInvariants replays random traces under every policy and checks,
// from the outcomes alone, what any schedule must satisfy: no job starts
// before it is submitted, every job runs its run time cut at its limit, the
// machine is never over-committed, and FCFS starts jobs in queue order.
func TestRunInvariants(t *testing.T) {
	const procs = 16
	for seed := range uint64(5) {
		text, runs := randomTrace(seed, procs, 300)
		tr := readTrace(t, text)
		for _, p := range []sched.Policy{sched.PolicyFCFS, sched.PolicyEASY, sched.PolicyConservative} {
			t.Run(fmt.Sprintf("seed %d %s", seed, p), func(t *testing.T) {
				res, err := Run(tr, Options{Policy: p})
				if err != nil {
					t.Fatal(err)
				}
				checkOutcomes(t, res, procs, runs)
				if p != sched.PolicyFCFS {
					return
				}
				for i := 1; i < len(res.Outcomes); i++ {
					if a, b := res.Outcomes[i-1], res.Outcomes[i]; b.Start < a.Start {
						t.Errorf("fcfs: job %d started at %d, before job %d ahead of it in the queue (%d)", b.ID, b.Start, a.ID, a.Start)
					}
				}
			})
		}
	}
}

// randomTrace writes an SWF trace of n jobs of 1–procs processors, some
// running past their requested time, and returns each job's effective run.
func randomTrace(seed uint64, procs, n int) (string, map[uint64]int64) {
	r := rand.New(rand.NewPCG(seed, 42))
	var b strings.Builder
	fmt.Fprintf(&b, "; MaxProcs: %d\n", procs)
	runs := map[uint64]int64{}
	submit := int64(0)
	for id := 1; id <= n; id++ {
		submit += int64(r.IntN(60))
		run, req := int64(r.IntN(600)), int64(1+r.IntN(600))
		size := 1 + r.IntN(procs)
		fmt.Fprintf(&b, "%d %d -1 %d %d -1 -1 %d %d -1 1 1 1 -1 -1 -1 -1 -1\n", id, submit, run, size, size, req)
		runs[uint64(id)] = min(run, req)
	}
	return b.String(), runs
}

func checkOutcomes(t *testing.T, res Result, procs int, runs map[uint64]int64) {
	t.Helper()
	type change struct {
		at    int64
		delta int
	}
	var changes []change
	for _, o := range res.Outcomes {
		if o.Start < o.Submit {
			t.Errorf("job %d started at %d, before its submit at %d", o.ID, o.Start, o.Submit)
		}
		if o.Run() != runs[o.ID] {
			t.Errorf("job %d ran %d s, want %d", o.ID, o.Run(), runs[o.ID])
		}
		changes = append(changes, change{o.Start, o.Size}, change{o.End, -o.Size})
	}
	// Ends before starts at the same second: an end frees processors for
	// that second's pass.
	sort.Slice(changes, func(a, b int) bool {
		if changes[a].at != changes[b].at {
			return changes[a].at < changes[b].at
		}
		return changes[a].delta < changes[b].delta
	})
	busy := 0
	for _, c := range changes {
		if busy += c.delta; busy > procs {
			t.Fatalf("%d processors busy at second %d, of %d", busy, c.at, procs)
		}
	}
}

// TestNth compares nth with sorting, on lists with many repeats, sorted,
// reversed and short ones, for every k, and checks the order it leaves.
func TestNth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 3, 16, 17, 40, 101, 1000} {
		for kind := range 4 {
			a := make([]float64, n)
			for i := range a {
				switch kind {
				case 0:
					a[i] = float64(r.IntN(5)) // repeats, as waits of 0 are
				case 1:
					a[i] = r.Float64()
				case 2:
					a[i] = float64(i)
				default:
					a[i] = float64(n - i)
				}
			}
			sorted := slices.Clone(a)
			slices.Sort(sorted)
			for k := range n {
				b := slices.Clone(a)
				if got := nth(b, k); got != sorted[k] {
					t.Fatalf("n %d kind %d: nth(%d) = %v, want %v", n, kind, k, got, sorted[k])
				}
				if k > 0 && slices.Max(b[:k]) > b[k] || k < n-1 && slices.Min(b[k+1:]) < b[k] {
					t.Fatalf("n %d kind %d: nth(%d) left %v", n, kind, k, b)
				}
			}
		}
	}
}
