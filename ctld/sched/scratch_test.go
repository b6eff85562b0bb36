package sched

import (
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// tmp makes the job ask for mb MiB of scratch space (sbatch --tmp).
func (b jobB) tmp(mb int64) jobB { return b.with(func(j *state.Job) { j.Spec.TmpMB = mb }) }

// scratch gives the nodes mb MiB of scratch space each (noded --tmp).
func (ns nodeSet) scratch(mb int64) nodeSet {
	return ns.each(func(n *state.Node) { n.TmpMB = mb })
}

// TestScratchSpace: --tmp is a consumable: a job starts only where that
// much scratch space is free, holds it, and waits for Resources when no
// node of its partition has that much at all.
func TestScratchSpace(t *testing.T) {
	ns := nodes(2).cpus(8).mem(8192)
	ns[0].TmpMB, ns[1].TmpMB = 1024, 10240
	snap := at(t0).with(ns).queue(
		job(1).tmp(5000), job(2).tmp(6000), job(3).tmp(20000), job(4).tmp(500),
	).snapshot()
	plan := Schedule(snap)
	checkPlan(t, snap, plan)
	started := map[uint64]string{}
	for _, st := range plan.Starts {
		started[st.JobID] = st.Node
		if st.JobID == 1 && st.TmpMB != 5000 {
			t.Errorf("job 1's start holds %d MiB of scratch space, want 5000", st.TmpMB)
		}
	}
	if started[1] != "n2" || started[4] != "n1" || len(started) != 2 {
		t.Errorf("started %v; want job 1 on n2 (the only node with 5000 MiB) and job 4 on n1", started)
	}
	if plan.Reasons[2] != api.ReasonResources || plan.Reasons[3] != api.ReasonResources {
		t.Errorf("reasons %v; want Resources for jobs 2 (n2's space held) and 3 (more than any node)", plan.Reasons)
	}
	if CouldEverFit(snap, job(5).tmp(20000).j) || !CouldEverFit(snap, job(6).tmp(10240).j) {
		t.Error("CouldEverFit must say no to 20000 MiB of scratch space and yes to 10240 (n2's all)")
	}
	// CPUs on one node, scratch space on another: no node holds both.
	if CouldEverFit(snap, job(7).cpus(8).tmp(2000).j) != true || CouldEverFit(at(t0).with(node("a").cpus(16).scratch(100), node("b").cpus(2).scratch(4000)).snapshot(), job(8).cpus(16).tmp(2000).j) {
		t.Error("CouldEverFit must ask for CPUs and scratch space on the same node")
	}
}

// TestScratchSpaceEverywhere: every way the pass starts a job counts
// scratch space: preemption frees it only where the victims' runs give it
// back (a suspended job keeps its files), a job of a reservation holds it
// as any other, and a backfill reservation is never planned on a node with
// too little in all.
func TestScratchSpaceEverywhere(t *testing.T) {
	preemption := func(mode api.PreemptMode) *scene {
		// Job 9 holds 800 of n1's 1000 MiB: CPUs are free for job 1, its
		// 500 MiB are not.
		return at(t0).withQOS(mode, 0).with(node("n1").cpus(4).scratch(1000)).
			running("n1", time.Hour, job(9).cpus(1).tmp(800).qos("besteffort")).
			queue(job(1).cpus(1).tmp(500).qos("guaranteed"))
	}
	tests := map[string]struct {
		scene   *scene
		starts  []string
		victims []victim
		// reserved is the node job 1's backfill reservation is on, if any.
		reserved string
	}{
		"a preemptor short of scratch space preempts the job that holds it": {
			scene: preemption(api.PreemptCancel), victims: []victim{{9, api.PreemptCancel}},
		},
		"a suspended victim keeps its scratch space: no preemption, job 1 waits for job 9": {
			scene: preemption(api.PreemptSuspend), reserved: "n1",
		},
		"jobs of a reservation hold scratch space": {
			scene: at(t0).with(node("n1").cpus(4).mem(4096).scratch(1000)).reserve(resv("r", -time.Hour, 2*time.Hour, "n1")).
				queue(job(1).in("r").tmp(600).limit(time.Hour), job(2).in("r").tmp(600).limit(time.Hour), job(3).in("r").tmp(400).limit(time.Hour)),
			starts: []string{"1@n1", "3@n1"},
		},
		// n1 frees its CPUs first but has no scratch space; n2 frees
		// them later and has it.
		"a backfill reservation only where the scratch space is": {
			scene: at(t0).with(node("n1").cpus(2), node("n2").cpus(2).scratch(1000)).
				running("n1", 0, job(8).cpus(2).limit(10*time.Minute)).
				running("n2", 0, job(9).cpus(2).limit(time.Hour)).
				queue(job(1).cpus(2).tmp(500).limit(time.Hour)),
			reserved: "n2",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := tc.scene.snapshot()
			p := Schedule(s)
			checkPlan(t, s, p)
			if got := startsOf(p); !slices.Equal(got, tc.starts) {
				t.Errorf("starts = %v, want %v", got, tc.starts)
			}
			if got := victimsOf(p); !slices.Equal(got, tc.victims) {
				t.Errorf("victims = %v, want %v", got, tc.victims)
			}
			if got := p.Reservations[1].Node; got != tc.reserved {
				t.Errorf("job 1 reserved on %q, want %q", got, tc.reserved)
			}
		})
	}
}
