package ctld

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// followLeadership starts the leader-only loops when this member wins an
// election and stops them when it loses leadership.
func (c *Controller) followLeadership(ctx context.Context) {
	obs := make(chan raft.Observation, 16)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	c.node.raft.RegisterObserver(observer)
	defer c.node.raft.DeregisterObserver(observer)

	var stop context.CancelFunc
	var wg sync.WaitGroup
	check := time.NewTicker(250 * time.Millisecond) // Raft's own time, not the injected clock
	defer check.Stop()
	for {
		isLeader := c.node.raft.State() == raft.Leader
		switch {
		case isLeader && stop == nil:
			lctx, cancel := context.WithCancel(ctx)
			stop = cancel
			wg.Add(1)
			go func() { defer wg.Done(); c.lead(lctx) }()
		case !isLeader && stop != nil:
			stop()
			wg.Wait()
			stop = nil
		}
		select {
		case <-ctx.Done():
			if stop != nil {
				stop()
				wg.Wait()
			}
			return
		case <-obs:
			c.metrics.leaderChanges.Inc()
		case <-check.C:
		}
	}
}

// lead runs the leader's duties until lctx ends.
func (c *Controller) lead(ctx context.Context) {
	if err := c.node.raft.Barrier(10 * time.Second).Error(); err != nil {
		c.log.Warn("leader barrier failed; stepping back", "err", err)
		return
	}
	// Before this member takes requests: a submission must find the
	// partitions of a new cluster.
	c.seedConfig()
	now := c.clock.Now()
	c.mu.Lock()
	c.leading = true
	c.fsm.Read(func(s *state.State) {
		c.nextJobID = s.NextJobID
		// Every node gets a full timeout from the moment this member
		// took over: heartbeats sent to the old leader are not known here.
		c.seen = make(map[string]time.Time, len(s.Nodes))
		for name := range s.Nodes {
			c.seen[name] = now
		}
	})
	next := c.nextJobID
	c.mu.Unlock()
	c.log.Info("leading the cluster", "next_job_id", next)
	defer func() {
		c.mu.Lock()
		c.leading = false
		c.mu.Unlock()
		c.log.Info("no longer leading")
	}()

	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){c.submitLoop, c.scheduleLoop, c.livenessLoop, c.purgeLoop, c.auditLoop, c.resvLoop, c.sinkLoop, c.migrationLoop, c.mailLoop, c.mailTimerLoop} {
		wg.Add(1)
		go func(f func(context.Context)) { defer wg.Done(); f(ctx) }(loop)
	}
	wg.Wait()
}

// seedConfig seeds a new cluster's partitions, memory per CPU and policy
// from this member's flags (SeedConfig applies only to a cluster never
// seeded). On a seeded cluster the flags are ignored: the replicated
// configuration is changed with corral partition and corral config set.
func (c *Controller) seedConfig() {
	var seeded bool
	c.fsm.Read(func(s *state.State) { seeded = s.Seeded })
	if seeded {
		return
	}
	cmd := &state.SeedConfig{Partitions: c.cfg.Partitions, DefMemPerCPU: c.cfg.DefMemPerCPU, Policy: string(c.cfg.Policy), QOS: api.SlurmQOS()}
	if cmd.Policy == "" {
		cmd.Policy = string(sched.PolicyEASY)
	}
	if res, err := c.propose(state.CmdSeedConfig, cmd); err != nil {
		c.log.Warn("seeding the cluster's configuration failed; the next leader tries again", "err", err)
	} else if done, _ := res.(bool); done {
		c.log.Info("seeded the cluster's configuration from the flags", "partitions", len(cmd.Partitions), "def_mem_per_cpu_mb", cmd.DefMemPerCPU, "policy", cmd.Policy)
	}
}

// isLeading reports whether the leader loops run here.
func (c *Controller) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

// reasonsEvery is the least time between two plans that only change
// pending jobs' reasons and expected starts. Each submission wakes a
// pass, which gives the new job its reason: during a stream of single
// submissions (a workflow manager's sbatch loop) that was one more Raft
// entry per job, on every voter, as costly as the submission's own. A
// reasons-only plan within reasonsEvery of the last one is left to a pass
// at its end, which commits the reasons as they are then; the first one
// after a quiet spell, and any plan that starts, stops or cancels, is
// committed at once.
const reasonsEvery = 100 * time.Millisecond

// scheduleLoop runs a pass whenever the FSM signals a change that may let
// a job start, and when a begin time arrives. Changes that arrive during a
// pass are coalesced into the next one; there is no periodic tick.
func (c *Controller) scheduleLoop(ctx context.Context) {
	wake := c.clock.NewTimer(time.Hour)
	defer wake.Stop()
	var reasonsAt time.Time          // the next reasons-only plan waits until then
	c.schedulePass(wake, &reasonsAt) // the previous leader may have left work
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.fsm.Changed:
		case <-wake.C():
		}
		c.schedulePass(wake, &reasonsAt)
	}
}

// schedulePass runs one pass and commits its whole plan as one ApplyPlan
// entry (a plan of reasons only, not before *reasonsAt: reasonsEvery).
func (c *Controller) schedulePass(wake Timer, reasonsAt *time.Time) {
	now := c.clock.Now().UTC()
	snap := c.snapshotForSched(now)
	began := time.Now()
	plan, err := runPass(snap)
	c.metrics.observePass(time.Since(began), len(snap.Pending), len(plan.Starts), began)
	if err != nil {
		// The pass contains failures per job; this is one outside any job.
		// Nothing is committed; the next change or a minute brings a
		// retry, and the rest of the leader keeps serving.
		c.log.Error("scheduling pass failed; no plan committed", "err", err)
		wake.Reset(time.Minute)
		return
	}
	c.noteInvalid(plan)
	if !plan.NextWake.IsZero() {
		wake.Reset(plan.NextWake.Sub(now) + 10*time.Millisecond)
	}
	cmd := c.planCommand(now, snap, plan)
	if sched.EmptyEntry(cmd) {
		return
	}
	if sched.ReasonsOnly(cmd) {
		mono := c.clock.Now()
		if wait := reasonsAt.Sub(mono); wait > 0 {
			if plan.NextWake.IsZero() || wait < plan.NextWake.Sub(now) {
				wake.Reset(wait)
			}
			return
		}
		*reasonsAt = mono.Add(reasonsEvery)
	}
	res, err := c.propose(state.CmdApplyPlan, cmd)
	if err != nil {
		c.log.Warn("committing plan failed", "err", err)
		return
	}
	pr, _ := res.(*state.PlanResult)
	if pr == nil {
		return
	}
	for _, p := range plan.Preemptions {
		if slices.Contains(pr.Stopped, p.Victim) {
			c.log.Info("preempted", "victim", p.Victim, "mode", p.Mode, "for", p.Preemptor)
		}
	}
	if len(pr.Rejected) > 0 || len(pr.Skipped) > 0 {
		c.log.Debug("plan applier skipped what no longer applied", "starts", pr.Rejected, "others", pr.Skipped)
	}
}

// snapshotForSched builds what one pass needs under the FSM's read lock.
func (c *Controller) snapshotForSched(now time.Time) *sched.Snapshot {
	var snap *sched.Snapshot
	c.fsm.Read(func(s *state.State) {
		snap = sched.NewSnapshot(s, now)
	})
	return snap
}

// planCommand turns a pass's plan into the one ApplyPlan entry that
// commits it (sched.Plan.Entry), reserving the ids its array tasks take.
func (c *Controller) planCommand(now time.Time, snap *sched.Snapshot, plan sched.Plan) *state.ApplyPlan {
	var first uint64
	if n := plan.NewIDs(); n > 0 {
		c.mu.Lock()
		first = c.nextJobID
		c.nextJobID += uint64(n)
		c.mu.Unlock()
	}
	cmd := plan.Entry(now, snap, first)
	stampTokens(cmd)
	return cmd
}

// livenessLoop marks nodes DOWN when they miss heartbeats and flushes the
// heartbeat times into Raft, coalesced, for display.
func (c *Controller) livenessLoop(ctx context.Context) {
	period := c.cfg.NodeTimeout / 4
	if period > time.Second {
		period = time.Second
	}
	t := c.clock.NewTicker(period)
	defer t.Stop()
	lastFlush := c.clock.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		// The timeout is measured on the monotonic clock, as a node's
		// lease is (see nodeAck): a step of the wall clock must not
		// declare a node DOWN while it still holds its lease.
		mono := c.clock.Now()
		now := mono.UTC()
		var down []string
		var seen map[string]time.Time
		c.mu.Lock()
		c.fsm.Read(func(s *state.State) {
			for name, n := range s.Nodes {
				last, ok := c.seen[name]
				if !ok {
					c.seen[name] = mono
					continue
				}
				if !n.Down && mono.Sub(last) > c.cfg.NodeTimeout {
					down = append(down, name)
				}
			}
		})
		if c.seenDirty && now.Sub(lastFlush) >= 2*time.Second {
			seen = make(map[string]time.Time, len(c.seen))
			for k, v := range c.seen {
				seen[k] = v.UTC()
			}
			c.seenDirty = false
			lastFlush = now
		}
		c.mu.Unlock()
		if len(down) > 0 {
			c.log.Warn("nodes stopped responding; marking them DOWN", "nodes", down, "timeout", c.cfg.NodeTimeout)
			if _, err := c.propose(state.CmdNodeDown, &state.NodeDown{Now: now, Nodes: slices.Sorted(slices.Values(down)), Reason: "Not responding"}); err != nil {
				c.log.Warn("marking nodes down failed", "err", err)
			}
		}
		if seen != nil {
			_, _ = c.propose(state.CmdNodeHeartbeats, &state.NodeHeartbeats{Seen: seen})
		}
		c.drainUnattested(now)
	}
}

// runPass runs sched.Schedule, turning a panic outside the pass's own
// per-job containment into an error, so that no state can stop a leader.
func runPass(snap *sched.Snapshot) (plan sched.Plan, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return sched.Schedule(snap), nil
}

// noteInvalid logs, once per job and per node problem, what the pass left
// out: invalid jobs are held by the plan (their reason and message say why,
// and `corral why` explains), invalid nodes are skipped until they
// register again with a sane inventory.
func (c *Controller) noteInvalid(plan sched.Plan) {
	if len(plan.Invalid) == 0 && len(plan.InvalidNodes) == 0 && len(c.badNodes) == 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(plan.Invalid)) {
		var cur *state.Job
		c.fsm.Read(func(s *state.State) { cur = s.Jobs[id] })
		if cur != nil && cur.Reason != api.ReasonInvalidJob {
			c.log.Error("the scheduler cannot handle a job; holding it as InvalidJob", "job", id, "why", plan.Invalid[id])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(plan.InvalidNodes)) {
		if why := plan.InvalidNodes[name]; c.badNodes[name] != why {
			c.log.Error("the scheduler leaves out a node whose record it cannot handle", "node", name, "why", why)
		}
	}
	c.badNodes = plan.InvalidNodes
}
