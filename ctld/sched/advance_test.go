package sched

import (
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// resvB builds an advance reservation for the scenarios: whole nodes for
// user alice over [t0+from, t0+to).
type resvB struct{ r *api.Reservation }

func resv(name string, from, to time.Duration, nodes ...string) resvB {
	return resvB{&api.Reservation{Name: name, StartTime: t0.Add(from), EndTime: t0.Add(to), Nodes: nodes, Users: []string{"alice"}}}
}

func (b resvB) flags(f ...api.ResvFlag) resvB { b.r.Flags = append(b.r.Flags, f...); return b }
func (b resvB) users(u ...string) resvB       { b.r.Users = u; return b }
func (b resvB) accounts(a ...string) resvB    { b.r.Accounts, b.r.Users = a, nil; return b }

// share makes it a capacity reservation: cpus CPUs (with mem MiB) and gpus
// GPUs on its one node, of which used were consumed.
func (b resvB) share(cpus int, mem int64, gpus, used int) resvB {
	b.r.CPUs, b.r.GPUs = cpus, gpus
	b.r.Parts = []api.ResvPart{{Node: b.r.Nodes[0], CPUs: cpus, MemMB: mem, GPUs: gpus, UsedCPUs: used}}
	return b
}

// reserve adds advance reservations to the scene.
func (sc *scene) reserve(rs ...resvB) *scene {
	for _, b := range rs {
		sc.s.Advance = append(sc.s.Advance, b.r)
	}
	return sc
}

// in names the reservation the job runs in.
func (b jobB) in(name string) jobB { return b.with(func(j *state.Job) { j.Spec.Reservation = name }) }
func (b jobB) account(a string) jobB {
	return b.with(func(j *state.Job) { j.Spec.Account = a })
}
func (b jobB) user(u string) jobB { return b.with(func(j *state.Job) { j.Spec.User = u }) }

func TestScheduleAdvanceReservations(t *testing.T) {
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	node4 := func() nodeSet { return node("n1").cpus(4).mem(4096) }
	runScenarios(t, map[string]scenario{
		// Maintenance of n1 from t0+1h to t0+3h. Job 1 (2h) would run
		// into it: it waits, reserved for after it; job 2 (30m) ends
		// before it and backfills the gap.
		"a MAINT reservation keeps jobs that would overlap it off; backfill uses the gap": {
			scene: at(t0).with(node4()).reserve(resv("maint", time.Hour, 3*time.Hour, "n1").users("root").flags(api.ResvMaint)).
				queue(job(1).cpus(4).limit(2*time.Hour), job(2).limit(30*time.Minute)),
			starts:    []string{"2@n1"},
			reasons:   map[uint64]api.Reason{1: api.ReasonReservedForMaint},
			estimates: map[uint64]time.Time{1: m(180)},
			wake:      m(60),
		},
		// n1 is alice's now. Bob's job naming it is not admitted; bob's
		// other job may not use n1 until the window ends; alice's runs.
		"a user reservation runs only its users' jobs": {
			scene: at(t0).with(node4()).reserve(resv("r", -time.Hour, 2*time.Hour, "n1")).
				queue(job(1).user("bob").in("r").limit(time.Hour), job(2).in("r").limit(time.Hour),
					job(3).user("bob").limit(time.Hour)),
			starts:    []string{"2@n1"},
			reasons:   map[uint64]api.Reason{1: api.ReasonReservation, 3: api.ReasonResources},
			estimates: map[uint64]time.Time{3: m(120)},
			wake:      m(120),
		},
		// Job 1 is expected at the window's start (squeue --start); job 2
		// fits no window: it has no expected start.
		"a job of a reservation waits for its window, and must end within it": {
			scene: at(t0).with(node4()).reserve(resv("r", time.Hour, 2*time.Hour, "n1")).
				queue(job(1).in("r").limit(30*time.Minute), job(2).in("r").limit(3*time.Hour)),
			reasons:   map[uint64]api.Reason{1: api.ReasonReservation, 2: api.ReasonReservation},
			estimates: map[uint64]time.Time{1: m(60)},
			wake:      m(60),
		},
		"a job of a reservation that is gone waits": {
			scene:   at(t0).with(node4()).queue(job(1).in("gone")),
			reasons: map[uint64]api.Reason{1: api.ReasonReservationDeleted},
		},
		// The reservation's first window was two days ago, 12:00 to
		// 13:00; today's is in force. Alice's 30-minute job runs in it;
		// a 2-hour job waits until it ends; a 23.5-hour job fits no gap
		// between two windows ever and holds no reservation.
		"DAILY repeats: the next window follows the previous": {
			scene: at(t0).with(node4()).reserve(resv("d", -48*time.Hour, -47*time.Hour, "n1").flags(api.ResvDaily)).
				queue(job(1).in("d").limit(30*time.Minute), job(2).user("bob").limit(2*time.Hour),
					job(3).user("bob").limit(23*time.Hour+30*time.Minute)),
			starts:    []string{"1@n1"},
			reasons:   map[uint64]api.Reason{2: api.ReasonResources, 3: api.ReasonPriority},
			estimates: map[uint64]time.Time{2: m(60)},
			wake:      m(60),
		},
		// FLEX: a job of a reservation not open yet starts elsewhere, as
		// any job would; without FLEX it waits.
		"FLEX lets a job of the reservation run outside it": {
			scene: at(t0).with(node4(), node("n2").cpus(4).mem(4096)).
				reserve(resv("f", time.Hour, 2*time.Hour, "n1").flags(api.ResvFlex), resv("s", time.Hour, 2*time.Hour, "n2")).
				queue(job(1).in("f").limit(30*time.Minute), job(2).in("s").limit(30*time.Minute)),
			starts:  []string{"1@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonReservation},
			wake:    m(60),
		},
		// MAINT takes precedence where it meets alice's reservation: her
		// 30-minute job runs before it, her 2-hour one would run into it.
		"OVERLAP/MAINT: a reservation's jobs stay out of a maintenance inside it": {
			scene: at(t0).with(node4()).
				reserve(resv("r", 0, 4*time.Hour, "n1"), resv("m", time.Hour, 2*time.Hour, "n1").users("root").flags(api.ResvMaint)).
				queue(job(1).in("r").limit(30*time.Minute), job(2).in("r").limit(2*time.Hour)),
			starts:  []string{"1@n1"},
			reasons: map[uint64]api.Reason{2: api.ReasonResources},
			wake:    m(60),
		},
		// IGNORE_JOBS let the reservation take n1 while job 9 runs there
		// for another hour: nothing starts until it ends.
		"a reservation over a running job starts nothing there until it ends": {
			scene: at(t0).with(node4()).reserve(resv("r", 0, 4*time.Hour, "n1").flags(api.ResvIgnoreJobs)).
				running("n1", 0, job(9).user("bob").cpus(4).limit(time.Hour)).
				queue(job(1).in("r").limit(30*time.Minute), job(2).user("bob").limit(time.Minute)),
			reasons: map[uint64]api.Reason{1: api.ReasonResources, 2: api.ReasonResources},
			wake:    m(240),
		},
	})
}

// TestCapacityReservations: a block of 4 of node n1's 8 CPUs for account
// chem until t0+10h, of which a running job of chem (9, 2 CPUs, ending at
// t0+50m) uses 2. Job 1 of chem takes the other 2; job 2 of chem finds no
// room left. Job 3 (another account, 6 CPUs, 2h) then finds n1's 4 CPUs
// outside the block.
//
// Reusable, the block gets job 9's and job 1's CPUs back when they end, so
// outside it n1 never has 6: job 3 waits for the block's end, t0+10h; job
// 2 is expected when job 9 gives its CPUs back to the block.
// Consumable (PURGE_COMP), what jobs 9 and 1 took leaves the block for
// good: once job 9 ends (t0+50m) n1 has 6 CPUs for anyone and job 3 is
// reserved then.
func TestCapacityReservations(t *testing.T) {
	scene := func(consumable bool) *scene {
		b := resv("cap", -time.Hour, 10*time.Hour, "n1").accounts("chem").share(4, 4096, 0, 0)
		if consumable {
			b = b.flags(api.ResvPurgeComp)
			b.r.Parts[0].UsedCPUs = 2 // job 9's, as the apply recorded when it started
		}
		return at(t0).with(node("n1").cpus(8).mem(8192)).reserve(b).
			running("n1", 10*time.Minute, job(9).account("chem").in("cap").cpus(2).mem(1024).limit(time.Hour)).
			queue(job(1).account("chem").in("cap").cpus(2).mem(1024).limit(time.Hour),
				job(2).account("chem").in("cap").mem(512).limit(time.Hour),
				job(3).account("bio").cpus(6).mem(1024).limit(2*time.Hour))
	}
	runScenarios(t, map[string]scenario{
		"reusable: what jobs take comes back to the block": {
			scene:     scene(false),
			starts:    []string{"1@n1"},
			reasons:   map[uint64]api.Reason{2: api.ReasonResources, 3: api.ReasonResources},
			estimates: map[uint64]time.Time{2: t0.Add(50 * time.Minute), 3: t0.Add(10 * time.Hour)},
			wake:      t0.Add(10 * time.Hour),
		},
		"consumable: what jobs take is used up": {
			scene:     scene(true),
			starts:    []string{"1@n1"},
			reasons:   map[uint64]api.Reason{2: api.ReasonResources, 3: api.ReasonResources},
			estimates: map[uint64]time.Time{3: t0.Add(50 * time.Minute)},
			wake:      t0.Add(10 * time.Hour),
		},
	})
}

// TestGPUCapacityReservation: chem holds 8 CPUs and 2 of the 4 whole GPUs
// of a node: another account's jobs get the other 2 GPUs and no more;
// chem's job gets the held ones.
func TestGPUCapacityReservation(t *testing.T) {
	n := &state.Node{Name: "g1", CPUs: 32, MemMB: 256 << 10, Inventory: quadHost()}
	b := resv("gpu", -time.Hour, 10*time.Hour, "g1").accounts("chem").share(8, 64<<10, 2, 0)
	runScenarios(t, map[string]scenario{
		"GPUs held for chem": {
			scene: at(t0).with(nodeSet{n}).reserve(b).
				queue(job(1).account("bio").gpus(2).limit(time.Hour), job(2).account("bio").gpus(1).limit(time.Hour),
					job(3).account("chem").in("gpu").gpus(2).cpus(4).limit(time.Hour)),
			starts:  []string{"1@g1", "3@g1"},
			reasons: map[uint64]api.Reason{2: api.ReasonResources},
			wake:    t0.Add(10 * time.Hour),
		},
	})
}
