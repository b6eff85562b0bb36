package ctld

import (
	"fmt"
	"net/http"
	"time"

	"corral/accounting"
	"corral/api"
	"corral/ctld/state"
)

// The accounting endpoints answer from this member's own store: every
// member writes the same records from the log, so none forwards to the
// leader (a follower may lag the leader by the entries it has not applied).

// handleAccountingJobs is GET /v1/accounting/jobs (corral acct, sacct).
// A user gets their own records unless they name users or ask for all
// (-a); of those, only the records of jobs they may see (the job access
// rule of jobaccess.go): their own, their tenant's unless PrivateData
// hides them, their coordinated accounts', and every one for operators
// and admins. The working directory shows to its owner and admins only,
// as in the job API.
func (c *Controller) handleAccountingJobs(w http.ResponseWriter, r *http.Request) error {
	store := c.acctStore()
	if store == nil {
		return noStore()
	}
	q, err := api.ParseAcctQuery(r.URL.Query())
	if err != nil {
		return &fieldError{Msg: err.Error()}
	}
	p := principalFrom(r)
	if !q.AllUsers && len(q.Users) == 0 && len(q.Jobs) == 0 {
		q.Users = []string{p.name}
	}
	// What the entries applied so far ended is in the store before it is
	// read: a job this member shows as ended has its record.
	c.fsm.flushAccounting()
	recs, err := store.Select(q)
	if err != nil {
		return err
	}
	out := recs[:0]
	c.fsm.Read(func(s *state.State) {
		v := viewerOf(s, p)
		for _, rec := range recs {
			l := v.level(&state.Job{Spec: &state.JobSpec{User: rec.User, Account: rec.Account}})
			if l == hidden {
				continue
			}
			if l < owned {
				rec.WorkDir = ""
			}
			out = append(out, rec)
		}
	})
	switch r.URL.Query().Get("format") {
	case "rows":
		w.Header().Set("Content-Type", api.AcctRowsType)
		rw := api.NewAcctRowWriter(w)
		for i := range out {
			if err := rw.Write(&out[i]); err != nil {
				return nil // the client went away
			}
		}
		_ = rw.Flush()
		return nil
	case "", "json":
		if out == nil {
			out = []accounting.Record{}
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	return badRequest("format=%q: use json (the default) or rows", r.URL.Query().Get("format"))
}

// handleAccountingUsage is GET /v1/accounting/usage (corral acct report):
// usage by account and user over a window, from the store's day sums. A
// row shows to those who may see its user's jobs in its account (the job
// access rule): users their own rows and their tenant's unless PrivateData
// hides them, coordinators their accounts', operators and admins all.
func (c *Controller) handleAccountingUsage(w http.ResponseWriter, r *http.Request) error {
	store := c.acctStore()
	if store == nil {
		return noStore()
	}
	start, end, err := windowOf(r)
	if err != nil {
		return err
	}
	c.fsm.flushAccounting()
	rows, err := store.AccountUsage(start, end)
	if err != nil {
		return err
	}
	out := []api.AcctUsage{}
	c.fsm.Read(func(s *state.State) {
		v := viewerOf(s, principalFrom(r))
		for _, u := range rows {
			if v.level(&state.Job{Spec: &state.JobSpec{User: u.User, Account: u.Account}}) == hidden {
				continue
			}
			out = append(out, u)
		}
	})
	writeJSON(w, http.StatusOK, out)
	return nil
}

// windowOf reads a report's window, ?start and ?end (RFC 3339; either
// may be left out).
func windowOf(r *http.Request) (start, end time.Time, err error) {
	for name, t := range map[string]*time.Time{"start": &start, "end": &end} {
		if v := r.URL.Query().Get(name); v != "" {
			if *t, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return start, end, &fieldError{Field: name, Msg: fmt.Sprintf("%s=%q: give an RFC 3339 time, e.g. 2026-11-01T00:00:00Z", name, v)}
			}
		}
	}
	if !start.IsZero() && !end.IsZero() && !end.After(start) {
		return start, end, &fieldError{Field: "end", Msg: fmt.Sprintf("the window %s - %s is empty: give an end after the start", start.Format(time.RFC3339), end.Format(time.RFC3339))}
	}
	return start, end, nil
}

// handleAccountingSummary is GET /v1/accounting/summary: this member's
// record count and digest, to compare members.
func (c *Controller) handleAccountingSummary(w http.ResponseWriter, r *http.Request) error {
	store := c.acctStore()
	if store == nil {
		return noStore()
	}
	c.fsm.flushAccounting()
	sum, err := store.Summary()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.AcctSummary{Records: sum.Records, Hash: sum.Digest})
	return nil
}

// acctStore is this member's accounting store; nil when it keeps none.
func (c *Controller) acctStore() *accounting.Store {
	if c.fsm.acct == nil {
		return nil
	}
	return c.fsm.acct.store
}
