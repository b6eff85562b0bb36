package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// runCLIAs is runCLI as another Unix user (the test controller believes
// the user a client claims).
func runCLIAs(t *testing.T, ctx context.Context, addr, user string, argv ...string) result {
	t.Helper()
	vars := map[string]string{"USER": user, "CORRAL_ADDR": addr}
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(k string) string { return vars[k] }}
	code := dispatch(ctx, env, argv)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// testReservations drives advance reservations through scontrol, sinfo,
// squeue, scancel and sbatch against the fixture's controller, on a node
// n2 of its own partition (resv) so that the other tests' jobs stay off
// it: a maintenance window that keeps a long job off while a short one
// fills the gap; the maintenance in force (sinfo's maint); a user
// reservation that runs only its user's jobs; a daily one whose window
// moves on; a consumable CPU block used up by its job and deleted.
func testReservations(t *testing.T, f *ctlFixture) {
	ctx, addr, cl := f.ctx, f.addr, f.cl
	if err := cl.Register(ctx, api.NodeInfo{Name: "n2", CPUs: 2, MemMB: 2048, Partitions: []string{"resv"}, Runner: "test", BootID: "b2"}); err != nil {
		t.Fatal(err)
	}
	submit := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(mustRun(t, ctx, addr, append([]string{"sbatch", "--parsable", "--mem=100M"}, append(args, "--wrap", "true")...)...))
	}
	state := func(id string) string {
		return strings.TrimSpace(mustRun(t, ctx, addr, "squeue", "-h", "-t", "all", "-j", id, "-o", "%T %r"))
	}
	end := func(ids ...string) { // cancel the jobs; those that ran on n2 end there
		t.Helper()
		runCLI(t, ctx, addr, append([]string{"scancel"}, ids...)...) // some may be cancelled already
		for _, id := range ids {
			j, err := cl.JobByRef(ctx, id, true)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == api.StateCompleting {
				if err := cl.Report(ctx, api.NodeStatus{Name: "n2", BootID: "b2", Reports: []api.JobReport{
					{JobID: j.ID, StartIndex: j.StartIndex, State: api.StateCancelled}}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		waitFor(t, "the jobs to end", func() bool {
			for _, id := range ids {
				if j, err := cl.JobByRef(ctx, id, false); err != nil || !j.State.Terminal() {
					return false
				}
			}
			return true
		})
	}

	t.Run("refusals in Slurm's words", func(t *testing.T) {
		for _, tc := range []struct{ args, want string }{
			{"StartTime=now Duration=60 Nodes=n2", "Error creating the reservation: Requested reservation is invalid: reservation resv_1: Reservation request lacks users or accounts"},
			{"StartTime=now Duration=60 Users=root Nodes=n9", "Invalid node name specified: n9"},
			{"StartTime=now Duration=60 Users=root Nodes=n2 Flags=WEEKDAY", "flag WEEKDAY is not taken"},
			{"StartTime=never Duration=60 Users=root Nodes=n2", "StartTime=never: Invalid time specified"},
		} {
			r := runCLI(t, ctx, addr, append([]string{"scontrol", "create", "reservation"}, strings.Fields(tc.args)...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("scontrol create reservation %s: exit %d, stderr %q; want %q", tc.args, r.code, r.stderr, tc.want)
			}
		}
	})

	t.Run("MAINT keeps overlapping jobs off; backfill uses the gap", func(t *testing.T) {
		if out := mustRun(t, ctx, addr, "scontrol", "create", "reservation", "ReservationName=maint", "StartTime=now+1hour", "Duration=120",
			"Users=root", "Flags=MAINT", "Nodes=n2"); out != "Reservation created: maint\n" {
			t.Fatalf("create printed %q", out)
		}
		long := submit("-p", "resv", "-n", "2", "-t", "2:00:00")
		short := submit("-p", "resv", "-t", "30")
		waitFor(t, "the short job to fill the gap", func() bool { return strings.HasPrefix(state(short), "RUNNING") })
		waitFor(t, "the long job to wait for the maintenance", func() bool {
			return state(long) == "PENDING ReqNodeNotAvail, Reserved for maintenance"
		})
		if out := mustRun(t, ctx, addr, "scontrol", "show", "job", long); !strings.Contains(out, "Reason=ReqNodeNotAvail,_Reserved_for_maintenance") {
			t.Errorf("show job:\n%s", out)
		}
		if out := mustRun(t, ctx, addr, "corral", "why", long); !strings.Contains(out, "maintenance reservation") || !strings.Contains(out, "maint (n2") {
			t.Errorf("why:\n%s", out)
		}
		rows := fields(mustRun(t, ctx, addr, "sinfo", "-T"))
		if len(rows) != 2 || strings.Join(rows[0], " ") != "RESV_NAME STATE START_TIME END_TIME DURATION NODELIST" ||
			rows[1][0] != "maint" || rows[1][1] != "INACTIVE" || rows[1][4] != "02:00:00" || rows[1][5] != "n2" {
			t.Errorf("sinfo -T: %v", rows)
		}
		out := mustRun(t, ctx, addr, "scontrol", "show", "reservation", "maint")
		for _, want := range []string{"ReservationName=maint StartTime=", "Duration=02:00:00", "Nodes=n2 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES",
			"TRES=cpu=2", "Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE", "MaxStartDelay=(null)"} {
			if !strings.Contains(out, want) {
				t.Errorf("show reservation does not hold %q:\n%s", want, out)
			}
		}
		end(long, short)
		// sbatch --test-only runs the same pass: a 2-hour job of n2's
		// partition starts when the maintenance ends.
		r := runCLI(t, ctx, addr, "sbatch", "--test-only", "-p", "resv", "-n", "2", "-t", "2:00:00", "--mem=100M", "--wrap", "true")
		if maintEnd := rows[1][3]; r.code != 0 || !strings.Contains(r.stderr, " to start at "+maintEnd+" using 2 processors on nodes n2 in partition resv") {
			t.Errorf("sbatch --test-only before a maintenance: exit %d, stderr %q; want a start at its end, %s", r.code, r.stderr, maintEnd)
		}
		// In force now: n2 shows as maint.
		if out := mustRun(t, ctx, addr, "scontrol", "update", "ReservationName=maint", "StartTime=now"); out != "Reservation updated.\n" {
			t.Errorf("update printed %q", out)
		}
		if rows := fields(mustRun(t, ctx, addr, "sinfo", "-N", "-h", "-n", "n2")); len(rows) != 1 || rows[0][3] != "maint" {
			t.Errorf("sinfo -N of a node in maintenance: %v", rows)
		}
		if out := mustRun(t, ctx, addr, "scontrol", "show", "node", "n2"); !strings.Contains(out, "State=IDLE+MAINT+RESERVED") {
			t.Errorf("show node:\n%s", out)
		}
		if out := mustRun(t, ctx, addr, "scontrol", "delete", "ReservationName=maint"); out != "" {
			t.Errorf("delete printed %q", out)
		}
		if out := mustRun(t, ctx, addr, "sinfo", "-T"); out != "No reservations in the system\n" {
			t.Errorf("sinfo -T after the delete: %q", out)
		}
	})

	t.Run("a user reservation runs only its users' jobs", func(t *testing.T) {
		mustRun(t, ctx, addr, "corral", "reservation", "create", "ReservationName=mine", "StartTime=now", "Duration=60", "Users=tester", "Nodes=n2")
		defer mustRun(t, ctx, addr, "corral", "reservation", "delete", "mine")
		if r := runCLIAs(t, ctx, addr, "bob", "sbatch", "--reservation=mine", "-p", "resv", "--wrap", "true"); r.code != 1 ||
			!strings.Contains(r.stderr, "Access denied to requested reservation: reservation mine is for users tester") {
			t.Errorf("bob's job in tester's reservation: exit %d, stderr %q", r.code, r.stderr)
		}
		if r := runCLI(t, ctx, addr, "sbatch", "--reservation=nosuch", "--wrap", "true"); r.code != 1 || !strings.Contains(r.stderr, "Requested reservation is invalid") {
			t.Errorf("a job in no reservation: exit %d, stderr %q", r.code, r.stderr)
		}
		r := runCLIAs(t, ctx, addr, "bob", "sbatch", "--parsable", "-p", "resv", "-t", "10", "--mem=100M", "--wrap", "true")
		bobs := strings.TrimSpace(r.stdout)
		mine := submit("--reservation=mine", "-p", "resv", "-t", "10")
		waitFor(t, "tester's job to run in the reservation", func() bool { return strings.HasPrefix(state(mine), "RUNNING") })
		waitFor(t, "bob's job to wait", func() bool { return state(bobs) == "PENDING Resources" })
		if rows := fields(mustRun(t, ctx, addr, "squeue", "-h", "-R", "mine", "-o", "%i %v")); len(rows) != 1 || rows[0][0] != mine || rows[0][1] != "mine" {
			t.Errorf("squeue -R mine: %v", rows)
		}
		if out := mustRun(t, ctx, addr, "scontrol", "show", "job", mine); !strings.Contains(out, "Reservation=mine") {
			t.Errorf("show job of the reservation:\n%s", out)
		}
		mustRun(t, ctx, addr, "scancel", "--reservation=mine")
		if j, err := cl.JobByRef(ctx, mine, false); err != nil || j.State != api.StateCompleting {
			t.Errorf("scancel --reservation: job %s is %v (%v)", mine, j.State, err)
		}
		end(mine, bobs)
	})

	t.Run("DAILY: the next window follows the previous", func(t *testing.T) {
		first := time.Now().Add(-25 * time.Hour).Truncate(time.Second)
		mustRun(t, ctx, addr, "scontrol", "create", "reservation", "ReservationName=daily", "StartTime="+first.Format(time.RFC3339),
			"Duration=30", "Users=tester", "Nodes=n2", "Flags=DAILY")
		defer mustRun(t, ctx, addr, "scontrol", "delete", "ReservationName=daily")
		rows := fields(mustRun(t, ctx, addr, "sinfo", "-T", "-h"))
		next := first.Add(48 * time.Hour).Format("2006-01-02T15:04:05")
		if len(rows) != 1 || rows[0][0] != "daily" || rows[0][1] != "INACTIVE" || rows[0][2] != next || rows[0][4] != "00:30:00" {
			t.Errorf("sinfo -T of a daily reservation whose windows of yesterday and today ended: %v, want the window at %s", rows, next)
		}
		waiting := submit("--reservation=daily", "-p", "resv", "-t", "10")
		waitFor(t, "a job of the daily reservation to wait for its window", func() bool { return state(waiting) == "PENDING Reservation" })
		if out := mustRun(t, ctx, addr, "corral", "why", waiting); !strings.Contains(out, "Reservation daily opens at ") {
			t.Errorf("why of a job waiting for its reservation:\n%s", out)
		}
		mustRun(t, ctx, addr, "scancel", waiting)
		r := runCLI(t, ctx, addr, "sbatch", "--test-only", "--reservation=daily", "-p", "resv", "-t", "10", "--mem=100M", "--wrap", "true")
		if r.code != 0 || !strings.Contains(r.stderr, " to start at "+next+" using 1 processors on nodes n2") {
			t.Errorf("sbatch --test-only --reservation=daily: exit %d, stderr %q; want the next window, %s", r.code, r.stderr, next)
		}
	})

	t.Run("a consumable CPU block is used up and deleted", func(t *testing.T) {
		mustRun(t, ctx, addr, "scontrol", "create", "reservation", "ReservationName=cap", "StartTime=now", "Duration=60",
			"Users=tester", "TRES=cpu=1", "PartitionName=resv", "Flags=PURGE_COMP")
		out := mustRun(t, ctx, addr, "scontrol", "show", "reservation", "cap")
		for _, want := range []string{"Nodes=n2 NodeCnt=1 CoreCnt=1", "PartitionName=resv Flags=PURGE_COMP=00:05:00", "NodeName=n2 CoreCnt=1 Mem=1024M Used=cpu=0", "TRES=cpu=1", "State=ACTIVE"} {
			if !strings.Contains(out, want) {
				t.Errorf("show reservation does not hold %q:\n%s", want, out)
			}
		}
		in := submit("--reservation=cap", "-t", "10") // the reservation's partition
		again := submit("--reservation=cap", "-t", "10")
		outside := submit("-p", "resv", "-t", "10")
		waitFor(t, "the block's job to run", func() bool { return strings.HasPrefix(state(in), "RUNNING") })
		waitFor(t, "a job outside the block to take n2's other CPU", func() bool { return strings.HasPrefix(state(outside), "RUNNING") })
		waitFor(t, "the block's second job to find it used", func() bool { return state(again) == "PENDING Resources" })
		end(in)
		waitFor(t, "the used-up block to be deleted", func() bool {
			return runCLI(t, ctx, addr, "scontrol", "show", "reservation", "cap").code == 1
		})
		waitFor(t, "its waiting job to learn it is gone", func() bool { return state(again) == "PENDING ReservationDeleted" })
		end(again, outside)
	})
}
