package ctld

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// explainReservations says what advance reservations have to do with why
// pending job j waits: for a job of a reservation, where and when that
// one lets it run; for any other job, the reservations that hold nodes of
// its partition during the run it would make now.
func explainReservations(j *state.Job, reason api.Reason, snap *sched.Snapshot, say func(string, ...any)) {
	now := snap.Now
	limit := time.Duration(j.Spec.TimeLimit) * time.Second
	if name := j.Spec.Reservation; name != "" {
		i := slices.IndexFunc(snap.Advance, func(r *api.Reservation) bool { return r.Name == name })
		if i < 0 {
			say("Reservation %s does not exist (any more).", name)
			return
		}
		r := snap.Advance[i]
		start, end := r.Window(now)
		switch {
		case !r.Admits(j.Spec.User, j.Spec.Account):
			say("Reservation %s is for %s; user %s in account %s is not admitted: an operator changes its Users= or Accounts=, or cancel the job.",
				r.Name, resvAudience(r), j.Spec.User, orText(j.Spec.Account, "(none)"))
		case now.Before(start):
			say("Reservation %s opens at %s (in %s) on %s; the job starts inside it then.", r.Name, start.Format(time.RFC3339),
				start.Sub(now).Round(time.Second), strings.Join(r.Nodes, ","))
		case !end.IsZero() && (limit == 0 || now.Add(limit).After(end)):
			say("Its time limit (%s) does not end within reservation %s's window, which closes at %s (%s from now); a job of a reservation must end inside it: give a shorter --time%s.",
				limitText(j.Spec.TimeLimit), r.Name, end.Format(time.RFC3339), end.Sub(now).Round(time.Second), nextWindowText(r, end))
		case reason == api.ReasonResources:
			say("Reservation %s is in force until %s, but its room on %s is taken by its other running jobs now%s.",
				r.Name, orText(fmtTime(end), "it is deleted"), strings.Join(r.Nodes, ","), capacityText(r))
		}
		return
	}
	if reason != api.ReasonResources && reason != api.ReasonReservedForMaint && reason != api.ReasonPriority {
		return
	}
	part := j.Spec.Partition
	var held []string
	for _, r := range snap.Advance {
		start, end := r.Window(now)
		if limit > 0 && !now.Add(limit).After(start) {
			continue // the job would end before it opens
		}
		if onPartition(snap, r, part) {
			held = append(held, r.Name+" ("+strings.Join(r.Nodes, ",")+", "+fmtTime(start)+" to "+orText(fmtTime(end), "no end")+flagText(r)+")")
		}
	}
	if len(held) > 0 {
		say("Reservations hold nodes of partition %s during the run it would make now: %s; it may use them only before they open, and only if it ends by then.",
			part, strings.Join(held, "; "))
	}
}

// onPartition reports whether reservation r holds a node of partition
// part.
func onPartition(snap *sched.Snapshot, r *api.Reservation, part string) bool {
	for _, p := range snap.Partitions {
		if p.Name == part {
			return slices.ContainsFunc(r.Nodes, p.HasNode)
		}
	}
	return false
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

func flagText(r *api.Reservation) string {
	if len(r.Flags) == 0 {
		return ""
	}
	names := make([]string, len(r.Flags))
	for i, f := range r.Flags {
		names[i] = string(f)
	}
	return ", " + strings.Join(names, ",")
}

// nextWindowText says when a repeating reservation's next window opens.
func nextWindowText(r *api.Reservation, end time.Time) string {
	if p := r.Period(); p > 0 {
		start, _ := r.Window(end)
		return ", or wait for its next window at " + start.Format(time.RFC3339)
	}
	return ""
}

// capacityText says what a capacity reservation holds.
func capacityText(r *api.Reservation) string {
	if !r.Capacity() {
		return ""
	}
	s := " (it holds cpu=" + strconv.Itoa(r.CPUs)
	if r.GPUs > 0 {
		s += ",gres/gpu=" + strconv.Itoa(r.GPUs)
	}
	if r.Consumable() {
		s += "; consumable: what its jobs took is used up"
	}
	return s + ")"
}
