package accounting

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"corral/api"
)

// Query is a selection of records (sacct's options), as api.AcctQuery.
type Query = api.AcctQuery

// Matches reports whether record r is selected by q, the window aside
// from the index scan that found it: its job, user, account, tenant and
// state,
// and whether its run overlaps q's window (a record without a run, at its
// end).
func Matches(q *Query, r *Record) bool {
	if len(q.Jobs) > 0 && !slices.Contains(q.Jobs, r.JobID) && !slices.Contains(q.Jobs, r.ArrayJobID) {
		return false
	}
	if !q.AllUsers && len(q.Users) > 0 && !slices.Contains(q.Users, r.User) {
		return false
	}
	if len(q.Accounts) > 0 && !slices.Contains(q.Accounts, r.Account) {
		return false
	}
	if len(q.Tenants) > 0 && !slices.Contains(q.Tenants, r.Tenant) {
		return false
	}
	if len(q.States) > 0 && !slices.Contains(q.States, r.State) {
		return false
	}
	return inWindow(q.Start, q.End, r)
}

func inWindow(start, end time.Time, r *Record) bool {
	if !start.IsZero() && r.End.Before(start) {
		return false
	}
	from := r.Start
	if from.IsZero() {
		from = r.End
	}
	return end.IsZero() || !from.After(end)
}

// later reports whether a ended after b (the later allocation on a tie).
func later(a, b *Record) bool {
	if c := a.End.Compare(b.End); c != 0 {
		return c > 0
	}
	return a.AllocID > b.AllocID
}

// Select returns the records q selects, by job then allocation, each job
// once unless q.Duplicates. It reads the narrowest index q allows: the
// jobs' keys, the users' or accounts' ranges, or the records' time range.
func (s *Store) Select(q Query) ([]Record, error) {
	var found []*Record
	err := s.db.View(func(tx *bbolt.Tx) error {
		lo, hi := scanRange(tx, q.Start, q.End)
		keep := func(pk []byte) error {
			v := tx.Bucket(bRec).Get(pk)
			if v == nil {
				return nil
			}
			r := new(Record)
			if err := decodeRecord(v, r); err != nil {
				return fmt.Errorf("reading the record at %x: %w; the store is damaged, rebuild it from a peer", pk, err)
			}
			if Matches(&q, r) {
				found = append(found, r)
			}
			return nil
		}
		switch {
		case len(q.Jobs) > 0:
			return eachJobKey(tx, q.Jobs, keep)
		case !q.AllUsers && len(q.Users) > 0:
			return eachIndexed(tx.Bucket(bUser), q.Users, lo, hi, keep)
		case len(q.Accounts) > 0:
			return eachIndexed(tx.Bucket(bAcct), q.Accounts, lo, hi, keep)
		}
		c := tx.Bucket(bRec).Cursor()
		for k, _ := c.Seek(be64(lo)); k != nil && binary.BigEndian.Uint64(k) <= hi; k, _ = c.Next() {
			if err := keep(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ordered(found, q.Duplicates), nil
}

// ordered returns recs by job then allocation, each job's latest record
// only unless duplicates (the one that ended last: sacct without -D
// shows a job once). It sorts pointers,
// not the records (hundreds of bytes each), and copies each record kept
// once: every user's month is 86,000 records.
func ordered(recs []*Record, duplicates bool) []Record {
	slices.SortFunc(recs, func(x, y *Record) int {
		return cmp.Or(cmp.Compare(x.JobID, y.JobID), cmp.Compare(x.AllocID, y.AllocID))
	})
	if !duplicates {
		kept := recs[:0]
		for _, r := range recs {
			if n := len(kept); n > 0 && kept[n-1].JobID == r.JobID {
				if later(r, kept[n-1]) {
					kept[n-1] = r
				}
				continue
			}
			kept = append(kept, r)
		}
		recs = kept
	}
	out := make([]Record, len(recs))
	for i, r := range recs {
		out[i] = *r
	}
	return out
}

// scanRange is the range of end keys a window [start, end] needs: records
// that end from start on, up to end plus the longest run stored (a run
// that started before end may end that much later).
func scanRange(tx *bbolt.Tx, start, end time.Time) (lo, hi uint64) {
	lo, hi = timeKey(start), uint64(math.MaxUint64)
	if !end.IsZero() {
		var longest time.Duration
		if v := tx.Bucket(bMeta).Get(mLongest); len(v) == 8 {
			longest = time.Duration(binary.BigEndian.Uint64(v))
		}
		hi = timeKey(end.Add(longest))
	}
	return lo, hi
}

// eachJobKey calls f with the primary key of every record of the jobs
// (and of their array tasks).
func eachJobKey(tx *bbolt.Tx, jobs []uint64, f func(pk []byte) error) error {
	seen := map[string]bool{}
	call := func(pk []byte) error {
		if seen[string(pk)] {
			return nil
		}
		seen[string(pk)] = true
		return f(pk)
	}
	for _, j := range jobs {
		p := be64(j)
		c := tx.Bucket(bKey).Cursor()
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if err := call(v[:24]); err != nil {
				return err
			}
		}
		c = tx.Bucket(bArray).Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			if err := call(k[8:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachIndexed calls f with the primary key of every record of the names
// in index b whose end key is in [lo, hi].
func eachIndexed(b *bbolt.Bucket, names []string, lo, hi uint64, f func(pk []byte) error) error {
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		from := indexKey(n, be64(lo))
		p := from[:len(n)+1]
		c := b.Cursor()
		for k, _ := c.Seek(from); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			pk := k[len(p):]
			if binary.BigEndian.Uint64(pk) > hi {
				break
			}
			if err := f(pk); err != nil {
				return err
			}
		}
	}
	return nil
}

// Usage is one user's use of one account over a report's window, as the
// API answers it.
type Usage = api.AcctUsage

// AccountUsage sums the usage of the records that ended in [start, end)
// (zero start: from the first; zero end: to the last) by account and
// user, by account then user. Whole days come from the day sums
// (rollup.go); a part-day at either edge from the account index.
func (s *Store) AccountUsage(start, end time.Time) ([]Usage, error) {
	sums := usageSums{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		first, last := day(math.MinInt64), day(math.MaxInt64)
		if !start.IsZero() {
			if first = dayOf(start); !first.time().Equal(start) {
				first++
			}
		}
		if !end.IsZero() {
			last = dayOf(end)
		}
		if first >= last {
			return scanUsage(tx, timeKey(start), endKey(end), sums)
		}
		if !start.IsZero() {
			if err := scanUsage(tx, timeKey(start), timeKey(first.time()), sums); err != nil {
				return err
			}
		}
		if !end.IsZero() {
			if err := scanUsage(tx, timeKey(last.time()), endKey(end), sums); err != nil {
				return err
			}
		}
		return addDays(tx, first, last, &sums)
	})
	var out []Usage
	for _, byUser := range sums {
		for _, u := range byUser {
			out = append(out, *u)
		}
	}
	slices.SortFunc(out, func(a, b Usage) int { return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.User, b.User)) })
	return out, err
}

// endKey is the time key that ends a window [.., end): all when end is
// zero.
func endKey(end time.Time) uint64 {
	if end.IsZero() {
		return math.MaxUint64
	}
	return timeKey(end)
}

// scanUsage adds the usage of the records whose end key is in [lo, hi)
// from the account index's values.
func scanUsage(tx *bbolt.Tx, lo, hi uint64, sums usageSums) error {
	if lo >= hi {
		return nil
	}
	c := tx.Bucket(bAcct).Cursor()
	k, v := c.First()
	for k != nil {
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) != i+25 || len(v) < 41 {
			return fmt.Errorf("the account index holds a malformed entry %x; the store is damaged, rebuild it from a peer", k)
		}
		name := k[:i]
		switch at := binary.BigEndian.Uint64(k[i+1:]); {
		case at < lo:
			k, v = c.Seek(indexKey(string(name), be64(lo)))
			continue
		case at >= hi:
			// The next account's keys begin after name 0x01.
			k, v = c.Seek(append(bytes.Clone(name), 1))
			continue
		}
		f := func(n int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(v[n:])) }
		addUsage(sums.get(name, v[41:]), 1, f(8), f(16), f(24), f(32))
		k, v = c.Next()
	}
	return nil
}
