package ctld

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
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
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "rows" && !slices.Contains(accounting.ExportFormats, format) {
		return badRequest("format=%q: use json (the default), rows, or an export format: %s", format, strings.Join(accounting.ExportFormats, ", "))
	}
	// What the entries applied so far ended is in the store before it is
	// read: a job this member shows as ended has its record.
	c.fsm.flushAccounting()
	show := c.acctVisibility(p)
	if format == "" || format == "json" {
		recs, err := store.Select(q)
		if err != nil {
			return err
		}
		out := []accounting.Record{}
		for _, rec := range recs {
			if show(&rec) {
				out = append(out, rec)
			}
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	return c.streamAccounting(w, store, q, format, show)
}

// streamAccounting writes the records q selects that show to the caller,
// as sacct's compact rows or an export file, a chunk at a time as the
// store reads them (a year's records never sit in memory). Once the first
// bytes are out the status cannot change: a store that fails later cuts
// the connection, so that the client sees a broken transfer, never a
// short file that looks whole.
func (c *Controller) streamAccounting(rw http.ResponseWriter, store *accounting.Store, q accounting.Query, format string, show func(*accounting.Record) bool) error {
	w := &sentCounter{ResponseWriter: rw}
	var write func([]accounting.Record) error
	var finish func() error
	if format == "rows" {
		w.Header().Set("Content-Type", api.AcctRowsType)
		rows := api.NewAcctRowWriter(w)
		write = func(recs []accounting.Record) error {
			for i := range recs {
				if err := rows.Write(&recs[i]); err != nil {
					return err
				}
			}
			return nil
		}
		finish = rows.Flush
	} else {
		w.Header().Set("Content-Type", exportTypes[format])
		w.Header().Set("Trailer", api.AcctRecordsTrailer)
		e, err := accounting.NewExporter(format, w)
		if err != nil {
			return nil // the client went away
		}
		write, finish = e.Write, e.Close
	}
	var gone error
	n := 0
	err := store.Each(q, func(recs []accounting.Record) error {
		kept := recs[:0]
		for i := range recs {
			if show(&recs[i]) {
				kept = append(kept, recs[i])
			}
		}
		n += len(kept)
		gone = write(kept)
		return gone
	})
	if gone == nil && err == nil {
		gone = finish()
		w.Header().Set(api.AcctRecordsTrailer, strconv.Itoa(n))
	}
	if gone != nil {
		return nil // the client went away
	}
	if err != nil && w.sent == 0 {
		// Nothing is out yet (the writers buffer): an ordinary error.
		return fmt.Errorf("reading this member's accounting store: %w", err)
	}
	if err != nil {
		c.log.Error("reading the accounting store for a listing failed part way: cutting the response", "format", format, "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// sentCounter counts the body bytes written to a response.
type sentCounter struct {
	http.ResponseWriter
	sent int64
}

func (s *sentCounter) Write(p []byte) (int, error) {
	n, err := s.ResponseWriter.Write(p)
	s.sent += int64(n)
	return n, err
}

// exportTypes are the media types of the export formats.
var exportTypes = map[string]string{
	"csv": "text/csv; charset=utf-8", "ndjson": "application/x-ndjson", "parquet": "application/vnd.apache.parquet",
}

// acctVisibility returns the test of which records p may see, by the job
// access rule (jobaccess.go): it tells whether a record shows and blanks
// its working directory where p may see the job but does not own it. A
// record's user and account decide, so each pair is judged once, under
// the state's read lock, however many records it has.
func (c *Controller) acctVisibility(p principal) func(*accounting.Record) bool {
	type pair struct{ user, account string }
	levels := map[pair]level{}
	return func(rec *accounting.Record) bool {
		k := pair{rec.User, rec.Account}
		l, ok := levels[k]
		if !ok {
			c.fsm.Read(func(s *state.State) {
				l = viewerOf(s, p).level(&state.Job{Spec: &state.JobSpec{User: rec.User, Account: rec.Account}})
			})
			levels[k] = l
		}
		if l == hidden {
			return false
		}
		if l < owned {
			rec.WorkDir = ""
		}
		return true
	}
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
