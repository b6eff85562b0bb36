package ctld

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"corral/accounting"
	"corral/api"
	"corral/ctld/state"
)

// This file serves the reports that spread usage over time: cluster
// utilization (sreport cluster Utilization) and the usage series the CLI's
// --svg and the status page draw. Both read this member's store (its node
// facts and run index) and add what its state holds that has no record
// yet: the runs still going and the jobs still waiting, up to now.

// handleAccountingCluster is GET /v1/accounting/cluster: the cluster's
// utilization over a window, one row per TRES. The figures are the
// cluster's totals, which every user may read, as sinfo's.
func (c *Controller) handleAccountingCluster(w http.ResponseWriter, r *http.Request) error {
	store := c.acctStore()
	if store == nil {
		return noStore()
	}
	start, end, err := windowOf(r)
	if err != nil {
		return err
	}
	now := c.clock.Now().UTC()
	if end.IsZero() || end.After(now) {
		end = now
	}
	c.fsm.flushAccounting()
	facts, err := store.NodeFacts()
	if err != nil {
		return err
	}
	if start.IsZero() {
		start = end.Add(-24 * time.Hour)
		for _, f := range facts {
			if f.At.Before(start) {
				start = f.At
			}
		}
	}
	rows := []api.ClusterUtilization{}
	if end.After(start) {
		u := accounting.NewUtilization(start, end)
		u.AddNodes(facts)
		if err := store.EachRun(start, end, func(run *accounting.Run) error { u.AddRun(run); return nil }); err != nil {
			return err
		}
		c.fsm.Read(func(s *state.State) { accounting.LiveRuns(s, now, u.AddRun) })
		rows = u.Result()
	}
	writeJSON(w, http.StatusOK, rows)
	return nil
}

// handleAccountingSeries is GET /v1/accounting/series: usage by account
// over a window (default the last 7 days) in bins of ?step seconds, and
// the wait-time distribution, of the runs the caller may see (the rule of
// the usage report's rows: the jobs of a user in an account).
func (c *Controller) handleAccountingSeries(w http.ResponseWriter, r *http.Request) error {
	start, end, err := windowOf(r)
	if err != nil {
		return err
	}
	var step time.Duration
	if v := r.URL.Query().Get("step"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 60 {
			return &fieldError{Field: "step", Msg: fmt.Sprintf("step=%q: give the bins' length in seconds, at least 60", v)}
		}
		step = time.Duration(n) * time.Second
	}
	series, err := c.usageSeries(principalFrom(r), start, end, step)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, series)
	return nil
}

// usageSeries sums the series of [start, end) in bins of step (zero end:
// now; zero start: a week before the end; zero step: accounting's choice)
// over the runs p may see.
func (c *Controller) usageSeries(p principal, start, end time.Time, step time.Duration) (api.AcctSeries, error) {
	store := c.acctStore()
	if store == nil {
		return api.AcctSeries{}, noStore()
	}
	now := c.clock.Now().UTC()
	if end.IsZero() {
		end = now
	}
	if start.IsZero() {
		start = end.Add(-7 * 24 * time.Hour)
	}
	if step == 0 {
		step = accounting.SeriesStep(start, end)
	}
	if bins := end.Sub(start) / step; bins > accounting.MaxSeriesBins {
		return api.AcctSeries{}, &fieldError{Field: "step", Msg: fmt.Sprintf("a step of %s cuts the window into %d bins; give a longer one (at most %d bins)", step, bins, accounting.MaxSeriesBins)}
	}
	ser := accounting.NewSeries(start, end, step)
	visible := c.usageVisibility(p)
	c.fsm.flushAccounting()
	err := store.EachRun(start, end, func(run *accounting.Run) error {
		if visible(run.Account, run.User) {
			ser.AddRun(run)
		}
		return nil
	})
	if err != nil {
		return api.AcctSeries{}, err
	}
	if end.After(start) && !now.Before(start) {
		c.fsm.Read(func(s *state.State) {
			v := viewerOf(s, p)
			accounting.LiveRuns(s, now, func(run *accounting.Run) {
				if v.level(&state.Job{Spec: &state.JobSpec{User: run.User, Account: run.Account}}) != hidden {
					ser.AddRun(run)
				}
			})
		})
	}
	return ser.Result(), nil
}

// usageVisibility returns whether p may see the usage of a user's jobs in
// an account (the job access rule), deciding each pair once.
func (c *Controller) usageVisibility(p principal) func(account, user string) bool {
	seen := map[[2]string]bool{}
	return func(account, user string) bool {
		k := [2]string{account, user}
		ok, known := seen[k]
		if !known {
			c.fsm.Read(func(s *state.State) {
				ok = viewerOf(s, p).level(&state.Job{Spec: &state.JobSpec{User: user, Account: account}}) != hidden
			})
			seen[k] = ok
		}
		return ok
	}
}

// noStore is the answer of a member that keeps no accounting store.
func noStore() error {
	return &httpError{status: http.StatusServiceUnavailable, msg: "this controller keeps no accounting store (it runs without a data directory); ask another member"}
}
