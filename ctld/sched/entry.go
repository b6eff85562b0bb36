package sched

import (
	"time"

	"corral/ctld/state"
)

// This file turns a pass's plan into the one ApplyPlan entry that commits
// it. The controller's leader and the simulator both call Entry, so what
// the simulator applies to its state is what the leader proposes.

// InvalidDepReason is who cancels a job whose dependency can never be met,
// as its message says ("cancelled by ...").
const InvalidDepReason = "the scheduler: its dependency can never be satisfied (--kill-on-invalid-dep=yes)"

// DeadlineReason is why the scheduler cancels a job that could no longer
// end by its --deadline.
const DeadlineReason = "the scheduler: it could no longer end by its --deadline"

// EstimateSlack is how far an expected start may drift before a plan
// rewrites it (an estimate that tracks "now" would otherwise be rewritten
// on every pass).
const EstimateSlack = 30 * time.Second

// NewIDs returns how many job ids the plan's entry needs: one for each
// start of an array task, whose record is split off the array's.
func (p *Plan) NewIDs() int {
	n := 0
	for _, st := range p.Starts {
		if st.Array {
			n++
		}
	}
	return n
}

// Entry returns the ApplyPlan entry that commits p, computed over snap at
// now: the cancels for dependencies that can never be met, the
// preemptions, the resumes, the starts (array tasks taking the ids from
// firstID on, NewIDs of them) and the reasons and reservations that
// changed from the snapshot's. Nothing is checked here: the apply checks
// every part against the state it applies to.
func (p *Plan) Entry(now time.Time, snap *Snapshot, firstID uint64) *state.ApplyPlan {
	cmd := &state.ApplyPlan{}
	p.EntryInto(cmd, now, snap, firstID)
	return cmd
}

// EntryInto makes into cmd the entry Entry returns, reusing the arrays of
// cmd's lists: for a caller that applies each entry before it makes the
// next (the simulator; the state keeps none of an entry's lists).
func (p *Plan) EntryInto(cmd *state.ApplyPlan, now time.Time, snap *Snapshot, firstID uint64) {
	*cmd = state.ApplyPlan{Now: now, Resumes: p.Resumes,
		Cancels: cmd.Cancels[:0], Stops: cmd.Stops[:0], Starts: cmd.Starts[:0], Reasons: cmd.Reasons[:0],
		Migrations: cmd.Migrations, DrainNotes: cmd.DrainNotes}
	for _, id := range p.Cancels {
		cmd.Cancels = append(cmd.Cancels, state.PlanCancel{JobID: id, Reason: InvalidDepReason})
	}
	for _, id := range p.Deadlines {
		cmd.Cancels = append(cmd.Cancels, state.PlanCancel{JobID: id, Reason: DeadlineReason, Deadline: true})
	}
	for _, pr := range p.Preemptions {
		cmd.Stops = append(cmd.Stops, state.PlanStop{JobID: pr.Victim, Mode: pr.Mode, By: pr.Preemptor})
	}
	next := firstID
	if len(p.Starts) > 0 && cap(cmd.Starts) < len(p.Starts) {
		cmd.Starts = make([]state.PlanStart, 0, len(p.Starts))
	}
	for _, st := range p.Starts {
		ps := state.PlanStart{JobID: st.JobID, Node: st.Node, CPUs: st.CPUs, MemMB: st.MemMB, OverheadMB: st.OverheadMB, TmpMB: st.TmpMB, Placement: st.Placement}
		if st.Array {
			ps.Array, ps.Task, ps.NewID = true, st.Task, next
			next++
		}
		cmd.Starts = append(cmd.Starts, ps)
	}
	cmd.Migrations = cmd.Migrations[:0]
	for _, m := range p.Migrations {
		cmd.Migrations = append(cmd.Migrations, state.PlanMigration{JobID: m.JobID, From: m.From, To: m.To, Migration: m.Migration,
			Cause: m.Cause, By: m.By, CPUs: m.CPUs, MemMB: m.MemMB, OverheadMB: m.OverheadMB, Placement: m.Placement})
	}
	cmd.DrainNotes = drainNotes(p.DrainNotes, snap, cmd.DrainNotes[:0])
	untold := now.Add(Horizon / 2)
	for _, j := range snap.Pending {
		r, ok := p.Reasons[j.ID]
		if !ok {
			continue
		}
		resv := p.Reservations[j.ID]
		if !resv.Start.IsZero() && resv.Start.After(untold) {
			// Behind a job without a time limit: no start can be told,
			// and any pass would find the same.
			resv = Reservation{}
		}
		if j.Reason != r || j.EstNode != resv.Node || estimateMoved(j.EstStart, resv.Start) {
			cmd.Reasons = append(cmd.Reasons, state.PlanReason{JobID: j.ID, Reason: r, Start: resv.Start, Node: resv.Node, Message: p.Invalid[j.ID]})
		}
	}
}

// drainNotes returns, into out, the drain notes that change: each node
// drained with --migrate whose note differs from the plan's (none: "").
func drainNotes(notes map[string]string, snap *Snapshot, out []state.PlanDrainNote) []state.PlanDrainNote {
	for _, n := range snap.Nodes {
		if n.Drain && n.DrainMigrate && n.DrainNote != notes[n.Name] {
			out = append(out, state.PlanDrainNote{Node: n.Name, Note: notes[n.Name]})
		}
	}
	return out
}

// estimateMoved reports whether a job's expected start changed enough to
// be worth writing: it appeared, vanished, moved earlier, or moved later
// by more than EstimateSlack. An earlier start is always written: under
// conservative backfill the replicated start is the job's promise, which
// the next pass keeps, so a stale later one would let backfill delay the
// job up to the slack. A start that only drifts later (one that tracks
// "now") is written once it drifted EstimateSlack.
func estimateMoved(old, new time.Time) bool {
	if old.IsZero() || new.IsZero() {
		// Most pending jobs hold none before and after.
		return old.IsZero() != new.IsZero()
	}
	d := new.Sub(old)
	return d > EstimateSlack || d < 0
}

// EmptyEntry reports whether a plan's entry would change nothing.
func EmptyEntry(p *state.ApplyPlan) bool {
	return len(p.Reasons) == 0 && len(p.DrainNotes) == 0 && ReasonsOnly(p)
}

// ReasonsOnly reports whether p changes nothing but pending jobs' reasons
// and expected starts (and what drained nodes say of the jobs that stay):
// a plan that can wait for the next pass's.
func ReasonsOnly(p *state.ApplyPlan) bool {
	return len(p.Cancels) == 0 && len(p.Stops) == 0 && len(p.Resumes) == 0 && len(p.Starts) == 0 && len(p.Migrations) == 0
}
