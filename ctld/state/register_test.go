package state

import (
	"testing"
	"time"

	"corral/api"
)

// restartLog registers n1 (boot b1), submits a plain job (1) and a
// --requeue job (2) and starts both on n1 at index 3, their StartIndex.
func restartLog(t *testing.T) []*logEntry {
	req := spec("requeue")
	req.Requeue = true
	return []*logEntry{
		entry(t, 1, CmdRegisterNode, &RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, BootID: "b1", Partitions: []string{"batch"}}}),
		entry(t, 2, CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 1, Jobs: []JobSpec{spec("plain"), req}}),
		entry(t, 3, CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Second), Starts: []PlanStart{{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512}, {JobID: 2, Node: "n1", CPUs: 1, MemMB: 512}}}),
	}
}

// reregister is n1's registration after a restart with boot id boot.
func reregister(t *testing.T, index uint64, boot string, running []uint64, reports ...api.JobReport) *logEntry {
	info := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, BootID: boot, Partitions: []string{"batch"}, Running: running, Reports: reports}
	return entry(t, index, CmdRegisterNode, &RegisterNode{Now: t0.Add(5 * time.Second), Info: info})
}

// jobOutcome is what a test expects of a job after the registration.
type jobOutcome struct {
	state    api.JobState
	exit     int
	restarts int
}

func TestRegisterAppliesCarriedReports(t *testing.T) {
	cases := map[string]struct {
		before   []*logEntry // after restartLog, from index 4
		reg      func(index uint64) *logEntry
		want     map[uint64]jobOutcome
		nodeJobs int
	}{
		"runs that ended while the daemon was down keep their outcomes": {
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b2", nil,
					api.JobReport{JobID: 1, StartIndex: 3, State: api.StateFailed, ExitCode: 7},
					api.JobReport{JobID: 2, StartIndex: 3, State: api.StateCompleted})
			},
			want: map[uint64]jobOutcome{1: {api.StateFailed, 7, 0}, 2: {api.StateCompleted, 0, 0}},
		},
		"runs neither running nor reported were lost": {
			reg:  func(i uint64) *logEntry { return reregister(t, i, "b2", nil) },
			want: map[uint64]jobOutcome{1: {api.StateNodeFail, 0, 0}, 2: {api.StatePending, 0, 1}},
		},
		"a running job stays, a reported one ends": {
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b2", []uint64{1}, api.JobReport{JobID: 2, StartIndex: 3, State: api.StateCompleted})
			},
			want:     map[uint64]jobOutcome{1: {api.StateRunning, 0, 0}, 2: {api.StateCompleted, 0, 0}},
			nodeJobs: 1,
		},
		"a report of another run is stale and the job was lost": {
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b2", nil, api.JobReport{JobID: 1, StartIndex: 2, State: api.StateCompleted})
			},
			want: map[uint64]jobOutcome{1: {api.StateNodeFail, 0, 0}, 2: {api.StatePending, 0, 1}},
		},
		"a run reported lost requeues a --requeue job once": {
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b2", nil,
					api.JobReport{JobID: 1, StartIndex: 3, State: api.StateNodeFail, Signal: 15},
					api.JobReport{JobID: 2, StartIndex: 3, State: api.StateNodeFail, Signal: 15})
			},
			want: map[uint64]jobOutcome{1: {api.StateNodeFail, 0, 0}, 2: {api.StatePending, 0, 1}},
		},
		"the same daemon registering again keeps its jobs and applies its reports": {
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b1", nil, api.JobReport{JobID: 1, StartIndex: 3, State: api.StateFailed, ExitCode: 3})
			},
			want:     map[uint64]jobOutcome{1: {api.StateFailed, 3, 0}, 2: {api.StateRunning, 0, 0}},
			nodeJobs: 1,
		},
		"a job being cancelled takes its final state": {
			before: []*logEntry{entry(t, 4, CmdCancelJobs, &CancelJobs{Now: t0.Add(2 * time.Second), IDs: []uint64{1, 2}, By: "alice"})},
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b2", nil, api.JobReport{JobID: 1, StartIndex: 3, State: api.StateFailed, ExitCode: 143})
			},
			want: map[uint64]jobOutcome{1: {api.StateCancelled, 143, 0}, 2: {api.StateCancelled, 0, 0}},
		},
		"a run reported in a state that is not an end fails": {
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b1", nil, api.JobReport{JobID: 1, StartIndex: 3, State: api.StateRunning})
			},
			want:     map[uint64]jobOutcome{1: {api.StateFailed, 0, 0}, 2: {api.StateRunning, 0, 0}},
			nodeJobs: 1,
		},
		"a node that was DOWN reports runs the controllers already took as lost": {
			before: []*logEntry{entry(t, 4, CmdNodeDown, &NodeDown{Now: t0.Add(4 * time.Second), Nodes: []string{"n1"}, Reason: "Not responding"})},
			reg: func(i uint64) *logEntry {
				return reregister(t, i, "b1", nil,
					api.JobReport{JobID: 1, StartIndex: 3, State: api.StateNodeFail},
					api.JobReport{JobID: 2, StartIndex: 3, State: api.StateNodeFail})
			},
			want: map[uint64]jobOutcome{1: {api.StateNodeFail, 0, 0}, 2: {api.StatePending, 0, 1}},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newReplica()
			logs := append(restartLog(t), c.before...)
			applyAll(t, f, logs)
			f.Apply(c.reg(uint64(len(logs) + 1)))
			f.Read(func(s *State) {
				for id, w := range c.want {
					j := s.Jobs[id]
					if j.State != w.state || j.ExitCode != w.exit || j.Restarts != w.restarts {
						t.Errorf("job %d: %s exit %d restarts %d (%s), want %s exit %d restarts %d",
							id, j.State, j.ExitCode, j.Restarts, j.Message, w.state, w.exit, w.restarts)
					}
				}
				n := s.Nodes["n1"]
				if len(n.Allocs) != c.nodeJobs || n.AllocCPUs != c.nodeJobs || n.AllocMemMB != int64(512*c.nodeJobs) {
					t.Errorf("n1 holds allocations %v, %d CPUs, %d MiB; want %d jobs", n.Allocs, n.AllocCPUs, n.AllocMemMB, c.nodeJobs)
				}
			})
		})
	}
}

// TestReportAfterRegistrationApplies checks that a job the restarted daemon
// still runs takes its report afterwards (it is not stale), and that a
// report the registration applied already is.
func TestReportAfterRegistrationApplies(t *testing.T) {
	f := newReplica()
	applyAll(t, f, restartLog(t))
	f.Apply(reregister(t, 4, "b2", []uint64{1}, api.JobReport{JobID: 2, StartIndex: 3, State: api.StateCompleted}))
	res := f.Apply(entry(t, 5, CmdJobReports, &JobReports{Now: t0.Add(6 * time.Second), Node: "n1", BootID: "b2", Reports: []api.JobReport{
		{JobID: 1, StartIndex: 3, State: api.StateFailed, ExitCode: 7},
		{JobID: 2, StartIndex: 3, State: api.StateCompleted},
	}})).(*IDsResult)
	if len(res.Changed) != 1 || res.Changed[0] != 1 || res.Errors[2] != "stale report" {
		t.Errorf("reports after the registration: %+v, want job 1 changed and job 2's stale", res)
	}
	f.Read(func(s *State) {
		if j := s.Jobs[1]; j.State != api.StateFailed || j.ExitCode != 7 {
			t.Errorf("job 1: %s exit %d, want FAILED 7", j.State, j.ExitCode)
		}
	})
}

// TestFencedReportThenDownCountsOnce checks that a run the node stopped for
// its lease, reported before the controllers declared the node DOWN, is
// requeued once, not again by the DOWN.
func TestFencedReportThenDownCountsOnce(t *testing.T) {
	f := newReplica()
	applyAll(t, f, restartLog(t))
	f.Apply(entry(t, 4, CmdJobReports, &JobReports{Now: t0.Add(3 * time.Second), Node: "n1", BootID: "b1", Reports: []api.JobReport{
		{JobID: 1, StartIndex: 3, State: api.StateNodeFail, Signal: 15, Message: "lease"},
		{JobID: 2, StartIndex: 3, State: api.StateNodeFail, Signal: 15, Message: "lease"},
	}}))
	f.Apply(entry(t, 5, CmdNodeDown, &NodeDown{Now: t0.Add(4 * time.Second), Nodes: []string{"n1"}, Reason: "Not responding"}))
	f.Read(func(s *State) {
		if j := s.Jobs[1]; j.State != api.StateNodeFail || j.Signal != 15 || j.Message != "lease" {
			t.Errorf("plain job: %s signal %d %q, want NODE_FAIL by signal 15 with the node's message", j.State, j.Signal, j.Message)
		}
		if j := s.Jobs[2]; j.State != api.StatePending || j.Restarts != 1 || j.Message != "lease" {
			t.Errorf("--requeue job: %s restarts %d %q, want PENDING after one restart", j.State, j.Restarts, j.Message)
		}
	})
}

// registerScript is a log whose registrations carry reports, for the
// snapshot and replay checks.
func registerScript(t *testing.T) []*logEntry {
	return append(restartLog(t),
		reregister(t, 4, "b2", []uint64{1}, api.JobReport{JobID: 2, StartIndex: 3, State: api.StateFailed, ExitCode: 7, Message: "exit 7"}),
		entry(t, 5, CmdJobReports, &JobReports{Now: t0.Add(6 * time.Second), Node: "n1", BootID: "b2", Reports: []api.JobReport{{JobID: 1, StartIndex: 3, State: api.StateNodeFail}}}),
		reregister(t, 6, "b3", nil),
	)
}

func TestRegisterWithReportsSnapshotAndReplay(t *testing.T) {
	logs := registerScript(t)
	for i := range logs {
		restoreAfter(t, logs, i+1)
	}
	var hashes []string
	for range 3 {
		f := newReplica()
		applyAll(t, f, logs)
		hashes = append(hashes, f.Hash())
	}
	if hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Fatalf("replicas disagree: %v", hashes)
	}
	f := newReplica()
	applyAll(t, f, logs)
	f.Read(func(s *State) {
		if j := s.Jobs[2]; j.State != api.StateFailed || j.ExitCode != 7 {
			t.Errorf("job 2 after the script: %s exit %d, want FAILED 7", j.State, j.ExitCode)
		}
	})
}
