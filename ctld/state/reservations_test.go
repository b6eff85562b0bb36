package state

import (
	"strings"
	"testing"
	"time"

	"corral/api"
)

// resv is a whole-node reservation of node on [t0+from, t0+to) for alice.
func resv(name string, from, to time.Duration, nodes ...string) api.Reservation {
	return api.Reservation{Name: name, StartTime: t0.Add(from), EndTime: t0.Add(to), Nodes: nodes, Users: []string{"alice"}}
}

// errText is the text of an apply's error result, "" for none.
func errText(res any) string {
	if err, ok := res.(error); ok {
		return err.Error()
	}
	return ""
}

func init() {
	applyTests[CmdPutReservation] = func(t *testing.T) {
		r, next := scene(t)
		s := r.s
		put := func(rv api.Reservation, create bool) string {
			return errText(next(CmdPutReservation, &PutReservation{Now: t0, Reservation: rv, Create: create, By: "root"}))
		}
		// Job 1 runs on n1 without a time limit: it holds n1 past any start.
		busy := put(resv("m", time.Hour, 2*time.Hour, "n1"), true)
		ignore := resv("m", time.Hour, 2*time.Hour, "n1")
		ignore.Flags = []api.ResvFlag{api.ResvIgnoreJobs}
		made := put(ignore, true)
		dup := put(ignore, true)
		overlap := put(resv("o", 90*time.Minute, 3*time.Hour, "n1"), true)
		after := put(resv("o", 2*time.Hour, 3*time.Hour, "n1"), true) // after m: it only meets job 1
		maint := resv("p", 0, 90*time.Minute, "n1")
		maint.Flags = []api.ResvFlag{api.ResvIgnoreJobs, api.ResvMaint}
		underMaint := put(maint, true) // a MAINT one may overlap m
		noUsers := resv("u", time.Hour, 2*time.Hour, "n2")
		noUsers.Users = nil
		lacks := put(noUsers, true)
		unknown := put(resv("x", time.Hour, 2*time.Hour, "n9"), true)
		daily := resv("d", time.Hour, 26*time.Hour, "n2")
		daily.Flags = []api.ResvFlag{api.ResvDaily, api.ResvIgnoreJobs}
		tooLong := put(daily, true)
		missing := put(resv("nope", time.Hour, 2*time.Hour, "n1"), false)
		// Started is the state's own: an update keeps it.
		cur := *s.Reservations["m"]
		cur.Started = 0
		s.Reservations["m"].Started = 3
		cur.EndTime = t0.Add(150 * time.Minute)
		updated := put(cur, false)
		expect(t, map[string][2]any{
			"busy nodes refused":        {strings.Contains(busy, "Requested nodes are busy") && strings.Contains(busy, "job 1"), true},
			"IGNORE_JOBS made it":       {made, ""},
			"flags in order":            {s.Reservations["p"].Flags[0], api.ResvMaint},
			"a name once":               {strings.Contains(dup, "Duplicate reservation name"), true},
			"overlap refused":           {strings.Contains(overlap, "overlaps with another reservation") && strings.Contains(overlap, "m holds node n1"), true},
			"busy after m too":          {strings.Contains(after, "busy"), true},
			"MAINT may overlap":         {underMaint, ""},
			"users or accounts":         {strings.Contains(lacks, "lacks users or accounts"), true},
			"unknown node":              {strings.Contains(unknown, "Invalid node name specified: n9"), true},
			"window longer than repeat": {strings.Contains(tooLong, "does not fit in its repeat period"), true},
			"update of unknown":         {strings.Contains(missing, "Reservation nope not found"), true},
			"update applied":            {updated, ""},
			"update keeps Started":      {s.Reservations["m"].Started, 3},
			"update changed end":        {s.Reservations["m"].EndTime, t0.Add(150 * time.Minute)},
		})
		// A job of reservation m starts only on its nodes within its
		// window, and not into the maintenance p: job 10 (m, 30 minutes)
		// is refused at t0 (the window opens at t0+1h), on n2, and at
		// t0+1h (p lasts until t0+90m); it starts at t0+90m.
		in := spec("in")
		in.Reservation, in.TimeLimit = "m", 1800
		out := spec("out")
		out.TimeLimit = 7200
		next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 10, Jobs: []JobSpec{in, out}})
		early := next(CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 10, Node: "n1", CPUs: 1, MemMB: 512}}}).(*PlanResult)
		elsewhere := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Hour), Starts: []PlanStart{{JobID: 10, Node: "n2", CPUs: 1, MemMB: 512}}}).(*PlanResult)
		// Job 11 (no reservation, 2 hours) would run into m on n1.
		intrude := next(CmdApplyPlan, &ApplyPlan{Now: t0, Starts: []PlanStart{{JobID: 11, Node: "n1", CPUs: 1, MemMB: 512}}}).(*PlanResult)
		maintFirst := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Hour), Starts: []PlanStart{{JobID: 10, Node: "n1", CPUs: 1, MemMB: 512}}}).(*PlanResult)
		inside := next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(90 * time.Minute), Starts: []PlanStart{{JobID: 10, Node: "n1", CPUs: 1, MemMB: 512}}}).(*PlanResult)
		inUse := errText(next(CmdPutReservation, &PutReservation{Now: t0.Add(90 * time.Minute), Reservation: api.Reservation{Name: "m"}, Delete: true}))
		expect(t, map[string][2]any{
			"not before its window": {len(early.Rejected), 1},
			"not off its nodes":     {len(elsewhere.Rejected), 1},
			"no intruder":           {len(intrude.Rejected), 1},
			"maintenance first":     {len(maintFirst.Rejected), 1},
			"inside it starts":      {len(inside.Started), 1},
			"started counted":       {s.Reservations["m"].Started, 4},
			"no delete while used":  {strings.Contains(inUse, "Reservation is in use: job 10"), true},
		})
		gone := errText(next(CmdPutReservation, &PutReservation{Reservation: api.Reservation{Name: "p"}, Delete: true}))
		expect(t, map[string][2]any{"deleted": {gone, ""}, "gone": {s.Reservations["p"] == nil, true}})
	}
	applyTests[CmdExpireReservations] = func(t *testing.T) {
		r, next := scene(t)
		s := r.s
		a := resv("a", time.Hour, 2*time.Hour, "n2")
		a.Flags = []api.ResvFlag{api.ResvIgnoreJobs}
		d := resv("d", time.Hour, 2*time.Hour, "n2")
		d.Flags = []api.ResvFlag{api.ResvDaily, api.ResvIgnoreJobs, api.ResvOverlap}
		c := api.Reservation{Name: "c", StartTime: t0, EndTime: t0.Add(10 * time.Hour), Nodes: []string{"n1"}, Accounts: []string{"phys"},
			Flags: []api.ResvFlag{api.ResvPurgeComp, api.ResvIgnoreJobs}, PurgeAfter: 60, CPUs: 1, Parts: []api.ResvPart{{Node: "n1", CPUs: 1, MemMB: 1024}}}
		for _, rv := range []api.Reservation{a, d, c} {
			if err := errText(next(CmdPutReservation, &PutReservation{Now: t0, Reservation: rv, Create: true})); err != "" {
				t.Fatal(err)
			}
		}
		early := next(CmdExpireReservations, &ExpireReservations{Now: t0.Add(90 * time.Minute), Names: []string{"a", "d", "c"}}).([]string)
		// A job of the consumable reservation c takes its one CPU: used up.
		job := spec("c1")
		job.Reservation, job.Account, job.TimeLimit = "c", "phys", 60
		next(CmdSubmitJobs, &SubmitJobs{Now: t0, FirstID: 10, Jobs: []JobSpec{job}})
		next(CmdApplyPlan, &ApplyPlan{Now: t0.Add(time.Minute), Starts: []PlanStart{{JobID: 10, Node: "n1", CPUs: 1, MemMB: 512}}})
		used := s.Reservations["c"].Parts[0].UsedCPUs
		running := next(CmdExpireReservations, &ExpireReservations{Now: t0.Add(2 * time.Minute), Names: []string{"c"}}).([]string)
		next(CmdJobReports, &JobReports{Now: t0.Add(3 * time.Minute), Node: "n1", BootID: "b1", Reports: []api.JobReport{{JobID: 10, StartIndex: run(s, 10).StartIndex, State: api.StateCompleted}}})
		late := next(CmdExpireReservations, &ExpireReservations{Now: t0.Add(3 * time.Hour), Names: []string{"a", "d", "c"}}).([]string)
		expect(t, map[string][2]any{
			"none over early":          {len(early), 0},
			"consumed":                 {used, 1},
			"not while a job runs":     {len(running), 0},
			"over and used up go":      {strings.Join(late, ","), "a,c"},
			"a daily one stays":        {s.Reservations["d"] != nil, true},
			"the ended one is deleted": {s.Reservations["a"] == nil, true},
		})
	}
}

func TestResvWindowsRepeat(t *testing.T) {
	d := resv("d", time.Hour, 2*time.Hour, "n1")
	d.Flags = []api.ResvFlag{api.ResvDaily}
	start, end := d.Window(t0.Add(3 * time.Hour))
	if !start.Equal(t0.Add(25*time.Hour)) || !end.Equal(t0.Add(26*time.Hour)) {
		t.Fatalf("the window after the first is %s..%s, want the next day's", start, end)
	}
	if d.Active(t0.Add(3*time.Hour)) || !d.Active(t0.Add(25*time.Hour+time.Minute)) || d.Over(t0.Add(1000*time.Hour)) {
		t.Fatal("a daily reservation is active in each day's window and never over")
	}
	ws := ResvWindows(&d, t0, t0.Add(3*24*time.Hour), nil)
	if len(ws) != 3 || !ws[2][0].Equal(t0.Add(49*time.Hour)) {
		t.Fatalf("three days hold three windows, got %v", ws)
	}
	w := resv("w", 30*time.Minute, 90*time.Minute, "n1")
	w.Flags = []api.ResvFlag{api.ResvWeekly}
	if _, ok := WindowsMeet(&d, &w, t0); !ok {
		t.Fatal("a daily and a weekly window over the same hour meet")
	}
	w.StartTime, w.EndTime = t0.Add(3*time.Hour), t0.Add(4*time.Hour)
	if at, ok := WindowsMeet(&d, &w, t0); ok {
		t.Fatalf("windows at 13:00 each day and 15:00 each week never meet, got %s", at)
	}
}

// TestMigrationKeepsOutOfReservations: a live migration's destination is a
// start too: job 1 (no time limit) may not move onto v2 while bob's
// reservation holds it, and moves once the reservation is gone.
func TestMigrationKeepsOutOfReservations(t *testing.T) {
	r, next := migScene(t)
	rv := api.Reservation{Name: "bobs", StartTime: t0.Add(time.Hour), EndTime: t0.Add(2 * time.Hour), Nodes: []string{"v2"},
		Users: []string{"bob"}, Flags: []api.ResvFlag{api.ResvIgnoreJobs}}
	if err := errText(next(CmdPutReservation, &PutReservation{Now: t0, Reservation: rv, Create: true})); err != "" {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	res := next(CmdMigrateJobs, &MigrateJobs{Now: at, Requests: []MigrateRequest{{Job: 1, By: "alice", Token: "tok"}}}).(*IDsResult)
	if len(res.Changed) != 1 {
		t.Fatalf("migration refused: %v", res.Errors)
	}
	m := r.s.LiveMigration(r.s.Jobs[1])
	place := func(now time.Time) *PlanResult {
		return next(CmdApplyPlan, &ApplyPlan{Now: now, Migrations: []PlanMigration{{JobID: 1, From: "v1", To: "v2",
			Migration: m.ID, CPUs: 1, MemMB: 512}}}).(*PlanResult)
	}
	if pr := place(at.Add(time.Second)); len(pr.Migrated) != 0 || len(pr.Skipped) != 1 {
		t.Fatalf("a migration onto a reserved node was placed: %+v", pr)
	}
	next(CmdPutReservation, &PutReservation{Reservation: api.Reservation{Name: "bobs"}, Delete: true})
	if pr := place(at.Add(2 * time.Second)); len(pr.Migrated) != 1 {
		t.Fatalf("the migration was not placed once the reservation was gone: %+v", pr)
	}
}
