package accounting

import (
	"math"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"corral/api"
	"corral/ctld/state"
)

// applyAll applies commands to s at consecutive indexes from 1.
func applyAll(t *testing.T, s *state.State, cmds ...any) {
	t.Helper()
	for i, c := range cmds {
		var typ state.CommandType
		switch c.(type) {
		case *state.RegisterNode:
			typ = state.CmdRegisterNode
		case *state.NodeDrain:
			typ = state.CmdNodeDrain
		case *state.NodeDown:
			typ = state.CmdNodeDown
		case *state.NodeAttest:
			typ = state.CmdNodeAttest
		default:
			t.Fatalf("no command type for %T", c)
		}
		if err, ok := s.Apply(s.Index+uint64(i)+1, typ, c).(error); ok {
			t.Fatalf("%T: %v", c, err)
		}
	}
}

// TestNodeFactsFromApplies checks the facts the log gives: a
// registration is up, a drain by a person planned down, a resume up
// again, a node that stopped responding or that its health check drained
// down; each at its entry's time, with the node's CPUs and GPUs.
func TestNodeFactsFromApplies(t *testing.T) {
	s := testState()
	s.TrackEnds(true)
	gpus := &api.Inventory{GPUs: []api.GPU{{}, {}}}
	reg := func(name string, cpus int, at time.Time) *state.RegisterNode {
		return &state.RegisterNode{Now: at, Info: api.NodeInfo{Name: name, CPUs: cpus, MemMB: 4096, Runner: "process", BootID: "b", Inventory: gpus}}
	}
	type fact struct {
		node  string
		at    time.Duration
		state NodeState
	}
	steps := []struct {
		cmd  any
		want []fact
	}{
		{reg("n1", 8, t0), []fact{{"n1", 0, NodeUp}}},
		{reg("n2", 4, t0.Add(time.Minute)), []fact{{"n2", time.Minute, NodeUp}}},
		{&state.NodeDrain{Now: t0.Add(time.Hour), Node: "n1", Drain: true, Reason: "disk swap", By: "ops"}, []fact{{"n1", time.Hour, NodePlannedDown}}},
		{&state.NodeDrain{Now: t0.Add(2 * time.Hour), Node: "n1", Drain: false, By: "ops"}, []fact{{"n1", 2 * time.Hour, NodeUp}}},
		{&state.NodeDrain{Now: t0.Add(3 * time.Hour), Node: "n2", Drain: true, Reason: "ecc", By: api.HealthCheckUser, Health: true}, []fact{{"n2", 3 * time.Hour, NodeDown}}},
		{&state.NodeDown{Now: t0.Add(4 * time.Hour), Nodes: []string{"n1"}, Reason: "not responding"}, []fact{{"n1", 4 * time.Hour, NodeDown}}},
		{&state.NodeAttest{Now: t0.Add(5 * time.Hour), Node: "n1", Reason: "PCR 7"}, []fact{{"n1", 5 * time.Hour, NodeDown}}},
	}
	for i, st := range steps {
		applyAll(t, s, st.cmd)
		w := FromEnds(s, s.TakeEnds())
		var got []fact
		for _, f := range w.Nodes {
			got = append(got, fact{f.Node, f.At.Sub(t0), f.State})
			if f.GPUs != 2 || f.CPUs != s.Nodes[f.Node].CPUs {
				t.Errorf("step %d: fact %+v, want the node's %d CPUs and 2 GPUs", i, f, s.Nodes[f.Node].CPUs)
			}
		}
		if !slices.Equal(got, st.want) {
			t.Errorf("step %d (%T): facts %+v, want %+v", i, st.cmd, got, st.want)
		}
	}
	// A member restored from this state knows each node's state since its
	// reason was set.
	restored := RestoredNodeFacts(s)
	if len(restored) != 2 || !restored[0].At.Equal(t0.Add(5*time.Hour)) || restored[0].State != NodeDown ||
		!restored[1].At.Equal(t0.Add(3*time.Hour)) || restored[1].State != NodeDown {
		t.Errorf("restored facts %+v, want n1 down since 5h (its reason's time: the attestation) and n2 since 3h", restored)
	}
}

// TestNodeFactsInStore checks that facts are idempotent by (node, time),
// and that a restored member's guesses are written only for nodes the
// store knows nothing of.
func TestNodeFactsInStore(t *testing.T) {
	s := openTest(t)
	up := NodeFact{Node: "n1", At: t0, State: NodeUp, CPUs: 8}
	down := NodeFact{Node: "n1", At: t0.Add(time.Hour), State: NodeDown, CPUs: 8}
	for range 2 {
		if err := s.Write(Written{Nodes: []NodeFact{up, down}}); err != nil {
			t.Fatal(err)
		}
	}
	guess := []NodeFact{{Node: "n1", At: t0.Add(-time.Hour), State: NodeUp, CPUs: 8}, {Node: "n2", At: t0, State: NodePlannedDown, CPUs: 2, GPUs: 1}}
	if err := s.Write(Written{NodesIfNone: guess}); err != nil {
		t.Fatal(err)
	}
	got, err := s.NodeFacts()
	if err != nil {
		t.Fatal(err)
	}
	want := []NodeFact{up, down, guess[1]}
	if len(got) != len(want) {
		t.Fatalf("facts %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Node != want[i].Node || !got[i].At.Equal(want[i].At) || got[i].State != want[i].State || got[i].CPUs != want[i].CPUs || got[i].GPUs != want[i].GPUs {
			t.Errorf("fact %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := s.Write(Written{Nodes: []NodeFact{{Node: "a\x00b", At: t0}}}); err == nil {
		t.Error("a node name with a NUL was stored")
	}
}

// runRecord2 is a record of job id on one node: cpus and gpus held from start
// to end, eligible at eligible.
func runRecord2(id uint64, account string, cpus, gpus int, eligible, start, end time.Time, restarts int) Record {
	r := Record{JobID: id, AllocID: id, Final: true, User: "u", Account: account, Eligible: eligible, Start: start, End: end,
		Restarts: restarts, ReqTRES: api.TRES{CPU: cpus}, AllocTRES: api.TRES{CPU: cpus}}
	if gpus > 0 {
		r.ReqTRES.GPUs = map[string]int{"": gpus}
		r.AllocTRES.GPUs = map[string]int{"": gpus}
	}
	if !start.IsZero() {
		secs := end.Sub(start).Seconds()
		r.Elapsed = int64(secs)
		r.CPUSeconds, r.GPUSeconds, r.Billing = secs*float64(cpus), secs*float64(gpus), secs*float64(cpus)*2
	} else {
		r.AllocID, r.AllocTRES = 0, api.TRES{}
	}
	return r
}

func hours(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }

// TestClusterUtilization checks sreport's cluster figures against nodes
// and jobs of known times over a day:
//
//	n1  8 CPUs           up all day                         192 CPU-h
//	n2  4 CPUs, 2 GPUs   drained by ops 10h-14h             96 CPU-h, 16 of them planned down; 48 GPU-h, 8 planned down
//	n3  4 CPUs           up, down from 20h                  96 CPU-h, 16 of them down
//	job 1  4 CPUs 1h-3h, eligible 0.5h                      8 CPU-h allocated, 2 planned (its wait)
//	job 2  2 CPUs 1 GPU, -1h-1h                             2 CPU-h and 1 GPU-h in the window
//	job 3  never ran: 8 CPUs waited 22h-23h                 8 CPU-h planned
//	job 4  a requeued run 5h-6h, eligible at 0h              4 CPU-h allocated, no wait (not its first run)
//	job 5  ended the day before                             nothing
func TestClusterUtilization(t *testing.T) {
	s := openTest(t)
	at := func(h float64) time.Time { return t0.Add(hours(h)) }
	recs := []Record{
		runRecord2(1, "physics", 4, 0, at(0.5), at(1), at(3), 0),
		runRecord2(2, "chem", 2, 1, at(-2), at(-1), at(1), 0),
		runRecord2(3, "chem", 8, 0, at(22), time.Time{}, at(23), 0),
		runRecord2(4, "physics", 4, 0, at(0), at(5), at(6), 1),
		runRecord2(5, "physics", 4, 0, at(-30), at(-29), at(-25), 0),
	}
	facts := []NodeFact{
		{Node: "n1", At: at(-48), State: NodeUp, CPUs: 8},
		{Node: "n2", At: at(-1), State: NodeUp, CPUs: 4, GPUs: 2},
		{Node: "n2", At: at(10), State: NodePlannedDown, CPUs: 4, GPUs: 2},
		{Node: "n2", At: at(14), State: NodeUp, CPUs: 4, GPUs: 2},
		{Node: "n3", At: at(0), State: NodeUp, CPUs: 4},
		{Node: "n3", At: at(20), State: NodeDown, CPUs: 4},
	}
	if err := s.Write(Written{Replace: recs, Nodes: facts}); err != nil {
		t.Fatal(err)
	}
	u := NewUtilization(at(0), at(24))
	stored, err := s.NodeFacts()
	if err != nil {
		t.Fatal(err)
	}
	u.AddNodes(stored)
	var jobs []uint64
	if err := s.EachRun(at(0), at(24), func(r *Run) error {
		jobs = append(jobs, r.Job)
		u.AddRun(r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(jobs)
	if !slices.Equal(jobs, []uint64{1, 2, 3, 4}) {
		t.Errorf("runs in the window: jobs %v, want 1-4", jobs)
	}
	rows := u.Result()
	if len(rows) != 2 || rows[0].TRES != "cpu" || rows[1].TRES != "gres/gpu" {
		t.Fatalf("rows %+v, want cpu and gres/gpu", rows)
	}
	h := 3600.0
	wantCPU := api.ClusterUtilization{TRES: "cpu", Count: 16, Allocated: 14 * h, Down: 16 * h, PlannedDown: 16 * h,
		Planned: 10 * h, Idle: (384 - 14 - 16 - 16 - 10) * h, Reported: 384 * h}
	wantGPU := api.ClusterUtilization{TRES: "gres/gpu", Count: 2, Allocated: 1 * h, PlannedDown: 8 * h,
		Idle: (48 - 1 - 8) * h, Reported: 48 * h}
	for i, want := range []api.ClusterUtilization{wantCPU, wantGPU} {
		if !closeRow(rows[i], want) {
			t.Errorf("%s: got %+v\nwant %+v", want.TRES, rows[i], want)
		}
	}
}

func closeRow(a, b api.ClusterUtilization) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-6 }
	return a.TRES == b.TRES && a.Count == b.Count && near(a.Allocated, b.Allocated) && near(a.Down, b.Down) &&
		near(a.PlannedDown, b.PlannedDown) && near(a.Planned, b.Planned) && near(a.Idle, b.Idle) && near(a.Reported, b.Reported)
}

// TestUtilizationLimits checks the figures never exceed what the nodes
// reported: allocated time on a drained node comes out of its planned
// down time, and waits beyond the idle time are cut.
func TestUtilizationLimits(t *testing.T) {
	u := NewUtilization(t0, t0.Add(time.Hour))
	u.AddNodes([]NodeFact{{Node: "n1", At: t0, State: NodePlannedDown, CPUs: 4}})
	u.AddRun(&Run{Start: t0, End: t0.Add(time.Hour), CPUs: 1, CPUSeconds: 3600})
	u.AddRun(&Run{Eligible: t0, End: t0.Add(time.Hour), CPUs: 64, First: true})
	got := u.Result()[0]
	want := api.ClusterUtilization{TRES: "cpu", Count: 4, Allocated: 3600, PlannedDown: 3 * 3600, Reported: 4 * 3600}
	if !closeRow(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestSeries checks the usage series and the wait distribution against
// runs of known times: a run's totals are spread over the bins its run
// time falls in, each account on its own line; each job's wait counts
// once, in the window it started in.
func TestSeries(t *testing.T) {
	s := openTest(t)
	at := func(h float64) time.Time { return t0.Add(hours(h)) }
	recs := []Record{
		runRecord2(1, "physics", 4, 0, at(0.5), at(1), at(3), 0),  // wait 30 min; 4 CPU-h in bins 1 and 2
		runRecord2(2, "chem", 2, 1, at(-2), at(-1), at(1), 0),     // started before: no wait counted; 2 CPU-h in bin 0
		runRecord2(3, "chem", 8, 0, at(2), time.Time{}, at(3), 0), // never ran: no usage, no wait
		runRecord2(4, "physics", 4, 0, at(0), at(5.5), at(6), 1),  // a requeued run: 2 CPU-h in bin 5, no wait
		runRecord2(6, "physics", 1, 0, at(0), at(0), at(2), 0),    // wait 0
		runRecord2(7, "chem", 1, 0, at(-48), at(3), at(3.5), 0),   // waited 51 h
		runRecord2(8, "physics", 2, 0, at(-200), at(3), at(4), 0), // waited over a week
		runRecord2(9, "physics", 2, 0, at(2.95), at(3), at(7), 0), // 3 min; runs past the window
	}
	// Job 6's two nodes: two records, one wait.
	second := runRecord2(6, "physics", 1, 0, at(0), at(0), at(2), 0)
	second.AllocID = 60
	recs = append(recs, second)
	if err := s.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	ser := NewSeries(at(0), at(6), time.Hour)
	if err := s.EachRun(at(0), at(6), func(r *Run) error { ser.AddRun(r); return nil }); err != nil {
		t.Fatal(err)
	}
	got := ser.Result()
	if got.Step != 3600 || len(got.Accounts) != 2 || got.Accounts[0].Account != "chem" || got.Accounts[1].Account != "physics" {
		t.Fatalf("series %+v, want hourly lines of chem and physics", got)
	}
	h := 3600.0
	wantCPU := map[string][]float64{
		"chem":    {2 * h, 0, 0, 0.5 * h, 0, 0},
		"physics": {2 * h, 6 * h, 4 * h, 4 * h, 2 * h, 4 * h},
	}
	for _, l := range got.Accounts {
		for b, want := range wantCPU[l.Account] {
			if math.Abs(l.CPUSeconds[b]-want) > 1e-6 {
				t.Errorf("%s bin %d: %v CPU-s, want %v", l.Account, b, l.CPUSeconds[b], want)
			}
			if math.Abs(l.Billing[b]-2*want) > 1e-6 {
				t.Errorf("%s bin %d: billing %v, want %v", l.Account, b, l.Billing[b], 2*want)
			}
		}
	}
	if gpu := got.Accounts[0].GPUSeconds[0]; gpu != h {
		t.Errorf("chem's GPU-s in bin 0 = %v, want %v", gpu, h)
	}
	var counts []int
	for _, b := range got.Waits {
		counts = append(counts, b.Jobs)
	}
	// < 1 min: job 6; 1-10 min: job 9; 10-60 min: job 1; 1-7 d: job 7; > 7 d: job 8.
	if want := []int{1, 1, 1, 0, 0, 1, 1}; !slices.Equal(counts, want) {
		t.Errorf("wait distribution %v, want %v", counts, want)
	}
}

// TestRunIndexBuiltForOldStore checks that a store written before the
// run index existed gets it from its records when opened.
func TestRunIndexBuiltForOldStore(t *testing.T) {
	s := openTest(t)
	path := s.Path()
	if err := s.Write(Written{Replace: []Record{synthetic(0, 1, 1, time.Minute), synthetic(1, 1, 1, time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	dropRunIndex(t, s)
	_ = s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	n := 0
	if err := s2.EachRun(time.Time{}, time.Time{}, func(*Run) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("the rebuilt run index holds %d runs, want 2", n)
	}
}

// dropRunIndex removes the run index, as a store written before it
// existed lacks it.
func dropRunIndex(t *testing.T, s *Store) {
	t.Helper()
	if err := s.db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket(bRun) }); err != nil {
		t.Fatal(err)
	}
}
