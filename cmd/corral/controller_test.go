package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/display"
)

// fields splits out into lines of whitespace-separated fields.
func fields(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows = append(rows, f)
		}
	}
	return rows
}

// mustRun runs argv and fails the test unless it exits 0.
func mustRun(t *testing.T, ctx context.Context, addr string, argv ...string) string {
	t.Helper()
	r := runCLI(t, ctx, addr, argv...)
	if r.code != 0 {
		t.Fatalf("%s: exit %d, stderr %q", strings.Join(argv, " "), r.code, r.stderr)
	}
	return r.stdout
}

// TestDispatchAgainstController runs the CLI's commands, under their corral
// and Slurm names, against a controller in this process. No node daemon
// runs jobs: submitted jobs stay pending until a node is registered by hand.
func TestDispatchAgainstController(t *testing.T) {
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}, {Name: "debug", MaxTime: 1800}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := api.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n#SBATCH -J scripted\n#SBATCH --mem=64M\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	out := mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", "first", "--wrap", "true")
	first, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("sbatch --parsable printed %q", out)
	}
	out = mustRun(t, ctx, addr, "corral", "submit", script)
	var second uint64
	if n, _ := fmt.Sscanf(out, "Submitted batch job %d\n", &second); n != 1 {
		t.Fatalf("submit printed %q, want Submitted batch job N", out)
	}
	f := &ctlFixture{ctx: ctx, addr: addr, cl: cl, first: first, second: second,
		names: map[uint64]string{first: "first", second: "scripted"}}
	t.Run("queue", func(t *testing.T) { testQueueCommands(t, f) })
	t.Run("squeue forms", func(t *testing.T) { testQueueForms(t, f) })
	t.Run("format variables", func(t *testing.T) { testFormatEnv(t, f) })
	t.Run("jobs", func(t *testing.T) { testJobCommands(t, f) })
	// A node registered by hand (nothing heartbeats, the controller's node
	// timeout is a minute).
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 1024, Partitions: []string{"batch"}, Runner: "test", BootID: "b1", TmpMB: 2048}); err != nil {
		t.Fatal(err)
	}
	t.Run("nodes", func(t *testing.T) { testNodeCommands(t, f) })
	t.Run("node features", func(t *testing.T) { testNodeFeatures(t, f) })
	t.Run("sinfo forms", func(t *testing.T) { testNodeForms(t, f) })
	t.Run("squeue -r", func(t *testing.T) { testQueueArray(t, f) })
	t.Run("reservations", func(t *testing.T) { testReservations(t, f) })
}

// ctlFixture is the controller TestDispatchAgainstController runs against
// and the two pending jobs it submitted.
type ctlFixture struct {
	ctx           context.Context
	addr          string
	cl            *api.Client
	first, second uint64
	names         map[uint64]string // job id -> name
}

func idStr(id uint64) string { return strconv.FormatUint(id, 10) }

func testQueueCommands(t *testing.T, f *ctlFixture) {
	ctx, addr, first, second, ids := f.ctx, f.addr, f.first, f.second, f.names
	t.Run("squeue lists both", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "squeue", "-h", "-o", "%i %j %u %T %P"))
		if len(rows) != 2 {
			t.Fatalf("rows %v, want the 2 jobs", rows)
		}
		for _, r := range rows {
			id, _ := strconv.ParseUint(r[0], 10, 64)
			if ids[id] != r[1] || r[2] != "tester" || r[3] != "PENDING" || r[4] != "batch" {
				t.Errorf("row %v, want id name tester PENDING batch for %v", r, ids)
			}
		}
	})
	t.Run("squeue filters", func(t *testing.T) {
		cases := map[string]struct {
			args []string
			want int
		}{
			"-u tester":                        {[]string{"-u", "tester"}, 2},
			"-u nobody":                        {[]string{"-u", "nobody"}, 0},
			"-j first":                         {[]string{"-j", idStr(first)}, 1},
			"job id argument":                  {[]string{idStr(second)}, 1},
			"a task of a job that is no array": {[]string{idStr(second) + "_0"}, 0},
			"-n scripted":                      {[]string{"-n", "scripted"}, 1},
			"-p debug":                         {[]string{"-p", "debug"}, 0},
			"-t PD":                            {[]string{"-t", "PD"}, 2},
			"-t R":                             {[]string{"-t", "R"}, 0},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				rows := fields(mustRun(t, ctx, addr, append([]string{"squeue"}, tc.args...)...))
				if len(rows) != tc.want+1 || rows[0][0] != "JOBID" {
					t.Fatalf("squeue %v: %v, want a header and %d rows", tc.args, rows, tc.want)
				}
			})
		}
	})
	t.Run("squeue --json", func(t *testing.T) {
		var doc display.JSONQueue
		if err := json.Unmarshal([]byte(mustRun(t, ctx, addr, "squeue", "-t", "all", "--json")), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Jobs) != 2 {
			t.Fatalf("jobs %+v, want 2", doc.Jobs)
		}
		for _, j := range doc.Jobs {
			if ids[j.JobID] != j.Name || j.State != "PENDING" || j.User != "tester" {
				t.Errorf("job %+v", j)
			}
		}
	})
	t.Run("squeue bad format", func(t *testing.T) {
		r := runCLI(t, ctx, addr, "squeue", "-o", "%i %!")
		if r.code != 1 || !strings.Contains(r.stderr, "--format") || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and a --format error", r.code, r.stdout, r.stderr)
		}
	})
}

func testJobCommands(t *testing.T, f *ctlFixture) {
	ctx, addr, cl, first, second := f.ctx, f.addr, f.cl, f.first, f.second
	t.Run("scontrol show job", func(t *testing.T) {
		out := mustRun(t, ctx, addr, "scontrol", "show", "JOB", idStr(second))
		for _, want := range []string{"JobId=" + idStr(second) + " JobName=scripted", "UserId=tester", "JobState=PENDING", "MinMemoryNode=64M"} {
			if !strings.Contains(out, want) {
				t.Errorf("show job does not hold %q:\n%s", want, out)
			}
		}
		r := runCLI(t, ctx, addr, "scontrol", "show", "job", "99999")
		if r.code != 1 || !strings.Contains(r.stderr, "scontrol: error:") {
			t.Errorf("show job of no job: exit %d, stderr %q; want 1", r.code, r.stderr)
		}
		var doc struct{ Jobs []api.Job }
		if err := json.Unmarshal([]byte(mustRun(t, ctx, addr, "corral", "show", "job", "--json")), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Jobs) != 2 {
			t.Errorf("show job --json: %d jobs, want 2", len(doc.Jobs))
		}
	})
	t.Run("scontrol hold and release", func(t *testing.T) {
		reason := func() string {
			return strings.TrimSpace(mustRun(t, ctx, addr, "squeue", "-h", "-j", idStr(first), "-o", "%r"))
		}
		mustRun(t, ctx, addr, "scontrol", "hold", idStr(first))
		if got := reason(); got != string(api.ReasonJobHeldUser) {
			t.Fatalf("held job's reason %q, want JobHeldUser", got)
		}
		mustRun(t, ctx, addr, "scontrol", "release", idStr(first))
		if got := reason(); got == string(api.ReasonJobHeldUser) {
			t.Fatalf("released job's reason is still %q", got)
		}
		r := runCLI(t, ctx, addr, "scontrol", "hold", "99999")
		if r.code != 1 || !strings.Contains(r.stderr, "scontrol: error:") {
			t.Fatalf("hold of no job: exit %d, stderr %q; want 1 and an error", r.code, r.stderr)
		}
	})
	t.Run("scancel", func(t *testing.T) {
		r := runCLI(t, ctx, addr, "scancel", "99999")
		if r.code != 1 || !strings.Contains(r.stderr, "scancel: error: Kill job error on job id 99999") {
			t.Fatalf("cancel of no job: exit %d, stderr %q", r.code, r.stderr)
		}
		out := mustRun(t, ctx, addr, "scancel", "-v", idStr(first))
		if out != "scancel: Terminating job "+idStr(first)+"\n" {
			t.Fatalf("scancel -v printed %q", out)
		}
		rows := fields(mustRun(t, ctx, addr, "squeue", "-h", "-t", "CA", "-o", "%i %T"))
		if len(rows) != 1 || rows[0][0] != idStr(first) || rows[0][1] != "CANCELLED" {
			t.Fatalf("cancelled jobs %v, want only %d", rows, first)
		}
	})
	t.Run("submit --wait ends with the job", func(t *testing.T) {
		done := make(chan result, 1)
		go func() { done <- runCLI(t, ctx, addr, "corral", "submit", "--wait", "-J", "waiter", "--wrap", "true") }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			jobs, err := cl.Jobs(ctx, api.JobFilter{Names: []string{"waiter"}}, false)
			if err == nil && len(jobs) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the waiting submission did not arrive: %v %v", jobs, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		select {
		case r := <-done:
			t.Fatalf("submit --wait returned before its job ended: %+v", r)
		case <-time.After(200 * time.Millisecond):
		}
		mustRun(t, ctx, addr, "scancel", "-n", "waiter")
		select {
		case r := <-done:
			if r.code != 1 || !strings.HasPrefix(r.stdout, "Submitted batch job ") {
				t.Fatalf("submit --wait of a cancelled job: exit %d, stdout %q, stderr %q; want 1", r.code, r.stdout, r.stderr)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("submit --wait did not return after its job was cancelled")
		}
	})
	t.Run("scancel by user", func(t *testing.T) {
		mustRun(t, ctx, addr, "scancel", "-u", "tester")
		if rows := fields(mustRun(t, ctx, addr, "squeue", "-h")); len(rows) != 0 {
			t.Fatalf("jobs left after scancel -u tester: %v", rows)
		}
	})

}

func testNodeCommands(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	t.Run("sinfo", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "sinfo"))
		want := [][]string{
			{"PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"},
			{"batch*", "up", "infinite", "1", "idle", "n1"},
			{"debug", "up", "30:00", "0", "n/a"},
		}
		if !equalRows(rows, want) {
			t.Fatalf("sinfo:\n%v\nwant\n%v", rows, want)
		}
	})
	t.Run("sinfo -p shows only the partitions asked for", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "sinfo", "-p", "debug"))
		want := [][]string{{"PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"}, {"debug", "up", "30:00", "0", "n/a"}}
		if !equalRows(rows, want) {
			t.Errorf("sinfo -p debug:\n%v\nwant\n%v", rows, want)
		}
		rows = fields(mustRun(t, ctx, addr, "sinfo", "-h", "-N", "-p", "debug"))
		if len(rows) != 0 {
			t.Errorf("sinfo -N -p debug lists %v, want no node", rows)
		}
		rows = fields(mustRun(t, ctx, addr, "sinfo", "-h", "-p", "batch"))
		if want := [][]string{{"batch*", "up", "infinite", "1", "idle", "n1"}}; !equalRows(rows, want) {
			t.Errorf("sinfo -h -p batch:\n%v\nwant\n%v", rows, want)
		}
		var doc struct {
			Nodes      []api.Node
			Partitions []api.Partition
		}
		if err := json.Unmarshal([]byte(mustRun(t, ctx, addr, "sinfo", "--json", "-p", "debug")), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Nodes) != 0 || len(doc.Partitions) != 1 || doc.Partitions[0].Name != "debug" {
			t.Errorf("sinfo --json -p debug: %+v, want the debug partition and no node", doc)
		}
	})
	t.Run("node drain and resume", func(t *testing.T) {
		mustRun(t, ctx, addr, "corral", "node", "drain", "n1", "--reason", "maint")
		rows := fields(mustRun(t, ctx, addr, "sinfo", "-N", "-l", "-h"))
		if len(rows) != 1 || rows[0][0] != "n1" || rows[0][3] != "drained" || len(rows[0]) < 11 || rows[0][10] != "maint" {
			t.Errorf("sinfo -N -l of a drained node: %v", rows)
		}
		out := mustRun(t, ctx, addr, "scontrol", "show", "Node", "n1")
		for _, want := range []string{"NodeName=n1", "State=IDLE+DRAIN", "Reason=maint", "CPUTot=2"} {
			if !strings.Contains(out, want) {
				t.Errorf("show node does not hold %q:\n%s", want, out)
			}
		}
		var doc struct{ Nodes []api.Node }
		if err := json.Unmarshal([]byte(mustRun(t, ctx, addr, "corral", "show", "node", "n1", "--json")), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Nodes) != 1 || !doc.Nodes[0].Drain || doc.Nodes[0].Reason != "maint" || doc.Nodes[0].MemMB != 1024 {
			t.Errorf("show node --json: %+v", doc.Nodes)
		}
		mustRun(t, ctx, addr, "corral", "node", "resume", "n1")
		if rows := fields(mustRun(t, ctx, addr, "sinfo", "-N", "-h")); len(rows) != 1 || rows[0][3] != "idle" {
			t.Errorf("sinfo -N after resume: %v, want n1 idle", rows)
		}
		if r := runCLI(t, ctx, addr, "corral", "node", "drain", "n1"); r.code != 1 || !strings.Contains(r.stderr, "--reason") {
			t.Errorf("drain without a reason: exit %d, stderr %q; want 1 asking for --reason", r.code, r.stderr)
		}
		if r := runCLI(t, ctx, addr, "corral", "node", "drain", "nosuch", "--reason", "x"); r.code != 1 || r.stderr == "" {
			t.Errorf("drain of no node: exit %d, stderr %q; want 1", r.code, r.stderr)
		}
		if r := runCLI(t, ctx, addr, "corral", "show", "node", "nosuch"); r.code != 1 || r.stderr == "" {
			t.Errorf("show of no node: exit %d, stderr %q; want 1", r.code, r.stderr)
		}
	})
	t.Run("status", func(t *testing.T) {
		out := mustRun(t, ctx, addr, "corral", "status")
		for _, want := range []string{"Member: c1 (Leader)", "Leader: c1", "commit=", "applied=", "Nodes:  1 (idle 1)"} {
			if !strings.Contains(out, want) {
				t.Errorf("status does not hold %q:\n%s", want, out)
			}
		}
		var st api.ClusterStatus
		if err := json.Unmarshal([]byte(mustRun(t, ctx, addr, "corral", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Leader != "c1" || len(st.Members) != 1 || !st.Members[0].Leader || st.CommitIndex == 0 || st.AppliedIndex == 0 {
			t.Errorf("status --json: %+v", st)
		}
	})
	t.Run("scontrol ping", func(t *testing.T) {
		if out := mustRun(t, ctx, addr, "scontrol", "ping"); out != "Slurmctld(primary) at c1 is UP\n" {
			t.Errorf("scontrol ping printed %q", out)
		}
	})
	t.Run("scontrol show config", func(t *testing.T) {
		if out := mustRun(t, ctx, addr, "scontrol", "show", "config"); !strings.Contains(out, "PriorityWeightAge") {
			t.Errorf("scontrol show config printed %q", out)
		}
	})
	t.Run("scontrol requeue and requeuehold", func(t *testing.T) { testRequeue(t, f) })
	t.Run("scontrol update JobId", func(t *testing.T) { testUpdateJob(t, f) })
	t.Run("licenses", func(t *testing.T) { testLicenses(t, f) })
	t.Run("scratch space", func(t *testing.T) { testScratch(t, f) })
	t.Run("sbatch option fates", func(t *testing.T) {
		r := runCLI(t, ctx, addr, "sbatch", "--cpu-freq=high", "--gpu-freq=high", "-s", "--mail-type=END", "-H", "--wrap", "true")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Submitted batch job ") ||
			r.stderr != "sbatch: warning: --cpu-freq: a job's CPUs are a VM's virtual CPUs, whose frequency the job cannot set\n"+
				"sbatch: warning: --gpu-freq: a job's GPUs are passed through to its VM, which may not set their clocks\n"+
				"sbatch: warning: --oversubscribe: every partition is OverSubscribe=NO (scontrol show partition), which Slurm lets override the job's option: the job gets its CPUs to itself\n" {
			t.Errorf("sbatch with warned options: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if r := runCLI(t, ctx, addr, "sbatch", "-Q", "--cpu-freq=high", "-H", "--wrap", "true"); r.code != 0 || r.stderr != "" {
			t.Errorf("sbatch -Q: exit %d, stderr %q; want no warning", r.code, r.stderr)
		}
		if r := runCLI(t, ctx, addr, "sbatch", "--reservation=maint", "--wrap", "true"); r.code != 1 || !strings.Contains(r.stderr, "Requested reservation is invalid: --reservation=maint does not exist") {
			t.Errorf("sbatch --reservation: exit %d, stderr %q", r.code, r.stderr)
		}
		if r := runCLI(t, ctx, addr, "sbatch", "-V"); r.code != 0 || !strings.HasPrefix(r.stdout, "corral ") {
			t.Errorf("sbatch -V: exit %d, stdout %q", r.code, r.stdout)
		}
		mustRun(t, ctx, addr, "scancel", "-u", "tester")
	})
	t.Run("sbatch --test-only", func(t *testing.T) {
		before, err := f.cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, ctx, addr, "sbatch", "--test-only", "-c", "2", "--wrap", "true")
		if r.code != 0 || r.stdout != "" || !strings.HasPrefix(r.stderr, "sbatch: Job ") ||
			!strings.HasSuffix(r.stderr, " using 2 processors on nodes n1 in partition batch\n") {
			t.Errorf("sbatch --test-only: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, ctx, addr, "sbatch", "--test-only", "-c", "3", "--wrap", "true")
		if r.code != 1 || !strings.Contains(r.stderr, "Requested node configuration is not available") {
			t.Errorf("sbatch --test-only of a job no node holds: exit %d, stderr %q", r.code, r.stderr)
		}
		after, err := f.cl.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.Jobs["PENDING"]+after.Jobs["RUNNING"] != before.Jobs["PENDING"]+before.Jobs["RUNNING"] {
			t.Errorf("test-only submissions stored jobs: %v → %v", before.Jobs, after.Jobs)
		}
	})
}

// testRequeue requeues a job running on the hand-registered node n1: it
// stops (COMPLETING) and is PENDING again once the node reports the run
// ended; requeuehold of a finished job holds it at once.
func testRequeue(t *testing.T, f *ctlFixture) {
	ctx, addr, cl := f.ctx, f.addr, f.cl
	id := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", "again", "--wrap", "true"))
	state := func() []string {
		return strings.Fields(mustRun(t, ctx, addr, "squeue", "-h", "-t", "all", "-j", id, "-o", "%T %r"))
	}
	waitFor(t, "the job to start on n1", func() bool { return state()[0] == "RUNNING" })
	job, err := cl.JobByRef(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, ctx, addr, "scontrol", "requeue", id)
	if got := state(); got[0] != "COMPLETING" {
		t.Fatalf("a requeued running job is %v, want COMPLETING until its node confirms", got)
	}
	if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "b1", Reports: []api.JobReport{
		{JobID: job.ID, StartIndex: job.StartIndex, State: api.StateCancelled}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the requeued job to run again", func() bool { return state()[0] == "RUNNING" })
	job2, err := cl.JobByRef(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	if job2.Restarts != 1 || job2.StartIndex == job.StartIndex {
		t.Errorf("after the requeue: restarts %d, start index %d (was %d); want 1 and a new run", job2.Restarts, job2.StartIndex, job.StartIndex)
	}
	if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "b1", Reports: []api.JobReport{
		{JobID: job2.ID, StartIndex: job2.StartIndex, State: api.StateCompleted}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to complete", func() bool { return state()[0] == "COMPLETED" })
	mustRun(t, ctx, addr, "scontrol", "requeuehold", id)
	if got := state(); len(got) != 2 || got[0] != "PENDING" || got[1] != string(api.ReasonJobHeldUser) {
		t.Errorf("requeuehold of a completed job: %v, want PENDING JobHeldUser", got)
	}
	r := runCLI(t, ctx, addr, "scontrol", "requeue", id)
	if r.code != 1 || !strings.Contains(r.stderr, "scontrol: error: job "+id+": is pending already") {
		t.Errorf("requeue of a pending job: exit %d, stderr %q", r.code, r.stderr)
	}
	mustRun(t, ctx, addr, "scancel", id)
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], " ") != strings.Join(b[i], " ") {
			return false
		}
	}
	return true
}

// testUpdateJob changes a pending job's fields with scontrol update, as
// users type it: a time limit, +T on it, a name, a comment and memory in
// one request; unknown keys and a refused change say what is wrong.
func testUpdateJob(t *testing.T, f *ctlFixture) {
	ctx, addr, cl := f.ctx, f.addr, f.cl
	id := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-H", "-t", "2:00:00", "--wrap", "true"))
	mustRun(t, ctx, addr, "scontrol", "update", "JobId="+id, "TimeLimit=1:00:00", "JobName=renamed", "Comment=hello", "MinMemoryNode=128M", "MinTmpDiskNode=1G")
	mustRun(t, ctx, addr, "corral", "update", id, "TimeLimit=-30")
	j, err := cl.JobByRef(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if s := j.Spec; s.TimeLimit != 1800 || s.Name != "renamed" || s.Comment != "hello" || s.MemPerNode != 128 || s.TmpMB != 1024 {
		t.Errorf("after scontrol update: limit %d, name %q, comment %q, memory %d, scratch space %d", s.TimeLimit, s.Name, s.Comment, s.MemPerNode, s.TmpMB)
	}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"scontrol", "update", "JobId=" + id, "Colour=red"}, "Colour is not a job field update can change"},
		{[]string{"scontrol", "update", "JobId=" + id, "NumCPUs=64"}, "Requested node configuration is not available"},
		{[]string{"scontrol", "update", "JobId=" + id, "TimeLimit=soon"}, "TimeLimit"},
		{[]string{"scontrol", "update", "JobId=" + id, "Nice=x"}, "Nice=x is not a whole number"},
		{[]string{"scontrol", "update", "JobId=" + id, "MinTmpDiskNode=4X"}, `MinTmpDiskNode=4X: unknown unit "X"`},
		{[]string{"scontrol", "update", "JobId=" + id, "MinTmpDiskNode=3G"}, "the job asks for 3072 MiB of scratch space (--tmp); the largest node of partition batch (n1) has 2048 MiB"},
		{[]string{"scontrol", "update", "JobId=" + id, "TimeLimit=+1:00:00"}, "scontrol: error: job " + id + ": TimeLimit=1h30m0s raises its limit of 30m0s"},
	} {
		if r := runCLI(t, ctx, addr, tc.argv...); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a refusal saying %q", strings.Join(tc.argv, " "), r.code, r.stderr, tc.want)
		}
	}
	mustRun(t, ctx, addr, "scancel", id)
}

// testLicenses gives the cluster licenses and runs jobs that ask for them:
// one starts, the next waits with reason Licenses while it holds them,
// scontrol show lic counts them, and requests the cluster cannot meet are
// refused in Slurm's words.
func testLicenses(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	mustRun(t, ctx, addr, "corral", "config", "set", "Licenses=matlab:3,fluent")
	defer mustRun(t, ctx, addr, "corral", "config", "set", "Licenses=none")
	first := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-L", "matlab:2", "--wrap", "true"))
	second := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "-L", "matlab:2", "--wrap", "true"))
	defer cancelOnN1(t, f, first, second)
	state := func(id string) string {
		return strings.TrimSpace(mustRun(t, ctx, addr, "squeue", "-h", "-j", id, "-o", "%T %r"))
	}
	waitFor(t, "the first licensed job to start", func() bool { return strings.HasPrefix(state(first), "RUNNING") })
	waitFor(t, "the second to wait for licenses", func() bool { return state(second) == "PENDING Licenses" })
	want := "LicenseName=fluent\n    Total=1 Used=0 Free=1 Reserved=0 Remote=no\nLicenseName=matlab\n    Total=3 Used=2 Free=1 Reserved=0 Remote=no\n"
	if out := mustRun(t, ctx, addr, "scontrol", "show", "lic"); out != want {
		t.Errorf("scontrol show lic printed %q, want %q", out, want)
	}
	if out := mustRun(t, ctx, addr, "scontrol", "show", "job", first); !strings.Contains(out, "Licenses=matlab:2") {
		t.Errorf("scontrol show job does not show the job's licenses:\n%s", out)
	}
	for _, tc := range []struct{ lic, want string }{
		{"matlab:4", "Invalid license specification: 4 of license matlab asked for; the cluster has 3 in all"},
		{"ansys", "Invalid license specification: the cluster has no license ansys (it has fluent:1,matlab:3)"},
		{"matlab|fluent", `does not take "|"`},
	} {
		if r := runCLI(t, ctx, addr, "sbatch", "-L", tc.lic, "--wrap", "true"); r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sbatch -L %s: exit %d, stderr %q; want %q", tc.lic, r.code, r.stderr, tc.want)
		}
	}
}

// testScratch: sbatch --tmp holds node n1's scratch space (2048 MiB), a
// second job waits for it, and scontrol shows both sides; a request larger
// than any node's is refused at submit, naming --tmp.
func testScratch(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	first := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "--tmp=1536", "--wrap", "true"))
	second := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "--tmp=1G", "--wrap", "true"))
	defer cancelOnN1(t, f, first, second)
	state := func(id string) string {
		return strings.TrimSpace(mustRun(t, ctx, addr, "squeue", "-h", "-j", id, "-o", "%T %r %d"))
	}
	waitFor(t, "the first job to start", func() bool { return state(first) == "RUNNING None 1.50G" })
	waitFor(t, "the second to wait for scratch space", func() bool { return state(second) == "PENDING Resources 1G" })
	if out := mustRun(t, ctx, addr, "scontrol", "show", "job", second); !strings.Contains(out, "MinTmpDiskNode=1G") {
		t.Errorf("scontrol show job does not show the job's --tmp:\n%s", out)
	}
	if out := mustRun(t, ctx, addr, "scontrol", "show", "node", "n1"); !strings.Contains(out, " TmpDisk=2048 ") {
		t.Errorf("scontrol show node does not show n1's scratch space:\n%s", out)
	}
	want := "Requested node configuration is not available: the job asks for 3072 MiB of scratch space (--tmp); the largest node of partition batch (n1) has 2048 MiB"
	if r := runCLI(t, ctx, addr, "sbatch", "--tmp=3G", "--wrap", "true"); r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("sbatch --tmp=3G: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
}

// cancelOnN1 cancels jobs and, as the hand-registered node n1 has no
// daemon, reports the runs of those that ran there ended, so that n1 is
// idle again for the tests after.
func cancelOnN1(t *testing.T, f *ctlFixture, ids ...string) {
	t.Helper()
	mustRun(t, f.ctx, f.addr, append([]string{"scancel"}, ids...)...)
	for _, id := range ids {
		j, err := f.cl.JobByRef(f.ctx, id, true)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.StateCompleting {
			continue
		}
		if err := f.cl.Report(f.ctx, api.NodeStatus{Name: "n1", BootID: "b1", Reports: []api.JobReport{
			{JobID: j.ID, StartIndex: j.StartIndex, State: api.StateCancelled}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "n1 to be idle", func() bool {
		n, err := f.cl.Node(f.ctx, "n1")
		return err == nil && n.AllocCPUs == 0
	})
}

// waitFor polls cond for up to 15 s and fails the test, naming what it
// waited for, when it never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
