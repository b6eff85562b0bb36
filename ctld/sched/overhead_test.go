package sched

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// A vm node charges its runner's overhead per job: on 1000 MiB with 100 MiB
// per VM, two jobs of 400 MiB fit (2 × 500) and a third waits.
func TestOverheadIsCountedPerJob(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	node := &state.Node{Name: "vm1", CPUs: 8, MemMB: 1000, OverheadMB: 100, Partitions: []string{"batch"}}
	var pending []*state.Job
	for id := uint64(1); id <= 3; id++ {
		pending = append(pending, &state.Job{ID: id, State: api.StatePending, SubmitTime: now,
			Spec: &state.JobSpec{NTasks: 1, CPUsPerTask: 1, MemPerNode: 400, Partition: "batch"}})
	}
	p := Schedule(&Snapshot{Now: now, Pending: pending, Nodes: []*state.Node{node},
		Partitions: []api.Partition{{Name: "batch", Default: true}}})
	if len(p.Starts) != 2 || p.Reasons[3] != api.ReasonResources {
		t.Fatalf("starts %+v reasons %v: want jobs 1 and 2 started, job 3 Resources", p.Starts, p.Reasons)
	}
	for _, st := range p.Starts {
		if st.MemMB != 400 || st.OverheadMB != 100 {
			t.Errorf("start %+v: want 400 MiB for the job and 100 MiB of overhead", st)
		}
	}
	big := &state.Job{ID: 4, State: api.StatePending, SubmitTime: now, Spec: &state.JobSpec{NTasks: 1, CPUsPerTask: 1, MemPerNode: 950, Partition: "batch"}}
	p = Schedule(&Snapshot{Now: now, Pending: []*state.Job{big}, Nodes: []*state.Node{node}})
	if len(p.Starts) != 0 {
		t.Fatalf("a 950 MiB job started on a 1000 MiB node that charges 100 MiB per VM")
	}
}
