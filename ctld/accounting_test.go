package ctld

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/accounting"
	"corral/api"
	"corral/ctld/state"
)

// TestAccountingOnEveryMember runs jobs through a 3-voter cluster that
// purges finished jobs after 1 s: every member answers sacct's query from
// its own store with one record per job, the purged ones included (a
// completed run, a job cancelled while pending), and the members' stores
// agree on their summary. A member restarted on its data directory
// replays the log into its store without a duplicate.
func TestAccountingOnEveryMember(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")
	var specs []api.JobSpec
	for i := range 3 {
		specs = append(specs, spec(fmt.Sprint("done-", i)))
	}
	held := spec("held")
	held.Hold = true
	res, err := cl.Submit(ctx, append(specs, held))
	if err != nil {
		t.Fatal(err)
	}
	heldID := res[3].JobID
	if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{heldID}}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		waitGone(t, cl, r.JobID)
	}
	waitConverged(t, tc)
	var first api.AcctSummary
	for i, addr := range tc.addrs {
		one, _ := api.NewClient(addr)
		recs, err := one.Accounting(ctx, api.AcctQuery{AllUsers: true})
		if err != nil {
			t.Fatalf("member %d: %v", i+1, err)
		}
		if len(recs) != 4 {
			t.Fatalf("member %d holds %d records, want 4: %+v", i+1, len(recs), recs)
		}
		for _, r := range recs {
			want := api.StateCompleted
			if r.JobID == heldID {
				want = api.StateCancelled
			}
			if r.State != want || !r.Final || (r.JobID == heldID) != (r.AllocID == 0) {
				t.Errorf("member %d: job %d's record: state %s final %v alloc %d; want %s", i+1, r.JobID, r.State, r.Final, r.AllocID, want)
			}
			if r.JobID != heldID && (r.NodeList != "n1" || r.AllocTRES.CPU != 1 || r.Start.IsZero() || r.End.Before(r.Start)) {
				t.Errorf("member %d: job %d's run: nodes %q, AllocTRES %+v, %v..%v", i+1, r.JobID, r.NodeList, r.AllocTRES, r.Start, r.End)
			}
		}
		sum, err := one.AccountingSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = sum
		} else if sum != first {
			t.Errorf("member %d's store summary %+v differs from member 1's %+v", i+1, sum, first)
		}
	}
	if first.Records != 4 {
		t.Errorf("the stores hold %d records, want 4", first.Records)
	}

	// Restart member 3 on its data directory: its log replays into the
	// store it kept, changing nothing.
	cfg := tc.ctls[2].cfg
	tc.cancels[2]()
	<-tc.done[2]
	cfg.HTTPAddr, cfg.HTTPListener = "127.0.0.1:0", nil
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	tc.ctls[2], tc.cancels[2], tc.done[2] = c, rcancel, done
	eventually(t, "the restarted member applies the log", func() bool {
		var idx uint64
		c.FSM().Read(func(s *state.State) { idx = s.Index })
		return idx >= tc.ctls[0].node.raft.AppliedIndex()
	})
	one, _ := api.NewClient("http://" + c.HTTPAddr())
	if sum, err := one.AccountingSummary(ctx); err != nil || sum != first {
		t.Errorf("after a restart member 3's summary is %+v (%v), want %+v", sum, err, first)
	}
	if got := filepath.Base(c.acctStore().Path()); got != acctFile {
		t.Errorf("the store's file is %s, want %s in the data directory", got, acctFile)
	}
}

// TestAccountingAccess: a user sees their own records by default, with
// -a (all=1) those of their tenant too, never another tenant's; an
// operator sees every user's; another user's working directory is hidden.
func TestAccountingAccess(t *testing.T) {
	sc := newAuthScene(t)
	a1 := sc.submitAs(t, "alice", "phys", true)
	a2 := sc.submitAs(t, "alice2", "hep", true)
	b1 := sc.submitAs(t, "bob", "bio", true)
	sc.do(t, pAdmin, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{a1, a2, b1}}})
	get := func(who, query string) []api.AcctRecord {
		t.Helper()
		status, body := sc.do(t, who, "GET", "/v1/accounting/jobs?"+query, nil)
		if status != 200 {
			t.Fatalf("GET /v1/accounting/jobs?%s as %s: %d %s", query, who, status, body)
		}
		var recs []api.AcctRecord
		if err := json.Unmarshal([]byte(body), &recs); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	// The same through a streamed export (NDJSON), which must apply the
	// same rules.
	export := func(who, query string) []api.AcctRecord {
		t.Helper()
		status, body := sc.do(t, who, "GET", "/v1/accounting/jobs?format=ndjson&"+query, nil)
		if status != 200 {
			t.Fatalf("GET /v1/accounting/jobs?format=ndjson&%s as %s: %d %s", query, who, status, body)
		}
		var recs []api.AcctRecord
		for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
			if line == "" {
				continue
			}
			var r api.AcctRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("the export line %q: %v", line, err)
			}
			recs = append(recs, r)
		}
		return recs
	}
	jobs := func(recs []api.AcctRecord) []uint64 {
		var out []uint64
		for _, r := range recs {
			out = append(out, r.JobID)
		}
		return out
	}
	eventually(t, "the records of the three cancelled jobs are written", func() bool { return len(get(pAdmin, "all=1")) == 3 })
	cases := []struct {
		name, who, query string
		want             []uint64
	}{
		{"a user's own by default", pUserA, "", []uint64{a1}},
		{"-a: the user's tenant", pUserA, "all=1", []uint64{a1, a2}},
		{"-a: the other tenant's user sees only bio", pUserB, "all=1", []uint64{b1}},
		{"-u of another tenant's user: nothing", pUserA, "user=bob", nil},
		{"-j of another tenant's job: nothing", pUserA, fmt.Sprintf("job=%d", b1), nil},
		{"an operator: everyone", pOperator, "all=1", []uint64{a1, a2, b1}},
		{"a coordinator: the tenant", pCoord, "all=1", []uint64{a1, a2}},
	}
	for _, c := range cases {
		if got := jobs(get(c.who, c.query)); !slices.Equal(got, c.want) {
			t.Errorf("%s: got jobs %v, want %v", c.name, got, c.want)
		}
		if got := jobs(export(c.who, c.query)); !slices.Equal(got, c.want) {
			t.Errorf("%s, exported: got jobs %v, want %v", c.name, got, c.want)
		}
	}
	for _, r := range append(get(pUserA, "all=1"), export(pUserA, "all=1")...) {
		if want := map[uint64]string{a1: "/home/alice"}[r.JobID]; r.WorkDir != want {
			t.Errorf("alice sees job %d's working directory as %q, want %q", r.JobID, r.WorkDir, want)
		}
	}
	if status, body := sc.do(t, pUserA, "GET", "/v1/accounting/jobs?state=NOPE", nil); status != 400 || !strings.Contains(body, "state=") {
		t.Errorf("a bad state: %d %s; want 400 naming the parameter", status, body)
	}
	if status, body := sc.do(t, pUserA, "GET", "/v1/accounting/jobs?format=xml", nil); status != 400 || !strings.Contains(body, "parquet") {
		t.Errorf("an unknown format: %d %s; want 400 listing the formats", status, body)
	}
}

// TestAccountingStoreRebuiltFromPeer loses a member's store: the member
// restarts from its Raft snapshot, which no longer holds the purged jobs,
// finds its store behind the snapshot, and copies the records it lacks
// from a peer, after which its summary equals the others'. It copies the
// peer's node facts too: the node's drain and resume before the snapshot,
// which the snapshot does not tell.
func TestAccountingStoreRebuiltFromPeer(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")
	res, err := cl.Submit(ctx, []api.JobSpec{spec("r1"), spec("r2"), spec("r3")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		waitGone(t, cl, r.JobID)
	}
	for _, drain := range []bool{true, false} {
		if err := cl.Drain(ctx, api.DrainRequest{Node: "n1", Drain: drain, Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
	}
	waitConverged(t, tc)
	one, _ := api.NewClient(tc.addrs[0])
	want, err := one.AccountingSummary(ctx)
	if err != nil || want.Records != 3 {
		t.Fatalf("member 1 holds %+v (%v), want 3 records", want, err)
	}
	m3 := tc.ctls[2]
	if err := m3.node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	cfg := m3.cfg
	tc.cancels[2]()
	<-tc.done[2]
	if err := os.Remove(filepath.Join(cfg.DataDir, acctFile)); err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr, cfg.HTTPListener = "127.0.0.1:0", nil
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	tc.ctls[2], tc.cancels[2], tc.done[2] = c, rcancel, done
	three, _ := api.NewClient("http://" + c.HTTPAddr())
	eventually(t, "the rebuilt member's store equals its peers'", func() bool {
		got, err := three.AccountingSummary(ctx)
		gap, _ := c.acctStore().Gap()
		return err == nil && got == want && gap == 0
	})
	recs, err := three.Accounting(ctx, api.AcctQuery{AllUsers: true})
	if err != nil || len(recs) != 3 {
		t.Errorf("the rebuilt member answers sacct with %d records (%v), want 3", len(recs), err)
	}
	// Both members apply the same entries (n1 may go DOWN meanwhile: it
	// sends no heartbeats), so their facts agree once both applied them.
	var got, peerFacts []accounting.NodeFact
	eventually(t, "the rebuilt member's node facts equal its peer's", func() bool {
		tc.ctls[0].fsm.flushAccounting()
		c.fsm.flushAccounting()
		peerFacts, _ = tc.ctls[0].acctStore().NodeFacts()
		got, _ = c.acctStore().NodeFacts()
		return len(peerFacts) >= 3 && reflect.DeepEqual(got, peerFacts)
	})
	// Its change feed is its peers': the PostgreSQL sink may continue on
	// it where another member stopped.
	if a, b := feedOf(t, tc.ctls[0]), feedOf(t, c); !slices.Equal(a, b) {
		t.Errorf("the rebuilt member's change feed %v differs from member 1's %v", b, a)
	}
}

// feedOf returns a member's accounting change feed, positions only.
func feedOf(t *testing.T, c *Controller) []accounting.ChangePos {
	t.Helper()
	c.fsm.flushAccounting()
	chs, err := c.acctStore().Changes(accounting.ChangePos{}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var out []accounting.ChangePos
	for _, ch := range chs {
		out = append(out, ch.Pos)
	}
	return out
}

// TestAccountingStoreLostAlone loses the store of a cluster's only member:
// restarted from its snapshot, it has no peer to copy the purged jobs'
// records from, says they are lost and clears the gap, so that its store
// (and a PostgreSQL sink) carries on with what it holds.
func TestAccountingStoreLostAlone(t *testing.T) {
	tc := startClusterTuned(t, 1, false, false, func(c *Config) { c.NodeTimeout = time.Hour })
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")
	res, err := cl.Submit(ctx, []api.JobSpec{spec("gone")})
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, cl, res[0].JobID)
	m := tc.ctls[0]
	if err := m.node.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	cfg := m.cfg
	tc.cancels[0]()
	<-tc.done[0]
	if err := os.Remove(filepath.Join(cfg.DataDir, acctFile)); err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr, cfg.HTTPListener = "127.0.0.1:0", nil
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	tc.ctls[0], tc.cancels[0], tc.done[0] = c, rcancel, done
	eventually(t, "the lone member clears its gap", func() bool {
		gap, err := c.acctStore().Gap()
		applied, _ := c.acctStore().Applied()
		return err == nil && gap == 0 && applied > 0
	})
}
