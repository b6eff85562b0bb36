package sched

import (
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

func (b jobB) qos(name string) jobB { return b.with(func(j *state.Job) { j.Spec.QOS = name }) }

// withQOS gives the scene the default QoS (guaranteed may preempt
// besteffort), with besteffort's preemption mode and exempt time set.
func (sc *scene) withQOS(mode api.PreemptMode, exempt time.Duration) *scene {
	sc.s.QOS = map[string]*api.QOS{}
	for _, q := range api.DefaultQOS() {
		if q.Name == "besteffort" {
			q.PreemptMode, q.PreemptExemptTime = mode, int64(exempt/time.Second)
		}
		sc.s.QOS[q.Name] = &q
	}
	return sc
}

type victim struct {
	id   uint64
	mode api.PreemptMode
}

func victimsOf(p Plan) []victim {
	var out []victim
	for _, v := range p.Preemptions {
		out = append(out, victim{v.Victim, v.Mode})
	}
	return out
}

func TestSchedulePreemption(t *testing.T) {
	tests := map[string]struct {
		scene   *scene
		victims []victim
		reason  api.Reason // job 1's
	}{
		"a guaranteed job on a full node preempts a besteffort job (cancel)": {
			scene: at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(2)).
				running("n1", time.Hour, job(9).cpus(2).qos("besteffort")).
				queue(job(1).cpus(2).qos("guaranteed")),
			victims: []victim{{9, api.PreemptCancel}}, reason: api.ReasonResources,
		},
		"requeue mode": {
			scene: at(t0).withQOS(api.PreemptRequeue, 0).with(node("n1").cpus(2)).
				running("n1", time.Hour, job(9).cpus(2).qos("besteffort")).
				queue(job(1).cpus(2).qos("guaranteed")),
			victims: []victim{{9, api.PreemptRequeue}}, reason: api.ReasonResources,
		},
		// Suspend frees CPUs only: job 9 keeps its 1536 MiB, so 512 MiB is
		// all job 1 can have.
		"suspend mode frees CPUs, not memory: enough": {
			scene: at(t0).withQOS(api.PreemptSuspend, 0).with(node("n1").cpus(2).mem(2048)).
				running("n1", time.Hour, job(9).cpus(2).mem(1536).qos("besteffort")).
				queue(job(1).cpus(2).mem(512).qos("guaranteed")),
			victims: []victim{{9, api.PreemptSuspend}}, reason: api.ReasonResources,
		},
		"suspend mode frees CPUs, not memory: not enough, no preemption": {
			scene: at(t0).withQOS(api.PreemptSuspend, 0).with(node("n1").cpus(2).mem(2048)).
				running("n1", time.Hour, job(9).cpus(2).mem(1536).qos("besteffort")).
				queue(job(1).cpus(2).mem(1024).qos("guaranteed")),
			reason: api.ReasonResources,
		},
		// Four 1-CPU besteffort jobs: 6 and 7 have the lowest priority (1);
		// of those, 6 has run less (5m against 30m), so it goes first, then
		// 7, which frees the 2 CPUs job 1 needs.
		"the cheapest victims: lowest priority, then least run time lost": {
			scene: at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(4)).
				running("n1", 30*time.Minute, job(7).qos("besteffort").priority(1)).
				running("n1", time.Minute, job(8).qos("besteffort").priority(5)).
				running("n1", 5*time.Minute, job(6).qos("besteffort").priority(1)).
				running("n1", time.Minute, job(9).qos("besteffort").priority(3)).
				queue(job(1).cpus(2).qos("guaranteed")),
			victims: []victim{{6, api.PreemptCancel}, {7, api.PreemptCancel}}, reason: api.ReasonResources,
		},
		"never a job inside its exempt time": {
			scene: at(t0).withQOS(api.PreemptCancel, 10*time.Minute).with(node("n1").cpus(2)).
				running("n1", 5*time.Minute, job(9).cpus(2).qos("besteffort")).
				queue(job(1).cpus(2).qos("guaranteed")),
			reason: api.ReasonResources,
		},
		// Only 1 of the 4 CPUs is besteffort's: preempting it would not let
		// job 1 start, so nothing is preempted.
		"no preemption that would not let the preemptor start": {
			scene: at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(4)).
				running("n1", time.Hour, job(8).cpus(1).qos("besteffort")).
				running("n1", time.Hour, job(9).cpus(3).qos("burstable")).
				queue(job(1).cpus(4).qos("guaranteed")),
			reason: api.ReasonResources,
		},
		"a QoS not in the preempt list is safe": {
			scene: at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(2)).
				running("n1", time.Hour, job(9).cpus(2).qos("burstable")).
				queue(job(1).cpus(2).qos("guaranteed")),
			reason: api.ReasonResources,
		},
		"a besteffort job preempts no one": {
			scene: at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(2)).
				running("n1", time.Hour, job(9).cpus(2).qos("besteffort")).
				queue(job(1).cpus(2).qos("besteffort")),
			reason: api.ReasonResources,
		},
		// The node job 1 claims starts nothing else in the pass: job 2
		// would fit in the CPU job 9 leaves but must not take it.
		"the claimed node starts nothing else": {
			scene: at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(3)).
				running("n1", time.Hour, job(9).cpus(2).qos("besteffort")).
				queue(job(1).cpus(3).qos("guaranteed"), job(2).cpus(1).submitted(t0.Add(time.Second))),
			victims: []victim{{9, api.PreemptCancel}}, reason: api.ReasonResources,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := tc.scene.snapshot()
			p := Schedule(s)
			checkPlan(t, s, p)
			if got := victimsOf(p); !slices.Equal(got, tc.victims) {
				t.Errorf("victims = %v, want %v", got, tc.victims)
			}
			if p.Reasons[1] != tc.reason {
				t.Errorf("job 1 reason = %q, want %q", p.Reasons[1], tc.reason)
			}
			for _, st := range p.Starts {
				if st.Node == "n1" && len(tc.victims) > 0 {
					t.Errorf("job %d started on n1, which job 1 claimed", st.JobID)
				}
			}
		})
	}
}

func TestScheduleResumesLentCPUs(t *testing.T) {
	// The lent CPUs are free in the node's figures: the pass hands them
	// back before placing job 1, which then finds only 2 CPUs.
	sc := at(t0).with(node("n1").cpus(4)).runningWith("n1", time.Hour, job(9).cpus(2), lentTo(0))
	sc.queue(job(1).cpus(4))
	s := sc.snapshot()
	p := Schedule(s)
	if !slices.Equal(p.Resumes, []uint64{9}) {
		t.Errorf("resumes = %v, want [9]", p.Resumes)
	}
	if len(p.Starts) != 0 {
		t.Errorf("starts = %v, want none: the resumed job holds its CPUs again", startsOf(p))
	}
}

func TestScheduleQOSLimits(t *testing.T) {
	limits := func(q api.QOS) *scene {
		sc := at(t0).with(nodes(1).cpus(8))
		sc.s.QOS = map[string]*api.QOS{q.Name: &q}
		return sc
	}
	runScenarios(t, map[string]scenario{
		"MaxJobsPerUser counts running jobs of the user in the QoS": {
			scene: limits(api.QOS{Name: "q", MaxJobsPerUser: 1}).
				running("n1", time.Minute, job(9).qos("q")).
				queue(job(1).qos("q"), job(2).qos("q").named("x", "bob")),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonQOSMaxJobsPerUserLimit},
		},
		"MaxJobsPerUser counts this pass's starts": {
			scene:   limits(api.QOS{Name: "q", MaxJobsPerUser: 2}).queue(job(1).qos("q"), job(2).qos("q"), job(3).qos("q")),
			starts:  []string{"1@n1", "2@n1"},
			reasons: map[uint64]api.Reason{3: api.ReasonQOSMaxJobsPerUserLimit},
		},
		"GrpCPUs caps the QoS's CPUs": {
			scene:   limits(api.QOS{Name: "q", GrpCPUs: 4}).queue(job(1).qos("q").cpus(3), job(2).qos("q").cpus(2), job(3).qos("q")),
			starts:  []string{"1@n1", "3@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonQOSGrpCpuLimit},
		},
		"MaxWall refuses a longer time limit": {
			scene:   limits(api.QOS{Name: "q", MaxWall: 3600}).queue(job(1).qos("q").limit(2*time.Hour), job(2).qos("q").limit(time.Hour)),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonQOSMaxWallDurationLimit},
		},
	})
}

// TestSchedulePriorityFactors: with weights set, a later guaranteed job
// outranks an earlier besteffort one, and an older job outranks a newer
// one of the same QoS.
func TestSchedulePriorityFactors(t *testing.T) {
	sc := at(t0).withQOS(api.PreemptCancel, 0).with(node("n1").cpus(1)).
		queue(job(1).qos("besteffort").submitted(t0.Add(-time.Hour)), job(2).qos("guaranteed"))
	sc.s.Config = api.DefaultSchedConfig()
	p := Schedule(sc.snapshot())
	if got := startsOf(p); !slices.Equal(got, []string{"2@n1"}) {
		t.Errorf("starts = %v, want the guaranteed job first", got)
	}
	// Worked example, default weights (age 1000 over 7 days, QoS 10000,
	// partition 1000, job size 1000 over the cluster's CPUs): job 1 waited
	// 1h → age 1/168 → 5.95; QoS 0; partition 1 → 1000; job size 1/1 →
	// 1000: 2006. Job 2: age 0; QoS 1000/1000 → 10000; 1000; 1000: 12000.
	s := sc.snapshot()
	if f := Priority(s.Pending[0], s, 1); f.Priority != 2006 {
		t.Errorf("job 1 priority = %d (%+v), want 2006", f.Priority, f)
	}
	if f := Priority(s.Pending[1], s, 1); f.Priority != 12000 {
		t.Errorf("job 2 priority = %d (%+v), want 12000", f.Priority, f)
	}
	sc2 := at(t0).with(node("n1").cpus(1)).queue(job(1).submitted(t0.Add(-time.Minute)), job(2).submitted(t0.Add(-time.Hour)))
	sc2.s.Config = api.DefaultSchedConfig()
	if got := startsOf(Schedule(sc2.snapshot())); !slices.Equal(got, []string{"2@n1"}) {
		t.Errorf("starts = %v, want the older job first", got)
	}
}

// A job suspended by preemption stays suspended while its preemptor runs.
func TestScheduleKeepsSuspendedWhilePreemptorRuns(t *testing.T) {
	sc := at(t0).with(node("n1").cpus(4)).
		runningWith("n1", time.Hour, job(9).cpus(2), lentTo(5)).
		running("n1", time.Minute, job(5).cpus(2))
	if p := Schedule(sc.snapshot()); len(p.Resumes) != 0 {
		t.Errorf("resumes = %v while the preemptor runs, want none", p.Resumes)
	}
}

// TestPreemptionRounds plays a guaranteed job arriving on a full node,
// round by round, in each mode of the besteffort QoS. Node n1 has 4 CPUs;
// besteffort jobs 1 and 2 (2 CPUs, 10 rounds; 2 has the lower priority)
// start in round 0; guaranteed job 3 (2 CPUs, 2 rounds) arrives in round
// 1. Job 2 is the cheaper victim; job 3 starts in round 2, once job 2's
// CPUs are free, and ends in round 4, when job 2 runs again (requeue:
// from the start, 10 rounds; suspend: resumed with 9 rounds left) or
// never (cancel).
func TestPreemptionRounds(t *testing.T) {
	tests := map[api.PreemptMode]map[int][]string{
		api.PreemptCancel: {
			0: {"start 1", "start 2"}, 1: {"preempt 2 (cancel)"}, 2: {"start 3"},
		},
		api.PreemptRequeue: {
			0: {"start 1", "start 2"}, 1: {"preempt 2 (requeue)"}, 2: {"start 3"}, 4: {"start 2"},
		},
		api.PreemptSuspend: {
			0: {"start 1", "start 2"}, 1: {"preempt 2 (suspend)"}, 2: {"start 3"}, 4: {"resume 2"},
		},
	}
	for mode, want := range tests {
		t.Run(string(mode), func(t *testing.T) {
			s := newSimulation(t, node("n1").cpus(4))
			s.qos = at(t0).withQOS(mode, 0).s.QOS
			s.submit(job(1).cpus(2).qos("besteffort"), 0, 10)
			s.submit(job(2).cpus(2).qos("besteffort").priority(-1), 0, 10)
			s.submit(job(3).cpus(2).qos("guaranteed"), 1, 2)
			for range 8 {
				s.step()
			}
			for r := range 8 {
				if got := s.events[r]; !slices.Equal(got, want[r]) {
					t.Errorf("round %d: %v, want %v", r, got, want[r])
				}
			}
		})
	}
}

// TestPriorityFactors checks each factor alone: one weight of 1000 at a
// time, on a 16-CPU cluster, at t0.
func TestPriorityFactors(t *testing.T) {
	qos := map[string]*api.QOS{"hi": {Name: "hi", Priority: 400}, "top": {Name: "top", Priority: 1000}}
	week := int64(7 * 24 * 3600)
	tests := map[string]struct {
		weights api.PriorityWeights
		job     jobB
		fs      float64
		want    int64
	}{
		// 1 day of 7: 1000/7 = 142.86 → 143.
		"age grows with waiting":                 {api.PriorityWeights{Age: 1000}, job(1).submitted(t0.Add(-24 * time.Hour)), 0, 143},
		"age saturates at the max age":           {api.PriorityWeights{Age: 1000}, job(1).submitted(t0.Add(-30 * 24 * time.Hour)), 0, 1000},
		"a job from the future has age 0":        {api.PriorityWeights{Age: 1000}, job(1).submitted(t0.Add(time.Hour)), 0, 0},
		"fair-share is the association's factor": {api.PriorityWeights{Fairshare: 1000}, job(1), 0.25, 250},
		// 400 of the top QoS's 1000.
		"QoS is relative to the highest QoS": {api.PriorityWeights{QOS: 1000}, job(1).qos("hi"), 0, 400},
		"no QoS: 0":                          {api.PriorityWeights{QOS: 1000}, job(1), 0, 0},
		"partition factor is 1":              {api.PriorityWeights{Partition: 1000}, job(1), 0, 1000},
		// 4 of 16 CPUs.
		"job size is the share of the cluster's CPUs": {api.PriorityWeights{JobSize: 1000}, job(1).cpus(4), 0, 250},
		"nice lowers the priority":                    {api.PriorityWeights{Partition: 1000}, job(1).with(func(j *state.Job) { j.Spec.Nice = 100 }), 0, 900},
		"the job's own priority adds":                 {api.PriorityWeights{}, job(1).priority(7), 0, 7},
		"site factor is 0 for now":                    {api.PriorityWeights{Site: 1000}, job(1), 0, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &Snapshot{Now: t0, QOS: qos, Config: api.SchedConfig{Weights: tc.weights, PriorityMaxAge: week},
				Fairshare: func(string, string) float64 { return tc.fs }}
			if got := Priority(tc.job.j, s, 16); got.Priority != tc.want {
				t.Errorf("priority = %d (%+v), want %d", got.Priority, got, tc.want)
			}
		})
	}
}
