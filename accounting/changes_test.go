package accounting

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"corral/api"
)

// feed returns the store's whole change feed as (index, job) pairs.
func feed(t *testing.T, s *Store) [][2]uint64 {
	t.Helper()
	chs, err := s.Changes(ChangePos{}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]uint64
	for _, c := range chs {
		if c.Pos.Job != c.Record.JobID || c.Pos.Alloc != c.Record.AllocID {
			t.Fatalf("the feed's position %+v holds job %d allocation %d", c.Pos, c.Record.JobID, c.Record.AllocID)
		}
		out = append(out, [2]uint64{c.Pos.Index, c.Pos.Job})
	}
	return out
}

// TestChangeFeed: records sit at the index of the entry that last changed
// them; a record written again unchanged keeps its place, a changed one
// moves; entries batched into one write keep their own indexes; expired
// records leave the feed; a reader pages through it after a position.
func TestChangeFeed(t *testing.T) {
	s := openTest(t)
	recs := make([]Record, 5)
	for i := range recs {
		recs[i] = synthetic(i, 2, 2, time.Minute)
	}
	if err := s.Write(Written{Replace: recs, Index: 10}); err != nil {
		t.Fatal(err)
	}
	changed := recs[1]
	changed.State = api.StateFailed
	more := []Written{
		{Replace: []Record{changed, recs[2]}, Index: 11},
		{IfAbsent: []Record{recs[3], synthetic(5, 2, 2, time.Minute)}, Index: 12},
		{Replace: []Record{synthetic(6, 2, 2, time.Minute)}, Index: 13},
	}
	if err := s.WriteAll(more); err != nil {
		t.Fatal(err)
	}
	want := [][2]uint64{{10, 1}, {10, 3}, {10, 4}, {10, 5}, {11, 2}, {12, 6}, {13, 7}}
	if got := feed(t, s); !slices.Equal(got, want) {
		t.Errorf("the feed is %v, want %v", got, want)
	}
	page, err := s.Changes(ChangePos{Index: 10, Job: 4, Alloc: 4}, 2)
	if err != nil || len(page) != 2 || page[0].Pos.Job != 5 || page[1].Pos.Job != 2 || page[1].Record.State != api.StateFailed {
		t.Errorf("the page after (10, 4) is %+v (%v), want jobs 5 and 2 (changed)", page, err)
	}
	if n, _ := s.ChangesAfter(ChangePos{Index: 11}); n != 3 {
		t.Errorf("%d changes after index 11, want 3", n)
	}
	if err := s.Write(Written{ExpireBefore: recs[2].End.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got, want := feed(t, s), [][2]uint64{{10, 4}, {10, 5}, {12, 6}, {13, 7}}; !slices.Equal(got, want) {
		t.Errorf("after expiring jobs 1-3 the feed is %v, want %v", got, want)
	}
}

// TestChangeFeedOfACopy: a member restored from a snapshot writes the
// records the snapshot holds at the snapshot's index, then copies its
// peer's store; its feed is then the peer's, so a reader may continue
// on either.
func TestChangeFeedOfACopy(t *testing.T) {
	peer, rebuilt := openTest(t), openTest(t)
	var recs []Record
	for i := range 6 {
		recs = append(recs, synthetic(i, 2, 2, time.Minute))
		if err := peer.Write(Written{Replace: recs[i:], Index: uint64(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The snapshot at 20 still holds jobs 4-6; jobs 1-3 were purged.
	if err := rebuilt.Write(Written{IfAbsent: recs[3:], Index: 20}); err != nil {
		t.Fatal(err)
	}
	// An entry after the snapshot changes job 6 on both.
	changed := recs[5]
	changed.ExitCode = 3
	for _, s := range []*Store{peer, rebuilt} {
		if err := s.Write(Written{Replace: []Record{changed}, Index: 21}); err != nil {
			t.Fatal(err)
		}
	}
	var after []byte
	for {
		page, next, err := peer.Page(after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := rebuilt.Copy(page, nil); err != nil {
			t.Fatal(err)
		}
		if next == nil {
			break
		}
		after = next
	}
	want := [][2]uint64{{10, 1}, {11, 2}, {12, 3}, {13, 4}, {14, 5}, {21, 6}}
	if got, peers := feed(t, rebuilt), feed(t, peer); !slices.Equal(got, want) || !slices.Equal(peers, want) {
		t.Errorf("the copy's feed is %v and the peer's %v, want both %v", got, peers, want)
	}
	a, _ := peer.Summary()
	b, _ := rebuilt.Summary()
	if a != b {
		t.Errorf("the copy's summary %+v differs from the peer's %+v", b, a)
	}
}

// TestChangeFeedOfAnOlderStore: a store written before the feed existed
// gets one on opening, with every record at index 0, so that a reader
// from the start reads them all, and keeps working.
func TestChangeFeedOfAnOlderStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acct.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(Written{Replace: []Record{synthetic(0, 1, 1, time.Minute), synthetic(1, 1, 1, time.Minute)}, Index: 7}); err != nil {
		t.Fatal(err)
	}
	// Make it as an older corral left it: no chg bucket, keys without
	// their change index.
	err = s.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bChg); err != nil {
			return err
		}
		keys := tx.Bucket(bKey)
		var ks, vs [][]byte
		_ = keys.ForEach(func(k, v []byte) error {
			ks, vs = append(ks, slices.Clone(k)), append(vs, slices.Clone(v[:24]))
			return nil
		})
		for i := range ks {
			if err := keys.Put(ks[i], vs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := feed(t, s), [][2]uint64{{0, 1}, {0, 2}}; !slices.Equal(got, want) {
		t.Errorf("the older store's feed is %v, want %v", got, want)
	}
	changed := synthetic(1, 1, 1, time.Minute)
	changed.State = api.StateFailed
	if err := s.Write(Written{Replace: []Record{changed}, Index: 8}); err != nil {
		t.Fatal(err)
	}
	if got, want := feed(t, s), [][2]uint64{{0, 1}, {8, 2}}; !slices.Equal(got, want) {
		t.Errorf("after a change the feed is %v, want %v", got, want)
	}
}
