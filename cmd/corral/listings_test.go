package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// runWithEnv runs argv as runCLI does, with vars added to its environment.
func runWithEnv(t *testing.T, ctx context.Context, addr string, vars map[string]string, argv ...string) result {
	t.Helper()
	all := map[string]string{"USER": "tester", "CORRAL_ADDR": addr}
	for k, v := range vars {
		all[k] = v
	}
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(k string) string { return all[k] }}
	code := dispatch(ctx, env, argv)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// testFormatEnv checks SQUEUE_FORMAT, SQUEUE_FORMAT2, SQUEUE_SORT and
// SINFO_FORMAT, which stand for -o, -O and -S when those are not given; it
// runs while the fixture has its two pending jobs and no node.
func testFormatEnv(t *testing.T, f *ctlFixture) {
	lo, hi := min(f.first, f.second), max(f.first, f.second)
	tests := map[string]struct {
		vars map[string]string
		argv []string
		want string
	}{
		"SQUEUE_FORMAT":       {map[string]string{"SQUEUE_FORMAT": "%i|%u"}, []string{"squeue", "-h"}, fmt.Sprintf("%d|tester\n%d|tester\n", lo, hi)},
		"SQUEUE_FORMAT2":      {map[string]string{"SQUEUE_FORMAT2": "jobid:.4"}, []string{"squeue", "-h"}, fmt.Sprintf("%4d\n%4d\n", lo, hi)},
		"SQUEUE_SORT":         {map[string]string{"SQUEUE_SORT": "-i", "SQUEUE_FORMAT": "%i"}, []string{"squeue", "-h"}, fmt.Sprintf("%d\n%d\n", hi, lo)},
		"-o wins over it":     {map[string]string{"SQUEUE_FORMAT": "%u"}, []string{"squeue", "-h", "-o", "%i", "-S", "i"}, fmt.Sprintf("%d\n%d\n", lo, hi)},
		"SINFO_FORMAT":        {map[string]string{"SINFO_FORMAT": "%R %D"}, []string{"sinfo", "-h"}, "batch 0\ndebug 0\n"},
		"sinfo -O wins":       {map[string]string{"SINFO_FORMAT": "%R %D"}, []string{"sinfo", "-h", "-O", "partitionname:6,nodes:.2"}, "batch  0\ndebug  0\n"},
		"a bad SINFO_FORMAT":  {map[string]string{"SINFO_FORMAT": "%Q"}, []string{"sinfo"}, "sinfo: error: SINFO_FORMAT: Invalid node format specification: %Q"},
		"a bad SQUEUE_FORMAT": {map[string]string{"SQUEUE_FORMAT": "%!"}, []string{"squeue"}, "squeue: error: --format:"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := runWithEnv(t, f.ctx, f.addr, tc.vars, tc.argv...)
			got := r.stdout
			if r.code != 0 {
				got = r.stderr
			}
			if !strings.HasPrefix(got, tc.want) || r.code == 0 && got != tc.want {
				t.Errorf("%v with %v: exit %d, %q; want %q", tc.argv, tc.vars, r.code, got, tc.want)
			}
		})
	}
}

// testQueueForms runs the squeue forms of issue 16 against the fixture's
// controller: its two pending jobs of tester, then an array of three.
func testQueueForms(t *testing.T, f *ctlFixture) {
	ctx, addr, first, second := f.ctx, f.addr, f.first, f.second
	lo, hi := min(first, second), max(first, second)
	text := map[string]struct {
		args []string
		want string
	}{
		"--me": {[]string{"--me", "-h", "-o", "%i %u"}, fmt.Sprintf("%d tester\n%d tester\n", lo, hi)},
		"-O widths": {[]string{"-O", "jobid:.8,username:7,statecompact:3,nodelist"},
			fmt.Sprintf("   JOBIDUSER   ST NODELIST            \n%8dtester PD                     \n%8dtester PD                     \n", lo, hi)},
		"-S -i":          {[]string{"-h", "-S", "-i", "-o", "%i"}, fmt.Sprintf("%d\n%d\n", hi, lo)},
		"-S long names":  {[]string{"-h", "--sort=+JobID", "-o", "%i"}, fmt.Sprintf("%d\n%d\n", lo, hi)},
		"-q no such QoS": {[]string{"-h", "-q", "nosuch"}, ""},
		"-w a node":      {[]string{"-h", "-w", "n[1-2]"}, ""},
		"-R none":        {[]string{"-h", "-R", "maint"}, ""},
	}
	for name, tc := range text {
		t.Run(name, func(t *testing.T) {
			if got := mustRun(t, ctx, addr, append([]string{"squeue"}, tc.args...)...); got != tc.want {
				t.Errorf("squeue %v:\n%q\nwant\n%q", tc.args, got, tc.want)
			}
		})
	}
	refused := map[string]struct {
		args   []string
		stderr string
	}{
		"-O unknown":     {[]string{"-O", "jobid,bogus"}, `squeue: error: Invalid job format specification: bogus (in --Format "jobid,bogus"`},
		"-S unknown":     {[]string{"-S", "P,zz"}, `squeue: error: Invalid sort specification: zz (in --sort "P,zz"`},
		"-i not seconds": {[]string{"-i", "0"}, `squeue: error: --iterate="0"`},
		"-w bad list":    {[]string{"-w", "n[1-"}, "squeue: error: --nodelist: not a host list: \"n[1-\": '[' at byte 1 is never closed"},
		"unknown option": {[]string{"--bogus"}, "squeue: error: unknown option"},
	}
	if out := mustRun(t, ctx, addr, "squeue", "-s"); out != "STEPID NAME PARTITION USER TIME NODELIST\n" {
		t.Errorf("squeue -s without steps: %q, want the header alone", out)
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, ctx, addr, append([]string{"squeue"}, tc.args...)...)
			if r.code == 0 || !strings.HasPrefix(r.stderr, tc.stderr) || strings.Contains(r.stderr, "error: queue:") {
				t.Errorf("squeue %v: exit %d, stderr %q; want it refused with %q", tc.args, r.code, r.stderr, tc.stderr)
			}
		})
	}
}

// testQueueArray checks squeue -r against a held array of three tasks (held,
// so that none starts on the fixture's node), which it cancels again.
func testQueueArray(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	out := strings.TrimSpace(mustRun(t, ctx, addr, "sbatch", "--parsable", "--hold", "--array=1-3", "--wrap", "true"))
	id := strings.Split(out, ";")[0]
	defer mustRun(t, ctx, addr, "scancel", id)
	if got, want := mustRun(t, ctx, addr, "squeue", "-h", "-j", id, "-o", "%i"), id+"_[1-3]\n"; got != want {
		t.Errorf("squeue -j %s: %q, want %q", id, got, want)
	}
	want := fmt.Sprintf("%s_1 1\n%[1]s_2 2\n%[1]s_3 3\n", id)
	if got := mustRun(t, ctx, addr, "squeue", "-r", "-h", "-j", id, "-o", "%i %K"); got != want {
		t.Errorf("squeue -r -j %s: %q, want %q", id, got, want)
	}
	if got, want := mustRun(t, ctx, addr, "squeue", "-r", "-h", "-j", id+"_2,"+id+"_3", "-o", "%i"), id+"_2\n"+id+"_3\n"; got != want {
		t.Errorf("squeue -r -j %s_2,%[1]s_3: %q, want %q", id, got, want)
	}
}

// testNodeForms runs the sinfo forms of issue 16 against the fixture's
// controller, which has n1 (2 CPUs, 1024 MB) in batch and an empty debug.
func testNodeForms(t *testing.T, f *ctlFixture) {
	ctx, addr := f.ctx, f.addr
	text := map[string]struct {
		args []string
		want string
	}{
		"-s": {[]string{"-s"}, "" +
			"PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T)  NODELIST\n" +
			"batch*       up   infinite          0/1/0/1  n1\n" +
			"debug        up      30:00          0/0/0/0  \n"},
		"-o": {[]string{"-o", "%P|%c|%m|%C|%t|%N"}, "" +
			"PARTITION|CPUS|MEMORY|CPUS(A/I/O/T)|STATE|NODELIST\n" +
			"batch*|2|1024|0/2/0/2|idle|n1\n" +
			"debug|0|0|0/0/0/0|n/a|\n"},
		"-O": {[]string{"-O", "partition:10,nodes:.6,statecompact"}, "" +
			"PARTITION  NODESSTATE               \n" +
			"batch*         1idle                \n" +
			"debug          0n/a                 \n"},
		"-t and -n":         {[]string{"-h", "-N", "-t", "idle", "-n", "n[1-3]"}, "n1             1    batch* idle  \n"},
		"-t with no match":  {[]string{"-h", "-t", "drain"}, ""},
		"-R with no reason": {[]string{"-R"}, "REASON               USER      TIMESTAMP           NODELIST\n"},
		"-T with none":      {[]string{"-T"}, "No reservations in the system\n"},
		"-e":                {[]string{"-h", "-e", "-p", "batch"}, "batch*       up   infinite      1   idle n1\n"},
	}
	for name, tc := range text {
		t.Run(name, func(t *testing.T) {
			if got := mustRun(t, ctx, addr, append([]string{"sinfo"}, tc.args...)...); got != tc.want {
				t.Errorf("sinfo %v:\n%s\nwant\n%s", tc.args, got, tc.want)
			}
		})
	}
	refused := map[string]struct {
		args   []string
		stderr string
	}{
		"-t unknown":     {[]string{"-t", "sleepy"}, `sinfo: error: Bad state string: "sleepy" (valid states: all,`},
		"-o unknown":     {[]string{"-o", "%P %Q"}, `sinfo: error: Invalid node format specification: %Q (in format "%P %Q"`},
		"-O unknown":     {[]string{"-O", "nodes,bogus"}, `sinfo: error: Invalid node format specification: bogus (in --Format "nodes,bogus"`},
		"-n empty":       {[]string{"-n", ","}, "sinfo: error: --nodes: no node named"},
		"-d with -r":     {[]string{"-d", "-r"}, "sinfo: error: --dead and --responding exclude each other"},
		"unknown option": {[]string{"-Z"}, "sinfo: error: "},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, ctx, addr, append([]string{"sinfo"}, tc.args...)...)
			if r.code == 0 || !strings.HasPrefix(r.stderr, tc.stderr) || strings.Contains(r.stderr, "error: nodes:") {
				t.Errorf("sinfo %v: exit %d, stderr %q; want it refused with %q", tc.args, r.code, r.stderr, tc.stderr)
			}
		})
	}
	t.Run("-R shows who drained a node and when", func(t *testing.T) {
		before := time.Now().Add(-time.Second)
		mustRun(t, ctx, addr, "corral", "node", "drain", "n1", "--reason", "fan broken")
		defer mustRun(t, ctx, addr, "corral", "node", "resume", "n1")
		rows := fields(mustRun(t, ctx, addr, "sinfo", "-R", "-h"))
		if len(rows) != 1 || len(rows[0]) != 5 || rows[0][0] != "fan" || rows[0][1] != "broken" || rows[0][4] != "n1" {
			t.Fatalf("sinfo -R: %v, want the reason, a user, a time and n1", rows)
		}
		at, err := time.ParseInLocation("2006-01-02T15:04:05", rows[0][3], time.Local)
		if err != nil || at.Before(before.Truncate(time.Second)) || at.After(time.Now()) {
			t.Errorf("sinfo -R timestamp %q (%v), want the time of the drain", rows[0][3], err)
		}
		if rows[0][2] == "Unknown" {
			t.Errorf("sinfo -R user %q, want who drained the node", rows[0][2])
		}
		if got := fields(mustRun(t, ctx, addr, "sinfo", "-s", "-h", "-p", "batch")); len(got) != 1 || got[0][3] != "0/0/1/1" {
			t.Errorf("sinfo -s of a drained node: %v, want 0/0/1/1", got)
		}
	})
}

// TestIterate checks -i's loop: a listing, then another each time the
// interval passes, until an interrupt, which is not an error.
func TestIterate(t *testing.T) {
	errStop := errors.New("interrupted")
	tests := map[string]struct {
		every  time.Duration
		sleeps int // sleeps that pass before the interrupt
		fail   int // the listing that fails, 0 for none
		runs   int
		err    error
	}{
		"once without -i":      {0, 5, 0, 1, nil},
		"until interrupted":    {time.Second, 2, 0, 3, nil},
		"a failing listing":    {time.Second, 5, 2, 2, errStop},
		"interrupted at first": {time.Second, 0, 0, 1, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			slept, runs := 0, 0
			sleep := func(_ context.Context, d time.Duration) error {
				if d != tc.every {
					t.Errorf("slept %v, want %v", d, tc.every)
				}
				if slept++; slept > tc.sleeps {
					return context.Canceled
				}
				return nil
			}
			err := iterate(context.Background(), tc.every, sleep, func(first bool) error {
				runs++
				if first != (runs == 1) {
					t.Errorf("listing %d: first=%v", runs, first)
				}
				if runs == tc.fail {
					return errStop
				}
				return nil
			})
			if runs != tc.runs || !errors.Is(err, tc.err) {
				t.Errorf("%d listings, error %v; want %d, %v", runs, err, tc.runs, tc.err)
			}
		})
	}
}
