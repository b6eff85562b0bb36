package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// randomResvScene draws a pass over nodes held by random advance
// reservations: whole or capacity, now, later, past or repeating daily,
// maintenance and overlapping ones over the others, FLEX and consumable
// ones; running jobs inside and outside them; and pending jobs of every
// kind: of a reservation (admitted or not), of none, of one that is gone.
// Reservations that neither takes precedence get nodes of their own, as
// the state allows (state.CheckReservation).
func randomResvScene(r *rand.Rand) *scene {
	sc := at(t0)
	var names []string
	for i := range 1 + r.IntN(6) {
		name := fmt.Sprintf("n%d", i)
		names = append(names, name)
		sc.with(node(name).cpus(pick(r, 2, 4, 8)).mem(8192))
	}
	free := slices.Clone(names) // nodes no plain reservation holds yet
	hours := func(lo, hi int) time.Duration { return time.Duration(lo*60+r.IntN((hi-lo)*60)) * time.Minute }
	var resvs []*api.Reservation
	for k := range r.IntN(5) {
		b := resvB{&api.Reservation{Name: fmt.Sprintf("r%d", k), Users: []string{"alice"}}}
		start := hours(-3, 5)
		b.r.StartTime, b.r.EndTime = t0.Add(start), t0.Add(start+hours(1, 6))
		precedes := r.IntN(3) == 0
		if precedes {
			b.flags(pick(r, api.ResvMaint, api.ResvOverlap))
			b.r.Nodes = []string{pick(r, names...)}
		} else {
			if len(free) == 0 {
				continue
			}
			i := r.IntN(len(free))
			b.r.Nodes = []string{free[i]}
			free = slices.Delete(free, i, i+1)
		}
		if r.IntN(4) == 0 {
			b.flags(api.ResvDaily)
		}
		if r.IntN(4) == 0 {
			b.flags(api.ResvFlex)
		}
		if r.IntN(2) == 0 {
			b.share(1+r.IntN(2), 1024, 0, 0)
			if r.IntN(2) == 0 {
				b.flags(api.ResvPurgeComp)
				b.r.Parts[0].UsedCPUs = r.IntN(b.r.CPUs + 1)
			}
		}
		sc.reserve(b)
		resvs = append(resvs, b.r)
	}
	id := uint64(100)
	for _, name := range names {
		for range r.IntN(3) {
			id++
			j := job(id).user(pick(r, "alice", "bob")).limit(hours(1, 4))
			if len(resvs) > 0 && r.IntN(2) == 0 {
				j.in(pick(r, resvs...).Name)
			}
			var cpus int
			for _, n := range sc.s.Nodes {
				if n.Name == name {
					cpus = n.CPUs - n.AllocCPUs
				}
			}
			if cpus > 0 {
				sc.running(name, hours(0, 2), j.cpus(1+r.IntN(cpus)))
			}
		}
	}
	for id := uint64(1); id <= uint64(r.IntN(25)); id++ {
		j := job(id).user(pick(r, "alice", "alice", "bob")).cpus(pick(r, 1, 1, 2, 4))
		if r.IntN(5) > 0 {
			j.limit(time.Duration(pick(r, 10, 30, 60, 120, 300, 1440)) * time.Minute)
		}
		if len(resvs) > 0 && r.IntN(2) == 0 {
			j.in(pick(r, resvs...).Name)
		} else if r.IntN(15) == 0 {
			j.in("gone")
		}
		sc.queue(j)
	}
	return sc
}

// TestPropertyNoStartOverlapsAReservation: whatever the reservations and
// jobs, no job the pass starts runs on a node a reservation it may not use
// holds whole during the job's run, no job of a reservation starts outside
// it (unless FLEX), and a capacity reservation's jobs take no more than
// its share.
func TestPropertyNoStartOverlapsAReservation(t *testing.T) {
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		s := randomResvScene(r).snapshot()
		p := Schedule(s)
		checkPlan(t, s, p)
		byID := map[uint64]*state.Job{}
		for _, j := range s.Pending {
			byID[j.ID] = j
		}
		byName := map[string]*api.Reservation{}
		for _, rv := range s.Advance {
			byName[rv.Name] = rv
		}
		took := map[[2]string]int{} // CPUs jobs of a reservation take on a node
		for _, run := range s.Running {
			if rv := byName[run.Job.Spec.Reservation]; rv != nil && !rv.Consumable() {
				took[[2]string{rv.Name, run.Alloc.Node}] += run.Alloc.CPUs
			}
		}
		for _, st := range p.Starts {
			j := byID[st.JobID]
			end := s.Now.Add(jobLimit(j, nil))
			own := byName[j.Spec.Reservation]
			if j.Spec.Reservation != "" && own == nil {
				t.Errorf("job %d of reservation %s, which is gone, starts", j.ID, j.Spec.Reservation)
				continue
			}
			inside := own != nil && slices.Contains(own.Nodes, st.Node) && own.Active(s.Now) && !end.After(windowEnd(own, s.Now))
			if own != nil && !own.Has(api.ResvFlex) && (!inside || !own.Admits(j.Spec.User, j.Spec.Account)) {
				t.Errorf("job %d of reservation %s starts on %s outside it (window %v)", j.ID, own.Name, st.Node, own.StartTime)
			}
			if own != nil && inside && own.Capacity() {
				k := [2]string{own.Name, st.Node}
				took[k] += st.CPUs
				cpus, _, _ := shareOf(own, st.Node)
				if took[k] > cpus {
					t.Errorf("the jobs of capacity reservation %s take %d CPUs of node %s; it holds %d", own.Name, took[k], st.Node, cpus)
				}
			}
			for _, rv := range s.Advance {
				if rv == own && inside || rv.Capacity() || !slices.Contains(rv.Nodes, st.Node) ||
					own != nil && inside && own.Precedes() && !rv.Precedes() {
					continue
				}
				for _, w := range state.ResvWindows(rv, s.Now, end, nil) {
					if w[0].Before(end) && s.Now.Before(w[1]) {
						t.Errorf("job %d (%s..%s) starts on %s, which reservation %s holds from %s", j.ID,
							s.Now.Format(time.Kitchen), end.Format(time.Kitchen), st.Node, rv.Name, w[0].Format(time.Kitchen))
					}
				}
			}
		}
	})
}

// windowEnd is the end of the window of r in force at now; Forever for
// none.
func windowEnd(r *api.Reservation, now time.Time) time.Time {
	_, end := r.Window(now)
	if end.IsZero() {
		return state.Forever
	}
	return end
}
