package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"corral/api"
)

// TestAllocationInvariantsHold applies random logs — submits, plans (with
// placements that may collide, stops in every preemption mode, resumes,
// cancels and migrations in the same entry), reports, cancels, suspends and resumes,
// preemptions, nodes going down, restarting and draining — and checks after
// every entry that no resource is held by two allocations and that every
// job's state agrees with its allocations' (CheckInvariants), that no
// node record a reader may hold changes its allocation list, and that a
// snapshot round trip keeps the state.
func TestAllocationInvariantsHold(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			g := &logGen{rnd: rand.New(rand.NewPCG(seed, 7)), r: newReplica(), t: t}
			g.setup()
			// Every version of a node record that a reader may hold
			// keeps its allocation list (appendNode shares the array).
			held := map[*Node][]uint64{}
			for step := 0; step < 150; step++ {
				ct, p := g.next()
				g.apply(ct, p)
				if err := g.r.s.CheckInvariants(); err != nil {
					t.Fatalf("after %s at index %d: %v", ct, g.index, err)
				}
				for _, n := range g.r.s.Nodes {
					if _, ok := held[n]; !ok {
						held[n] = slices.Clone(n.Allocs)
					}
				}
			}
			for n, allocs := range held {
				if !slices.Equal(n.Allocs, allocs) {
					t.Fatalf("an earlier version of node %s changed its allocations from %v to %v", n.Name, allocs, n.Allocs)
				}
			}
			if h := restoredCopy(t, g.r).Hash(); h != g.r.Hash() {
				t.Fatal("the state changed in a snapshot round trip")
			}
		})
	}
}

// logGen makes random entries against the state as it stands.
type logGen struct {
	rnd   *rand.Rand
	r     *replica
	t     *testing.T
	index uint64
	now   time.Time
	boots map[string]int
}

func (g *logGen) apply(ct CommandType, p any) any {
	g.index++
	return g.r.Apply(entry(g.t, g.index, ct, p))
}

// setup registers two plain nodes and one with a four-CPU topology and a
// GPU, so placements can collide.
func (g *logGen) setup() {
	g.now, g.boots = t0, map[string]int{}
	g.apply(CmdRegisterNode, &RegisterNode{Now: g.now, Info: g.info("p1")})
	g.apply(CmdRegisterNode, &RegisterNode{Now: g.now, Info: g.info("p2")})
	g.apply(CmdRegisterNode, &RegisterNode{Now: g.now, Info: g.info("inv")})
}

func (g *logGen) info(name string) api.NodeInfo {
	info := api.NodeInfo{Name: name, CPUs: 4, MemMB: 4096, BootID: fmt.Sprint(name, "-", g.boots[name])}
	if name == "inv" {
		node := api.NUMANode{ID: 0, MemMB: 4096}
		for c := 0; c < 4; c++ {
			node.CPUs = append(node.CPUs, api.CPU{ID: c, Core: c})
		}
		info.Inventory = &api.Inventory{Topology: &api.Topology{Sockets: 1, Nodes: []api.NUMANode{node}, Distances: [][]int{{10}}},
			GPUs: []api.GPU{{UUID: "GPU-0", NUMANode: 0}}}
	}
	return info
}

// pick returns a random element of ids, or 0.
func (g *logGen) pick(ids []uint64) uint64 {
	if len(ids) == 0 {
		return 0
	}
	return ids[g.rnd.IntN(len(ids))]
}

// jobsIn lists the jobs in the given states, by id.
func (g *logGen) jobsIn(states ...api.JobState) []uint64 {
	var out []uint64
	for id, j := range g.r.s.Jobs {
		if slices.Contains(states, j.State) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// next returns a random entry.
func (g *logGen) next() (CommandType, any) {
	g.now = g.now.Add(time.Duration(1+g.rnd.IntN(30)) * time.Second)
	s := g.r.s
	switch k := g.rnd.IntN(100); {
	case k < 20:
		sp := spec(fmt.Sprint("j", s.NextJobID))
		sp.CPUsPerTask, sp.Requeue = 1+g.rnd.IntN(3), g.rnd.IntN(2) == 0
		return CmdSubmitJobs, &SubmitJobs{Now: g.now, FirstID: s.NextJobID, Jobs: []JobSpec{sp}}
	case k < 45:
		return CmdApplyPlan, g.plan()
	case k < 65:
		return CmdJobReports, g.report()
	case k < 72:
		return CmdCancelJobs, &CancelJobs{Now: g.now, IDs: []uint64{g.pick(g.jobsIn(api.StatePending, api.StateRunning, api.StateSuspended))}}
	case k < 80:
		id := g.pick(g.jobsIn(api.StateRunning, api.StateSuspended))
		suspend := s.Jobs[id] != nil && s.Jobs[id].State == api.StateRunning
		preempt := g.rnd.IntN(2) == 0
		return CmdSuspendJobs, &SuspendJobs{Now: g.now, IDs: []uint64{id}, Suspend: suspend, Preempt: preempt, By: g.pick(g.jobsIn(api.StatePending))}
	case k < 85:
		modes := []api.PreemptMode{api.PreemptCancel, api.PreemptRequeue}
		return CmdCancelJobs, &CancelJobs{Now: g.now, IDs: []uint64{g.pick(g.jobsIn(api.StateRunning))}, By: "job 1", Preempt: modes[g.rnd.IntN(2)]}
	case k < 90:
		return CmdNodeDown, &NodeDown{Now: g.now, Nodes: []string{[]string{"p1", "p2", "inv"}[g.rnd.IntN(3)]}, Reason: "Not responding"}
	case k < 96:
		return CmdRegisterNode, g.restart()
	default:
		name := []string{"p1", "p2", "inv"}[g.rnd.IntN(3)]
		return CmdNodeDrain, &NodeDrain{Now: g.now, Node: name, Drain: g.rnd.IntN(2) == 0, Reason: "test"}
	}
}

// plan is one pass's entry: sometimes stops of running jobs (preemption
// in every mode, for a pending job), resumes of suspended jobs, cancels of
// pending jobs and a migration (which this build rejects), and starts of
// up to three pending jobs on random nodes; on the inventory node with
// random CPUs and sometimes the GPU, which may collide with each other and
// with the runs being stopped.
func (g *logGen) plan() *ApplyPlan {
	p := &ApplyPlan{Now: g.now}
	modes := []api.PreemptMode{api.PreemptCancel, api.PreemptRequeue, api.PreemptSuspend}
	if g.rnd.IntN(3) == 0 {
		for range 1 + g.rnd.IntN(2) {
			if id := g.pick(g.jobsIn(api.StateRunning)); id != 0 {
				p.Stops = append(p.Stops, PlanStop{JobID: id, Mode: modes[g.rnd.IntN(3)], By: g.pick(g.jobsIn(api.StatePending))})
			}
		}
	}
	if id := g.pick(g.jobsIn(api.StateSuspended)); id != 0 && g.rnd.IntN(3) == 0 {
		p.Resumes = append(p.Resumes, id)
	}
	if id := g.pick(g.jobsIn(api.StatePending)); id != 0 && g.rnd.IntN(8) == 0 {
		p.Cancels = append(p.Cancels, PlanCancel{JobID: id, Reason: "the scheduler: its dependency can never be satisfied"})
	}
	if id := g.pick(g.jobsIn(api.StateRunning)); id != 0 && g.rnd.IntN(10) == 0 {
		p.Migrations = append(p.Migrations, PlanMigration{JobID: id, From: "p1", To: "p2"})
	}
	for i := 0; i < 1+g.rnd.IntN(3); i++ {
		id := g.pick(g.jobsIn(api.StatePending))
		j := g.r.s.Jobs[id]
		if j == nil {
			break
		}
		st := PlanStart{JobID: id, Node: []string{"p1", "p2", "inv"}[g.rnd.IntN(3)], CPUs: j.Spec.CPUs(), MemMB: 256}
		if st.Node == "inv" {
			pl := &api.Placement{CPUs: g.rnd.Perm(4)[:st.CPUs], Mem: []api.NodeAmount{{Node: 0, MB: 256}}}
			if g.rnd.IntN(3) == 0 {
				pl.GPUs = []string{"GPU-0"}
			}
			st.Placement = pl
		}
		p.Starts = append(p.Starts, st)
	}
	return p
}

// report ends a random active allocation, as its node would (sometimes by
// job and start index, as an older daemon would), or sends a stale one.
func (g *logGen) report() *JobReports {
	var active []*Allocation
	for _, id := range slices.Sorted(mapsKeys(g.r.s.Allocs)) {
		if a := g.r.s.Allocs[id]; a.Active() {
			active = append(active, a)
		}
	}
	states := []api.JobState{api.StateCompleted, api.StateFailed, api.StateNodeFail, api.StateTimeout, api.StateRunning}
	if len(active) == 0 || g.rnd.IntN(8) == 0 {
		return &JobReports{Now: g.now, Node: "p1", Reports: []api.JobReport{{JobID: 1, StartIndex: 99, State: api.StateCompleted}}}
	}
	a := active[g.rnd.IntN(len(active))]
	r := api.JobReport{Alloc: a.ID, JobID: a.Job, StartIndex: a.StartIndex, State: states[g.rnd.IntN(len(states))], ExitCode: g.rnd.IntN(3)}
	if g.rnd.IntN(3) == 0 {
		r.Alloc = 0
	}
	return &JobReports{Now: g.now, Node: a.Node, Reports: []api.JobReport{r}}
}

// restart registers a node with a new boot id, holding a random part of
// its runs.
func (g *logGen) restart() *RegisterNode {
	name := []string{"p1", "p2", "inv"}[g.rnd.IntN(3)]
	g.boots[name]++
	info := g.info(name)
	if n := g.r.s.Nodes[name]; n != nil {
		for _, id := range n.Allocs {
			if g.rnd.IntN(2) == 0 {
				info.Running = append(info.Running, g.r.s.Allocs[id].Job)
			}
		}
	}
	return &RegisterNode{Now: g.now, Info: info}
}
