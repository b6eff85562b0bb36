package display

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"corral/api"
)

func acctFixture() []api.AcctRecord {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	return []api.AcctRecord{
		{
			JobID: 12, Ref: "12", AllocID: 3, Final: true, Name: "simulation-long-name", User: "ada", Account: "physics",
			Partition: "batch", QOS: "normal", WorkDir: "/home/ada", Submit: t0.Add(-time.Minute), Eligible: t0.Add(-time.Minute),
			Start: t0, End: t0.Add(90 * time.Minute), TimeLimit: 7200, Elapsed: 5400, State: api.StateCompleted,
			NodeList: "n1", ReqTRES: api.TRES{CPU: 4, MemMB: 8192, Nodes: 1, GPUs: map[string]int{"h100": 1}},
			AllocTRES: api.TRES{CPU: 4, MemMB: 8192, Nodes: 1, GPUs: map[string]int{"h100": 1}}, BillingRate: 16,
			TotalCPU: 61.5, MaxRSSKB: 1024,
		},
		{
			JobID: 13, Ref: "13", Final: true, Name: "held", User: "ada", Account: "physics", Partition: "batch",
			Submit: t0, Eligible: t0, End: t0.Add(time.Minute), State: api.StateCancelled, ExitCode: 0,
			ReqTRES: api.TRES{CPU: 1, MemMB: 500, Nodes: 1},
		},
		{
			JobID: 14, Ref: "10_2", ArrayJobID: 10, ArrayTaskID: 2, AllocID: 4, Final: true, Name: "arr", User: "bob",
			Account: "bio", Partition: "batch", Submit: t0, Eligible: t0, Start: t0, End: t0.Add(2 * time.Second),
			Elapsed: 2, State: api.StateFailed, ExitCode: 3, NodeList: "n2",
			ReqTRES: api.TRES{CPU: 1, MemMB: 512, Nodes: 1}, AllocTRES: api.TRES{CPU: 1, MemMB: 512, Nodes: 1}, BillingRate: 1.125,
		},
	}
}

func renderAcct(t *testing.T, format string, layout AcctLayout, allocations bool) string {
	t.Helper()
	cols, err := ParseAcctFormat(format)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	env := AcctEnv{Loc: time.UTC, Cluster: "corral", UID: func(u string) (int, int, string, bool) { return 1000, 100, "users", u == "ada" }}
	if err := Acct(&b, AcctLines(acctFixture(), allocations), cols, layout, env); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestAcctDefaultLayout is sacct's default table: a left-justified JobID,
// right-justified fields, a dashes line, a trailing space after every
// field, a batch line under each run, values longer than their field cut
// with a '+'.
func TestAcctDefaultLayout(t *testing.T) {
	want := "" +
		"JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n" +
		"------------ ---------- ---------- ---------- ---------- ---------- -------- \n" +
		"12           simulatio+      batch    physics          4  COMPLETED      0:0 \n" +
		"12.batch          batch               physics          4  COMPLETED      0:0 \n" +
		"13                 held      batch    physics          0  CANCELLED      0:0 \n" +
		"10_2                arr      batch        bio          1     FAILED      3:0 \n" +
		"10_2.batch        batch                   bio          1     FAILED      3:0 \n"
	if got := renderAcct(t, AcctDefaultFormat, AcctLayout{}, false); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestAcctParsableLayouts(t *testing.T) {
	cases := []struct {
		name, format string
		layout       AcctLayout
		allocations  bool
		want         string
	}{
		{"-P -X", "JobID,JobIDRaw,State,ExitCode,Elapsed,ElapsedRaw,AllocTRES", AcctLayout{Parsable2: true}, true,
			"JobID|JobIDRaw|State|ExitCode|Elapsed|ElapsedRaw|AllocTRES\n" +
				"12|12|COMPLETED|0:0|01:30:00|5400|billing=16,cpu=4,gres/gpu=1,gres/gpu:h100=1,mem=8G,node=1\n" +
				"13|13|CANCELLED|0:0|00:00:00|0|\n" +
				"10_2|14|FAILED|3:0|00:00:02|2|billing=1,cpu=1,mem=512M,node=1\n"},
		{"-p -n", "jobid,user,uid,group,nodelist", AcctLayout{Parsable: true, NoHeader: true}, false,
			"12|ada|1000|users|n1|\n12.batch||||n1|\n13|ada|1000|users|None assigned|\n10_2|bob|||n2|\n10_2.batch||||n2|\n"},
		{"times and limits", "JobID,Submit,Start,End,Timelimit,ReqMem,ReqCPUS,NNodes,NCPUS,TotalCPU,MaxRSS,Reason,Restarts,Cluster,QOS,WorkDir",
			AcctLayout{Parsable2: true, NoHeader: true}, false,
			"12|2026-12-01T08:59:00|2026-12-01T09:00:00|2026-12-01T10:30:00|02:00:00|8G|4|1|4|01:01.500||None|0|corral|normal|/home/ada\n" +
				"12.batch|2026-12-01T08:59:00|2026-12-01T09:00:00|2026-12-01T10:30:00||8G|4|1|4|01:01.500|1024K|None|0|corral||\n" +
				"13|2026-12-01T09:00:00|Unknown|2026-12-01T09:01:00|UNLIMITED|500M|1|1|1|00:00.000||None|0|corral||\n" +
				"10_2|2026-12-01T09:00:00|2026-12-01T09:00:00|2026-12-01T09:00:02|UNLIMITED|512M|1|1|1|00:00.000||None|0|corral||\n" +
				"10_2.batch|2026-12-01T09:00:00|2026-12-01T09:00:00|2026-12-01T09:00:02||512M|1|1|1|00:00.000||None|0|corral||\n"},
		{"%N widths", "JobID%6,JobName%25,State%4", AcctLayout{}, true,
			"JobID                    JobName Stat \n" +
				"------ ------------------------- ---- \n" +
				"12          simulation-long-name COM+ \n" +
				"13                          held CAN+ \n" +
				"10_2                         arr FAI+ \n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := renderAcct(t, c.format, c.layout, c.allocations)
			if got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestParseAcctFormatRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"JobID,Bogus":  `unknown field "Bogus"`,
		"JobName%0":    "JobName: the width",
		"JobName%x":    "JobName: the width",
		"":             "name at least one field",
		"JobID%100000": "JobID: the width",
	} {
		if _, err := ParseAcctFormat(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", in, err, want)
		}
	}
}

func TestAcctJSON(t *testing.T) {
	var b bytes.Buffer
	if err := AcctJSON(&b, acctFixture(), AcctEnv{Cluster: "corral"}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs []struct {
			JobID    uint64 `json:"job_id"`
			ExitCode struct {
				ReturnCode struct{ Number int } `json:"return_code"`
			} `json:"exit_code"`
			State struct{ Current []string } `json:"state"`
			Steps []struct {
				Step struct{ ID string } `json:"step"`
			} `json:"steps"`
			Array struct {
				JobID uint64 `json:"job_id"`
			} `json:"array"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Jobs) != 3 || doc.Jobs[2].ExitCode.ReturnCode.Number != 3 || doc.Jobs[2].State.Current[0] != "FAILED" ||
		len(doc.Jobs[0].Steps) != 1 || doc.Jobs[0].Steps[0].Step.ID != "12.batch" || len(doc.Jobs[1].Steps) != 0 || doc.Jobs[2].Array.JobID != 10 {
		t.Errorf("sacct --json document: %s", b.String())
	}
}

// FuzzParseAcctFormat: any --format parses or is refused, never panics;
// what parses renders a header with one name per column.
func FuzzParseAcctFormat(f *testing.F) {
	for _, s := range []string{AcctDefaultFormat, "JobName%30,State%4", "jobid,,user%", "%5", "JobID%-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cols, err := ParseAcctFormat(s)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := Acct(&b, AcctLines(acctFixture(), false), cols, AcctLayout{Parsable2: true}, AcctEnv{}); err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(b.String(), "\n")
		if n := len(strings.Split(header, "|")); n != len(cols) {
			t.Fatalf("%q: a header of %d names for %d columns", s, n, len(cols))
		}
	})
}

// TestAcctMultiNodeSteps: a two-node run's lines: the job's (both nodes),
// its batch step's (rank 0's node, not the first of the list, and what
// it held), and a line per step srun
// ran, as JOB.STEP; -X leaves the step lines out; --json lists them.
func TestAcctMultiNodeSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	recs := []api.AcctRecord{{
		JobID: 20, Ref: "20", AllocID: 9, Final: true, Name: "mpi", User: "ada", Account: "physics", Partition: "batch",
		Submit: t0, Eligible: t0, Start: t0, End: t0.Add(time.Hour), Elapsed: 3600, State: api.StateCompleted, NodeList: "n[1-2]",
		ReqTRES: api.TRES{CPU: 8, MemMB: 4096, Nodes: 2}, AllocTRES: api.TRES{CPU: 10, MemMB: 4096, Nodes: 2},
		BatchNode: "n2", BatchTRES: api.TRES{CPU: 6, MemMB: 2048, Nodes: 1},
		Steps: []api.AcctStep{
			{ID: 0, Name: "hostname", NodeList: "n[1-2]", Nodes: 2, NTasks: 4, CPUs: 4, State: api.StateCompleted,
				Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute)},
			{ID: 1, Name: "a.out", NodeList: "n2", Nodes: 1, NTasks: 1, CPUs: 1, State: api.StateFailed, ExitCode: 2,
				Start: t0.Add(3 * time.Minute), End: t0.Add(3*time.Minute + 5*time.Second)},
		},
	}}
	cols, err := ParseAcctFormat("JobID,JobName,NNodes,AllocCPUS,State,ExitCode,Elapsed,NodeList")
	if err != nil {
		t.Fatal(err)
	}
	render := func(allocations bool) string {
		var b bytes.Buffer
		if err := Acct(&b, AcctLines(recs, allocations), cols, AcctLayout{Parsable2: true, NoHeader: true}, AcctEnv{}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	want := "20|mpi|2|10|COMPLETED|0:0|01:00:00|n[1-2]\n" +
		"20.batch|batch|1|6|COMPLETED|0:0|01:00:00|n2\n" +
		"20.0|hostname|2|4|COMPLETED|0:0|00:01:00|n[1-2]\n" +
		"20.1|a.out|1|1|FAILED|2:0|00:00:05|n2\n"
	if got := render(false); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := render(true); got != "20|mpi|2|10|COMPLETED|0:0|01:00:00|n[1-2]\n" {
		t.Errorf("-X: got\n%s", got)
	}
	var b bytes.Buffer
	if err := AcctJSON(&b, recs, AcctEnv{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs []struct {
			Steps []struct {
				Step  struct{ ID, Name string }
				Nodes struct {
					Count int
					List  []string
				}
			}
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Jobs[0].Steps; len(s) != 3 || s[0].Step.ID != "20.batch" || s[0].Nodes.List[0] != "n2" ||
		s[1].Step.ID != "20.0" || s[1].Nodes.Count != 2 || s[2].Step.Name != "a.out" {
		t.Errorf("--json steps: %+v", s)
	}
}
