package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// sacctLines runs sacct (the alias) with -P -n and splits its lines into
// fields.
func sacctLines(t *testing.T, sacct string, c *cluster, work string, args ...string) [][]string {
	t.Helper()
	out := mustCLI(t, sacct, c.addr, work, append([]string{"-P", "-n"}, args...)...)
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l != "" {
			rows = append(rows, strings.Split(l, "|"))
		}
	}
	return rows
}

// testSacctTenants runs jobs of two tenants (phys: alice, bio: bob) that
// complete, fail, are preempted and requeued by the other tenant's job,
// and are preempted and cancelled, under billing weights; sacct then shows
// each run with its user, account, tenant, state, exit code, times,
// allocated TRES and billing, in -P with -D and -X, in windows (-S/-E),
// in --json's layout and in the invocation Open XDMoD's shredder runs.
// It returns the jobs' ids.
func testSacctTenants(t *testing.T, c *cluster, work, sacct string) []uint64 {
	cl := c.client(t)
	ctx := context.Background()
	began := time.Now().Add(-time.Second)
	for _, a := range []api.Account{{Name: "phys", Shares: 1}, {Name: "bio", Shares: 1}} {
		if err := cl.PutAccount(ctx, api.AccountRequest{Account: a}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []api.AccountUser{{Name: "alice", Account: "phys", Shares: 1}, {Name: "bob", Account: "bio", Shares: 1}} {
		if err := cl.PutUser(ctx, api.UserRequest{User: u}); err != nil {
			t.Fatal(err)
		}
	}
	// Billing per second: 1 a CPU and 0.25 a GiB; a 1-CPU 512 MiB run
	// bills 1.125 a second.
	mustCLI(t, corralBin, c.addr, work, "config", "set", "TRESBillingWeights=CPU=1.0,Mem=0.25G")

	ok := submitAs(t, c, work, "alice", "-o", "/dev/null", "-J", "a-ok", "-A", "phys", "-c", "1", "--mem", "512M", "--wrap", "sleep 1")
	fail := submitAs(t, c, work, "bob", "-o", "/dev/null", "-J", "b-fail", "-A", "bio", "-c", "1", "--mem", "512M", "--wrap", "exit 2")
	waitJob(t, cl, ok, api.StateCompleted, 20*time.Second)
	waitJob(t, cl, fail, api.StateFailed, 20*time.Second)

	// bio's guaranteed job takes the whole node from phys's besteffort
	// one, which is requeued, runs again and completes.
	setBesteffort(t, cl, api.PreemptRequeue)
	requeued := submitAs(t, c, work, "alice", "-o", "/dev/null", "-J", "a-requeued", "-A", "phys", "--qos", "besteffort", "-c", "4", "--mem", "256M", "--wrap", "sleep 1.5")
	waitJob(t, cl, requeued, api.StateRunning, 20*time.Second)
	boss := submitAs(t, c, work, "bob", "-o", "/dev/null", "-J", "b-boss", "-A", "bio", "--qos", "guaranteed", "-c", "4", "--mem", "256M", "--wrap", "sleep 0.5")
	waitJob(t, cl, boss, api.StateCompleted, 20*time.Second)
	waitJob(t, cl, requeued, api.StateCompleted, 30*time.Second)

	// Then one preempted for good (the cancel mode).
	setBesteffort(t, cl, api.PreemptCancel)
	preempted := submitAs(t, c, work, "alice", "-o", "/dev/null", "-J", "a-preempted", "-A", "phys", "--qos", "besteffort", "-c", "4", "--mem", "256M", "--wrap", "sleep 30")
	waitJob(t, cl, preempted, api.StateRunning, 20*time.Second)
	boss2 := submitAs(t, c, work, "bob", "-o", "/dev/null", "-J", "b-boss2", "-A", "bio", "--qos", "guaranteed", "-c", "4", "--mem", "256M", "--wrap", "true")
	waitJob(t, cl, preempted, api.StatePreempted, 20*time.Second)
	waitJob(t, cl, boss2, api.StateCompleted, 20*time.Second)

	ids := fmt.Sprintf("%d,%d,%d,%d,%d,%d", ok, fail, requeued, boss, preempted, boss2)
	type run = acctRun
	want := map[uint64][]run{
		ok:        {{"alice", "phys", "COMPLETED", "0:0"}},
		fail:      {{"bob", "bio", "FAILED", "2:0"}},
		requeued:  {{"alice", "phys", "REQUEUED", "0:0"}, {"alice", "phys", "COMPLETED", "0:0"}},
		boss:      {{"bob", "bio", "COMPLETED", "0:0"}},
		preempted: {{"alice", "phys", "PREEMPTED", "0:15"}}, // stopped with SIGTERM
		boss2:     {{"bob", "bio", "COMPLETED", "0:0"}},
	}
	format := "JobIDRaw,User,Account,State,ExitCode,Start,End,ElapsedRaw,AllocTRES,Restarts"
	var rows [][]string
	eventually(t, 10*time.Second, func() string {
		rows = sacctLines(t, sacct, c, work, "-a", "-D", "-X", "-S", "now-1hours", "-j", ids, "-o", format)
		if len(rows) != 7 {
			return fmt.Sprintf("sacct -D -X printed %d runs, want 7: %v", len(rows), rows)
		}
		return ""
	})
	seen := map[uint64]int{}
	for _, r := range rows {
		id := mustID(t, r[0])
		runs := want[id]
		if len(r) != 10 || seen[id] >= len(runs) {
			t.Errorf("unexpected run %v", r)
			continue
		}
		w := runs[seen[id]]
		seen[id]++
		if r[1] != w.user || r[2] != w.account || r[3] != w.state || r[4] != w.exit {
			t.Errorf("job %d: user %s account %s state %s exit %s; want %+v", id, r[1], r[2], r[3], r[4], w)
		}
		start, err1 := time.ParseInLocation("2006-01-02T15:04:05", r[5], time.Local)
		end, err2 := time.ParseInLocation("2006-01-02T15:04:05", r[6], time.Local)
		if err1 != nil || err2 != nil || start.Before(began.Truncate(time.Second)) || end.Before(start) || time.Since(end) > 5*time.Minute {
			t.Errorf("job %d: start %q, end %q", id, r[5], r[6])
		}
		if el := end.Sub(start).Seconds(); math.Abs(el-float64(mustInt(t, r[7]))) > 1 {
			t.Errorf("job %d: ElapsedRaw %s for a run from %s to %s", id, r[7], r[5], r[6])
		}
		cpus := map[uint64]string{ok: "cpu=1", fail: "cpu=1"}[id]
		if cpus == "" {
			cpus = "cpu=4"
		}
		if !strings.Contains(r[8], cpus) || !strings.Contains(r[8], "node=1") || !strings.Contains(r[8], "billing=") {
			t.Errorf("job %d: AllocTRES %q, want %s, node=1 and billing", id, r[8], cpus)
		}
	}
	checkRequeueCounts(t, rows, requeued)
	checkAcctJSON(t, sacct, c, work, ok, fail, preempted)
	checkAcctWindows(t, sacct, c, work, ids, ok, preempted)
	checkXDMoD(t, sacct, c, work, began, want)
	return []uint64{ok, fail, requeued, boss, preempted, boss2}
}

// acctRun is what sacct should show of a run: user, account, state and
// exit code.
type acctRun struct{ user, account, state, exit string }

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// checkRequeueCounts: the requeued job's first run shows no restart
// before it, its final run one.
func checkRequeueCounts(t *testing.T, rows [][]string, requeued uint64) {
	t.Helper()
	var restarts []string
	for _, r := range rows {
		if r[0] == idText(requeued) {
			restarts = append(restarts, r[9])
		}
	}
	if strings.Join(restarts, ",") != "0,1" {
		t.Errorf("the requeued job's runs show Restarts %v, want 0 then 1", restarts)
	}
}

// checkAcctJSON reads sacct --json: Slurm's layout (jobs, each with its
// state, exit code, times, TRES and a batch step) with the records'
// tenant and billing: the 1-CPU 512 MiB runs bill 1.125 a second.
func checkAcctJSON(t *testing.T, sacct string, c *cluster, work string, ok, fail, preempted uint64) {
	t.Helper()
	out := mustCLI(t, sacct, c.addr, work, "-a", "-S", "now-1hours", "--json", "-j", fmt.Sprintf("%d,%d,%d", ok, fail, preempted))
	var doc struct {
		Jobs []struct {
			JobID  uint64 `json:"job_id"`
			User   string `json:"user"`
			Tenant string `json:"tenant"`
			State  struct {
				Current []string `json:"current"`
			} `json:"state"`
			ExitCode struct {
				Status     []string `json:"status"`
				ReturnCode struct {
					Set    bool  `json:"set"`
					Number int64 `json:"number"`
				} `json:"return_code"`
				Signal struct {
					ID struct {
						Number int64 `json:"number"`
					} `json:"id"`
				} `json:"signal"`
			} `json:"exit_code"`
			Time struct {
				Start, End, Elapsed int64
			} `json:"time"`
			TRES struct {
				Allocated []struct {
					Type  string `json:"type"`
					Count int64  `json:"count"`
				} `json:"allocated"`
			} `json:"tres"`
			Billing float64 `json:"billing"`
			Steps   []struct {
				Step struct {
					ID string `json:"id"`
				} `json:"step"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Jobs) != 3 {
		t.Fatalf("sacct --json: %d jobs (%v) in %s", len(doc.Jobs), err, out)
	}
	want := map[uint64][4]string{ok: {"phys", "COMPLETED", "SUCCESS", "0"}, fail: {"bio", "FAILED", "ERROR", "2"}, preempted: {"phys", "PREEMPTED", "SIGNALED", "0"}}
	for _, j := range doc.Jobs {
		w := want[j.JobID]
		got := [4]string{j.Tenant, strings.Join(j.State.Current, ","), strings.Join(j.ExitCode.Status, ","), fmt.Sprint(j.ExitCode.ReturnCode.Number)}
		if got != w || !j.ExitCode.ReturnCode.Set || (j.JobID == preempted) != (j.ExitCode.Signal.ID.Number == 15) {
			t.Errorf("sacct --json job %d: tenant, state, exit status and code %v, want %v", j.JobID, got, w)
		}
		if j.Time.End < j.Time.Start || j.Time.Elapsed != j.Time.End-j.Time.Start && j.Time.Elapsed != j.Time.End-j.Time.Start-1 {
			t.Errorf("sacct --json job %d: times %+v", j.JobID, j.Time)
		}
		if len(j.Steps) != 1 || j.Steps[0].Step.ID != fmt.Sprintf("%d.batch", j.JobID) {
			t.Errorf("sacct --json job %d: steps %+v, want its batch step", j.JobID, j.Steps)
		}
		if j.JobID != preempted {
			if want := 1.125 * float64(j.Time.Elapsed); math.Abs(j.Billing-want) > 1e-9 {
				t.Errorf("sacct --json job %d: billing %v for %d s at 1.125/s, want %v", j.JobID, j.Billing, j.Time.Elapsed, want)
			}
			if len(j.TRES.Allocated) < 2 || j.TRES.Allocated[0].Type != "billing" || j.TRES.Allocated[0].Count != 1 || j.TRES.Allocated[1].Type != "cpu" {
				t.Errorf("sacct --json job %d: allocated TRES %+v, want billing=1 then cpu", j.JobID, j.TRES.Allocated)
			}
		}
	}
}

// checkAcctWindows: -S/-E select the runs that overlap the window; a
// window before or after every run selects none; -X leaves the .batch
// lines out, and -p ends each line with the separator.
func checkAcctWindows(t *testing.T, sacct string, c *cluster, work, ids string, ok, preempted uint64) {
	t.Helper()
	runs := sacctLines(t, sacct, c, work, "-a", "-X", "-S", "now-1hours", "-j", ids, "-o", "JobIDRaw,Start,End")
	ends := map[string]string{}
	for _, r := range runs {
		ends[r[0]] = r[2]
	}
	// Until alice's first job ended: that one, not the preempted job,
	// which started seconds later.
	got := sacctLines(t, sacct, c, work, "-a", "-X", "-S", "now-1hours", "-E", ends[idText(ok)], "-j", ids, "-o", "JobIDRaw")
	in := map[string]bool{}
	for _, r := range got {
		in[r[0]] = true
	}
	if !in[idText(ok)] || in[idText(preempted)] {
		t.Errorf("sacct -E %s (alice's first job's end) selected %v: want job %d, not %d", ends[idText(ok)], got, ok, preempted)
	}
	for _, w := range [][]string{{"-S", "now-3hours", "-E", "now-2hours"}, {"-S", "now+1hours"}} {
		if rows := sacctLines(t, sacct, c, work, append([]string{"-a", "-j", ids}, w...)...); len(rows) != 0 {
			t.Errorf("sacct %v selected %v, want nothing", w, rows)
		}
	}
	full := sacctLines(t, sacct, c, work, "-a", "-S", "now-1hours", "-j", idText(ok), "-o", "JobID,State")
	if len(full) != 2 || full[1][0] != idText(ok)+".batch" || full[1][1] != "COMPLETED" {
		t.Errorf("sacct without -X: %v, want the job line and its .batch line", full)
	}
	p := mustCLI(t, sacct, c.addr, work, "-a", "-p", "-S", "now-1hours", "-X", "-j", idText(ok), "-o", "JobID,State,ExitCode")
	if want := fmt.Sprintf("JobID|State|ExitCode|\n%d|COMPLETED|0:0|\n", ok); p != want {
		t.Errorf("sacct -p: %q, want %q", p, want)
	}
}

// checkXDMoD runs the sacct invocation of Open XDMoD's Slurm shredder
// (xdmod-slurm-helper) and splits its lines as the shredder does: 26
// fields, of which the job's ids, cluster, account, user, times, state,
// CPUs and TRES are checked; the states it asks for leave the requeued
// run out.
func checkXDMoD(t *testing.T, sacct string, c *cluster, work string, began time.Time, want map[uint64][]acctRun) {
	t.Helper()
	stamp := "2006-01-02T15:04:05"
	out := mustCLI(t, sacct, c.addr, work, "--clusters", "corral", "--allusers", "--parsable2", "--noheader", "--allocations", "--duplicates",
		"--format", "jobid,jobidraw,cluster,partition,qos,account,group,gid,user,uid,submit,eligible,start,end,elapsed,exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,alloctres,timelimit,nodelist,jobname",
		"--state", "CANCELLED,COMPLETED,FAILED,NODE_FAIL,PREEMPTED,TIMEOUT,OUT_OF_MEMORY",
		"--starttime", began.Format(stamp), "--endtime", time.Now().Add(time.Minute).Format(stamp))
	seen := map[uint64]int{}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 26 {
			t.Errorf("XDMoD line %q has %d fields, want 26", l, len(f))
			continue
		}
		id := mustID(t, f[1])
		runs, known := want[id]
		if !known {
			continue
		}
		for seen[id] < len(runs) && runs[seen[id]].state == "REQUEUED" {
			seen[id]++
		}
		if seen[id] >= len(runs) {
			t.Errorf("XDMoD line %q: more runs of job %d than expected", l, id)
			continue
		}
		w := runs[seen[id]]
		seen[id]++
		times := true
		for _, v := range f[10:14] {
			_, err := time.ParseInLocation(stamp, v, time.Local)
			times = times && err == nil
		}
		if f[0] != f[1] || f[2] != "corral" || f[5] != w.account || f[8] != w.user || f[15] != w.exit || f[16] != w.state ||
			!times || f[17] != "1" || mustInt(t, f[18]) < 1 || !strings.Contains(f[22], "billing=") || f[24] != "n1" || f[25] == "" {
			t.Errorf("XDMoD line %q, want %+v on n1", l, w)
		}
	}
	for id, runs := range want {
		n := 0
		for _, r := range runs {
			if r.state != "REQUEUED" {
				n++
			}
		}
		if seen[id] != len(runs) && seen[id] != n {
			t.Errorf("the XDMoD invocation showed %d runs of job %d, want %d", seen[id], id, n)
		}
	}
}

// testMemberRebuilt loses a follower's whole data directory (Raft log,
// snapshots, accounting store) while more jobs finish and are purged from
// the state; restarted empty, the member is sent the leader's snapshot,
// which no longer holds the purged jobs, copies the records it lacks from
// a peer, and answers sacct with the whole history, as the leader does.
func testMemberRebuilt(t *testing.T, c *cluster, work, sacct string) {
	lead := c.leader(t, 5*time.Second)
	gone := (lead + 1) % len(c.ctlds)
	id := fmt.Sprintf("c%d", gone+1)
	c.ctlds[gone].kill(syscall.SIGKILL)
	if err := os.RemoveAll(filepath.Join(c.dir, id)); err != nil {
		t.Fatal(err)
	}
	cl := c.client(t)
	var more []uint64
	for i := range 5 {
		more = append(more, submitParsable(t, c.addr, work, "-J", fmt.Sprint("while-away-", i), "-o", "/dev/null", "--wrap", "true"))
	}
	for _, j := range more {
		waitJob(t, cl, j, api.StateCompleted, 20*time.Second)
	}
	eventually(t, 30*time.Second, func() string {
		if n := len(allJobs(t, cl)); n != 0 {
			return fmt.Sprintf("%d jobs not purged", n)
		}
		return ""
	})
	c.ctlds[gone].start(t)
	history := func(addr string) (string, error) {
		return cli(t, addr, work, "acct", "-a", "-D", "-X", "-P", "-n", "-S", "now-1hours", "-o", "JobIDRaw,JobName,User,Account,State,ExitCode,Start,End,AllocTRES")
	}
	want, err := history(c.http[lead])
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range more {
		if !strings.Contains(want, "\n"+idText(j)+"|") {
			t.Fatalf("the leader's history lacks job %d:\n%s", j, want)
		}
	}
	eventually(t, 60*time.Second, func() string {
		got, err := history(c.http[gone])
		if err != nil {
			return err.Error()
		}
		if got != want {
			return fmt.Sprintf("the rebuilt member %s shows\n%s\nthe leader\n%s", id, got, want)
		}
		return ""
	})
	if log := c.ctlds[gone].tail(); !strings.Contains(log, "copying them from a peer") {
		t.Errorf("the rebuilt member did not restore a snapshot over its empty store (it replayed the whole log?); its log:\n%s", log)
	}
	one, err := c.client(t, c.http[lead]).AccountingSummary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		s, err := c.client(t, c.http[gone]).AccountingSummary(context.Background())
		if err != nil || s != one {
			return fmt.Sprintf("the rebuilt member's store summary %+v (%v), the leader's %+v", s, err, one)
		}
		return ""
	})
}

// testMemberAdded starts a fourth controller with --join (asking one
// member's API): it is added as a voter, sent a snapshot that no longer
// holds the purged jobs, and answers sacct with the whole history, as the
// leader does; `corral ping` then lists it.
func testMemberAdded(t *testing.T, c *cluster, work string) {
	ports := freePorts(t, 2)
	p := startProc(t, c.dir, "c4", "ctld", "--id", "c4", "--data", filepath.Join(c.dir, "c4"), "--raft", ports[0], "--http", ports[1],
		"--join", c.http[0], "--log-level", "warn", "--raft-snapshot-interval", "1s", "--raft-snapshot-entries", "40", "--raft-trailing-logs", "10")
	lead := c.leader(t, 5*time.Second)
	history := func(addr string) (string, error) {
		return cli(t, addr, work, "acct", "-a", "-D", "-X", "-P", "-n", "-S", "now-1hours", "-o", "JobIDRaw,JobName,User,Account,State,ExitCode,Start,End,AllocTRES")
	}
	want, err := history(c.http[lead])
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() string {
		got, err := history("http://" + ports[1])
		if err != nil {
			return err.Error()
		}
		if got != want {
			return fmt.Sprintf("the added member shows\n%s\nthe leader\n%s\nits log:\n%s", got, want, p.tail())
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		out, _ := cli(t, c.addr, work, "ping")
		if !strings.Contains(out, "c4") {
			return fmt.Sprintf("corral ping does not list the added member:\n%s", out)
		}
		return ""
	})
}
