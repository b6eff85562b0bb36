package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// sacctAlias returns the path of a `sacct` symlink to the corral binary,
// so that the test runs the alias as a user would.
func sacctAlias(t *testing.T) string {
	t.Helper()
	link := filepath.Join(t.TempDir(), "sacct")
	if err := os.Symlink(corralBin, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// TestSacctThroughCluster runs jobs through three controllers and a node
// daemon: one completes, one fails with exit code 3, one runs past its
// 2 s limit, one is cancelled while it runs. sacct (the alias) shows each
// with its state, exit code, times and allocated TRES, in -P and in the
// default table with --format widths. Jobs of two tenants then complete,
// fail, are preempted and requeued, and preempted for good
// (testSacctTenants: billing, -D, -X, windows, --json, the XDMoD
// invocation). The records outlive the jobs' purge. Then the leader is
// killed while 20 jobs finish: afterwards every member holds exactly one
// record per job, and the members' stores agree. Last, a member loses its
// data directory and is rebuilt from the others (testMemberRebuilt), and a
// fourth member joins the running cluster (testMemberAdded).
func TestSacctThroughCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 processes and runs 24 jobs")
	}
	// Frequent snapshots and a short log behind them, so that a member
	// rebuilt from scratch is sent a snapshot (testMemberRebuilt).
	c := startControllers(t, 3, "--raft-snapshot-interval", "1s", "--raft-snapshot-entries", "40", "--raft-trailing-logs", "10")
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1", "--cpus", "4", "--mem", "2G")
	c.waitNodes(t, 1)
	work := t.TempDir()
	cl := c.client(t)
	sacct := sacctAlias(t)

	ok := submitParsable(t, c.addr, work, "-J", "ok", "-c", "2", "-o", "/dev/null", "--wrap", "sleep 0.2")
	fail := submitParsable(t, c.addr, work, "-J", "fail", "-o", "/dev/null", "--wrap", "exit 3")
	slow := submitParsable(t, c.addr, work, "-J", "slow", "-t", "0:02", "-o", "/dev/null", "--wrap", "sleep 60")
	kill := submitParsable(t, c.addr, work, "-J", "kill", "-o", "/dev/null", "--wrap", "sleep 60")
	waitJob(t, cl, kill, api.StateRunning, 20*time.Second)
	mustCLI(t, corralBin, c.addr, work, "cancel", idText(kill))
	for id, st := range map[uint64]api.JobState{ok: api.StateCompleted, fail: api.StateFailed, slow: api.StateTimeout, kill: api.StateCancelled} {
		waitJob(t, cl, id, st, 20*time.Second)
	}
	ids := fmt.Sprintf("%d,%d,%d,%d", ok, fail, slow, kill)
	format := "JobID,JobName,State,ExitCode,Start,End,Elapsed,AllocTRES,NodeList"
	var rows [][]string
	eventually(t, 10*time.Second, func() string {
		out := mustCLI(t, sacct, c.addr, work, "-X", "-P", "-n", "-j", ids, "--format", format)
		rows = nil
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			rows = append(rows, strings.Split(l, "|"))
		}
		if len(rows) != 4 {
			return fmt.Sprintf("sacct -X -P -n -j %s printed %q, want 4 lines", ids, out)
		}
		return ""
	})
	want := map[string][2]string{
		idText(ok): {"COMPLETED", "0:0"}, idText(fail): {"FAILED", "3:0"}, idText(slow): {"TIMEOUT", ""}, idText(kill): {"CANCELLED", ""},
	}
	for _, r := range rows {
		w, known := want[r[0]]
		if !known || len(r) != 9 {
			t.Errorf("unexpected line %v", r)
			continue
		}
		start, err1 := time.ParseInLocation("2006-01-02T15:04:05", r[4], time.Local)
		end, err2 := time.ParseInLocation("2006-01-02T15:04:05", r[5], time.Local)
		switch {
		case r[2] != w[0] || w[1] != "" && r[3] != w[1]:
			t.Errorf("job %s: state %s, exit code %s; want %s %s", r[0], r[2], r[3], w[0], w[1])
		case err1 != nil || err2 != nil || end.Before(start) || time.Since(start) > 5*time.Minute:
			t.Errorf("job %s: start %q, end %q", r[0], r[4], r[5])
		case !strings.Contains(r[7], "cpu=") || !strings.Contains(r[7], "node=1") || r[8] != "n1":
			t.Errorf("job %s: AllocTRES %q, NodeList %q", r[0], r[7], r[8])
		}
		if r[0] == idText(ok) && !strings.Contains(r[7], "cpu=2") {
			t.Errorf("job %d asked for 2 CPUs: AllocTRES %q", ok, r[7])
		}
		if r[0] == idText(slow) && (r[6] < "00:00:02" || r[6] > "00:00:30") {
			t.Errorf("the job with a 2 s limit ran %s", r[6])
		}
	}
	table := mustCLI(t, sacct, c.addr, work, "-j", idText(ok), "--format", "JobID,JobName%20,State")
	wantTable := fmt.Sprintf("JobID                     JobName      State \n------------ -------------------- ---------- \n%-12d                   ok  COMPLETED \n%-12s                batch  COMPLETED \n",
		ok, idText(ok)+".batch")
	if table != wantTable {
		t.Errorf("sacct --format with a width:\n%q\nwant\n%q", table, wantTable)
	}
	tenants := testSacctTenants(t, c, work, sacct)

	// The records outlive the jobs: purge them.
	mustCLI(t, corralBin, c.addr, work, "config", "set", "MinJobAge=1")
	eventually(t, 30*time.Second, func() string {
		if n := len(allJobs(t, cl)); n != 0 {
			return fmt.Sprintf("%d jobs not purged", n)
		}
		return ""
	})
	if out := mustCLI(t, sacct, c.addr, work, "-X", "-n", "-P", "-j", ids, "-o", "JobID"); strings.Count(out, "\n") != 4 {
		t.Errorf("after the purge sacct shows %q", out)
	}

	// Kill the leader while 20 jobs finish.
	var batch []uint64
	for i := range 20 {
		batch = append(batch, submitParsable(t, c.addr, work, "-J", fmt.Sprint("b", i), "-o", "/dev/null", "--wrap", "sleep 0.3"))
	}
	lead := c.leader(t, 5*time.Second)
	c.ctlds[lead].kill(syscall.SIGKILL)
	c.leader(t, 15*time.Second)
	c.ctlds[lead].start(t)
	all := append(append([]uint64{ok, fail, slow, kill}, tenants...), batch...)
	eventually(t, 90*time.Second, func() string {
		for i, h := range c.http {
			out, err := cli(t, h, work, "acct", "-a", "-D", "-X", "-P", "-n", "-S", "now-1hours", "-o", "JobIDRaw")
			if err != nil {
				return fmt.Sprintf("member %d: %v", i+1, err)
			}
			count := map[string]int{}
			for _, l := range strings.Fields(out) {
				count[l]++
			}
			for _, id := range all {
				want := 1
				if id == tenants[2] {
					want = 2 // requeued: a record per run
				}
				if n := count[strconv.FormatUint(id, 10)]; n != want {
					return fmt.Sprintf("member %d holds %d records of job %d, want %d", i+1, n, id, want)
				}
			}
			if len(count) != len(all) {
				return fmt.Sprintf("member %d holds records of %d jobs, want %d", i+1, len(count), len(all))
			}
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		sums := map[api.AcctSummary]bool{}
		for _, h := range c.http {
			s, err := c.client(t, h).AccountingSummary(context.Background())
			if err != nil {
				return err.Error()
			}
			sums[s] = true
		}
		if len(sums) != 1 {
			return fmt.Sprintf("the members' stores differ: %v", sums)
		}
		return ""
	})
	testMemberRebuilt(t, c, work, sacct)
	testMemberAdded(t, c, work)
}
