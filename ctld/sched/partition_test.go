package sched

import (
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// withPartition adds a partition with the given settings.
func (sc *scene) withPartition(p api.Partition) *scene {
	sc.s.Partitions = append(sc.s.Partitions, p)
	return sc
}

func TestSchedulePartitionStatesAndLimits(t *testing.T) {
	two := func() *scene { return at(t0).with(nodes(2).cpus(2).partition("a", "b")) }
	runScenarios(t, map[string]scenario{
		"a DOWN partition starts nothing; another on the same nodes does": {
			scene: two().withPartition(api.Partition{Name: "a", State: api.PartitionDown}).withPartition(api.Partition{Name: "b"}).
				queue(job(1).partition("a"), job(2).partition("b")),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonPartitionDown},
		},
		"an INACTIVE partition starts nothing": {
			scene:   two().withPartition(api.Partition{Name: "a", State: api.PartitionInactive}).queue(job(1).partition("a")),
			reasons: map[uint64]api.Reason{1: api.ReasonPartitionInactive},
		},
		"a DRAIN partition still starts the jobs it has": {
			scene:  two().withPartition(api.Partition{Name: "a", State: api.PartitionDrain}).queue(job(1).partition("a")),
			starts: []string{"1@n1"},
		},
		"a job asking for fewer nodes than MinNodes waits": {
			scene: two().withPartition(api.Partition{Name: "a", MinNodes: 2}).withPartition(api.Partition{Name: "b", MaxNodes: 1}).
				queue(job(1).partition("a"), job(2).partition("b").with(func(j *state.Job) { j.Spec.Nodes = 1 })),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonPartitionNodeLimit},
		},
		"a higher tier goes first, whatever the priority": {
			scene: at(t0).with(nodes(1).cpus(1).partition("lo", "hi")).
				withPartition(api.Partition{Name: "lo"}).withPartition(api.Partition{Name: "hi", PriorityTier: 5}).
				queue(job(1).partition("lo").priority(100), job(2).partition("hi")),
			starts:  []string{"2@n1"},
			reasons: map[uint64]api.Reason{1: api.ReasonResources},
		},
	})
}

// TestPartitionFactor: the partition factor is the tier over the highest.
func TestPartitionFactor(t *testing.T) {
	s := &Snapshot{Now: t0, Config: api.SchedConfig{Weights: api.PriorityWeights{Partition: 1000}},
		Partitions: []api.Partition{{Name: "lo", PriorityTier: 1}, {Name: "hi", PriorityTier: 4}}}
	if got := Priority(job(1).partition("lo").j, s, 1).Priority; got != 250 {
		t.Errorf("tier 1 of 4: priority %d, want 250", got)
	}
	s.Partitions = []api.Partition{{Name: "lo"}}
	if got := Priority(job(1).partition("lo").j, s, 1).Priority; got != 1000 {
		t.Errorf("no tiers: priority %d, want 1000", got)
	}
}

// TestPartitionPreemptMode: a victim whose QoS names no mode is preempted
// in its partition's.
func TestPartitionPreemptMode(t *testing.T) {
	sc := at(t0).withQOS("", 0).with(node("n1").cpus(1)).
		withPartition(api.Partition{Name: "batch", Default: true, PreemptMode: api.PreemptSuspend}).
		running("n1", time.Hour, job(9).qos("besteffort")).
		queue(job(1).qos("guaranteed"))
	p := Schedule(sc.snapshot())
	if !slices.Equal(p.Preemptions, []Preemption{{Victim: 9, Preemptor: 1, Mode: api.PreemptSuspend}}) {
		t.Errorf("preemptions %v, want job 9 suspended for job 1", p.Preemptions)
	}
}
