package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/internal/getopt"
	"corral/submit"
)

// TestPolicyUsageErrors runs policy commands whose mistakes are caught
// before any controller is asked.
func TestPolicyUsageErrors(t *testing.T) {
	cases := map[string]struct {
		argv   []string
		code   int
		stdout []string // substrings stdout must hold
		stderr []string // substrings stderr must hold
	}{
		"qos alone":          {argv: []string{"corral", "qos"}, code: 1, stderr: []string{"qos: give an action: add, modify, delete, list"}},
		"qos unknown action": {argv: []string{"corral", "qos", "frob"}, code: 1, stderr: []string{`unknown action "frob"`}},
		"qos --help":         {argv: []string{"corral", "qos", "--help"}, stdout: []string{"corral qos add NAME", "corral qos list"}},
		"qos add --help": {argv: []string{"corral", "qos", "add", "--help"},
			stdout: []string{"usage: corral qos add [options]", "--max-wall", "--preempt-mode"}},
		"qos add without name": {argv: []string{"corral", "qos", "add", "--priority", "5"}, code: 1, stderr: []string{"give one QoS name"}},
		"qos name with comma":  {argv: []string{"corral", "qos", "add", "a,b"}, code: 1, stderr: []string{`"a,b" is not a valid QoS name`}},
		"qos bad priority": {argv: []string{"corral", "qos", "add", "high", "--priority=abc"}, code: 1,
			stderr: []string{"qos add high: --priority=abc: give a whole number ≥ 0"}},
		"qos negative limit": {argv: []string{"corral", "qos", "add", "high", "--max-jobs-per-user=-1"}, code: 1,
			stderr: []string{"--max-jobs-per-user=-1: give a whole number ≥ 0, or 0 for no limit"}},
		"qos bad time": {argv: []string{"corral", "qos", "modify", "high", "--max-wall", "soon"}, code: 1,
			stderr: []string{"--max-wall=soon:", "D-H:M:S", "UNLIMITED"}},
		"qos bad preempt mode": {argv: []string{"corral", "qos", "add", "high", "--preempt-mode", "kill"}, code: 1,
			stderr: []string{"--preempt-mode=kill: use cancel, requeue, suspend, migrate or checkpoint"}},
		"qos migrate as its own fallback": {argv: []string{"corral", "qos", "add", "high", "--preempt-mode", "migrate", "--preempt-fallback", "migrate"},
			code: 1, stderr: []string{"--preempt-fallback=migrate: use cancel, requeue, suspend or checkpoint"}},
		"qos unknown option": {argv: []string{"corral", "qos", "add", "high", "--bogus"}, code: 2, stderr: []string{"--bogus"}},
		"config alone":       {argv: []string{"corral", "config"}, code: 1, stderr: []string{"config: give an action: show, set"}},
		"config set nothing": {argv: []string{"corral", "config", "set"}, code: 1, stderr: []string{"give NAME=VALUE pairs", "PriorityWeightAge"}},
		"config set no value": {argv: []string{"corral", "config", "set", "PriorityWeightAge"}, code: 1,
			stderr: []string{`"PriorityWeightAge" is not NAME=VALUE`}},
		"config set unknown": {argv: []string{"corral", "config", "set", "PriorityWeightAge=1", "Frob=2"}, code: 1,
			stderr: []string{`unknown setting "Frob"`}},
		"config set bad value": {argv: []string{"corral", "config", "set", "PriorityMaxAge=soon"}, code: 1,
			stderr: []string{"PriorityMaxAge=soon", "168h"}},
		"config show stray":     {argv: []string{"corral", "config", "show", "x"}, code: 1, stderr: []string{`unexpected argument "x"`}},
		"account bad shares":    {argv: []string{"corral", "account", "add", "physics", "--shares", "lots"}, code: 1, stderr: []string{"--shares=lots: give a number of shares ≥ 0"}},
		"account modify no-op":  {argv: []string{"corral", "account", "modify", "physics"}, code: 1, stderr: []string{"nothing to change"}},
		"user without account":  {argv: []string{"corral", "user", "add", "alice"}, code: 1, stderr: []string{"--account is required"}},
		"user modify no shares": {argv: []string{"corral", "user", "modify", "alice", "-A", "physics"}, code: 1, stderr: []string{"give --shares N"}},
		"user list":             {argv: []string{"corral", "user", "list"}, code: 1, stderr: []string{`unknown action "list"`, "add, modify, delete"}},
		"why without id":        {argv: []string{"corral", "why"}, code: 1, stderr: []string{"give one job id"}},
		"why bad id":            {argv: []string{"corral", "why", "abc"}, code: 1, stderr: []string{`"abc" is not a job id`}},
		"sprio bad job id":      {argv: []string{"sprio", "-j", "x1"}, code: 1, stderr: []string{"sprio: error: --jobs:", `"x1" is not a job id`}},
		"sprio --help":          {argv: []string{"sprio", "--help"}, stdout: []string{"usage: sprio [options]", "--norm", "--weights"}},
		"sshare --help":         {argv: []string{"sshare", "--help"}, stdout: []string{"usage: sshare [options]", "--accounts", "--long"}},
		"sshare stray argument": {argv: []string{"sshare", "physics"}, code: 1, stderr: []string{"-A ACCOUNT"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// No server: every case must end before it needs one.
			r := runCLI(t, context.Background(), "http://127.0.0.1:1", tc.argv...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", r.code, tc.code, r.stdout, r.stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("stdout does not hold %q:\n%s", s, r.stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr does not hold %q:\n%s", s, r.stderr)
				}
			}
		})
	}
}

// TestPolicyCommandsAgainstController runs the policy, priority and
// fair-share commands against a controller in this process, in order: each
// step builds on the policy the previous ones left.
func TestPolicyCommandsAgainstController(t *testing.T) {
	addr := startController(t, []api.Partition{{Name: "batch", Default: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := api.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &ctlFixture{ctx: ctx, addr: addr, cl: cl}
	t.Run("config", func(t *testing.T) { testConfigCommands(t, f) })
	t.Run("qos", func(t *testing.T) { testQOSCommands(t, f) })
	t.Run("accounts", func(t *testing.T) { testAccountCommands(t, f) })
	out := mustRun(t, ctx, addr, "sbatch", "--parsable", "-J", "waiting", "--wrap", "true")
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("sbatch --parsable printed %q", out)
	}
	f.first = id
	t.Run("prio", func(t *testing.T) { testPrioCommands(t, f) })
	t.Run("share", func(t *testing.T) { testShareCommands(t, f) })
	t.Run("why", func(t *testing.T) { testWhyCommands(t, f) })
}

// mustFail runs argv, expects exit code 1 and stderr holding each of want.
func mustFail(t *testing.T, f *ctlFixture, want []string, argv ...string) {
	t.Helper()
	r := runCLI(t, f.ctx, f.addr, argv...)
	if r.code != 1 {
		t.Errorf("%s: exit %d, want 1 (stderr %q)", strings.Join(argv, " "), r.code, r.stderr)
	}
	for _, s := range want {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("%s: stderr %q does not hold %q", strings.Join(argv, " "), r.stderr, s)
		}
	}
}

func testConfigCommands(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	mustRun(t, ctx, addr, "corral", "config", "set", "PriorityWeightFairshare=5000", "PriorityMaxAge=48h", "billingweightmem=0.5")
	show := mustRun(t, ctx, addr, "corral", "config", "show")
	for _, want := range []string{"PriorityWeightFairshare=5000\n", "PriorityMaxAge=172800\n", "BillingWeightMem=0.5\n", "FairshareAlgorithm=fairtree\n"} {
		if !strings.Contains(show, want) {
			t.Errorf("config show does not hold %q:\n%s", want, show)
		}
	}
	if lines := strings.Split(strings.TrimSpace(show), "\n"); len(lines) != len(api.ConfigKeys()) {
		t.Errorf("config show printed %d settings, want %d:\n%s", len(lines), len(api.ConfigKeys()), show)
	}
	// What show prints, set accepts, and nothing changes.
	mustRun(t, ctx, addr, append([]string{"corral", "config", "set"}, strings.Fields(show)...)...)
	if again := mustRun(t, ctx, addr, "corral", "config", "show"); again != show {
		t.Errorf("setting what config show printed changed it:\n%s\nwas\n%s", again, show)
	}
	// A refused pair leaves every setting as it was.
	mustFail(t, f, []string{"PriorityMaxAge=soon"}, "corral", "config", "set", "PriorityWeightAge=1", "PriorityMaxAge=soon")
	if again := mustRun(t, ctx, addr, "corral", "config", "show"); again != show {
		t.Errorf("a refused config set changed the settings:\n%s", again)
	}
}

func testQOSCommands(t *testing.T, f *ctlFixture) {
	ctx, addr, cl := f.ctx, f.addr, f.cl
	qos := func(name string) api.QOS {
		t.Helper()
		p, err := cl.Policy(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q := findQOS(p, name); q != nil {
			return *q
		}
		t.Fatalf("no QoS %s in %+v", name, p.QOS)
		return api.QOS{}
	}
	listRow := func(name string) []string {
		t.Helper()
		for _, r := range fields(mustRun(t, ctx, addr, "corral", "qos", "list")) {
			if r[0] == name {
				return r
			}
		}
		t.Fatalf("qos list has no row for %s", name)
		return nil
	}
	t.Run("add", func(t *testing.T) {
		mustRun(t, ctx, addr, "corral", "qos", "add", "high", "--priority", "2000", "--preempt", "besteffort,burstable",
			"--preempt-mode", "REQUEUE", "--max-wall", "2-00:00:00", "--max-jobs-per-user=4", "--preempt-exempt-time", "10")
		want := api.QOS{Name: "high", Priority: 2000, Preempt: []string{"besteffort", "burstable"}, PreemptMode: api.PreemptRequeue,
			MaxWall: 2 * 86400, MaxJobsPerUser: 4, PreemptExemptTime: 600}
		if got := qos("high"); !equalQOS(got, want) {
			t.Errorf("added %+v, want %+v", got, want)
		}
		want2 := []string{"high", "2000", "besteffort,burstable", "requeue", "00:10:00", "2-00:00:00", "4"}
		if got := listRow("high"); !slices.Equal(got, want2) {
			t.Errorf("qos list row %v, want %v", got, want2)
		}
	})
	t.Run("modify changes only what is given", func(t *testing.T) {
		mustRun(t, ctx, addr, "corral", "qos", "modify", "high", "--max-wall", "UNLIMITED", "--preempt", "", "--grp-cpus", "64")
		want := api.QOS{Name: "high", Priority: 2000, PreemptMode: api.PreemptRequeue, MaxJobsPerUser: 4, PreemptExemptTime: 600, GrpCPUs: 64}
		if got := qos("high"); !equalQOS(got, want) {
			t.Errorf("modified %+v, want %+v", got, want)
		}
		// Preempt and MaxWall are blank now, so the row has fewer fields.
		want2 := []string{"high", "2000", "requeue", "00:10:00", "4", "64"}
		if got := listRow("high"); !slices.Equal(got, want2) {
			t.Errorf("qos list row %v, want %v", got, want2)
		}
		if h := fields(mustRun(t, ctx, addr, "corral", "qos", "list"))[0]; strings.Join(h, " ") !=
			"Name Priority Preempt PreemptMode PreemptExemptTime MaxWall MaxJobsPU MaxSubmitPU GrpCPUs PreemptFallback" {
			t.Errorf("qos list header %v", h)
		}
	})
	t.Run("preemption by migration, falling back to a checkpoint", func(t *testing.T) {
		mustRun(t, ctx, addr, "corral", "qos", "add", "mover", "--preempt-mode", "Migrate", "--preempt-fallback", "CHECKPOINT")
		want := api.QOS{Name: "mover", PreemptMode: api.PreemptMigrate, PreemptFallback: api.PreemptCheckpoint}
		if got := qos("mover"); !equalQOS(got, want) {
			t.Errorf("added %+v, want %+v", got, want)
		}
		if got, want := listRow("mover"), []string{"mover", "0", "migrate", "checkpoint"}; !slices.Equal(got, want) {
			t.Errorf("qos list row %v, want %v", got, want)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		mustFail(t, f, []string{"QoS guaranteed exists", "corral qos modify guaranteed"}, "corral", "qos", "add", "guaranteed")
		mustFail(t, f, []string{"no QoS named nosuch", "besteffort, burstable, guaranteed, high", "corral qos add nosuch"},
			"corral", "qos", "modify", "nosuch", "--priority", "1")
		mustFail(t, f, []string{"nothing to change"}, "corral", "qos", "modify", "high")
		mustFail(t, f, []string{"--preempt names nosuch, which is no QoS"}, "corral", "qos", "modify", "high", "--preempt", "nosuch")
		mustFail(t, f, []string{"a QoS cannot preempt itself"}, "corral", "qos", "add", "selfish", "--preempt", "selfish")
		mustFail(t, f, []string{"guaranteed may preempt it"}, "corral", "qos", "delete", "besteffort")
		if got := qos("high"); got.GrpCPUs != 64 || len(got.Preempt) != 0 {
			t.Errorf("a refused change altered high: %+v", got)
		}
	})
	t.Run("delete", func(t *testing.T) {
		mustRun(t, ctx, addr, "corral", "qos", "add", "scratch")
		mustRun(t, ctx, addr, "corral", "qos", "delete", "scratch")
		for _, r := range fields(mustRun(t, ctx, addr, "corral", "qos", "list")) {
			if r[0] == "scratch" {
				t.Errorf("deleted QoS still listed: %v", r)
			}
		}
		mustFail(t, f, []string{"no such QoS"}, "corral", "qos", "delete", "scratch")
	})
}

func equalQOS(a, b api.QOS) bool {
	return a.Name == b.Name && a.Priority == b.Priority && slices.Equal(a.Preempt, b.Preempt) && a.PreemptMode == b.PreemptMode &&
		a.PreemptFallback == b.PreemptFallback && a.PreemptExemptTime == b.PreemptExemptTime && a.MaxWall == b.MaxWall && a.MaxJobsPerUser == b.MaxJobsPerUser &&
		a.MaxSubmitPerUser == b.MaxSubmitPerUser && a.GrpCPUs == b.GrpCPUs
}

func testAccountCommands(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	mustRun(t, ctx, addr, "corral", "account", "add", "physics", "--shares", "40")
	mustRun(t, ctx, addr, "corral", "account", "add", "theory", "--parent", "physics")
	mustRun(t, ctx, addr, "corral", "account", "add", "bio", "--shares", "60")
	mustRun(t, ctx, addr, "corral", "user", "add", "tester", "--account", "physics", "--shares", "2")
	mustRun(t, ctx, addr, "corral", "user", "add", "alice", "-A", "theory")
	mustRun(t, ctx, addr, "corral", "user", "add", "bob", "-A", "theory")
	want := `Account              Parent           User    Shares
-------------------- ---------- ---------- ---------
bio                  root                         60
physics              root                         40
 physics                            tester         2
 theory              physics                       1
  theory                             alice         1
  theory                               bob         1
`
	if got := mustRun(t, ctx, addr, "corral", "account", "list"); got != want {
		t.Errorf("account list:\n%s\nwant\n%s", got, want)
	}
	mustRun(t, ctx, addr, "corral", "account", "modify", "theory", "--shares", "3")
	mustRun(t, ctx, addr, "corral", "user", "modify", "alice", "--account", "theory", "--shares", "5")
	mustRun(t, ctx, addr, "corral", "user", "delete", "bob", "--account", "theory")
	want = `Account              Parent           User    Shares
-------------------- ---------- ---------- ---------
bio                  root                         60
physics              root                         40
 physics                            tester         2
 theory              physics                       3
  theory                             alice         5
`
	if got := mustRun(t, ctx, addr, "corral", "account", "list"); got != want {
		t.Errorf("account list after changes:\n%s\nwant\n%s", got, want)
	}
	// Moving an account keeps its shares.
	mustRun(t, ctx, addr, "corral", "account", "modify", "theory", "--parent", "root")
	if rows := fields(mustRun(t, ctx, addr, "corral", "account", "list")); !slices.Contains(rowsJoined(rows), "theory root 3") {
		t.Errorf("theory after moving to root: %v", rows)
	}
	mustRun(t, ctx, addr, "corral", "account", "modify", "theory", "--parent", "physics")

	mustFail(t, f, []string{"account physics exists", "corral account modify physics"}, "corral", "account", "add", "physics")
	mustFail(t, f, []string{"no account named nosuch"}, "corral", "account", "modify", "nosuch", "--shares", "1")
	mustFail(t, f, []string{"parent nosuch does not exist"}, "corral", "account", "add", "chem", "--parent", "nosuch")
	mustFail(t, f, []string{"parent theory is under it"}, "corral", "account", "modify", "physics", "--parent", "theory")
	mustFail(t, f, []string{"account theory is under it"}, "corral", "account", "delete", "physics")
	mustFail(t, f, []string{"user alice is in it", "corral user delete alice --account theory"}, "corral", "account", "delete", "theory")
	mustFail(t, f, []string{`account "nosuch" does not exist`}, "corral", "user", "add", "carol", "--account", "nosuch")
	mustFail(t, f, []string{"user alice is already in account theory", "corral user modify alice"}, "corral", "user", "add", "alice", "-A", "theory")
	mustFail(t, f, []string{"user carol is not in account bio", "corral user add carol --account bio"}, "corral", "user", "modify", "carol", "-A", "bio", "--shares", "1")
	mustFail(t, f, []string{"user carol is not in account bio"}, "corral", "user", "delete", "carol", "-A", "bio")

	mustRun(t, ctx, addr, "corral", "account", "add", "tmp")
	mustRun(t, ctx, addr, "corral", "account", "delete", "tmp")
	if strings.Contains(mustRun(t, ctx, addr, "corral", "account", "list"), "tmp") {
		t.Error("deleted account tmp is still listed")
	}
}

func rowsJoined(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, " ")
	}
	return out
}

func testPrioCommands(t *testing.T, f *ctlFixture) {
	ctx, addr, id := f.ctx, f.addr, idStr(f.first)
	header := "JOBID PARTITION USER ACCOUNT PRIORITY SITE AGE FAIRSHARE JOBSIZE PARTITION QOS NICE"
	t.Run("a pending job's row", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "corral", "prio"))
		if len(rows) != 2 || strings.Join(rows[0], " ") != header {
			t.Fatalf("prio: %v, want the header and one row", rows)
		}
		r := rows[1]
		// tester's jobs go to its only account, physics. With no node the
		// job size factor is 0 and the partition's is 1 (weight 1000).
		if r[0] != id || r[1] != "batch" || r[2] != "tester" || r[3] != "physics" || r[9] != "1000" || r[11] != "0" {
			t.Errorf("prio row %v, want job %s in batch for tester/physics with PARTITION 1000 and NICE 0", r, id)
		}
		if _, err := strconv.ParseInt(r[4], 10, 64); err != nil {
			t.Errorf("PRIORITY %q is not a whole number", r[4])
		}
	})
	t.Run("normalized", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "sprio", "-n", "-h"))
		if len(rows) != 1 || rows[0][9] != "1.0000000" || rows[0][6] == "" {
			t.Errorf("sprio -n -h: %v, want one row with a PARTITION factor of 1.0000000", rows)
		}
	})
	t.Run("weights", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "sprio", "-w"))
		// SITE AGE FAIRSHARE JOBSIZE PARTITION QOS, FAIRSHARE as config set it.
		want := []string{"Weights", "0", "1000", "5000", "1000", "1000", "10000"}
		if len(rows) != 2 || !slices.Equal(rows[1], want) {
			t.Errorf("sprio -w: %v, want the header and %v", rows, want)
		}
	})
	t.Run("filters", func(t *testing.T) {
		cases := map[string]struct {
			args []string
			rows int
		}{
			"-j the job":     {[]string{"-j", id}, 1},
			"job argument":   {[]string{id}, 1},
			"-u tester":      {[]string{"-u", "tester"}, 1},
			"-u nobody":      {[]string{"-u", "nobody"}, 0},
			"-j and -u miss": {[]string{"-j", id, "-u", "nobody"}, -1},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				out := mustRun(t, ctx, addr, append([]string{"sprio", "-h"}, tc.args...)...)
				if tc.rows < 0 {
					if out != "Unable to find jobs matching user/id(s) specified\n" {
						t.Errorf("sprio %v printed %q, want sprio's no-match line", tc.args, out)
					}
					return
				}
				if got := len(fields(out)); got != tc.rows {
					t.Errorf("sprio %v: %d rows, want %d:\n%s", tc.args, got, tc.rows, out)
				}
			})
		}
	})
}

func testShareCommands(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	t.Run("only the caller's user lines", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "sshare"))
		if strings.Join(rows[0], " ") != "Account User RawShares NormShares RawUsage EffectvUsage FairShare" {
			t.Fatalf("sshare header %v", rows[0])
		}
		var users []string
		for _, r := range rows[2:] {
			if len(r) == 7 { // a user line: account, user and five numbers
				users = append(users, r[1])
			}
		}
		if !slices.Equal(users, []string{"tester"}) {
			t.Errorf("sshare user lines for %v, want only tester's:\n%v", users, rows)
		}
	})
	t.Run("all users, long", func(t *testing.T) {
		out := mustRun(t, ctx, addr, "sshare", "-a", "-l")
		for _, want := range []string{"LevelFS", " bio ", "  physics                tester", "   theory                 alice"} {
			if !strings.Contains(out, want) {
				t.Errorf("sshare -a -l does not hold %q:\n%s", want, out)
			}
		}
	})
	t.Run("accounts and users", func(t *testing.T) {
		rows := fields(mustRun(t, ctx, addr, "sshare", "-n", "-A", "theory", "-u", "alice"))
		if len(rows) != 2 || rows[0][0] != "theory" || rows[1][0] != "theory" || rows[1][1] != "alice" {
			t.Errorf("sshare -A theory -u alice: %v, want theory's line and alice's", rows)
		}
	})
}

func testWhyCommands(t *testing.T, f *ctlFixture) {
	ctx, addr, id := f.ctx, f.addr, idStr(f.first)
	out := mustRun(t, ctx, addr, "corral", "why", id)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "Job "+id+" is PENDING") {
		t.Errorf("why's first line %q, want Job %s is PENDING...", lines[0], id)
	}
	if !strings.Contains(out, "Priority ") || !strings.Contains(out, "rank 1 of 1 pending") {
		t.Errorf("why does not give the priority and rank:\n%s", out)
	}
	mustFail(t, f, []string{"job 99999: no such job"}, "corral", "why", "99999")
}

// TestApplyQOSOptions checks the option values qos add and modify accept,
// and that a refusal names the option and keeps its cause.
func TestApplyQOSOptions(t *testing.T) {
	parse := func(t *testing.T, args ...string) *optSet {
		t.Helper()
		env := &cliEnv{prog: "corral"}
		o, err := parseOpts(env, "qos add", getopt.Permute, args, qosOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	t.Run("values", func(t *testing.T) {
		q := api.QOS{Name: "q", Priority: 7, MaxSubmitPerUser: 9}
		o := parse(t, "--preempt", "a,b,a", "--preempt-mode", "Suspend", "--max-wall", "90", "--preempt-exempt-time", "1:00:00", "--grp-cpus", "0",
			"--preempt-fallback", "Requeue")
		if err := applyQOSOptions(&q, o); err != nil {
			t.Fatal(err)
		}
		want := api.QOS{Name: "q", Priority: 7, Preempt: []string{"a", "b"}, PreemptMode: api.PreemptSuspend, PreemptFallback: api.PreemptRequeue,
			MaxWall: 5400, PreemptExemptTime: 3600, MaxSubmitPerUser: 9}
		if !equalQOS(q, want) {
			t.Errorf("got %+v, want %+v", q, want)
		}
	})
	t.Run("a bad time keeps the parser's error", func(t *testing.T) {
		var q api.QOS
		err := applyQOSOptions(&q, parse(t, "--max-wall", "1:2:3:4"))
		var oe *optionError
		var se *submit.Error
		if !errors.As(err, &oe) || oe.option != "max-wall" || !errors.As(err, &se) {
			t.Fatalf("error %v (%T), want an optionError for max-wall wrapping a submit.Error", err, err)
		}
	})
}
