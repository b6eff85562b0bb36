package ctld

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func spec(name string) api.JobSpec {
	return api.JobSpec{Name: name, User: "alice", Script: "#!/bin/sh\necho hi\n", NTasks: 1, CPUsPerTask: 1, RequestID: "req-" + name}
}

// entry frames a command as a Raft log entry at index.
func entry(t *testing.T, index uint64, ct CommandType, payload any) *raft.Log {
	t.Helper()
	data, err := encodeCommand(ct, payload)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// scriptLog is one log that exercises every command type.
func scriptLog(t *testing.T) []*raft.Log {
	node := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "process", BootID: "b1", Partitions: []string{"batch"}}
	node2 := api.NodeInfo{Name: "n2", CPUs: 2, MemMB: 4096, Runner: "process", BootID: "c1", Partitions: []string{"batch"}}
	req := spec("b")
	req.Requeue = true
	cmds := []struct {
		t CommandType
		p any
	}{
		{CmdSetMember, &SetMember{ID: "c1", HTTPAddr: "127.0.0.1:7001"}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: node}},
		{CmdRegisterNode, &RegisterNode{Now: t0, Info: node2}},
		{CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []api.JobSpec{spec("a"), req, spec("c"), spec("d")}}},
		{CmdHoldRelease, &HoldRelease{Now: t0, IDs: []uint64{3}, Hold: true}},
		{CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "n2", CPUs: 1, MemMB: 512}, {JobID: 4, Node: "n1", CPUs: 1, MemMB: 512}}, Reasons: []PlanReason{{JobID: 3, Reason: api.ReasonJobHeldUser}}}},
		{CmdNodeHeartbeats, &NodeHeartbeats{Seen: map[string]time.Time{"n1": t0.Add(2 * time.Second)}}},
		{CmdSuspendJobs, &SuspendJobs{Now: t0.Add(2 * time.Second), IDs: []uint64{4}, Suspend: true}},
		{CmdSuspendJobs, &SuspendJobs{Now: t0.Add(3 * time.Second), IDs: []uint64{4, 3}, Suspend: false}},
		{CmdJobReports, &JobReports{Now: t0.Add(3 * time.Second), Node: "n1", BootID: "b1", Reports: []api.JobReport{{JobID: 1, StartIndex: 6, State: api.StateCompleted}}}},
		{CmdCancelJobs, &CancelJobs{Now: t0.Add(4 * time.Second), IDs: []uint64{4}, By: "alice"}},
		{CmdNodeDown, &NodeDown{Now: t0.Add(5 * time.Second), Nodes: []string{"n2"}, Reason: "Not responding"}},
		{CmdNodeDrain, &NodeDrain{Now: t0.Add(6 * time.Second), Node: "n1", Drain: true, Reason: "maintenance"}},
	}
	var logs []*raft.Log
	for i, c := range cmds {
		logs = append(logs, entry(t, uint64(i+1), c.t, c.p))
	}
	return logs
}

func applyAll(t *testing.T, f *FSM, logs []*raft.Log) {
	t.Helper()
	for _, l := range logs {
		f.Apply(l)
	}
}

func TestApplyEveryCommand(t *testing.T) {
	f := NewFSM(quietLog())
	applyAll(t, f, scriptLog(t))
	f.Read(func(s *State) {
		checks := map[string]struct {
			got, want any
		}{
			"member recorded":             {s.Members["c1"], "127.0.0.1:7001"},
			"next job id":                 {s.NextJobID, uint64(5)},
			"job 1 completed":             {s.Jobs[1].State, api.StateCompleted},
			"requeue job back to pending": {s.Jobs[2].State, api.StatePending},
			"requeued restarts":           {s.Jobs[2].Restarts, 1},
			"held job":                    {s.Jobs[3].Reason, api.ReasonJobHeldUser},
			"cancelled running job":       {s.Jobs[4].State, api.StateCompleting},
			"cancel final state":          {s.Jobs[4].FinalState, api.StateCancelled},
			"n2 down":                     {s.Nodes["n2"].State(), api.NodeDown},
			"n1 draining":                 {s.Nodes["n1"].State(), api.NodeDraining},
			"n1 last seen":                {s.Nodes["n1"].LastSeen, t0.Add(2 * time.Second)},
			"n1 holds job 4 until report": {s.Nodes["n1"].AllocCPUs, 1},
			"pending index":               {len(s.Pending), 2},
			"suspended time counted":      {s.Jobs[4].SuspendedFor, time.Second},
			"not suspended any more":      {s.Jobs[4].SuspendTime.IsZero(), true},
		}
		for name, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: got %v, want %v", name, c.got, c.want)
			}
		}
	})
}

func TestSubmitIsIdempotent(t *testing.T) {
	f := NewFSM(quietLog())
	f.Apply(entry(t, 1, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []api.JobSpec{spec("a")}}))
	res := f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 2, Jobs: []api.JobSpec{spec("a"), spec("b")}})).(*SubmitResult)
	if got := res.Results[0]; got.JobID != 1 || !got.Duplicate {
		t.Errorf("retried submit: got %+v, want job 1 duplicate", got)
	}
	if got := res.Results[1]; got.JobID != 3 || got.Duplicate {
		t.Errorf("new submit: got %+v, want job 3", got)
	}
	f.Read(func(s *State) {
		if len(s.Jobs) != 2 {
			t.Errorf("jobs stored: %d, want 2", len(s.Jobs))
		}
	})
}

func TestPlanRejectsDoubleBooking(t *testing.T) {
	f := NewFSM(quietLog())
	f.Apply(entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, BootID: "b"}}))
	f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []api.JobSpec{spec("a"), spec("b"), spec("c")}}))
	res := f.Apply(entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{
		{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 3, Node: "n1", CPUs: 1, MemMB: 512},
	}})).(*PlanResult)
	if len(res.Started) != 2 || len(res.Rejected) != 1 || res.Rejected[0] != 3 {
		t.Fatalf("plan result %+v: want jobs 1,2 started and 3 rejected", res)
	}
	res = f.Apply(entry(t, 4, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1}}})).(*PlanResult)
	if len(res.Rejected) != 1 {
		t.Errorf("starting a running job again was not rejected: %+v", res)
	}
}

func TestStaleReportIgnored(t *testing.T) {
	f := NewFSM(quietLog())
	applyAll(t, f, scriptLog(t)[:6])
	res := f.Apply(entry(t, 7, CmdJobReports, &JobReports{Now: t0, Node: "n1", Reports: []api.JobReport{{JobID: 1, StartIndex: 99, State: api.StateFailed}}})).(*IDsResult)
	if len(res.Changed) != 0 {
		t.Fatalf("a report for another run changed the job: %+v", res)
	}
}

func TestRegisterRestartLosesUnknownJobs(t *testing.T) {
	f := NewFSM(quietLog())
	applyAll(t, f, scriptLog(t)[:6])
	// n1 restarts knowing only job 4; job 1 was lost with the old daemon.
	f.Apply(entry(t, 7, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, BootID: "b2", Running: []uint64{4}}}))
	f.Read(func(s *State) {
		if s.Jobs[1].State != api.StateNodeFail {
			t.Errorf("lost job: %s, want NODE_FAIL", s.Jobs[1].State)
		}
		if s.Jobs[4].State != api.StateRunning || s.Nodes["n1"].AllocCPUs != 1 {
			t.Errorf("adopted job: %s with %d CPUs allocated, want RUNNING with 1", s.Jobs[4].State, s.Nodes["n1"].AllocCPUs)
		}
	})
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

func TestSnapshotRoundTripPerCommand(t *testing.T) {
	logs := scriptLog(t)
	for i := range logs {
		l := logs[i]
		name, _, _ := decodeCommand(l.Data)
		t.Run(name.String(), func(t *testing.T) {
			f := NewFSM(quietLog())
			applyAll(t, f, logs[:i+1])
			snap, err := f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var sink memSink
			if err := snap.Persist(&sink); err != nil {
				t.Fatal(err)
			}
			g := NewFSM(quietLog())
			if err := g.Restore(io.NopCloser(&sink.Buffer)); err != nil {
				t.Fatal(err)
			}
			if f.Hash() != g.Hash() {
				t.Fatalf("state after restore differs")
			}
			// The restored replica keeps applying identically.
			if i+1 < len(logs) {
				applyAll(t, f, logs[i+1:])
				applyAll(t, g, logs[i+1:])
				if f.Hash() != g.Hash() {
					t.Fatalf("replicas diverged after restore")
				}
			}
		})
	}
}

func TestReplayIntoThreeFSMs(t *testing.T) {
	logs := scriptLog(t)
	var hashes []string
	for i := 0; i < 3; i++ {
		f := NewFSM(quietLog())
		applyAll(t, f, logs)
		hashes = append(hashes, f.Hash())
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("replicas disagree: %v", hashes)
	}
	empty := NewFSM(quietLog()).Hash()
	if hashes[0] == empty {
		t.Fatal("hash ignores state")
	}
}

func TestUnknownCommandStopsTheFSM(t *testing.T) {
	f := NewFSM(quietLog())
	defer func() {
		if recover() == nil {
			t.Fatal("an unknown command type was applied silently")
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{200, '{', '}'}})
}

func TestSnapshotFormatChecked(t *testing.T) {
	_, err := readSnapshot(bytes.NewBufferString(`{"format":99}` + "\n"))
	if err == nil {
		t.Fatal("a snapshot of an unknown format was accepted")
	}
}

func TestRunnerOverheadIsCharged(t *testing.T) {
	f := NewFSM(quietLog())
	f.Apply(entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "vm1", CPUs: 4, MemMB: 1000, BootID: "b", OverheadMB: 100}}))
	f.Apply(entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []api.JobSpec{spec("a"), spec("b"), spec("c")}}))
	// 2 × (400 + 100) fills the node's 1000 MiB: the third start must be
	// refused, and a plan that leaves the overhead out is refused too.
	res := f.Apply(entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{
		{JobID: 1, Node: "vm1", CPUs: 1, MemMB: 400, OverheadMB: 100},
		{JobID: 2, Node: "vm1", CPUs: 1, MemMB: 400, OverheadMB: 100},
		{JobID: 3, Node: "vm1", CPUs: 1, MemMB: 1, OverheadMB: 100},
	}})).(*PlanResult)
	if len(res.Started) != 2 || len(res.Rejected) != 1 {
		t.Fatalf("plan %+v: want 2 started, 1 rejected", res)
	}
	f.Apply(entry(t, 4, CmdJobReports, &JobReports{Now: t0, Node: "vm1", Reports: []api.JobReport{{JobID: 1, StartIndex: 3, State: api.StateCompleted}}}))
	res = f.Apply(entry(t, 5, CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 3, Node: "vm1", CPUs: 1, MemMB: 400}}})).(*PlanResult)
	if len(res.Rejected) != 1 {
		t.Fatalf("a plan without the node's overhead was applied: %+v", res)
	}
	f.Read(func(s *State) {
		if got := s.Nodes["vm1"].AllocMemMB; got != 500 {
			t.Errorf("allocated memory %d MiB, want 500 (one job of 400 plus 100 overhead)", got)
		}
	})
}
