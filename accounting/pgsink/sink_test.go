package pgsink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/accounting"
	"corral/api"
	"corral/internal/pgtest"
)

var t0 = time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)

// record returns a run of job i: array tasks, GPUs, hugepages, an unmeasured
// run and one that never started are among them, so that every kind of
// column value (NULL or not) is shipped.
func record(i int) accounting.Record {
	end := t0.Add(time.Duration(i) * time.Minute)
	r := accounting.Record{
		JobID: uint64(i), Ref: fmt.Sprint(i), AllocID: uint64(1000 + i), Final: true,
		Name: "job", User: fmt.Sprintf("u%d", i%3), Tenant: "phys", Account: fmt.Sprintf("a%d", i%2),
		Partition: "batch", QOS: "normal", WorkDir: "/home/x",
		Submit: end.Add(-time.Hour), Eligible: end.Add(-time.Hour), Start: end.Add(-30 * time.Minute), End: end,
		TimeLimit: 3600, Elapsed: 1800, State: api.StateCompleted, NodeList: "n1",
		ReqTRES:    api.TRES{CPU: 2, MemMB: 1024, Nodes: 1},
		AllocTRES:  api.TRES{CPU: 2, MemMB: 1024, Nodes: 1},
		CPUSeconds: 3600, MemSeconds: 1024 * 1800, BillingRate: 2.5, Billing: 4500,
		TotalCPU: 1700.5, MaxRSSKB: 123456,
	}
	switch i % 5 {
	case 1:
		r.ArrayJobID, r.ArrayTaskID, r.Ref = uint64(i-1), 3, fmt.Sprintf("%d_3", i-1)
	case 2:
		r.AllocTRES.GPUs = map[string]int{"a100": 2}
		r.AllocTRES.Hugepages = map[string]int64{"2048": 512}
		r.GPUSeconds = 3600
		r.State, r.ExitCode, r.Signal = api.StateFailed, 137, 9
	case 3:
		r.Start, r.Elapsed, r.AllocID, r.State, r.TimeLimit = time.Time{}, 0, 0, api.StateCancelled, 0
		r.CPUSeconds, r.MemSeconds, r.Billing, r.TotalCPU, r.MaxRSSKB = 0, 0, 0, 0, 0
	}
	return r
}

func openStore(t *testing.T) *accounting.Store {
	s, err := accounting.Open(filepath.Join(t.TempDir(), "acct.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// write writes jobs from..to-1 as one entry at index, and mirrors are
// given the same writes (the other members of a cluster).
func write(t *testing.T, index uint64, recs []accounting.Record, stores ...*accounting.Store) {
	t.Helper()
	for _, s := range stores {
		if err := s.Write(accounting.Written{Replace: recs, Index: index}); err != nil {
			t.Fatal(err)
		}
	}
}

func records(from, to int) []accounting.Record {
	var out []accounting.Record
	for i := from; i < to; i++ {
		out = append(out, record(i))
	}
	return out
}

func runSink(t *testing.T, dsn string, store *accounting.Store) (*Sink, context.CancelFunc) {
	t.Helper()
	return runSinkWith(t, dsn, store, nil)
}

// runSinkWith is runSink with Options.LogIndex.
func runSinkWith(t *testing.T, dsn string, store *accounting.Store, logIndex func() uint64) (*Sink, context.CancelFunc) {
	t.Helper()
	s, err := New(dsn, store, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Batch: 40, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, Poll: 20 * time.Millisecond, LogIndex: logIndex})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return s, stop
}

// row is what the test reads back of a shipped record: typed columns and
// the whole record.
type row struct {
	job, alloc      int64
	user, account   string
	state           string
	exit            int32
	start, end      *time.Time
	arrayJob        *int64
	allocCPUs, gpus int32
	billing         float64
	maxRSS          *int64
	allocTRES       map[string]any
	change          int64
	record          accounting.Record
}

func readRows(t *testing.T, pg *pgtest.Server) []row {
	t.Helper()
	out, err := tryRows(pg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryRows reads every row, by change then key.
func tryRows(pg *pgtest.Server) ([]row, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT job_id, alloc_id, user_name, account, state, exit_code, start_time, end_time, array_job_id,
		alloc_cpus, alloc_gpus, billing, max_rss_kb, alloc_tres, change_index, record FROM corral_accounting ORDER BY change_index, job_id, alloc_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		var rec []byte
		if err := rows.Scan(&r.job, &r.alloc, &r.user, &r.account, &r.state, &r.exit, &r.start, &r.end, &r.arrayJob,
			&r.allocCPUs, &r.gpus, &r.billing, &r.maxRSS, &r.allocTRES, &r.change, &rec); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(rec, &r.record); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// compare checks that the database holds every record of the store's
// change feed, once, in every column, at its place; it returns "" when it
// does, else the first difference.
func compare(t *testing.T, pg *pgtest.Server, store *accounting.Store) string {
	t.Helper()
	want, err := store.Changes(accounting.ChangePos{}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tryRows(pg)
	if err != nil {
		return err.Error()
	}
	if len(got) != len(want) {
		return fmt.Sprintf("the database holds %d rows, the store %d records", len(got), len(want))
	}
	for i, w := range want {
		g, r := got[i], w.Record
		if uint64(g.change) != w.Pos.Index || uint64(g.job) != r.JobID || uint64(g.alloc) != r.AllocID {
			return fmt.Sprintf("row %d is job %d allocation %d at index %d, want job %d allocation %d at %d", i, g.job, g.alloc, g.change, r.JobID, r.AllocID, w.Pos.Index)
		}
		if !reflect.DeepEqual(g.record, r) {
			return fmt.Sprintf("job %d allocation %d: the record column holds %+v, want %+v", r.JobID, r.AllocID, g.record, r)
		}
		startOK := (g.start == nil) == r.Start.IsZero() && (g.start == nil || g.start.Equal(r.Start))
		arrayOK := (g.arrayJob == nil) == (r.ArrayJobID == 0) && (g.arrayJob == nil || uint64(*g.arrayJob) == r.ArrayJobID)
		rssOK := (g.maxRSS == nil) == (r.MaxRSSKB == 0) && (g.maxRSS == nil || *g.maxRSS == r.MaxRSSKB)
		if g.user != r.User || g.account != r.Account || g.state != string(r.State) || int(g.exit) != r.ExitCode || !g.end.Equal(r.End) ||
			!startOK || !arrayOK || !rssOK || int(g.allocCPUs) != r.AllocTRES.CPU || int(g.gpus) != r.AllocTRES.GPUCount() || g.billing != r.Billing ||
			g.allocTRES["cpu"] != float64(r.AllocTRES.CPU) {
			return fmt.Sprintf("job %d allocation %d: typed columns %+v differ from the record %+v", r.JobID, r.AllocID, g, r)
		}
	}
	return ""
}

func waitSame(t *testing.T, what string, pg *pgtest.Server, store *accounting.Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		diff := compare(t, pg, store)
		if diff == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, diff)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSinkResumesAfterOutage ships a store's records into a real
// PostgreSQL, stops the server while more records are written and some
// replaced, starts it again: the database then holds every record of the
// store exactly once, each as the store holds it. A second store with the
// same records (another member) that takes over ships only what came
// after the first one's cursor.
func TestSinkResumesAfterOutage(t *testing.T) {
	pg := pgtest.Start(t)
	store, mirror := openStore(t), openStore(t)
	write(t, 10, records(1, 100), store, mirror)
	sink, stop := runSink(t, pg.DSN, store)
	write(t, 11, records(100, 150), store, mirror)
	waitSame(t, "before the outage", pg, store)

	pg.Stop()
	// While the database is down: new records, a changed record (a
	// requeued run's end rewritten), the same record written again.
	changed := record(5)
	changed.State, changed.ExitCode = api.StateTimeout, 0
	write(t, 12, records(150, 260), store, mirror)
	write(t, 13, append([]accounting.Record{changed}, record(6)), store, mirror)
	deadline := time.Now().Add(10 * time.Second)
	for sink.Status().Errors == 0 || sink.Status().Connected {
		if time.Now().After(deadline) {
			t.Fatalf("the sink saw no failure while the database was down: %+v", sink.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	pg.Start()
	waitSame(t, "after the outage", pg, store)
	st := sink.Status()
	if st.Cursor.Index != 13 || !st.Connected || st.LastError != "" {
		t.Errorf("after catching up the sink's status is %+v, want connected at index 13", st)
	}

	// Another member takes over: it resumes after the shared cursor.
	stop()
	write(t, 14, records(260, 300), store, mirror)
	other, _ := runSink(t, pg.DSN, mirror)
	waitSame(t, "after another member took over", pg, store)
	if rows := other.Status().Rows; rows != 40 {
		t.Errorf("the member that took over wrote %d rows, want the 40 after the cursor", rows)
	}
}

// TestSinkRefusesAnotherClustersCursor: a cursor past everything the store
// applied means the database holds another cluster's records; the sink
// writes nothing and says so.
func TestSinkRefusesAnotherClustersCursor(t *testing.T) {
	pg := pgtest.Start(t)
	ahead := openStore(t)
	write(t, 500, records(1, 3), ahead)
	_, stop := runSink(t, pg.DSN, ahead)
	waitSame(t, "the first cluster's records", pg, ahead)
	stop()
	fresh := openStore(t)
	write(t, 20, records(700, 710), fresh)
	sink, _ := runSink(t, pg.DSN, fresh)
	deadline := time.Now().Add(10 * time.Second)
	for sink.Status().LastError == "" {
		if time.Now().After(deadline) {
			t.Fatal("the sink took a cursor past its store's log without an error")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rows := readRows(t, pg); len(rows) != 2 || sink.Status().Rows != 0 {
		t.Errorf("the database holds %d rows and the sink wrote %d; want the first cluster's 2 and none", len(rows), sink.Status().Rows)
	}
}

// TestSinkWaitsForItsStore: a member that takes over while its store is a
// moment behind its log (the cursor is past what its store wrote, not past
// its log) waits for the store instead of failing, then ships only what
// comes after the cursor.
func TestSinkWaitsForItsStore(t *testing.T) {
	pg := pgtest.Start(t)
	ahead, behind := openStore(t), openStore(t)
	write(t, 10, records(1, 20), ahead, behind)
	write(t, 11, records(20, 30), ahead)
	_, stop := runSink(t, pg.DSN, ahead)
	waitSame(t, "the first member's records", pg, ahead)
	stop()
	sink, _ := runSinkWith(t, pg.DSN, behind, func() uint64 { return 12 })
	deadline := time.Now().Add(10 * time.Second)
	for !sink.Status().Connected && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // five of its polls
	if st := sink.Status(); st.Errors != 0 || st.Rows != 0 || !st.Connected {
		t.Fatalf("while its store is behind the cursor the sink is %+v, want connected, waiting, no error", st)
	}
	write(t, 11, records(20, 30), behind)
	write(t, 12, records(30, 35), ahead, behind)
	waitSame(t, "after the store caught up", pg, behind)
	if st := sink.Status(); st.Rows != 5 || st.Errors != 0 {
		t.Errorf("the sink wrote %d rows with %d errors, want the 5 after the cursor and none", st.Rows, st.Errors)
	}
}

// BenchmarkShip measures the sink's throughput: 20,000 records (one Raft
// entry per 100) shipped into an empty table of a PostgreSQL the
// benchmark starts, in batches of Options.Batch; it reports records/s.
func BenchmarkShip(b *testing.B) {
	const n = 20_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pg := pgtest.Start(b)
		store, err := accounting.Open(filepath.Join(b.TempDir(), "acct.db"))
		if err != nil {
			b.Fatal(err)
		}
		for from := 1; from <= n; from += 100 {
			if err := store.Write(accounting.Written{Replace: records(from, from+100), Index: uint64(from)}); err != nil {
				b.Fatal(err)
			}
		}
		s, err := New(pg.DSN, store, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Poll: 5 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		b.StartTimer()
		began := time.Now()
		go func() { defer close(done); _ = s.Run(ctx) }()
		for s.Status().Rows < n {
			time.Sleep(time.Millisecond)
		}
		took := time.Since(began)
		b.StopTimer()
		cancel()
		<-done
		store.Close()
		b.ReportMetric(n/took.Seconds(), "records/s")
	}
}
