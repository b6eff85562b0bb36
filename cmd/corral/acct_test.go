package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestAcctAgainstController runs jobs on a node registered by hand (the
// test reports their ends as its daemon would: one completes, one fails
// with exit code 3) and cancels a held one; sacct, under its Slurm name
// and as corral acct, then shows each with its state and exit code in
// the default table, -P, -X, --format and --json.
func TestAcctAgainstController(t *testing.T) {
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := api.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	cl.User = "tester"
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 4, MemMB: 4096, Partitions: []string{"batch"}, Runner: "test", BootID: "b1"}); err != nil {
		t.Fatal(err)
	}
	ok := submitOne(t, ctx, addr, "-J", "ok", "-c", "2", "--wrap", "true")
	bad := submitOne(t, ctx, addr, "-J", "bad", "--wrap", "false")
	held := submitOne(t, ctx, addr, "-J", "held", "-H", "--wrap", "true")
	exits := map[uint64]api.JobReport{ok: {State: api.StateCompleted}, bad: {State: api.StateFailed, ExitCode: 3}}
	var index uint64
	for reported := 0; reported < 2; {
		d, err := cl.Desired(ctx, "n1", index, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		index = d.Index
		var reps []api.JobReport
		for _, a := range d.Allocations {
			r := exits[a.Job.ID]
			r.Alloc, r.JobID, r.StartIndex, r.CPUSeconds = a.ID, a.Job.ID, a.Job.StartIndex, 1.5
			reps = append(reps, r)
		}
		if len(reps) > 0 {
			if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "b1", Reports: reps}); err != nil {
				t.Fatal(err)
			}
			reported += len(reps)
		}
	}
	mustRun(t, ctx, addr, "scancel", fmt.Sprint(held))

	want := fmt.Sprintf("%d|ok|COMPLETED|0:0|2\n%d|bad|FAILED|3:0|1\n%d|held|CANCELLED|0:0|0\n", ok, bad, held)
	var got string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got = mustRun(t, ctx, addr, "sacct", "-X", "-P", "-n", "--format", "JobID,JobName,State,ExitCode,AllocCPUS"); got == want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got != want {
		t.Fatalf("sacct -X -P -n: got\n%s\nwant\n%s", got, want)
	}
	table := mustRun(t, ctx, addr, "sacct")
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if len(lines) != 2+5 || !strings.HasPrefix(lines[0], "JobID           JobName  Partition") || !strings.HasPrefix(lines[1], "------------ ----------") ||
		!strings.HasPrefix(lines[3], fmt.Sprintf("%d.batch", ok)) {
		t.Errorf("sacct's default table:\n%s", table)
	}
	p := mustRun(t, ctx, addr, "corral", "acct", "-p", "-j", fmt.Sprint(bad), "-o", "JobID,State,ExitCode,NodeList,AllocTRES,TotalCPU")
	if want := fmt.Sprintf("JobID|State|ExitCode|NodeList|AllocTRES|TotalCPU|\n%d|FAILED|3:0|n1|billing=1,cpu=1,mem=512M,node=1|00:01.500|\n%d.batch|FAILED|3:0|n1|billing=1,cpu=1,mem=512M,node=1|00:01.500|\n", bad, bad); p != want {
		t.Errorf("acct -p -j: got\n%s\nwant\n%s", p, want)
	}
	var doc struct {
		Jobs []struct {
			JobID uint64 `json:"job_id"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, ctx, addr, "sacct", "--json", "-s", "CD,F")), &doc); err != nil || len(doc.Jobs) != 2 {
		t.Errorf("sacct --json -s CD,F: %+v, %v; want jobs %d and %d", doc, err, ok, bad)
	}
	if r := runCLI(t, ctx, addr, "sacct", "-S", "tomorrowish"); r.code == 0 || !strings.Contains(r.stderr, "--starttime") {
		t.Errorf("sacct -S tomorrowish: exit %d, stderr %q; want an error naming --starttime", r.code, r.stderr)
	}
	if r := runCLI(t, ctx, addr, "sacct", "-S", "now-1hour", "-E", "now-2hours"); r.code == 0 || !strings.Contains(r.stderr, "before --starttime") {
		t.Errorf("an end before the start: exit %d, stderr %q", r.code, r.stderr)
	}
	if out := mustRun(t, ctx, addr, "sacct", "-n", "-X", "-S", "now+1hour"); out != "" {
		t.Errorf("a window after every job: %q", out)
	}
	// Open XDMoD's Slurm helper asks for a window's allocations in this
	// form and splits each line on '|' into these 26 fields.
	from, to := time.Now().Add(-time.Hour).Format("2006-01-02T15:04:05"), time.Now().Add(time.Hour).Format("2006-01-02T15:04:05")
	xdmod := mustRun(t, ctx, addr, "sacct", "--clusters", "corral", "--allusers", "--parsable2", "--noheader", "--allocations", "--duplicates",
		"--format", "jobid,jobidraw,cluster,partition,qos,account,group,gid,user,uid,submit,eligible,start,end,elapsed,exitcode,state,nnodes,ncpus,reqcpus,reqmem,reqtres,alloctres,timelimit,nodelist,jobname",
		"--state", "CANCELLED,COMPLETED,FAILED,NODE_FAIL,PREEMPTED,TIMEOUT,OUT_OF_MEMORY",
		"--starttime", from, "--endtime", to)
	xlines := strings.Split(strings.TrimRight(xdmod, "\n"), "\n")
	if len(xlines) != 3 {
		t.Fatalf("the XDMoD invocation printed %q, want 3 lines", xdmod)
	}
	for _, l := range xlines {
		f := strings.Split(l, "|")
		if len(f) != 26 || f[2] != "corral" || f[8] != "tester" || f[16] == "" || f[25] == "" {
			t.Errorf("XDMoD line %q: %d fields", l, len(f))
		}
		if f[0] == fmt.Sprint(bad) && (f[15] != "3:0" || f[16] != "FAILED" || f[22] != "billing=1,cpu=1,mem=512M,node=1" || f[24] != "n1") {
			t.Errorf("XDMoD line of the failed job: %q", l)
		}
	}
	csvFile := filepath.Join(t.TempDir(), "usage.csv")
	mustRun(t, ctx, addr, "corral", "acct", "export", "--format", "csv", "-o", csvFile, "-S", "now-1hour")
	rows, err := readCSV(csvFile)
	if err != nil || len(rows) != 4 || rows[0][0] != "job_id" || rows[2][0] != fmt.Sprint(bad) || rows[2][19] != "FAILED" || rows[2][20] != "3" {
		t.Errorf("acct export --format csv: %v %v", rows, err)
	}
	nd := mustRun(t, ctx, addr, "corral", "acct", "export", "--format", "ndjson", "-o", "-", "-j", fmt.Sprint(ok))
	var rec api.AcctRecord
	if err := json.Unmarshal([]byte(nd), &rec); err != nil || rec.JobID != ok || rec.State != api.StateCompleted || strings.Count(nd, "\n") != 1 {
		t.Errorf("acct export --format ndjson -j %d: %q (%v)", ok, nd, err)
	}
	pq := filepath.Join(t.TempDir(), "usage.parquet")
	mustRun(t, ctx, addr, "corral", "acct", "export", "--format", "parquet", "-o", pq, "-S", "now-1hour")
	if data, err := os.ReadFile(pq); err != nil || len(data) < 8 || string(data[:4]) != "PAR1" || string(data[len(data)-4:]) != "PAR1" {
		t.Errorf("acct export --format parquet wrote %d bytes (%v), not a Parquet file", len(data), err)
	}
	if r := runCLI(t, ctx, addr, "corral", "acct", "export", "--format", "xml", "-o", "-"); r.code == 0 || !strings.Contains(r.stderr, "csv, ndjson or parquet") {
		t.Errorf("export --format xml: exit %d, %q", r.code, r.stderr)
	}
	testAcctReport(t, ctx, addr)
}

// testAcctReport reads the usage of the jobs above back as corral acct
// report's two reports: each account's total then its users, and the top
// users, in sreport's banner and columns and with -P.
func testAcctReport(t *testing.T, ctx context.Context, addr string) {
	window := []string{"-S", "now-1hour", "-E", time.Now().Add(24 * time.Hour).Format("2006-01-02")}
	out := mustRun(t, ctx, addr, append([]string{"corral", "acct", "report", "account", "-t", "seconds"}, window...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[1], "Cluster/Account/User Utilization ") || lines[2] != "Usage reported in CPU Seconds" ||
		strings.Join(strings.Fields(lines[4]), " ") != "Cluster Account Login Used GPU Billing Runs" {
		t.Fatalf("acct report account:\n%s", out)
	}
	total, user := strings.Fields(lines[6]), strings.Fields(lines[7])
	if len(total) != 6 || total[1] != "(none)" || total[5] != "3" || len(user) != 7 || user[2] != "tester" || user[6] != "3" {
		t.Errorf("acct report account rows:\n%s\n%s\nwant the account's total of 3 runs, then tester's", lines[6], lines[7])
	}
	p := mustRun(t, ctx, addr, append([]string{"corral", "acct", "report", "users", "-P", "-n"}, window...)...)
	if f := strings.Split(strings.TrimSpace(p), "|"); len(f) != 7 || f[1] != "tester" || f[2] != "(none)" || f[6] != "3" {
		t.Errorf("acct report users -P -n: %q", p)
	}
	if r := runCLI(t, ctx, addr, "corral", "acct", "report", "clusters"); r.code == 0 || !strings.Contains(r.stderr, "give account") {
		t.Errorf("acct report clusters: exit %d, %q", r.code, r.stderr)
	}
	testClusterReport(t, ctx, addr, window)
}

// testClusterReport reads the cluster's utilization as sreport cluster
// Utilization lays it out, and draws the usage with --svg. (The figures
// themselves are checked against known times in ctld's
// TestClusterUtilizationEndpoint and usageplot's tests.)
func testClusterReport(t *testing.T, ctx context.Context, addr string, window []string) {
	out := mustRun(t, ctx, addr, append([]string{"corral", "acct", "report", "cluster", "utilization", "-t", "seconds"}, window...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 7 || !strings.HasPrefix(lines[1], "Cluster Utilization ") || strings.Contains(lines[1], "secs") ||
		lines[2] != "Usage reported in CPU Seconds" || lines[3] != strings.Repeat("-", 80) ||
		lines[4] != "  Cluster    Allocated       Down  PLND Down         Idle   Planned     Reported" ||
		lines[5] != "--------- ------------ ---------- ---------- ------------ --------- ------------" {
		t.Fatalf("acct report cluster utilization:\n%s", out)
	}
	p := mustRun(t, ctx, addr, append([]string{"corral", "acct", "report", "cluster", "-P", "-n", "-t", "s", "-T", "cpu,gpu"}, window...)...)
	rows := strings.Split(strings.TrimRight(p, "\n"), "\n")
	if len(rows) != 2 {
		t.Fatalf("acct report cluster -P -n -T cpu,gpu: %q, want a line per TRES", p)
	}
	f := strings.Split(rows[0], "|")
	if len(f) != 8 || f[0] != "corral" || f[1] != "cpu" || !strings.HasPrefix(rows[1], "corral|gres/gpu|0|0|0|0|0|0") {
		t.Fatalf("acct report cluster -P -n -T cpu,gpu: %q", p)
	}
	var n [6]int64
	for i := range n {
		n[i], _ = strconv.ParseInt(f[2+i], 10, 64)
	}
	// The node registered a moment ago: each figure rounds, the sum
	// stays within their rounding.
	if sum := n[0] + n[1] + n[2] + n[3] + n[4]; sum < n[5]-3 || sum > n[5]+3 {
		t.Errorf("the cpu line %q: Reported is not the sum of the others", rows[0])
	}
	svg := filepath.Join(t.TempDir(), "usage.svg")
	mustRun(t, ctx, addr, append([]string{"corral", "acct", "report", "users", "--svg", svg}, window...)...)
	data, err := os.ReadFile(svg)
	if err != nil || !bytes.HasPrefix(data, []byte("<?xml")) || !bytes.Contains(data, []byte("<svg")) ||
		!bytes.Contains(data, []byte(">Usage by account, ")) || !bytes.Contains(data, []byte(">CPU-hours</text>")) || !bytes.Contains(data, []byte(">&lt; 1 min</text>")) {
		t.Errorf("acct report --svg wrote %d bytes (%v), want an SVG of the usage in CPU-hours and the waits:\n%.400s", len(data), err, data)
	}
	if r := runCLI(t, ctx, addr, "corral", "acct", "report", "cluster", "-T", "mem"); r.code == 0 || !strings.Contains(r.stderr, "--tres=mem") {
		t.Errorf("acct report cluster -T mem: exit %d, %q", r.code, r.stderr)
	}
}

func readCSV(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return csv.NewReader(f).ReadAll()
}

// submitOne submits with sbatch --parsable and returns the job id.
func submitOne(t *testing.T, ctx context.Context, addr string, args ...string) uint64 {
	t.Helper()
	out := mustRun(t, ctx, addr, append([]string{"sbatch", "--parsable"}, args...)...)
	var id uint64
	if _, err := fmt.Sscan(out, &id); err != nil {
		t.Fatalf("sbatch --parsable printed %q", out)
	}
	return id
}
