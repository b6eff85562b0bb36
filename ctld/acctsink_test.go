package ctld

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/accounting"
	"corral/accounting/pgsink"
	"corral/api"
	"corral/internal/pgtest"
)

// pgRecords reads every record the sink wrote, by (job, allocation).
func pgRecords(ctx context.Context, dsn string) (map[accounting.Key]accounting.Record, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT job_id, alloc_id, record FROM corral_accounting")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[accounting.Key]accounting.Record{}
	for rows.Next() {
		var job, alloc int64
		var raw []byte
		if err := rows.Scan(&job, &alloc, &raw); err != nil {
			return nil, err
		}
		var r accounting.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		out[accounting.Key{Job: uint64(job), Alloc: uint64(alloc)}] = r
	}
	return out, rows.Err()
}

// sameAsStore says how the database differs from a member's store ("" when
// it holds every record of it, once, as stored, and nothing else).
func sameAsStore(ctx context.Context, dsn string, c *Controller) string {
	got, err := pgRecords(ctx, dsn)
	if err != nil {
		return err.Error()
	}
	c.fsm.flushAccounting()
	want, err := c.acctStore().Select(accounting.Query{AllUsers: true, Duplicates: true})
	if err != nil {
		return err.Error()
	}
	if len(got) != len(want) {
		return fmt.Sprintf("the database holds %d records, member %s's store %d", len(got), c.cfg.ID, len(want))
	}
	for _, r := range want {
		if g, ok := got[accounting.KeyOf(&r)]; !ok || !reflect.DeepEqual(g, r) {
			return fmt.Sprintf("job %d allocation %d: the database holds %+v (%v), the store %+v", r.JobID, r.AllocID, g, ok, r)
		}
	}
	return ""
}

// TestAccountingPostgresSink runs jobs through a 3-member cluster whose
// members stream their records into a real PostgreSQL. The database is
// stopped while more jobs finish (and are purged from the state) and
// while the leader is killed; once it is back, the new leader resumes
// from the cursor in the database: it holds every record of every
// member's store exactly once, as stored, and the metrics say so.
func TestAccountingPostgresSink(t *testing.T) {
	pg := pgtest.Start(t)
	tc := startClusterTuned(t, 3, false, false, func(c *Config) {
		// The test node sends no heartbeat: a long timeout keeps it UP
		// through the failover.
		c.NodeTimeout = time.Hour
		c.AccountingPostgres = pg.DSN
		c.SinkOptions = pgsink.Options{RetryMin: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond, Poll: 50 * time.Millisecond}
	})
	leader := tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")
	submitAndWait := func(prefix string, n int) {
		t.Helper()
		var specs []api.JobSpec
		for i := range n {
			specs = append(specs, spec(fmt.Sprintf("%s-%d", prefix, i)))
		}
		held := spec(prefix + "-held")
		held.Hold = true
		res, err := cl.Submit(ctx, append(specs, held))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{res[n].JobID}}}); err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			waitGone(t, cl, r.JobID)
		}
	}
	submitAndWait("before", 5)
	eventually(t, "the records reach PostgreSQL", func() bool { return sameAsStore(ctx, pg.DSN, leader) == "" })

	pg.Stop()
	submitAndWait("during", 5)
	li := -1
	for i, c := range tc.ctls {
		if c == leader {
			li = i
		}
	}
	tc.cancels[li]()
	err := <-tc.done[li]
	tc.done[li] <- err // for the cleanup's wait
	survivors := append(append([]*Controller{}, tc.ctls[:li]...), tc.ctls[li+1:]...)
	// leaderNow is the survivor that leads now: on a loaded machine the
	// leadership may move again between the steps below, and the sink
	// ships from whichever member leads.
	leaderNow := func() *Controller {
		var next *Controller
		eventually(t, "a leader among the survivors", func() bool {
			for _, c := range survivors {
				if c.isLeading() {
					next = c
					return true
				}
			}
			return false
		})
		return next
	}
	leaderNow()
	live := *tc
	live.addrs = append(append([]string{}, tc.addrs[:li]...), tc.addrs[li+1:]...)
	cl = live.client(t)
	submitAndWait("after-failover", 3)
	var st pgsink.Status
	eventually(t, "the new leader's sink runs, unconnected, while the database is down", func() bool {
		st = leaderNow().sink.Status()
		return st.Running && !st.Connected
	})
	pg.Start()
	var next *Controller
	eventually(t, "the new leader ships what the database missed", func() bool {
		next = leaderNow()
		return sameAsStore(ctx, pg.DSN, next) == ""
	})
	for _, c := range survivors {
		if diff := sameAsStore(ctx, pg.DSN, c); diff != "" {
			t.Errorf("member %s: %s", c.cfg.ID, diff)
		}
	}
	if n, _ := pgRecords(ctx, pg.DSN); len(n) != 16 {
		t.Errorf("the database holds %d records, want one for each of the 16 jobs", len(n))
	}

	// The metrics of the member that ships say it caught up.
	var metrics string
	caughtUp := []string{"corral_accounting_sink_active 1", "corral_accounting_sink_connected 1", "corral_accounting_sink_pending_records 0"}
	eventually(t, "the leader's /metrics say its sink caught up", func() bool {
		metrics = scrapeText(t, "http://"+leaderNow().HTTPAddr())
		for _, want := range caughtUp {
			if !strings.Contains(metrics, want+"\n") {
				return false
			}
		}
		return true
	})
	// The member that led through the outage counted its failures (the
	// leadership may have moved since, so any survivor may hold them).
	counted := false
	for _, c := range survivors {
		m := scrapeText(t, "http://"+c.HTTPAddr())
		counted = counted || strings.Contains(m, "corral_accounting_sink_errors_total ") && !strings.Contains(m, "corral_accounting_sink_errors_total 0\n")
	}
	if !counted {
		t.Errorf("no member's /metrics counts a sink error after the outage")
	}
}

// scrapeText returns a member's /metrics text.
func scrapeText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
