package sched

import (
	"maps"
	"slices"
	"testing"
	"time"

	"corral/api"
)

// scenario is one single-pass case: the scene, the starts expected in plan
// order ("job@node"), every reason expected, and the expected NextWake.
type scenario struct {
	scene   *scene
	starts  []string
	reasons map[uint64]api.Reason
	wake    time.Time
	// estimates, when not nil, are the expected start times of the jobs
	// holding reservations, exactly.
	estimates map[uint64]time.Time
	// cancels are the jobs the plan cancels (--kill-on-invalid-dep).
	cancels []uint64
}

func runScenarios(t *testing.T, cases map[string]scenario) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.scene.snapshot()
			p := Schedule(s)
			checkPlan(t, s, p)
			if got := startsOf(p); !slices.Equal(got, tc.starts) {
				t.Errorf("starts = %v, want %v", got, tc.starts)
			}
			want := tc.reasons
			if want == nil {
				want = map[uint64]api.Reason{}
			}
			if !maps.Equal(p.Reasons, want) {
				t.Errorf("reasons = %v, want %v", p.Reasons, want)
			}
			if !slices.Equal(p.Cancels, tc.cancels) {
				t.Errorf("cancels = %v, want %v", p.Cancels, tc.cancels)
			}
			if tc.estimates != nil && !maps.EqualFunc(p.Estimates, tc.estimates, time.Time.Equal) {
				t.Errorf("estimates = %v, want %v", p.Estimates, tc.estimates)
			}
			if !p.NextWake.Equal(tc.wake) {
				t.Errorf("NextWake = %v, want %v", p.NextWake, tc.wake)
			}
		})
	}
}

func TestSchedulePlacement(t *testing.T) {
	runScenarios(t, map[string]scenario{
		"first fit fills the first node before the next": {
			scene: at(t0).with(nodes(3).cpus(4).mem(8192)).
				queue(job(1).cpus(2), job(2).cpus(2), job(3).cpus(2)),
			starts: []string{"1@n1", "2@n1", "3@n2"},
		},
		"first fit skips a node without enough free CPUs": {
			scene: at(t0).with(node("n1").cpus(4).mem(8192).busy(3, 0), node("n2").cpus(4).mem(8192)).
				queue(job(1).cpus(2), job(2).cpus(1)),
			starts: []string{"1@n2", "2@n1"},
		},
		"first fit skips a node without enough free memory": {
			scene: at(t0).with(node("n1").cpus(8).mem(4096).busy(0, 3072), node("n2").cpus(8).mem(4096)).
				queue(job(1).mem(2048), job(2).mem(1024)),
			starts: []string{"1@n2", "2@n1"},
		},
		"nodes are tried in name order, not snapshot order": {
			scene:  at(t0).with(node("b"), node("a")).queue(job(1), job(2)),
			starts: []string{"1@a", "2@b"},
		},
		"a job asks for tasks times cpus-per-task": {
			scene:  at(t0).with(node("small").cpus(4), node("wide").cpus(8)).queue(job(1).tasks(3).cpus(2)),
			starts: []string{"1@wide"},
		},
		// FCFS: job 3 cannot start, so job 4 and 5 may not overtake it even
		// though n1 has a free CPU for each. (EASY lets them: see
		// TestScheduleBackfill.)
		"fcfs: a big job at the head blocks smaller later ones": {
			scene: at(t0).policy(PolicyFCFS).with(nodes(2).cpus(4).mem(8192)).
				queue(job(1).cpus(3), job(2).cpus(3), job(3).cpus(4), job(4).cpus(1), job(5).cpus(1)),
			starts: []string{"1@n1", "2@n2"},
			reasons: map[uint64]api.Reason{
				3: api.ReasonResources, 4: api.ReasonPriority, 5: api.ReasonPriority,
			},
		},
		"a job with more CPUs than any node gets Resources and blocks no one": {
			scene:   at(t0).with(nodes(2).cpus(4)).queue(job(1).cpus(8), job(2).cpus(1)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"a job with more memory than any node gets Resources and blocks no one": {
			scene:   at(t0).with(nodes(2).cpus(4).mem(4096)).queue(job(1).mem(8192), job(2).mem(4096)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		// "Larger than any node" is checked before "blocked", so a job
		// that can never fit says so even behind a waiting head.
		"a too-big job behind a waiting head still gets Resources": {
			scene: at(t0).with(node("n1").cpus(4).busy(4, 0)).
				queue(job(1).cpus(4), job(2).cpus(8), job(3).cpus(1)),
			reasons: map[uint64]api.Reason{
				1: api.ReasonResources, 2: api.ReasonResources, 3: api.ReasonPriority,
			},
		},
		"larger than any node is judged within the job's partition": {
			scene: at(t0).with(node("big").cpus(16).partition("big"), nodes(1).cpus(4)).
				queue(job(1).cpus(8), job(2).cpus(1)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"down and drained nodes are skipped": {
			scene:  at(t0).with(node("a").down(), node("b").drained(), node("c")).queue(job(1)),
			starts: []string{"1@c"},
		},
		// A node whose runner still probes the host (a restarted vm node
		// daemon boots its test guest) takes no new job until it is done.
		"a probing node is skipped": {
			scene:  at(t0).with(node("a").probing(), node("b")).queue(job(1)),
			starts: []string{"1@b"},
		},
		// A down node still counts as able to hold the job some day, so the
		// job waits for Resources (it is not "larger than any node") and, at
		// the head, blocks the jobs behind it.
		"fcfs: a job only a down node could hold waits and blocks": {
			scene: at(t0).policy(PolicyFCFS).with(node("a").cpus(8).down(), node("b").cpus(2)).
				queue(job(1).cpus(8), job(2).cpus(1)),
			reasons: map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonPriority},
		},
		// Under EASY the same job gets no reservation (no usable node can
		// ever hold it), so it cannot be delayed and job 2 starts.
		"easy: a job only a down node could hold has no reservation to protect": {
			scene: at(t0).with(node("a").cpus(8).down(), node("b").cpus(2)).
				queue(job(1).cpus(8), job(2).cpus(1)),
			starts:  []string{"2@b"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"an empty cluster gives every job Resources": {
			scene:   at(t0).queue(job(1), job(2)),
			reasons: map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonResources},
		},
		"an empty queue gives an empty plan": {
			scene: at(t0).with(nodes(2)),
		},
	})
}

func TestScheduleMemoryDefault(t *testing.T) {
	runScenarios(t, map[string]scenario{
		// 2 × 1024 MiB each for jobs 1 and 2 fill the node's 4096 MiB: job 3
		// finds four free CPUs but no memory.
		"a job without --mem gets DefMemPerCPU per CPU": {
			scene: at(t0).defMemPerCPU(1024).with(nodes(1).cpus(8).mem(4096)).
				queue(job(1).cpus(2), job(2).cpus(2), job(3).cpus(1)),
			starts:  []string{"1@n1", "2@n1"},
			reasons: map[uint64]api.Reason{3: api.ReasonResources},
		},
		"--mem overrides the default": {
			scene: at(t0).defMemPerCPU(1024).with(nodes(1).cpus(8).mem(4096)).
				queue(job(1).cpus(2).mem(512), job(2).cpus(6).mem(3584)),
			starts: []string{"1@n1", "2@n1"},
		},
		"--mem-per-cpu overrides the default": {
			scene: at(t0).defMemPerCPU(4096).with(nodes(1).cpus(8).mem(4096)).
				queue(job(1).cpus(4).memPerCPU(512), job(2).cpus(4).memPerCPU(512)),
			starts: []string{"1@n1", "2@n1"},
		},
		"the default makes a job too big for every node": {
			scene:   at(t0).defMemPerCPU(2048).with(nodes(1).cpus(8).mem(4096)).queue(job(1).cpus(4)),
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"without a default a job asks for no memory": {
			scene:  at(t0).with(nodes(1).cpus(2).mem(1024).busy(0, 1024)).queue(job(1)),
			starts: []string{"1@n1"},
		},
	})
}

func TestMemRequest(t *testing.T) {
	cases := map[string]struct {
		job  jobB
		def  int64
		want int64
	}{
		"--mem is per node":           {job(1).cpus(4).mem(3000), 1024, 3000},
		"--mem-per-cpu times CPUs":    {job(1).tasks(2).cpus(2).memPerCPU(100), 1024, 400},
		"the default times CPUs":      {job(1).tasks(3).cpus(2), 512, 3072},
		"no request and no default":   {job(1).cpus(4), 0, 0},
		"--mem wins over per-cpu too": {job(1).cpus(4).mem(10).memPerCPU(100), 1024, 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := MemRequest(tc.job.j, tc.def); got != tc.want {
				t.Errorf("MemRequest = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSchedulePartitions(t *testing.T) {
	batchAndDebug := func() *scene {
		return at(t0).with(nodes(2).named("b"), nodes(2).named("d").partition("debug"))
	}
	runScenarios(t, map[string]scenario{
		"a job lands only on nodes of its partition": {
			scene: batchAndDebug().partitions("batch", "batch", "debug").
				queue(job(1).partition("debug"), job(2).partition("batch")),
			starts: []string{"1@d1", "2@b1"},
		},
		"a job without a partition goes to the marked default": {
			scene:  batchAndDebug().partitions("debug", "batch", "debug").queue(job(1)),
			starts: []string{"1@d1"},
		},
		"without a marked default the first partition is the default": {
			scene:  batchAndDebug().partitions("", "debug", "batch").queue(job(1)),
			starts: []string{"1@d1"},
		},
		"without partitions the default is batch, which holds nodes that name none": {
			scene:  batchAndDebug().queue(job(1)),
			starts: []string{"1@b1"},
		},
		"a node in several partitions serves each": {
			scene: at(t0).with(node("x").cpus(2).partition("batch", "debug")).
				queue(job(1).partition("debug"), job(2).partition("batch")),
			starts: []string{"1@x", "2@x"},
		},
		"a partition without nodes gives Resources and blocks no one": {
			scene:   batchAndDebug().queue(job(1).partition("gpu"), job(2)),
			starts:  []string{"2@b1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		// Slurm blocks a partition, not the cluster: job 2 cannot delay job
		// 1, whose partition shares no node with debug, so it starts; job 3
		// may not overtake job 1 in batch.
		"a waiting job blocks only partitions that share its nodes": {
			scene: at(t0).with(nodes(2).named("b").busy(1, 0), nodes(1).named("d").partition("debug")).
				queue(job(1), job(2).partition("debug"), job(3)),
			starts:  []string{"2@d"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources, 3: api.ReasonPriority},
		},
		"fcfs: a waiting job blocks an overlapping partition": {
			scene: at(t0).policy(PolicyFCFS).with(node("x").cpus(2).busy(1, 0).partition("batch", "debug"), node("d").partition("debug")).
				queue(job(1).cpus(2).partition("batch"), job(2).partition("debug")),
			reasons: map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonPriority},
		},
	})
}

func TestScheduleEligibility(t *testing.T) {
	runScenarios(t, map[string]scenario{
		"a held job gets JobHeldUser and blocks no one": {
			scene:   at(t0).with(nodes(1)).queue(job(1).held(), job(2)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonJobHeldUser},
		},
		"a hold wins over begin time, dependencies and size": {
			scene:   at(t0).with(nodes(1)).queue(job(1).held().begin(t0.Add(time.Hour)).afterok(99).cpus(64)),
			reasons: map[uint64]api.Reason{1: api.ReasonJobHeldUser},
		},
		"a future begin time gives BeginTime and NextWake is the earliest": {
			scene: at(t0).with(nodes(1)).
				queue(job(1).begin(t0.Add(time.Hour)), job(2).begin(t0.Add(10*time.Minute)), job(3)),
			starts:  []string{"3@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonBeginTime, 2: api.ReasonBeginTime},
			wake:    t0.Add(10 * time.Minute),
		},
		"a begin time at now or before is eligible": {
			scene:  at(t0).with(nodes(2)).queue(job(1).begin(t0), job(2).begin(t0.Add(-time.Hour))),
			starts: []string{"1@n1", "2@n2"},
		},
		"begin time is judged before dependencies": {
			scene:   at(t0).with(nodes(1)).queue(job(1).begin(t0.Add(time.Hour)).afterok(99)),
			reasons: map[uint64]api.Reason{1: api.ReasonBeginTime},
			wake:    t0.Add(time.Hour),
		},
		"a held job's begin time does not set NextWake": {
			scene:   at(t0).with(nodes(1)).queue(job(1).held().begin(t0.Add(time.Hour))),
			reasons: map[uint64]api.Reason{1: api.ReasonJobHeldUser},
		},
		"a job waiting for its begin time blocks no one": {
			scene:   at(t0).with(nodes(1)).queue(job(1).priority(9).begin(t0.Add(time.Minute)), job(2)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonBeginTime},
			wake:    t0.Add(time.Minute),
		},
	})
}

func TestScheduleOrder(t *testing.T) {
	one := func() *scene { return at(t0).with(nodes(1)) }
	runScenarios(t, map[string]scenario{
		"higher priority first": {
			scene:   one().queue(job(1).priority(1), job(2).priority(5)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"priority wins over submit time": {
			scene: one().queue(job(1).priority(1).submitted(t0.Add(-time.Hour)),
				job(2).priority(2).submitted(t0)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"equal priority: earlier submit first": {
			scene:   one().queue(job(1).submitted(t0.Add(time.Minute)), job(2).submitted(t0)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
		"equal priority and submit time: lower id first": {
			scene:   one().queue(job(2), job(1)),
			starts:  []string{"1@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonResources},
		},
		"starts come in priority order": {
			scene: at(t0).with(nodes(1).cpus(3)).
				queue(job(1).priority(1), job(2).priority(3), job(3).priority(2)),
			starts: []string{"2@n1", "3@n1", "1@n1"},
		},
		// Only the first job that cannot start gets Resources; everything
		// after it in priority order gets Priority.
		"the first waiting job in priority order gets Resources": {
			scene: one().queue(job(1).cpus(1).priority(1), job(2).cpus(1).priority(2),
				job(3).cpus(1).priority(3)),
			starts:  []string{"3@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonResources, 1: api.ReasonPriority},
		},
	})
}
