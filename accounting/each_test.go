package accounting

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"corral/api"
)

// TestEachGivesWhatSelectGives: over a history where some jobs ran
// several times (requeued: several records, the latest one shown), every
// query gives through Each exactly Select's records in Select's order,
// whatever the chunk size.
func TestEachGivesWhatSelectGives(t *testing.T) {
	s := openTest(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []Record
	for i := range 300 {
		r := synthetic(i, 5, 3, 7*time.Minute)
		r.Tenant = fmt.Sprintf("t%d", i%2)
		recs = append(recs, r)
		// A third of the jobs ran before, ending earlier or (requeued
		// from a later record's point of view) later.
		for k := range rng.IntN(3) {
			again := r
			again.AllocID = r.AllocID + uint64(1000*(k+1))
			again.End = r.End.Add(time.Duration(rng.IntN(7200)-3600) * time.Second)
			again.Start = again.End.Add(-time.Minute)
			again.Final = false
			again.State = api.StateRequeued
			recs = append(recs, again)
		}
	}
	if err := s.Write(Written{Replace: recs, Index: 3}); err != nil {
		t.Fatal(err)
	}
	mid := t0.Add(300 * 7 * time.Minute / 2)
	queries := []Query{
		{AllUsers: true},
		{AllUsers: true, Duplicates: true},
		{AllUsers: true, Start: mid},
		{AllUsers: true, Start: mid.Add(-3 * time.Hour), End: mid, Duplicates: true},
		{AllUsers: true, End: mid},
		{AllUsers: true, States: []api.JobState{api.StateFailed, api.StateRequeued}},
		{AllUsers: true, Tenants: []string{"t1"}, Start: mid},
		{Users: []string{"u2"}},
		{Accounts: []string{"a1"}, Duplicates: true},
		{Jobs: []uint64{4, 9, 250}, Duplicates: true},
		{AllUsers: true, Start: t0.Add(1000 * time.Hour)},
	}
	defer func(n int) { eachChunk = n }(eachChunk)
	for _, chunk := range []int{1, 2, 5, 64, 4096} {
		eachChunk = chunk
		for i, q := range queries {
			want, err := s.Select(q)
			if err != nil {
				t.Fatal(err)
			}
			var got []Record
			if err := s.Each(q, func(c []Record) error {
				if len(c) == 0 || len(c) > eachChunk+1 {
					t.Errorf("chunk %d: a chunk of %d records", chunk, len(c))
				}
				got = append(got, c...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("chunk %d, query %d %+v: Each gave %d records, Select %d (or others)", chunk, i, q, len(got), len(want))
			}
		}
	}
}

// TestEachStopsWhenToldTo: an error from the caller's function ends Each
// with it, and the reader behind it stops.
func TestEachStopsWhenToldTo(t *testing.T) {
	s := openTest(t)
	var recs []Record
	for i := range 100 {
		recs = append(recs, synthetic(i, 3, 2, time.Minute))
	}
	if err := s.Write(Written{Replace: recs}); err != nil {
		t.Fatal(err)
	}
	defer func(n int) { eachChunk = n }(eachChunk)
	eachChunk = 10
	boom := errors.New("the client went away")
	calls := 0
	err := s.Each(Query{AllUsers: true}, func([]Record) error {
		calls++
		if calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Errorf("Each returned %v after %d calls, want the function's error after 2", err, calls)
	}
}
