package ctld

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// The fuzz targets here feed the controller what crosses its trust
// boundaries: Raft entries (any replica applies whatever the log holds),
// snapshots (a member restores whatever a peer sends), and request bodies.
// A committed entry must never crash a member: apply and the scheduling
// pass that follows must not panic. They are called here without the
// containment that production wraps around them, so that the bugs
// containment would hide are found.

// fuzzState builds a small cluster at index 20: a node with an inventory,
// a plain node, and pending, held, running, suspended and array jobs.
func fuzzState(tb testing.TB) *FSM {
	f := NewFSM(quietLog())
	inv := smallInventory()
	arr := spec("arr")
	arr.Array = &api.ArraySpec{Raw: "0-9", Ranges: []api.ArrayRange{{First: 0, Last: 9, Step: 1}}}
	dep := spec("dep")
	dep.Dependency = &api.Dependency{Raw: "afterok:1", Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"1"}}}}
	held := spec("held")
	held.Hold = true
	gpu := spec("gpu")
	gpu.Gres = []api.Gres{{Name: "gpu", Count: 1}}
	for i, c := range fuzzSeedCommands(inv, arr, dep, held, gpu) {
		data, err := state.Encode(c.t, c.p)
		if err != nil {
			tb.Fatal(err)
		}
		f.Apply(rlog(uint64(i+1), data))
	}
	return f
}

type fuzzCommand struct {
	t state.CommandType
	p any
}

// fuzzSeedCommands is a log that builds fuzzState and also serves as the
// seed corpus: one entry of every command type.
func fuzzSeedCommands(inv *api.Inventory, arr, dep, held, gpu api.JobSpec) []fuzzCommand {
	n1 := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "test", BootID: "b1", Partitions: []string{"batch"}, Inventory: inv}
	n2 := api.NodeInfo{Name: "n2", CPUs: 4, MemMB: 8192, Runner: "test", BootID: "b2", Partitions: []string{"batch"}}
	return []fuzzCommand{
		{state.CmdSetMember, &state.SetMember{ID: "c1", HTTPAddr: "127.0.0.1:7001"}},
		{state.CmdRegisterNode, &state.RegisterNode{Now: t0, Info: n1}},
		{state.CmdRegisterNode, &state.RegisterNode{Now: t0, Info: n2}},
		{state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 1, Jobs: stateSpecs(spec("a"), spec("b"), arr, dep, held, gpu, spec("c"))}},
		{state.CmdApplyPlan, &state.ApplyPlan{Now: t0.Add(time.Second), Starts: []state.PlanStart{
			{JobID: 1, Node: "n1", CPUs: 1, MemMB: 512, Placement: &api.Placement{CPUs: []int{0}, NUMANodes: []int{0}, Mem: []api.NodeAmount{{Node: 0, MB: 512}}}},
			{JobID: 2, Node: "n2", CPUs: 1, MemMB: 512},
			{JobID: 3, Node: "n2", CPUs: 1, MemMB: 512, Array: true, Task: 0, NewID: 8},
		}}},
		{state.CmdSuspendJobs, &state.SuspendJobs{Now: t0.Add(2 * time.Second), IDs: []uint64{2}, Suspend: true}},
		{state.CmdNodeHeartbeats, &state.NodeHeartbeats{Seen: map[string]time.Time{"n1": t0.Add(2 * time.Second)}}},
		{state.CmdHoldRelease, &state.HoldRelease{Now: t0.Add(3 * time.Second), IDs: []uint64{5}, Hold: true}},
		{state.CmdRequeueJobs, &state.RequeueJobs{Now: t0.Add(3 * time.Second), IDs: []uint64{5, 1}, Hold: true, By: "alice"}},
		{state.CmdJobReports, &state.JobReports{Now: t0.Add(3 * time.Second), Node: "n2", BootID: "b2", Reports: []api.JobReport{{JobID: 8, StartIndex: 5, State: api.StateFailed, ExitCode: 7}}}},
		{state.CmdCancelJobs, &state.CancelJobs{Now: t0.Add(4 * time.Second), IDs: []uint64{7}, Tasks: []api.TaskRef{{Array: 3, Task: 4}}, By: "alice"}},
		{state.CmdNodeDrain, &state.NodeDrain{Now: t0.Add(5 * time.Second), Node: "n2", Drain: true, Reason: "maintenance"}},
		{state.CmdNodeDown, &state.NodeDown{Now: t0.Add(6 * time.Second), Nodes: []string{"n9"}, Reason: "Not responding"}},
		{state.CmdSetConfig, &state.SetConfig{Settings: [][2]string{{"PriorityWeightAge", "500"}}}},
		{state.CmdPutQOS, &state.PutQOS{QOS: api.QOS{Name: "high", Priority: 100}}},
		{state.CmdPutAccount, &state.PutAccount{Account: api.Account{Name: "phys", Shares: 1}}},
		{state.CmdPutUser, &state.PutUser{User: api.AccountUser{Account: "phys", Name: "alice", Shares: 1}}},
		{state.CmdUpdateJob, &state.UpdateJob{Now: t0.Add(7 * time.Second), ID: 4, Dependency: &state.Dependency{Raw: "afterany:1", Clauses: []state.DepClause{{Type: "afterany", JobIDs: []string{"1"}}}}}},
		{state.CmdPurgeJobs, &state.PurgeJobs{Now: t0.Add(time.Hour), Max: 3}},
	}
}

// fuzzController wraps an FSM the way the leader uses it, without Raft.
func fuzzController(f *FSM) *Controller {
	c := &Controller{cfg: Config{DefMemPerCPU: 512, Partitions: []api.Partition{{Name: api.DefaultPartition, Default: true}}}, fsm: f, log: quietLog(), clock: realClock{}}
	f.Read(func(s *state.State) { c.nextJobID = s.NextJobID })
	return c
}

// passAndApply runs one scheduling pass on f's state and applies its plan,
// as the leader does, failing on any panic the pass contained.
func passAndApply(t *testing.T, f *FSM, now time.Time, index uint64) {
	c := fuzzController(f)
	snap := c.snapshotForSched(now)
	plan := sched.Schedule(snap)
	for id, why := range plan.Invalid {
		if strings.Contains(why, "the scheduler failed on it") {
			t.Fatalf("the pass failed on job %d: %s", id, why)
		}
	}
	cmd := c.planCommand(now, snap, plan)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state.Apply(index, state.CmdApplyPlan, cmd)
	f.state.TakeTouched()
}

// roundTrip checks that a snapshot of f restores to the same state hash.
func roundTrip(t *testing.T, f *FSM) {
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).snap.Write(&buf); err != nil {
		t.Fatalf("persisting a snapshot: %v", err)
	}
	s, err := state.ReadSnapshot(&buf)
	if err != nil {
		t.Fatalf("a snapshot this build wrote does not read back: %v", err)
	}
	g := NewFSM(quietLog())
	g.state = s
	if a, b := f.Hash(), g.Hash(); a != b {
		t.Fatalf("state hash %s, after a snapshot round trip %s", a, b)
	}
}

// FuzzApplyCommand applies an arbitrary Raft entry to a small cluster's
// state, then runs a scheduling pass and applies its plan, then checks the
// snapshot round trip.
func FuzzApplyCommand(f *testing.F) {
	arr := spec("x")
	arr.Array = &api.ArraySpec{Raw: "0-1099511627776,1-2", Ranges: []api.ArrayRange{{First: 0, Last: 1 << 40, Step: 1}, {First: 1, Last: 2, Step: 1}}}
	for _, c := range fuzzSeedCommands(smallInventory(), arr, spec("y"), spec("z"), spec("w")) {
		if sj, ok := c.p.(*state.SubmitJobs); ok {
			fresh := *sj
			fresh.FirstID = 100 // past fuzzState's ids, so the jobs are created
			c.p = &fresh
		}
		data, err := state.Encode(c.t, c.p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, sp := range poisonSpecs() {
		data, _ := state.Encode(state.CmdSubmitJobs, &state.SubmitJobs{Now: t0, FirstID: 100, Jobs: stateSpecs(sp)})
		f.Add(data)
	}
	recs := []api.AuditRecord{{Tenant: "phys", Time: t0, Principal: "user alice (token t)", User: "alice", Op: "POST /v1/jobs", Status: 200}}
	api.ChainAudit(map[string]api.AuditHead{}, recs)
	for _, c := range []fuzzCommand{
		{state.CmdPutToken, &state.PutToken{Now: t0, Token: state.TokenRecord{Hash: state.HashSecret("s"), Token: api.Token{ID: "t1", User: "alice", Role: api.RoleCoordinator, Account: "phys", Expires: t0.Add(time.Hour)}}}},
		{state.CmdRevokeToken, &state.RevokeToken{Now: t0, ID: "t1", By: "alice"}},
		{state.CmdSetRole, &state.SetRole{Grant: api.RoleGrant{User: "carol", Role: api.RoleCoordinator, Accounts: []string{"phys"}}}},
		{state.CmdAuditRecords, &state.AuditRecords{Now: t0, Records: recs, Keep: 10, Retention: time.Hour}},
		{state.CmdForgetNodeKey, &state.ForgetNodeKey{Node: "n1", By: "oscar"}},
		{state.CmdRegisterNode, &state.RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "test", BootID: "b1"}, Key: "other"}},
		{state.CmdRegisterNode, &state.RegisterNode{Now: t0, Info: api.NodeInfo{Name: "n2", CPUs: 4, MemMB: 8192, Runner: "vm", BootID: "b2",
			Partitions: []string{"batch"}, Accel: "tcg", Migrate: true, APIAddr: "http://n2:1"}}},
		{state.CmdMigrateJobs, &state.MigrateJobs{Now: t0, Requests: []state.MigrateRequest{{Job: 2, To: "n1", By: "alice", Token: "t"}, {Job: 1, Token: "u"}}}},
		{state.CmdMigrationReports, &state.MigrationReports{Now: t0, Node: "n2", Reports: []api.MigrationReport{{Migration: 1, Alloc: 2, Event: "sent", TotalMS: 5}}}},
		{state.CmdExpireMigrations, &state.ExpireMigrations{Now: t0.Add(time.Hour)}},
		{state.CmdCancelMigrations, &state.CancelMigrations{Now: t0, Jobs: []uint64{1, 2}, By: "alice"}},
		{state.CmdNodeDrain, &state.NodeDrain{Now: t0, Node: "n1", Drain: true, Reason: "x", Migrate: true}},
		{state.CmdApplyPlan, &state.ApplyPlan{Now: t0, Migrations: []state.PlanMigration{{JobID: 1, From: "n1", To: "n2", Cause: "drain", Token: "t", CPUs: 1, MemMB: 512}},
			DrainNotes: []state.PlanDrainNote{{Node: "n1", Note: "stays"}}}},
	} {
		data, err := state.Encode(c.t, c.p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0})
	f.Add([]byte{255, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		ct, cmd, err := state.Decode(data)
		if err != nil {
			return // the FSM stops loudly on these, by design
		}
		fsm := fuzzState(t)
		fsm.mu.Lock()
		fsm.state.Apply(21, ct, cmd)
		fsm.state.TakeTouched()
		fsm.mu.Unlock()
		passAndApply(t, fsm, t0.Add(time.Minute), 22)
		roundTrip(t, fsm)
	})
}

// FuzzReadSnapshot restores arbitrary snapshot bytes; what reads back must
// survive a scheduling pass and a round trip of its own.
func FuzzReadSnapshot(f *testing.F) {
	snap, err := fuzzState(f).Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.(*fsmSnapshot).snap.Write(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"format":1,"index":3,"next_job_id":2}` + "\n" + `{"job":{"id":1,"state":"PENDING","spec":{"ntasks":-1}}}`))
	f.Add([]byte(`{"format":99}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := state.ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		fsm := NewFSM(quietLog())
		fsm.state = s
		passAndApply(t, fsm, t0.Add(time.Minute), s.Index+1)
		roundTrip(t, fsm)
	})
}

// FuzzDecodeRequest decodes arbitrary bodies as each API request type,
// as the handlers do.
func FuzzDecodeRequest(f *testing.F) {
	targets := []func() any{
		func() any { return &api.SubmitRequest{} }, func() any { return &api.CancelRequest{} },
		func() any { return &api.HoldRequest{} }, func() any { return &api.SuspendRequest{} },
		func() any { return &api.NodeInfo{} }, func() any { return &api.NodeStatus{} },
		func() any { return &api.DrainRequest{} }, func() any { return &state.SetMember{} },
		func() any { return &api.ConfigRequest{} }, func() any { return &api.QOSRequest{} },
		func() any { return &api.AccountRequest{} }, func() any { return &api.UserRequest{} },
		func() any { return &api.UpdateJobRequest{} }, func() any { return &api.TokenRequest{} },
		func() any { return &api.RoleRequest{} }, func() any { return &api.MigrateRequest{} },
	}
	for i, body := range []string{
		`{"jobs":[{"name":"a","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1}]}`,
		`{"filter":{"ids":[1,2]},"by":"u"}`, `{"ids":[1],"hold":true}`, `{"ids":[1],"suspend":true}`,
		`{"name":"n1","cpus":2,"mem_mb":1024,"runner":"process","boot_id":"b"}`,
		`{"name":"n1","boot_id":"b","reports":[{"job_id":1,"start_index":2,"state":"COMPLETED","exit_code":0}]}`,
		`{"node":"n1","drain":true,"reason":"x"}`, `{"id":"c1","http_addr":"127.0.0.1:1"}`,
		`{"settings":[["PriorityWeightAge","1"]]}`, `{"qos":{"name":"q"}}`, `{"account":{"name":"a"}}`,
		`{"user":{"account":"a","name":"u"}}`, `{"id":1,"dependency":"afterok:2"}`,
		`{"user":"u","role":"coordinator","account":"a","ops":["read"],"expires_in":3600}`,
		`{"grant":{"user":"u","role":"operator"}}`,
		`{"ids":[1],"to":"n2","cancel":false}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		v := targets[int(which)%len(targets)]()
		r := httptest.NewRequest("POST", "/v1/x", bytes.NewReader(body))
		_ = decode(r, v)
	})
}

// FuzzSubmitToPass follows a submission body the whole way: decoded as the
// API decodes it, admitted (defaults and every check), committed, then
// scheduled on a cluster with an inventory node and its plan applied. What
// the controller admits, the pass must handle: no admitted job may end up
// InvalidJob, and nothing may panic.
func FuzzSubmitToPass(f *testing.F) {
	for _, body := range []string{
		`{"jobs":[{"name":"a","user":"u","script":"#!/bin/sh\ntrue\n","ntasks":1,"cpus_per_task":1}]}`,
		`{"jobs":[{"name":"g","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":2,"gres":[{"name":"gpu","count":-5}]}]}`,
		`{"jobs":[{"name":"o","user":"u","script":"#!/bin/sh\n","ntasks":4611686018427387904,"cpus_per_task":2}]}`,
		`{"jobs":[{"name":"r","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"array":{"raw":"0-1099511627776,1-2","ranges":[{"first":0,"last":1099511627776,"step":1},{"first":1,"last":2,"step":1}]}}]}`,
		`{"jobs":[{"name":"h","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"hugepages":[{"size_kb":2048,"count":-3}],"numa":"strict"}]}`,
		`{"jobs":[{"name":"d","user":"u","script":"#!/bin/sh\n","ntasks":2,"cpus_per_task":1,"mem_per_cpu_mb":100,"time_limit_s":60,"nice":5,"dependency":{"raw":"afterok:1","clauses":[{"type":"afterok","job_ids":["1"]}]}}]}`,
		`{"jobs":[{"name":"v","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"gres":[{"name":"vf","count":1}]},{"name":"w","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1,"hold":true}]}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		req, err := decodeSubmit(r)
		if err != nil || len(req.Jobs) == 0 || len(req.Jobs) > 16 {
			return
		}
		fsm := fuzzState(t)
		c := fuzzController(fsm)
		now := t0.Add(time.Minute)
		specs, err := c.admitJobs(req.Jobs, now)
		if err != nil {
			return
		}
		first := c.nextJobID
		fsm.mu.Lock()
		fsm.state.Apply(21, state.CmdSubmitJobs, &state.SubmitJobs{Now: now, FirstID: first, Jobs: specs})
		fsm.state.TakeTouched()
		fsm.mu.Unlock()
		passAndApply(t, fsm, now, 22)
		fsm.Read(func(s *state.State) {
			for id := first; id < first+uint64(len(req.Jobs)); id++ {
				if j := s.Jobs[id]; j != nil && j.Reason == api.ReasonInvalidJob {
					t.Fatalf("job %d was admitted but the pass cannot handle it: %s (spec %+v)", id, j.Message, j.Spec)
				}
			}
		})
		roundTrip(t, fsm)
	})
}
