package sched

import (
	"math"
	"strings"
	"testing"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

func TestCheckJob(t *testing.T) {
	tests := map[string]struct {
		job  jobB
		want string // a substring of the error; "" means valid
	}{
		"a plain job":              {job(1).cpus(4).mem(1024), ""},
		"ntasks and cpus unset":    {job(1).with(func(j *state.Job) { j.Spec.NTasks, j.Spec.CPUsPerTask = 0, 0 }), ""},
		"negative ntasks":          {job(1).tasks(-1), "ntasks=-1"},
		"cpus overflow":            {job(1).tasks(1 << 30).cpus(1 << 30), "ntasks=1073741824"},
		"cpus product too large":   {job(1).tasks(1 << 15).cpus(1 << 15), "ntasks × cpus_per_task"},
		"cpus product wraps":       {job(1).tasks(math.MaxInt).cpus(2), "ntasks="},
		"nodes -5":                 {job(1).with(func(j *state.Job) { j.Spec.Nodes = -5 }), "nodes=-5"},
		"two nodes":                {job(1).with(func(j *state.Job) { j.Spec.Nodes, j.Spec.NTasks = 2, 2 }), "nodes=2-2: this release's pass places jobs on one node"},
		"a node range":             {job(1).with(func(j *state.Job) { j.Spec.NodesMax = 3 }), "nodes=1-3"},
		"a node list":              {job(1).with(func(j *state.Job) { j.Spec.NodeList = "n1" }), "does not honour them"},
		"tasks per node":           {job(1).with(func(j *state.Job) { j.Spec.NTasks, j.Spec.NTasksPerNode = 0, 4 }), ""},
		"tasks per node too many":  {job(1).with(func(j *state.Job) { j.Spec.NTasks, j.Spec.NTasksPerNode = 0, 1<<30 }), "ntasks_per_node="},
		"tasks per node × cpus":    {job(1).cpus(1 << 15).with(func(j *state.Job) { j.Spec.NTasks, j.Spec.NTasksPerNode = 0, 1<<15 }), "ntasks × cpus_per_task"},
		"negative memory":          {job(1).mem(-1), "mem_per_node_mb=-1"},
		"memory per CPU overflows": {job(1).cpus(1024).memPerCPU(1 << 39), "mem_per_cpu_mb"},
		"time limit 2^63":          {job(1).with(func(j *state.Job) { j.Spec.TimeLimit = math.MaxInt64 }), "time_limit_s"},
		"nice -2^63":               {job(1).with(func(j *state.Job) { j.Spec.Nice = math.MinInt }), "nice="},
		"gpu count -5":             {job(1).with(func(j *state.Job) { j.Spec.Gres = []api.Gres{{Name: "gpu", Count: -5}} }), "gres gpu count -5"},
		"gpu count too large":      {job(1).with(func(j *state.Job) { j.Spec.Gres = []api.Gres{{Name: "gpu", Count: submit.MaxGresCount + 1}} }), "gres gpu count"},
		"negative hugepages":       {job(1).with(func(j *state.Job) { j.Spec.Hugepages = []api.HugepageRequest{{SizeKB: 2048, Count: -3}} }), "hugepages"},
		"unknown dependency type":  {job(1).dependsRaw(state.DepClause{Type: "afterwards", JobIDs: []string{"2"}}), `"afterwards"`},
		"negative delay":           {job(1).dependsRaw(state.DepClause{Type: "after", JobIDs: []string{"2"}, Minutes: -1}), "delay"},
		"array step 0": {job(1).with(func(j *state.Job) {
			j.ArrayJobID, j.ArrayPending = 1, &api.IndexSet{Ranges: []api.ArrayRange{{First: 0, Last: 9, Step: 0}}}
		}), "step 0"},
		"array without tasks": {job(1).with(func(j *state.Job) {
			j.ArrayJobID, j.ArrayPending = 1, &api.IndexSet{}
		}), "holds no task"},
		"array index too large": {job(1).with(func(j *state.Job) {
			j.ArrayJobID, j.ArrayPending = 1, &api.IndexSet{Ranges: []api.ArrayRange{{First: 0, Last: 1 << 40, Step: 1}}}
		}), "above the largest"},
		"array ranges overlap": {job(1).with(func(j *state.Job) {
			j.ArrayJobID, j.ArrayPending = 1, &api.IndexSet{Ranges: []api.ArrayRange{{First: 0, Last: 9, Step: 1}, {First: 5, Last: 7, Step: 1}}}
		}), "overlap"},
		"array range descends": {job(1).with(func(j *state.Job) {
			j.ArrayJobID, j.ArrayPending = 1, &api.IndexSet{Ranges: []api.ArrayRange{{First: 33, Last: 9, Step: 1}}}
		}), "ascending"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckJob(tc.job.j)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused a valid job: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want an error mentioning %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestCheckNode(t *testing.T) {
	good := func() *state.Node {
		return &state.Node{Name: "n1", CPUs: 2, MemMB: 1024, Inventory: &api.Inventory{Topology: &api.Topology{
			Nodes:     []api.NUMANode{{ID: 0, MemMB: 512, CPUs: []api.CPU{{ID: 0}}}, {ID: 1, MemMB: 512, CPUs: []api.CPU{{ID: 1}}}},
			Distances: [][]int{{10, 20}, {20, 10}},
		}}}
	}
	tests := map[string]struct {
		change func(n *state.Node)
		want   string
	}{
		"a sane node":           {func(*state.Node) {}, ""},
		"no inventory":          {func(n *state.Node) { n.Inventory = nil }, ""},
		"zero CPUs":             {func(n *state.Node) { n.CPUs = 0 }, "cpus=0"},
		"negative memory":       {func(n *state.Node) { n.MemMB = -1 }, "mem_mb=-1"},
		"short distance matrix": {func(n *state.Node) { n.Inventory.Topology.Distances = [][]int{{10}} }, "1 rows for 2"},
		"ragged distance row":   {func(n *state.Node) { n.Inventory.Topology.Distances[1] = []int{10} }, "row 1"},
		"zero distance":         {func(n *state.Node) { n.Inventory.Topology.Distances[0][1] = 0 }, "not positive"},
		"repeated NUMA id":      {func(n *state.Node) { n.Inventory.Topology.Nodes[1].ID = 0 }, "repeated"},
		"repeated CPU id":       {func(n *state.Node) { n.Inventory.Topology.Nodes[1].CPUs[0].ID = 0 }, "CPU id 0"},
		"negative hugepages": {func(n *state.Node) {
			n.Inventory.Topology.Nodes[0].Hugepages = map[int64]api.Hugepages{2048: {Total: 4, Free: -4}}
		}, "hugepages"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := good()
			tc.change(n)
			err := CheckNode(n)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused a sane node: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want an error mentioning %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestInvalidJobsDoNotStopThePass puts jobs the pass cannot handle ahead of
// valid ones: each invalid job gets InvalidJob with a message and starts
// nowhere, and the valid jobs behind them start as if they were not there.
func TestInvalidJobsDoNotStopThePass(t *testing.T) {
	sc := at(t0).with(nodes(2).cpus(2).mem(4096)).queue(
		job(1).priority(100).with(func(j *state.Job) { j.Spec.Gres = []api.Gres{{Name: "gpu", Count: -5}} }),
		job(2).priority(90).tasks(math.MaxInt).cpus(2),
		job(3).priority(80).dependsRaw(state.DepClause{Type: "afterwards", JobIDs: []string{"9"}}),
		job(4).priority(10).cpus(2),
		job(5).priority(5).cpus(2),
	)
	p := Schedule(sc.snapshot())
	if got := startsOf(p); strings.Join(got, " ") != "4@n1 5@n2" {
		t.Errorf("starts = %v, want [4@n1 5@n2]", got)
	}
	for _, id := range []uint64{1, 2, 3} {
		if p.Reasons[id] != api.ReasonInvalidJob || p.Invalid[id] == "" {
			t.Errorf("job %d: reason %q, why %q; want InvalidJob with a message", id, p.Reasons[id], p.Invalid[id])
		}
	}
}

// TestPanicWhileHandlingAJobIsContained makes the pass fail on one job — a
// dependency lookup that panics stands in for a bug that one record
// triggers — and checks that the job is named invalid and the others are
// scheduled as usual.
func TestPanicWhileHandlingAJobIsContained(t *testing.T) {
	tests := map[string]struct {
		bad    jobB
		breaks func(s *Snapshot)
	}{
		"while checking its dependency": {
			bad: job(1).priority(100).afterok(7),
			breaks: func(s *Snapshot) {
				s.Lookup = func(id uint64) *state.Job {
					if id == 7 {
						panic("lookup failed")
					}
					return nil
				}
			},
		},
		"while computing its priority": {
			bad: job(1).priority(100).named("x", "mallory"),
			breaks: func(s *Snapshot) {
				// A weight, so the pass reads the factor.
				s.Config.Weights.Fairshare = 1
				s.Fairshare = func(account, user string) float64 {
					if user == "mallory" {
						var m map[string]int
						m["x"]++ // a nil map write
					}
					return 0
				}
			},
		},
		"while placing one of its array tasks": {
			bad: job(1).priority(100).aftercorr(8).with(func(j *state.Job) {
				j.ArrayJobID, j.ArrayPending = 1, &api.IndexSet{Ranges: []api.ArrayRange{{First: 0, Last: 3, Step: 1}}}
			}),
			breaks: func(s *Snapshot) {
				s.LookupTask = func(array uint64, task int) *state.Job {
					if array == 8 {
						panic("task lookup failed")
					}
					return nil
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			sc := at(t0).with(nodes(2).cpus(2).mem(4096)).queue(tc.bad, job(2).priority(10).cpus(2), job(3).priority(5).cpus(2))
			s := sc.snapshot()
			tc.breaks(s)
			p := Schedule(s)
			if got := startsOf(p); strings.Join(got, " ") != "2@n1 3@n2" {
				t.Errorf("starts = %v, want [2@n1 3@n2]", got)
			}
			if p.Reasons[1] != api.ReasonInvalidJob || !strings.Contains(p.Invalid[1], "the scheduler failed on it") {
				t.Errorf("job 1: reason %q, why %q; want InvalidJob saying the scheduler failed", p.Reasons[1], p.Invalid[1])
			}
		})
	}
}

// TestInvalidNodeIsLeftOut checks that a node whose inventory the pass
// cannot index is skipped, named in the plan, and the others still place.
func TestInvalidNodeIsLeftOut(t *testing.T) {
	bad := node("bad").cpus(2).mem(4096).each(func(n *state.Node) {
		n.Inventory = &api.Inventory{Topology: &api.Topology{
			Nodes:     []api.NUMANode{{ID: 0, CPUs: []api.CPU{{ID: 0}, {ID: 1}}, MemMB: 4096}},
			Distances: [][]int{{10, 20}},
		}}
	})
	sc := at(t0).with(bad, node("good").cpus(2).mem(4096)).queue(job(1).cpus(2), job(2).cpus(2))
	p := Schedule(sc.snapshot())
	if got := startsOf(p); strings.Join(got, " ") != "1@good" {
		t.Errorf("starts = %v, want [1@good]", got)
	}
	if p.InvalidNodes["bad"] == "" {
		t.Errorf("InvalidNodes = %v, want node bad named", p.InvalidNodes)
	}
}

// TestHeldInvalidJobKeepsItsReason checks that a job the controller held as
// InvalidJob keeps that reason in later passes (not JobHeldUser).
func TestHeldInvalidJobKeepsItsReason(t *testing.T) {
	sc := at(t0).with(nodes(1).cpus(2)).queue(job(1).held().with(func(j *state.Job) { j.Reason = api.ReasonInvalidJob }))
	if r := Schedule(sc.snapshot()).Reasons[1]; r != api.ReasonInvalidJob {
		t.Errorf("reason %q, want InvalidJob", r)
	}
}
