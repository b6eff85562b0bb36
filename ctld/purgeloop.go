package ctld

import (
	"context"
	"time"

	"corral/ctld/state"
)

// purgeTick is how often the leader looks for finished jobs and request
// ids past their retention. A look is a binary search in the finished-job
// index and a glance at the oldest request generation, so it is cheap at
// any queue size.
const purgeTick = time.Second

// purgeRecheck is how long the leader waits before proposing again when
// the last purge held back every due job (an unfinished job depends on
// them) and nothing new came due.
const purgeRecheck = 30 * time.Second

// compactAfter is how many jobs and request ids a run of purges must
// remove before the leader takes a Raft snapshot at once, so that the snapshot on disk and
// the log behind it shrink too instead of waiting for the next threshold.
const compactAfter = 10_000

// purgeLoop proposes PurgeJobs entries on the leader while finished jobs or
// request ids are past their retention, one entry after another until none
// is due (each entry removes at most DefaultPurgeMax jobs).
func (c *Controller) purgeLoop(ctx context.Context) {
	t := c.clock.NewTicker(purgeTick)
	defer t.Stop()
	var last time.Time
	held := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		removed := 0
		for ctx.Err() == nil {
			now := c.clock.Now().UTC()
			var due state.Due
			c.fsm.Read(func(s *state.State) { due = s.PurgeDue(now) })
			if !due.Requests && due.Jobs <= held && (due.Jobs == 0 || now.Sub(last) < purgeRecheck) {
				break
			}
			res, err := c.propose(state.CmdPurgeJobs, &state.PurgeJobs{Now: now, Max: state.DefaultPurgeMax})
			if err != nil {
				c.log.Warn("purging finished jobs failed", "err", err)
				break
			}
			last = now
			pr, _ := res.(*state.PurgeResult)
			if pr == nil {
				break
			}
			held = pr.Held
			removed += pr.Jobs + pr.Requests
			if pr.Jobs > 0 || pr.Requests > 0 {
				c.log.Debug("purged", "jobs", pr.Jobs, "request_ids", pr.Requests, "held", pr.Held)
			}
			if !pr.More {
				break
			}
		}
		if removed >= compactAfter {
			c.log.Info("purged finished jobs and request ids; taking a snapshot", "removed", removed)
			if err := c.node.raft.Snapshot().Error(); err != nil {
				c.log.Warn("snapshot after purge failed", "err", err)
			}
		}
	}
}
