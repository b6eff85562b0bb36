package sched

import (
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// TestDeadlines checks Slurm's --deadline rule: a pending job that could no
// longer end by its deadline, started now with its time limit, is
// cancelled (DEADLINE); one that still could waits as any job does, and the
// pass is woken when it no longer could; a job without a limit is
// cancelled only once its deadline has passed.
func TestDeadlines(t *testing.T) {
	deadline := func(d time.Duration) func(*state.Job) {
		return func(j *state.Job) { j.Spec.Deadline = t0.Add(d) }
	}
	snap := at(t0).with(nodes(1).cpus(1)).
		running("n1", time.Minute, job(9).limit(time.Hour)).
		queue(
			job(1).limit(2*time.Hour).with(deadline(time.Hour)),    // cannot end by it
			job(2).limit(30*time.Minute).with(deadline(time.Hour)), // can; waits for n1
			job(3).with(deadline(time.Minute)),                     // no limit: waits
			job(4).with(deadline(-time.Second)).held(),             // no limit, passed, even held
			job(5).limit(time.Hour).with(deadline(time.Hour)),      // exactly at the line: in time
		).snapshot()
	plan := Schedule(snap)
	if !slices.Equal(plan.Deadlines, []uint64{1, 4}) {
		t.Errorf("Deadlines = %v, want [1 4]", plan.Deadlines)
	}
	for id, want := range map[uint64]api.Reason{1: api.ReasonDeadline, 2: api.ReasonResources, 3: api.ReasonPriority, 4: api.ReasonDeadline} {
		if got := plan.Reasons[id]; got != want {
			t.Errorf("job %d: reason %s, want %s", id, got, want)
		}
	}
	// Job 5 is late a second from now (the pass wakes then), job 3 (no
	// limit) a minute from now, job 2 in 30 minutes.
	if !plan.NextWake.Equal(t0.Add(time.Second)) {
		t.Errorf("NextWake = %v, want %v", plan.NextWake, t0.Add(time.Second))
	}
	cmd := plan.Entry(t0, snap, 100)
	var dl []uint64
	for _, c := range cmd.Cancels {
		if c.Deadline {
			dl = append(dl, c.JobID)
		}
	}
	if !slices.Equal(dl, []uint64{1, 4}) {
		t.Errorf("the entry's deadline cancels are %v", dl)
	}
}

// TestFixedPriority: a job whose priority an operator fixed (--priority)
// has that priority, whatever its factors, and is ordered by it.
func TestFixedPriority(t *testing.T) {
	snap := at(t0).with(nodes(1).cpus(1)).queue(
		job(1).submitted(t0.Add(-72*time.Hour)),
		job(2).with(func(j *state.Job) { j.Spec.Priority = api.MaxPriority }),
		job(3).with(func(j *state.Job) { j.Spec.Priority = 1 }).submitted(t0.Add(-100*time.Hour)),
	).snapshot()
	plan := Schedule(snap)
	if len(plan.Starts) != 1 || plan.Starts[0].JobID != 2 {
		t.Fatalf("started %+v, want job 2 (priority TOP) first", plan.Starts)
	}
	if f := Priority(snap.Pending[2], snap, 1); f.Priority != 1 {
		t.Errorf("job 3's priority is %d, want the fixed 1", f.Priority)
	}
}

// TestMemAll: a job asking for all of a node's memory (--mem=0) starts
// only on a node whose memory is all free, and is given all of it less
// the runner's overhead; on a node with a topology its placement holds
// every NUMA node's memory.
func TestMemAll(t *testing.T) {
	all := func(j *state.Job) { j.Spec.MemAll = true }
	snap := at(t0).with(nodes(2).cpus(4).mem(8192)).
		running("n1", time.Minute, job(9).mem(1024).limit(time.Hour)).
		queue(job(1).with(all).limit(time.Hour)).snapshot()
	snap.Nodes[1].OverheadMB = 64
	plan := Schedule(snap)
	if len(plan.Starts) != 1 || plan.Starts[0].Node != "n2" || plan.Starts[0].MemMB != 8192-64 || plan.Starts[0].OverheadMB != 64 {
		t.Fatalf("starts %+v; want job 1 on n2 with 8128 MiB (8 GiB less the 64 MiB overhead)", plan.Starts)
	}
	// With both nodes partly used it waits, with a reservation at n1's
	// job's end.
	snap = at(t0).with(nodes(2).cpus(4).mem(8192)).
		running("n1", time.Minute, job(9).mem(1024).limit(time.Hour)).
		running("n2", time.Minute, job(8).mem(512).limit(2*time.Hour)).
		queue(job(1).with(all).limit(time.Hour), job(2).mem(1024).limit(time.Minute)).snapshot()
	plan = Schedule(snap)
	if len(plan.Starts) != 1 || plan.Starts[0].JobID != 2 {
		t.Errorf("starts %+v; want only job 2, which backfills", plan.Starts)
	}
	if r := plan.Reservations[1]; r.Node != "n1" || !r.Start.Equal(t0.Add(59*time.Minute)) {
		t.Errorf("job 1's reservation %+v; want n1 when job 9 ends", r)
	}
}

// TestTopNice: scontrol top deals the jobs' priorities out again with the
// targets first, in the order given; each job's nice moves by its
// priority's change, so the sum is kept.
func TestTopNice(t *testing.T) {
	jobs := []TopJob{{ID: 1, Priority: 900, Nice: 0}, {ID: 2, Priority: 800, Nice: 0}, {ID: 3, Priority: 700, Nice: 10}, {ID: 4, Priority: 700, Nice: 0}}
	got := TopNice(jobs, []uint64{4, 2})
	// New order 4, 2, 1, 3 takes 900, 800, 700, 700.
	want := map[uint64]int{4: -200, 1: 200}
	if len(got) != len(want) || got[4] != want[4] || got[1] != want[1] {
		t.Errorf("TopNice = %v, want %v", got, want)
	}
	sum := 0
	for _, j := range jobs {
		n, changed := got[j.ID]
		if !changed {
			n = j.Nice
		}
		sum += n
	}
	if sum != 10 {
		t.Errorf("the nice values sum to %d, want 10 as before", sum)
	}
	if len(TopNice(jobs, []uint64{1})) != 0 {
		t.Error("topping the top job changed something")
	}
}
