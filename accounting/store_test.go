package accounting

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"corral/api"
)

func openTest(t testing.TB) *Store {
	s, err := Open(filepath.Join(t.TempDir(), "acct.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// synthetic returns record i of a synthetic history: jobs ending one every
// step from t0, users u0..u(users-1), accounts a0..a(accounts-1), runs of
// up to ~2 h.
func synthetic(i, users, accounts int, step time.Duration) Record {
	end := t0.Add(time.Duration(i) * step)
	run := time.Duration(60+i%7200) * time.Second
	states := []api.JobState{api.StateCompleted, api.StateCompleted, api.StateFailed, api.StateTimeout, api.StateCancelled}
	r := Record{
		JobID: uint64(i + 1), Ref: fmt.Sprint(i + 1), AllocID: uint64(i + 1), Final: true,
		Name: "job", User: fmt.Sprintf("u%d", i%users), Account: fmt.Sprintf("a%d", i%accounts),
		Partition: "batch", QOS: "normal", WorkDir: "/home/x",
		Submit: end.Add(-run - time.Minute), Eligible: end.Add(-run - time.Minute), Start: end.Add(-run), End: end,
		TimeLimit: 7200, Elapsed: int64(run / time.Second), State: states[i%len(states)], NodeList: "n1",
		ReqTRES:   api.TRES{CPU: 4, MemMB: 8192, Nodes: 1},
		AllocTRES: api.TRES{CPU: 4, MemMB: 8192, Nodes: 1},
	}
	secs := float64(r.Elapsed)
	r.CPUSeconds, r.MemSeconds, r.BillingRate = 4*secs, 8192*secs, 6
	r.Billing = 6 * secs
	return r
}

func TestStoreIsIdempotent(t *testing.T) {
	s := openTest(t)
	recs := []Record{synthetic(0, 2, 2, time.Minute), synthetic(1, 2, 2, time.Minute)}
	if err := s.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Summary()
	if err := s.Write(Written{Replace: recs, IfAbsent: recs}); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Summary(); again != first || first.Records != 2 {
		t.Errorf("writing the same records again changed the summary: %+v, then %+v", first, again)
	}
	moved := recs[0]
	moved.End = moved.End.Add(time.Hour)
	moved.State = api.StateFailed
	if err := s.Write(Written{IfAbsent: []Record{moved}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Summary(); got != first {
		t.Errorf("IfAbsent replaced a stored record: %+v, want %+v", got, first)
	}
	if err := s.Write(Written{Replace: []Record{moved}}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Select(Query{AllUsers: true, Duplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].State != api.StateFailed || !all[0].End.Equal(moved.End) {
		t.Errorf("after replacing job 1's record the store holds %+v", all)
	}
	if users, _ := s.Select(Query{Users: []string{"u0"}}); len(users) != 1 {
		t.Errorf("the user index holds %d records of u0 after the replace, want 1", len(users))
	}
}

// TestStoreDigestIgnoresOrder writes the same records in two orders, one
// of them with a detour (a record replaced, then put back).
func TestStoreDigestIgnoresOrder(t *testing.T) {
	a, b := openTest(t), openTest(t)
	var recs []Record
	for i := range 50 {
		recs = append(recs, synthetic(i, 3, 2, time.Minute))
	}
	if err := a.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(recs)
	slices.Reverse(rev)
	detour := rev[0]
	detour.Name = "other"
	if err := b.Write(Written{Replace: []Record{detour}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(Written{Replace: rev}); err != nil {
		t.Fatal(err)
	}
	sa, _ := a.Summary()
	sb, _ := b.Summary()
	if sa != sb || sa.Records != 50 {
		t.Errorf("summaries differ: %+v and %+v", sa, sb)
	}
	if err := b.Write(Written{Replace: []Record{detour}}); err != nil {
		t.Fatal(err)
	}
	if sc, _ := b.Summary(); sc == sa {
		t.Errorf("a changed record left the digest as it was")
	}
}

func TestSelect(t *testing.T) {
	s := openTest(t)
	var recs []Record
	for i := range 100 { // one every hour: job i+1 ends at t0 + i h
		recs = append(recs, synthetic(i, 4, 3, time.Hour))
	}
	// Job 200 ran twice: requeued, then failed; it is task 3 of array 199.
	r1 := synthetic(10, 4, 3, time.Hour)
	r1.JobID, r1.AllocID, r1.Final, r1.State, r1.ArrayJobID, r1.ArrayTaskID = 200, 300, false, api.StateRequeued, 199, 3
	r2 := synthetic(12, 4, 3, time.Hour)
	r2.JobID, r2.AllocID, r2.State, r2.ArrayJobID, r2.ArrayTaskID = 200, 301, api.StateFailed, 199, 3
	recs = append(recs, r1, r2)
	if err := s.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	ids := func(rs []Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d.%d", r.JobID, r.AllocID))
		}
		return out
	}
	cases := []struct {
		name string
		q    Query
		want []string
	}{
		{"one job", Query{Jobs: []uint64{5}}, []string{"5.5"}},
		{"an array's task, its last run", Query{Jobs: []uint64{199}}, []string{"200.301"}},
		{"every run with -D", Query{Jobs: []uint64{200}, Duplicates: true}, []string{"200.300", "200.301"}},
		{"a user in a window", Query{Users: []string{"u1"}, Start: t0.Add(20 * time.Hour), End: t0.Add(30 * time.Hour)},
			[]string{"22.22", "26.26", "30.30"}},
		{"an account and a state", Query{Accounts: []string{"a0"}, States: []api.JobState{api.StateFailed}, AllUsers: true},
			[]string{"13.13", "28.28", "43.43", "58.58", "73.73", "88.88", "200.301"}},
		{"all users, a window that overlaps runs", Query{AllUsers: true, Start: t0.Add(99*time.Hour + time.Minute)},
			nil},
		{"all users, the last hour", Query{AllUsers: true, Start: t0.Add(98*time.Hour + 30*time.Minute)}, []string{"100.100"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Select(c.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), c.want) {
				t.Errorf("got %v, want %v", ids(got), c.want)
			}
		})
	}
}

// TestAccountUsage compares the report's sums with sums over the records
// themselves, for windows that are within a day, cross days at odd
// hours, or are open, after one record was replaced by one that ends on
// another day (its old day's sums must lose it).
func TestAccountUsage(t *testing.T) {
	s := openTest(t)
	var recs []Record
	for i := range 40 { // one every 5 h: about 8 days
		recs = append(recs, synthetic(i, 3, 2, 5*time.Hour))
	}
	if err := s.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	moved := recs[3]
	moved.End, moved.CPUSeconds = moved.End.Add(50*time.Hour), 7
	if err := s.Write(Written{Replace: []Record{moved}}); err != nil {
		t.Fatal(err)
	}
	recs[3] = moved
	cases := []struct {
		name       string
		start, end time.Time
	}{
		{"within a day", t0.Add(2 * time.Hour), t0.Add(6 * time.Hour)},
		{"across days at odd hours", t0.Add(3 * time.Hour), t0.Add(100 * time.Hour)},
		{"from midnight to midnight", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)},
		{"open", time.Time{}, time.Time{}},
		{"open end", t0.Add(30 * time.Hour), time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.AccountUsage(c.start, c.end)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]Usage{}
			for _, r := range recs {
				if r.End.Before(c.start) || !c.end.IsZero() && !r.End.Before(c.end) {
					continue
				}
				u := want[r.Account+"/"+r.User]
				u.Account, u.User = r.Account, r.User
				addUsage(&u, 1, r.CPUSeconds, r.GPUSeconds, r.MemSeconds, r.Billing)
				want[r.Account+"/"+r.User] = u
			}
			if len(got) != len(want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			for _, u := range got {
				if w := want[u.Account+"/"+u.User]; u != w {
					t.Errorf("got %+v, want %+v", u, w)
				}
			}
		})
	}
}

// TestPageAppliedAndGap pages through a store two records at a time into
// another (written where absent) and checks the applied index only rises
// and the gap is kept until cleared.
func TestPageAppliedAndGap(t *testing.T) {
	src, dst := openTest(t), openTest(t)
	var recs []Record
	for i := range 5 {
		recs = append(recs, synthetic(i, 2, 2, time.Minute))
	}
	if err := src.Write(Written{Replace: recs, Index: 40}); err != nil {
		t.Fatal(err)
	}
	if err := src.Write(Written{Index: 30}); err != nil {
		t.Fatal(err)
	}
	if n, _ := src.Applied(); n != 40 {
		t.Errorf("applied = %d after indexes 40 and 30, want 40", n)
	}
	if err := dst.MarkGap(40); err != nil {
		t.Fatal(err)
	}
	var after []byte
	pages := 0
	for {
		page, next, err := src.Page(after, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if err := dst.Copy(page, nil); err != nil {
			t.Fatal(err)
		}
		if next == nil {
			break
		}
		after = next
	}
	a, _ := src.Summary()
	b, _ := dst.Summary()
	if a != b || pages != 3 {
		t.Errorf("after %d pages the copy's summary %+v differs from %+v", pages, b, a)
	}
	if g, _ := dst.Gap(); g != 40 {
		t.Errorf("gap = %d before it is cleared, want 40", g)
	}
	if err := dst.ClearGap(); err != nil {
		t.Fatal(err)
	}
	if g, _ := dst.Gap(); g != 0 {
		t.Errorf("gap = %d after it was cleared", g)
	}
}

// TestExpire deletes the records that ended before a cutoff: what remains
// (the records, the indexes, the day sums, the digest) is what a store
// that was only ever given the newer records holds.
func TestExpire(t *testing.T) {
	s, only := openTest(t), openTest(t)
	var recs []Record
	for i := range 10 {
		recs = append(recs, synthetic(i, 2, 2, time.Hour))
	}
	if err := s.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(Written{ExpireBefore: recs[6].End}); err != nil {
		t.Fatal(err)
	}
	if err := only.Write(Written{Replace: recs[6:]}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Summary()
	want, _ := only.Summary()
	if got != want || got.Records != 4 {
		t.Errorf("after expiring records 0-5 the store's summary is %+v, want %+v", got, want)
	}
	a, _ := s.AccountUsage(time.Time{}, time.Time{})
	b, _ := only.AccountUsage(time.Time{}, time.Time{})
	if !slices.Equal(a, b) {
		t.Errorf("usage after expiry %+v, want %+v", a, b)
	}
	if recs, _ := s.Select(Query{Users: []string{"u0"}}); len(recs) != 2 {
		t.Errorf("user u0 keeps %d records, want 2", len(recs))
	}
	// An expired record's key is free: writing it again adds it back.
	if err := s.Write(Written{IfAbsent: recs[:1]}); err != nil {
		t.Fatal(err)
	}
	if sum, _ := s.Summary(); sum.Records != 5 {
		t.Errorf("an expired record written again: %d records, want 5", sum.Records)
	}
}
