package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"corral/api"
)

// Every scenario here has one 8-CPU node unless it says otherwise, and a
// running job 9 that holds 5 CPUs until t0+30m (limit 1h, started 30m
// ago), so 3 CPUs are free now and 8 from t0+30m.
func busyNode() *scene {
	return at(t0).with(node("n1").cpus(8).mem(1<<20)).
		running("n1", 30*time.Minute, job(9).cpus(5).limit(time.Hour))
}

func TestScheduleBackfill(t *testing.T) {
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	runScenarios(t, map[string]scenario{
		// Job 1 needs all 8 CPUs: reservation at t0+30m. Job 2 (1 CPU,
		// 20m) ends by t0+20m, before it: it starts. Job 3 (1 CPU, 1h)
		// would still hold a CPU at t0+30m, leaving 7 of 8: it waits.
		"easy: a short job backfills; a long one would delay the head": {
			scene: busyNode().queue(job(1).cpus(8).limit(time.Hour), job(2).limit(20*time.Minute),
				job(3).limit(time.Hour)),
			starts:    []string{"2@n1"},
			reasons:   map[uint64]api.Reason{1: api.ReasonResources, 3: api.ReasonPriority},
			estimates: map[uint64]time.Time{1: m(30)},
		},
		// Job 1 needs 6 of the 8 CPUs free at t0+30m, leaving 2 over: job 2
		// (2 CPUs, 1h) may hold them past t0+30m; job 3 (1 CPU) then finds
		// 1 free now but would leave 5 < 6 at t0+30m.
		"easy: a backfilled job may use what the reservation leaves over": {
			scene: busyNode().queue(job(1).cpus(6).limit(time.Hour), job(2).cpus(2).limit(time.Hour),
				job(3).limit(time.Hour)),
			starts:    []string{"2@n1"},
			reasons:   map[uint64]api.Reason{1: api.ReasonResources, 3: api.ReasonPriority},
			estimates: map[uint64]time.Time{1: m(30)},
		},
		// A job without a time limit is planned to run for Horizon, so it
		// never fits before a reservation on its node.
		"easy: a job without a time limit does not backfill in front of a reservation": {
			scene:     busyNode().queue(job(1).cpus(8).limit(time.Hour), job(2)),
			reasons:   map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonPriority},
			estimates: map[uint64]time.Time{1: m(30)},
		},
		// EASY reserves for job 1 only. Job 2 (8 CPUs) gets none. Job 3
		// (2 CPUs, 3h) uses the 2 CPUs job 1 leaves over: it starts even
		// though it delays job 2.
		"easy: only the first blocked job has a reservation": {
			scene: busyNode().queue(job(1).cpus(6).limit(time.Hour), job(2).cpus(8).limit(time.Hour),
				job(3).cpus(2).limit(3*time.Hour)),
			starts:    []string{"3@n1"},
			reasons:   map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonPriority},
			estimates: map[uint64]time.Time{1: m(30)},
		},
		// The same queue conservatively: job 2 is reserved at t0+90m, when
		// job 1 ends; job 3 would hold 2 CPUs then: it waits. Job 4 (1 CPU,
		// 20m) delays no one: it starts.
		"conservative: every blocked job has a reservation": {
			scene: busyNode().policy(PolicyConservative).queue(job(1).cpus(6).limit(time.Hour),
				job(2).cpus(8).limit(time.Hour), job(3).cpus(2).limit(3*time.Hour), job(4).limit(20*time.Minute)),
			starts: []string{"4@n1"},
			reasons: map[uint64]api.Reason{
				1: api.ReasonResources, 2: api.ReasonPriority, 3: api.ReasonPriority,
			},
			estimates: map[uint64]time.Time{1: m(30), 2: m(90), 3: m(150)},
		},
		"fcfs: nothing overtakes the blocked head and nothing is reserved": {
			scene: busyNode().policy(PolicyFCFS).queue(job(1).cpus(8).limit(time.Hour),
				job(2).limit(time.Minute)),
			reasons:   map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonPriority},
			estimates: map[uint64]time.Time{},
		},
		// Node a frees its 4 CPUs at t0+1h, node b at t0+10m: the head is
		// reserved on b, the earlier.
		"the reservation is on the node where the job starts soonest": {
			scene: at(t0).with(node("a").cpus(4), node("b").cpus(4)).
				running("a", 0, job(8).cpus(4).limit(time.Hour)).
				running("b", 50*time.Minute, job(9).cpus(4).limit(time.Hour)).
				queue(job(1).cpus(4).limit(time.Hour)),
			reasons:   map[uint64]api.Reason{1: api.ReasonResources},
			estimates: map[uint64]time.Time{1: m(10)},
		},
		// Job 9 ran past its 1h limit (it is being killed): it is planned
		// to free its CPUs now.
		"a job past its limit is planned to end now": {
			scene: at(t0).with(node("n1").cpus(2)).
				running("n1", 2*time.Hour, job(9).cpus(2).limit(time.Hour)).
				queue(job(1).cpus(2).limit(time.Hour)),
			reasons:   map[uint64]api.Reason{1: api.ReasonResources},
			estimates: map[uint64]time.Time{1: t0},
		},
		"a running job without a limit pushes the reservation to the horizon": {
			scene: at(t0).with(node("n1").cpus(2)).
				running("n1", time.Hour, job(9).cpus(2)).
				queue(job(1).cpus(2).limit(time.Hour)),
			reasons:   map[uint64]api.Reason{1: api.ReasonResources},
			estimates: map[uint64]time.Time{1: t0.Add(Horizon)},
		},
		// Job 1 (partition batch) is reserved on x at t0+30m. Job 2 in the
		// overlapping debug partition would hold x's spare CPU past then;
		// job 3 ends before it.
		"easy: a reservation binds jobs of an overlapping partition": {
			scene: at(t0).with(node("x").cpus(2).partition("batch", "debug")).
				running("x", 30*time.Minute, job(9).cpus(1).limit(time.Hour).partition("batch")).
				queue(job(1).cpus(2).limit(time.Hour).partition("batch"),
					job(2).limit(2*time.Hour).partition("debug"),
					job(3).limit(20*time.Minute).partition("debug")),
			starts:    []string{"3@x"},
			reasons:   map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonPriority},
			estimates: map[uint64]time.Time{1: m(30)},
		},
	})
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"": PolicyEASY, "easy": PolicyEASY, "FCFS": PolicyFCFS, "conservative": PolicyConservative} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParsePolicy("backfill"); err == nil {
		t.Error("ParsePolicy(backfill) succeeded, want an error naming the policies")
	}
}

// limitedSimulation draws a workload for the backfill properties: one
// partition of 1–4 nodes, jobs of equal priority (so the queue is first
// come, first served) that each fit some node, each with a time limit of
// 1–maxLimit rounds and a run time within it, arriving over 30 rounds.
func limitedSimulation(t testing.TB, r *rand.Rand, policy Policy) (s *simulation, maxLimit int) {
	s = newSimulation(t)
	s.policy = policy
	for i := range 1 + r.IntN(4) {
		s.nodes = append(s.nodes, node(fmt.Sprintf("n%d", i)).cpus(pick(r, 2, 4, 8)).mem(8192)...)
	}
	maxLimit = 1 + r.IntN(10)
	for i := range 1 + r.IntN(60) {
		fit := pick(r, s.nodes...)
		limit := 1 + r.IntN(maxLimit)
		b := job(uint64(i + 1)).cpus(1 + r.IntN(fit.CPUs)).mem(r.Int64N(4097)).
			limit(time.Duration(limit) * time.Minute)
		s.submit(b, r.IntN(30), 1+r.IntN(limit))
	}
	return s, maxLimit
}

// TestPropertyBackfillNeverDelaysTheReservation: under EASY, the job at the
// head of the queue starts no later than the first start its reservation
// promised, whatever was backfilled meanwhile (jobs end by their limits,
// and none of higher priority arrives).
func TestPropertyBackfillNeverDelaysTheReservation(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		s, _ := limitedSimulation(t, r, PolicyEASY)
		promised := map[uint64]time.Time{}
		for len(s.started) < len(s.jobs) && s.round < 2000 {
			now := s.now()
			p := s.step()
			for id, at := range p.Estimates {
				if _, ok := promised[id]; !ok {
					promised[id] = at
				}
			}
			for _, st := range p.Starts {
				if at, ok := promised[st.JobID]; ok && now.After(at) {
					t.Fatalf("job %d started at %v, after its reservation promised %v", st.JobID, now, at)
				}
			}
		}
		if len(s.started) < len(s.jobs) {
			t.Fatalf("%d of %d jobs never started", len(s.jobs)-len(s.started), len(s.jobs))
		}
	})
}

// TestPropertyBackfillNoStarvation bounds every job's wait under EASY and
// conservative backfill. The job at the head of the queue starts within
// one maximum time limit (every running job ends by then, and backfill
// never touches its reservation); the next job becomes the head when it
// does. So a job with k jobs ahead of it when it arrives starts within
// (k+1) × the longest time limit of its arrival round.
func TestPropertyBackfillNoStarvation(t *testing.T) {
	for _, policy := range []Policy{PolicyEASY, PolicyConservative} {
		t.Run(string(policy), func(t *testing.T) {
			forEachSeed(t, func(t *testing.T, r *rand.Rand) {
				s, maxLimit := limitedSimulation(t, r, policy)
				ahead := map[uint64]int{}
				for len(s.started) < len(s.jobs) && s.round < 5000 {
					for id, j := range s.jobs {
						if s.arrive[id] != s.round {
							continue
						}
						for oid, o := range s.jobs {
							if o.State == api.StatePending && s.arrive[oid] <= s.round && before(o, j) {
								ahead[id]++
							}
						}
					}
					s.step()
				}
				for id := range s.jobs {
					start, ok := s.started[id]
					bound := (ahead[id] + 1) * maxLimit
					if !ok || start-s.arrive[id] > bound {
						t.Errorf("job %d arrived in round %d with %d jobs ahead; started in round %d (ok=%v), bound %d rounds",
							id, s.arrive[id], ahead[id], start, ok, bound)
					}
				}
			})
		})
	}
}
