package ctld

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"corral/accounting"
	"corral/ctld/state"
)

// A member whose accounting store missed records (it restored a snapshot
// over a store that had not applied the entries before it: a new member,
// or one whose store was lost) copies its peers' records, written where
// absent: every member writes the same records from the log, so a peer's
// are what this member's would have been. The gap stays recorded in the
// store until one peer's whole store was copied, so a restart midway
// starts again.

// acctSyncRetry is how long the member waits before it tries again when
// no peer could be copied.
const acctSyncRetry = 5 * time.Second

// acctPage is one page of GET /v1/internal/accounting/records.
type acctPage struct {
	Records []accounting.Record `json:"records"`
	// Changed holds each record's place in the serving member's change
	// feed (the Raft index of the entry that last changed it), so that
	// the copy places it there too (accounting.Store.Copy).
	Changed []uint64 `json:"changed"`
	// Next continues after the page's last record; empty after the last.
	Next string `json:"next,omitempty"`
	// Nodes, on the first page, are the member's node facts (few: one
	// per change of a node), which the copying member writes over its
	// own: they come from the same log.
	Nodes []accounting.NodeFact `json:"nodes,omitempty"`
}

// accountingSync copies the peers' records while the store has a gap,
// until ctx ends.
func (c *Controller) accountingSync(ctx context.Context) {
	w := c.fsm.acct
	if w == nil {
		return
	}
	for {
		gap, err := w.store.Gap()
		switch {
		case err != nil:
			c.log.Error("reading the accounting store's gap", "err", err)
		case gap > 0:
			if c.copyAccounting(ctx, gap) || c.accountingAlone(gap) {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(acctSyncRetry):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-w.gap:
		}
	}
}

// accountingAlone clears the gap of a member that is the cluster's only
// voter: no other member holds the records it lacks, so they are lost,
// and waiting for a peer would keep the gap (and the PostgreSQL sink,
// which ships from a whole store only) forever.
func (c *Controller) accountingAlone(gap uint64) bool {
	f := c.node.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || string(servers[0].ID) != c.cfg.ID {
		return false
	}
	c.log.Error("the accounting records of the jobs purged before the snapshot this member restored are lost: its store was lost and no other member holds them",
		"snapshot_index", gap, "store", c.fsm.acct.store.Path())
	if err := c.fsm.acct.store.ClearGap(); err != nil {
		c.log.Error("clearing the accounting store's gap", "err", err)
		return false
	}
	return true
}

// copyAccounting copies the whole store of one peer that answers and
// clears the gap; it reports whether it did.
func (c *Controller) copyAccounting(ctx context.Context, gap uint64) bool {
	var peers []string
	c.fsm.Read(func(s *state.State) {
		for id, addr := range s.Members {
			if id != c.cfg.ID && addr != "" {
				peers = append(peers, addr)
			}
		}
	})
	slices.Sort(peers)
	for _, addr := range peers {
		n, err := c.copyAccountingFrom(ctx, addr)
		if err != nil {
			c.log.Warn("copying accounting records from a peer failed; trying another", "peer", addr, "err", err)
			continue
		}
		if err := c.fsm.acct.store.ClearGap(); err != nil {
			c.log.Error("clearing the accounting store's gap", "err", err)
			return false
		}
		c.log.Info("copied the accounting records this member lacked from a peer", "peer", addr, "records_read", n, "snapshot_index", gap)
		return true
	}
	return false
}

// copyAccountingFrom pages through addr's store, writing its records
// where absent, and returns how many it read.
func (c *Controller) copyAccountingFrom(ctx context.Context, addr string) (int, error) {
	n, after := 0, ""
	for {
		u := url.URL{Scheme: c.scheme(), Host: addr, Path: "/v1/internal/accounting/records",
			RawQuery: url.Values{"after": {after}, "limit": {strconv.Itoa(accounting.PageSize)}}.Encode()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return n, err
		}
		resp, err := c.proxy.client.Do(req)
		if err != nil {
			return n, err
		}
		var page acctPage
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		switch {
		case resp.StatusCode != http.StatusOK:
			return n, fmt.Errorf("%s: %s", u.Path, resp.Status)
		case err != nil:
			return n, fmt.Errorf("%s: reading the page after %q: %w", u.Path, after, err)
		}
		if len(page.Changed) != len(page.Records) {
			return n, fmt.Errorf("%s: the page after %q has %d records and %d change indexes", u.Path, after, len(page.Records), len(page.Changed))
		}
		copied := make([]accounting.Change, len(page.Records))
		for i, r := range page.Records {
			copied[i] = accounting.Change{Record: r, Pos: accounting.ChangePos{Index: page.Changed[i], Job: r.JobID, Alloc: r.AllocID}}
		}
		if err := c.fsm.acct.store.Copy(copied, page.Nodes); err != nil {
			return n, err
		}
		n += len(page.Records)
		if page.Next == "" {
			return n, nil
		}
		after = page.Next
	}
}

// handleAccountingRecords is GET /v1/internal/accounting/records (members
// only): a page of this member's store in key order, for a peer that
// copies it.
func (c *Controller) handleAccountingRecords(w http.ResponseWriter, r *http.Request) error {
	store := c.acctStore()
	if store == nil {
		return &httpError{status: http.StatusServiceUnavailable, msg: "this controller keeps no accounting store; ask another member"}
	}
	var after []byte
	if v := r.URL.Query().Get("after"); v != "" {
		b, err := hex.DecodeString(v)
		if err != nil {
			return &fieldError{Field: "after", Msg: fmt.Sprintf("after=%q: give the hex key a previous page returned as next", v)}
		}
		after = b
	}
	// A store with a gap is no source: its records may be missing, and
	// those it wrote from a snapshot sit later in its change feed than on
	// the members that wrote them from the log.
	if gap, err := store.Gap(); err != nil || gap > 0 {
		return &httpError{status: http.StatusServiceUnavailable, msg: fmt.Sprintf("this member's accounting store is being rebuilt from its peers (gap at index %d, %v); copy another member's", gap, err)}
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if after == nil {
		// What the entries applied so far wrote is on disk before a
		// peer starts copying.
		c.fsm.flushAccounting()
	}
	recs, next, err := store.Page(after, limit)
	if err != nil {
		return err
	}
	page := acctPage{Records: make([]accounting.Record, len(recs)), Changed: make([]uint64, len(recs))}
	for i, ch := range recs {
		page.Records[i], page.Changed[i] = ch.Record, ch.Pos.Index
	}
	if after == nil {
		if page.Nodes, err = store.NodeFacts(); err != nil {
			return err
		}
	}
	if next != nil {
		page.Next = hex.EncodeToString(next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
