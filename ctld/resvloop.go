package ctld

import (
	"context"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// resvTick is how often the leader looks for reservations that are over:
// a walk over the reservations, and over the jobs only for a consumable
// one that jobs have used.
const resvTick = time.Second

// resvLoop deletes, on the leader, the reservations that are over, as
// Slurm purges them: those whose last window ended, and consumable ones
// (PURGE_COMP) that are used up or have been idle for their purge time
// since their last job ended. A reservation a job still runs in stays.
func (c *Controller) resvLoop(ctx context.Context) {
	t := c.clock.NewTicker(resvTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := c.clock.Now().UTC()
		var names []string
		c.fsm.Read(func(s *state.State) { names = expiredReservations(s, now) })
		if len(names) == 0 {
			continue
		}
		res, err := c.propose(state.CmdExpireReservations, &state.ExpireReservations{Now: now, Names: names})
		if err != nil {
			c.log.Warn("deleting reservations that are over failed", "err", err)
			continue
		}
		if gone, _ := res.([]string); len(gone) > 0 {
			c.log.Info("deleted reservations that are over", "reservations", gone)
		}
	}
}

// expiredReservations lists the reservations over at now.
func expiredReservations(s *state.State, now time.Time) []string {
	var out []string
	for _, name := range s.ResvNames() {
		r := s.Reservations[name]
		due := r.Over(now)
		if !due && r.Has(api.ResvPurgeComp) && r.Started > 0 {
			last, busy := lastResvEnd(s, name)
			due = r.Consumable() && state.ResvUsedUp(r) || !busy && !now.Before(last.Add(time.Duration(r.PurgeAfter)*time.Second))
		}
		if due && s.ResvExpired(r, now, true) {
			out = append(out, name)
		}
	}
	return out
}

// lastResvEnd returns when the last job of the reservation named ended,
// and whether one is still pending or running in it.
func lastResvEnd(s *state.State, name string) (last time.Time, busy bool) {
	for _, j := range s.Jobs {
		if j.Spec.Reservation != name {
			continue
		}
		if !j.State.Terminal() {
			return last, true
		}
		if j.EndTime.After(last) {
			last = j.EndTime
		}
	}
	return last, false
}
