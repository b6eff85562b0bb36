package sched

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// propertySeeds is how many random workloads each property test draws. The
// seeds are 1..propertySeeds, so a failure names a seed that reproduces it.
const propertySeeds = 200

func forEachSeed(t *testing.T, f func(t *testing.T, r *rand.Rand)) {
	for seed := uint64(1); seed <= propertySeeds; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			f(t, rand.New(rand.NewPCG(seed, 0x5eed)))
		})
	}
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randomScene draws a single-pass workload that exercises every branch of
// the pass: busy, down and drained nodes in overlapping partitions; jobs too
// big for any node, in unknown partitions, held, with begin times, and with
// dependencies on known, pending and unknown jobs; ties in priority and
// submit time.
func randomScene(r *rand.Rand) *scene {
	sc := at(t0).defMemPerCPU(pick[int64](r, 0, 256, 1024))
	switch r.IntN(3) {
	case 1:
		sc.partitions("batch", "batch", "debug")
	case 2:
		sc.partitions("debug", "batch", "debug")
	}
	for i := range 1 + r.IntN(12) {
		n := node(fmt.Sprintf("n%02d", i)).cpus(pick(r, 1, 2, 4, 8, 16)).mem(pick[int64](r, 1024, 4096, 16384))
		switch r.IntN(4) {
		case 1:
			n.partition("batch")
		case 2:
			n.partition("debug")
		case 3:
			n.partition("batch", "debug")
		}
		n.busy(r.IntN(n[0].CPUs+1), r.Int64N(n[0].MemMB+1))
		switch r.IntN(10) {
		case 0:
			n.down()
		case 1:
			n.drained()
		}
		sc.with(n)
	}
	for id := uint64(1000); id < 1010; id++ {
		j := job(id).runningFor(time.Duration(r.IntN(20)) * time.Minute)
		j.state(pick(r, api.StateRunning, api.StateCompleted, api.StateFailed, api.StateCancelled, api.StatePending))
		sc.known(j)
	}
	n := r.IntN(60)
	for id := uint64(1); id <= uint64(n); id++ {
		j := job(id).cpus(pick(r, 1, 1, 2, 4, 8, 32)).priority(int64(r.IntN(3))).
			submitted(t0.Add(-time.Duration(r.IntN(5)) * time.Minute)).
			partition(pick(r, "", "", "batch", "debug", "gpu"))
		if r.IntN(2) == 0 {
			j.mem(pick[int64](r, 256, 1024, 4096, 32768))
		}
		if r.IntN(15) == 0 {
			j.held()
		}
		if r.IntN(10) == 0 {
			j.begin(t0.Add(time.Duration(r.IntN(60)-30) * time.Minute))
		}
		for range r.IntN(3) {
			target := pick(r, uint64(r.IntN(n)+1), 1000+uint64(r.IntN(10)), 2000)
			j.depends(pick(r, "after", "afterany", "afterok", "afternotok", "aftercorr"), pick(r, 0, 0, 10), target)
		}
		if j.j.Spec.Dependency != nil && r.IntN(3) == 0 {
			j.anyOf()
		}
		sc.queue(j)
	}
	return sc
}

func TestPropertyPlanInvariants(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		s := randomScene(r).snapshot()
		p := Schedule(s)
		checkPlan(t, s, p)
		// NextWake is the earliest begin time among jobs waiting for one,
		// or the earliest end of an after:<id>+<minutes> delay.
		var wake time.Time
		for _, j := range s.Pending {
			if r := p.Reasons[j.ID]; r == api.ReasonDependency || r == api.ReasonDependencyNeverSatisfied {
				if d := delayEnd(j.Spec.Dependency, s); !d.IsZero() && (wake.IsZero() || d.Before(wake)) {
					wake = d
				}
			}
			if p.Reasons[j.ID] != api.ReasonBeginTime {
				continue
			}
			if !j.Spec.Begin.After(s.Now) {
				t.Errorf("job %d waits for BeginTime %v, which is not after now", j.ID, j.Spec.Begin)
			}
			if wake.IsZero() || j.Spec.Begin.Before(wake) {
				wake = j.Spec.Begin
			}
		}
		if !p.NextWake.Equal(wake) {
			t.Errorf("NextWake = %v, want %v", p.NextWake, wake)
		}
	})
}

// randomPreemptionScene draws a scene for QoS and preemption: nodes full of
// besteffort jobs that tie on priority and run time (their order must come
// from their ids alone), guaranteed jobs that preempt them in a random
// mode, QoS limits, jobs suspended by preemption waiting to resume, and GPU
// nodes (quadHost) whose running jobs hold GPUs and CPUs by placement.
func randomPreemptionScene(r *rand.Rand) *scene {
	mode := pick(r, api.PreemptCancel, api.PreemptRequeue, api.PreemptSuspend)
	sc := at(t0).withQOS(mode, pick(r, 0, 0, time.Minute))
	sc.s.Config = api.DefaultSchedConfig()
	if r.IntN(2) == 0 {
		sc.s.QOS["guaranteed"].MaxJobsPerUser = 1 + r.IntN(3)
	}
	id := uint64(100)
	for i := range 1 + r.IntN(5) {
		name := fmt.Sprintf("c%d", i)
		sc.with(node(name).cpus(4).mem(8192))
		for range r.IntN(5) {
			id++
			elapsed := pick(r, time.Hour, time.Hour, 2*time.Hour)
			sc.runningWith(name, elapsed, job(id).qos("besteffort").mem(1024), func(a *state.Allocation) {
				if r.IntN(5) == 0 {
					lentTo(1)(a) // suspended by preemption; its preemptor is gone
				}
			})
		}
	}
	for i := range r.IntN(3) {
		name := fmt.Sprintf("g%d", i)
		inv := quadHost()
		for g := range inv.GPUs {
			inv.GPUs[g].UUID = fmt.Sprintf("GPU-%d-%d", i, g)
			for m := range inv.GPUs[g].MIG {
				inv.GPUs[g].MIG[m].UUID = fmt.Sprintf("MIG-%d-%d-%d", i, g, m)
			}
		}
		sc.with(nodeSet{&state.Node{Name: name, CPUs: 32, MemMB: 256 << 10, Inventory: inv}})
		for range r.IntN(3) {
			id++
			j := job(id).cpus(1 + r.IntN(4)).qos(pick(r, "besteffort", "burstable")).gpus(1)
			used := state.NewUsed()
			for _, run := range sc.s.Running {
				if run.Alloc.Node == name {
					used.AddAlloc(run.Alloc)
				}
			}
			p, ok := PlaceInNode(inv, used, RequestOf(j.j, 0))
			if !ok {
				continue
			}
			sc.runningWith(name, time.Hour, j, func(a *state.Allocation) { a.Placement = &p })
		}
	}
	for k := uint64(1); k <= uint64(r.IntN(20)); k++ {
		j := job(k).cpus(pick(r, 1, 2, 4)).qos(pick(r, "guaranteed", "burstable", "besteffort")).
			submitted(t0.Add(-time.Duration(r.IntN(3)) * time.Minute))
		if r.IntN(4) == 0 {
			j.gpus(1 + r.IntN(2))
		}
		sc.queue(j)
	}
	return sc
}

// TestPropertyDeterministic runs each pass again, and again with its
// pending jobs, nodes and running allocations in shuffled orders: the plan
// must not change. The scenes cover dependencies and backfill
// (randomScene), and QoS, preemption in every mode with victims that tie,
// resumes and GPU placements (randomPreemptionScene), under every policy.
func TestPropertyDeterministic(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		for _, sc := range []*scene{randomScene(r), randomPreemptionScene(r)} {
			sc.policy(pick(r, PolicyEASY, PolicyFCFS, PolicyConservative))
			s := sc.snapshot()
			want := Schedule(s)
			if again := Schedule(s); !reflect.DeepEqual(again, want) {
				t.Fatalf("a second pass over the same snapshot differs:\n got %+v\nwant %+v", again, want)
			}
			for range 3 {
				shuffled := *s
				shuffled.Pending = slices.Clone(s.Pending)
				shuffled.Nodes = slices.Clone(s.Nodes)
				shuffled.Running = slices.Clone(s.Running)
				r.Shuffle(len(shuffled.Pending), func(a, b int) {
					shuffled.Pending[a], shuffled.Pending[b] = shuffled.Pending[b], shuffled.Pending[a]
				})
				r.Shuffle(len(shuffled.Nodes), func(a, b int) {
					shuffled.Nodes[a], shuffled.Nodes[b] = shuffled.Nodes[b], shuffled.Nodes[a]
				})
				r.Shuffle(len(shuffled.Running), func(a, b int) {
					shuffled.Running[a], shuffled.Running[b] = shuffled.Running[b], shuffled.Running[a]
				})
				if got := Schedule(&shuffled); !reflect.DeepEqual(got, want) {
					t.Fatalf("shuffling Pending, Nodes and Running changed the plan:\n got %+v\nwant %+v", got, want)
				}
			}
		}
	})
}

// simulation is the in-memory planner: it runs passes round by round (one
// round is one minute), applies each plan as the plan applier would, and
// ends running jobs when their run time is up.
type simulation struct {
	t       testing.TB
	round   int
	nodes   []*state.Node
	jobs    map[uint64]*state.Job
	arrive  map[uint64]int // round a job is submitted in
	runFor  map[uint64]int // rounds a job runs once started
	endAt   map[uint64]int
	started map[uint64]int // round each job started in
	// downUntil keeps a node down until the given round.
	downUntil map[string]int
	policy    Policy
	qos       map[string]*api.QOS
	// events records what each round did, for multi-round scenarios:
	// "start 3", "preempt 2 (requeue)", "resume 2".
	events map[int][]string
	// left is the run time left to a job suspended by preemption.
	left map[uint64]int
	// runs holds each running job's allocation.
	runs map[uint64]*state.Allocation
}

func newSimulation(t testing.TB, ns ...nodeSet) *simulation {
	s := &simulation{
		t: t, jobs: map[uint64]*state.Job{}, arrive: map[uint64]int{}, runFor: map[uint64]int{},
		endAt: map[uint64]int{}, started: map[uint64]int{}, downUntil: map[string]int{},
		runs: map[uint64]*state.Allocation{},
	}
	for _, set := range ns {
		s.nodes = append(s.nodes, set...)
	}
	return s
}

func (s *simulation) now() time.Time { return t0.Add(time.Duration(s.round) * time.Minute) }

// submit queues a job in round arrive; it runs for runFor rounds.
func (s *simulation) submit(b jobB, arrive, runFor int) {
	b.j.SubmitTime = t0.Add(time.Duration(arrive) * time.Minute)
	s.jobs[b.j.ID], s.arrive[b.j.ID], s.runFor[b.j.ID] = b.j, arrive, runFor
}

// step runs one round: end due jobs, bring nodes back up, plan, apply.
func (s *simulation) step() Plan {
	s.t.Helper()
	byName := map[string]*state.Node{}
	for _, n := range s.nodes {
		byName[n.Name] = n
		n.Down = s.round < s.downUntil[n.Name]
	}
	for id, end := range s.endAt {
		if end == s.round {
			j, a := s.jobs[id], s.runs[id]
			j.State, j.EndTime = api.StateCompleted, s.now()
			n := byName[a.Node]
			n.AllocCPUs -= a.CPUs
			n.AllocMemMB -= a.MemMB
			delete(s.endAt, id)
			delete(s.runs, id)
		}
	}
	snap := &Snapshot{Now: s.now(), Nodes: slices.Clone(s.nodes), Policy: s.policy, QOS: s.qos, Lookup: func(id uint64) *state.Job {
		if j := s.jobs[id]; j != nil && s.arrive[id] <= s.round {
			return j
		}
		return nil
	}}
	for _, id := range slices.Sorted(maps.Keys(s.jobs)) {
		j := s.jobs[id]
		if j.State == api.StatePending && s.arrive[id] <= s.round {
			snap.Pending = append(snap.Pending, j)
		}
		if j.State == api.StateRunning || j.State == api.StateSuspended {
			snap.Running = append(snap.Running, Run{Alloc: s.runs[id], Job: j})
		}
	}
	p := Schedule(snap)
	checkPlan(s.t, snap, p)
	s.applyPreemptions(p, byName)
	for _, st := range p.Starts {
		j, n := s.jobs[st.JobID], byName[st.Node]
		j.State, j.StartTime = api.StateRunning, s.now()
		s.runs[st.JobID] = &state.Allocation{ID: st.JobID, Job: st.JobID, Node: st.Node, CPUs: st.CPUs, MemMB: st.MemMB,
			Desired: state.AllocRun, Status: state.AllocActive, StartTime: s.now()}
		n.AllocCPUs += st.CPUs
		n.AllocMemMB += st.MemMB
		s.endAt[st.JobID] = s.round + s.runFor[st.JobID]
		s.started[st.JobID] = s.round
		s.event("start %d", st.JobID)
	}
	s.round++
	return p
}

func (s *simulation) event(format string, args ...any) {
	if s.events == nil {
		s.events = map[int][]string{}
	}
	s.events[s.round] = append(s.events[s.round], fmt.Sprintf(format, args...))
}

// applyPreemptions does what the controller and the victim's node do, at
// once: a cancelled victim ends PREEMPTED, a requeued one is PENDING again
// (same submit time), a suspended one lends its CPUs until resumed.
func (s *simulation) applyPreemptions(p Plan, byName map[string]*state.Node) {
	if s.left == nil {
		s.left = map[uint64]int{}
	}
	for _, pr := range p.Preemptions {
		v, a := s.jobs[pr.Victim], s.runs[pr.Victim]
		n := byName[a.Node]
		s.event("preempt %d (%s)", v.ID, pr.Mode)
		switch pr.Mode {
		case api.PreemptSuspend:
			v.State = api.StateSuspended
			a.Desired, a.CPUsLent, a.PreemptedBy, a.SuspendTime = state.AllocSuspend, true, pr.Preemptor, s.now()
			n.AllocCPUs -= a.CPUs
			s.left[v.ID] = s.endAt[v.ID] - s.round
			delete(s.endAt, v.ID)
			continue
		case api.PreemptRequeue:
			v.State, v.StartTime = api.StatePending, time.Time{}
			v.Restarts++
			delete(s.started, v.ID)
		default:
			v.State = api.StatePreempted
		}
		n.AllocCPUs -= a.CPUs
		n.AllocMemMB -= a.MemMB
		delete(s.endAt, v.ID)
		delete(s.runs, v.ID)
	}
	for _, id := range p.Resumes {
		v, a := s.jobs[id], s.runs[id]
		v.State = api.StateRunning
		a.Desired, a.CPUsLent = state.AllocRun, false
		a.SuspendedFor += s.now().Sub(a.SuspendTime)
		a.SuspendTime = time.Time{}
		byName[a.Node].AllocCPUs += a.CPUs
		s.endAt[id] = s.round + s.left[id]
		s.event("resume %d", id)
	}
}

// randomSimulation draws a finite workload in which every job can run: it
// fits some node of its partition, is never held, and depends only on
// earlier jobs that complete. Nodes may be down for the first rounds.
func randomSimulation(t testing.TB, r *rand.Rand) (s *simulation, bound int) {
	s = newSimulation(t)
	var batch, debug []*state.Node
	for i := range 1 + r.IntN(8) {
		n := node(fmt.Sprintf("n%d", i)).cpus(pick(r, 2, 4, 8)).mem(pick[int64](r, 4096, 8192))
		if r.IntN(3) == 0 {
			n.partition(pick(r, []string{"debug"}, []string{"batch", "debug"})...)
		}
		if r.IntN(6) == 0 {
			s.downUntil[n[0].Name] = r.IntN(10)
		}
		if slices.Contains(n[0].Partitions, "debug") {
			debug = append(debug, n[0])
		}
		if len(n[0].Partitions) == 0 || slices.Contains(n[0].Partitions, "batch") {
			batch = append(batch, n[0])
		}
		s.nodes = append(s.nodes, n...)
	}
	const maxRun, maxDelay, maxDown = 5, 30, 10
	count := 1 + r.IntN(80)
	arrivals := make([]int, count)
	for i := range arrivals {
		arrivals[i] = r.IntN(20)
	}
	slices.Sort(arrivals) // a job arrives no earlier than those it may depend on
	for i := range count {
		id := uint64(i + 1)
		b := job(id).priority(int64(r.IntN(4)))
		home := batch
		if len(debug) > 0 && (len(batch) == 0 || r.IntN(3) == 0) {
			home = debug
			b.partition("debug")
		}
		fit := pick(r, home...)
		b.cpus(1 + r.IntN(fit.CPUs)).mem(r.Int64N(fit.MemMB + 1))
		if r.IntN(8) == 0 {
			b.begin(t0.Add(time.Duration(arrivals[i]+r.IntN(maxDelay)) * time.Minute))
		}
		if i > 0 && r.IntN(4) == 0 {
			b.depends(pick(r, "after", "afterany", "afterok"), pick(r, 0, 0, 2), uint64(1+r.IntN(i)))
		}
		s.submit(b, arrivals[i], 1+r.IntN(maxRun))
	}
	// After the last arrival, begin time and down node, at least one job
	// starts in every maxRun+1 rounds (+2 for after+minutes) until all have.
	return s, 20 + maxDelay + maxDown + count*(maxRun+3)
}

func TestPropertyNoStarvation(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		s, bound := randomSimulation(t, r)
		for len(s.started) < len(s.jobs) && s.round <= bound {
			p := s.step()
			for id, reason := range p.Reasons {
				if reason == api.ReasonDependencyNeverSatisfied {
					t.Fatalf("round %d: job %d got %s, but every target completes", s.round-1, id, reason)
				}
			}
		}
		for id, j := range s.jobs {
			if _, ok := s.started[id]; !ok {
				t.Errorf("job %d (%d CPUs, %d MiB, partition %q) never started in %d rounds",
					id, j.Spec.CPUs(), j.Spec.MemMB(), j.Spec.Partition, bound)
			}
		}
	})
}

// TestNoStarvationAcrossPartitions runs a saturated batch partition: two
// high-priority batch jobs in round 0 and a new one every round after, each
// running three rounds on the one batch node, so a batch job always waits
// for Resources. A low-priority job
// in the debug partition, whose node is idle, must still start.
func TestNoStarvationAcrossPartitions(t *testing.T) {
	s := newSimulation(t, node("b"), node("d").partition("debug"))
	s.submit(job(1).partition("debug").priority(1), 0, 1)
	for i := range 50 {
		s.submit(job(uint64(100+i)).priority(10), max(i-1, 0), 3)
	}
	for range 50 {
		s.step()
		if _, ok := s.started[1]; ok {
			break
		}
	}
	if r, ok := s.started[1]; !ok {
		t.Errorf("debug job never started in %d rounds; want round 0", s.round)
	} else if r != 0 {
		t.Errorf("debug job started in round %d, want round 0", r)
	}
}
