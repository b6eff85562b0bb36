package accounting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// A member's store can miss records: one restored from a snapshot (a new
// member, or one whose store was lost) never applied the entries the
// snapshot covers, and the records of jobs purged before it exist only on
// its peers. The store keeps the Raft index up to which it holds every
// record (Applied); a snapshot at a later index leaves a gap, which the
// store remembers (Gap) until the controller copied its peers' records
// (Page, written where absent) and cleared it.

var (
	mApplied = []byte("applied")
	mGap     = []byte("gap")
)

// Applied returns the Raft index up to which the store holds the records
// of every entry (0 for a new store).
func (s *Store) Applied() (uint64, error) {
	var n uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(mApplied); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return n, err
}

// Gap returns the Raft index of the snapshot that left the store missing
// records, or 0 when none is missing.
func (s *Store) Gap() (uint64, error) {
	var n uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bMeta).Get(mGap); len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return n, err
}

// MarkGap records that the records of entries up to index may be missing
// (a snapshot at index was restored over a store that applied less).
func (s *Store) MarkGap(index uint64) error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bMeta).Put(mGap, be64(index)) })
}

// ClearGap records that the missing records were copied from a peer.
func (s *Store) ClearGap() error {
	return s.db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bMeta).Delete(mGap) })
}

// setApplied raises the applied index to index (never lowers it).
func (t *writeTx) setApplied(index uint64) error {
	if v := t.meta.Get(mApplied); len(v) == 8 && binary.BigEndian.Uint64(v) >= index {
		return nil
	}
	return t.meta.Put(mApplied, be64(index))
}

// PageSize is the most records Page returns at once.
const PageSize = 5000

// Page returns up to limit records (at most PageSize) in key order after
// the key after (nil: from the first), and the key to continue after
// (nil when there are no more).
func (s *Store) Page(after []byte, limit int) ([]Record, []byte, error) {
	limit = min(max(limit, 1), PageSize)
	var out []Record
	var next, last []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bRec).Cursor()
		k, v := c.First()
		if after != nil {
			k, v = c.Seek(after)
			if k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil; k, v = c.Next() {
			if len(out) == limit {
				next = last
				return nil
			}
			var r Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("reading the record at %x: %w; the store is damaged, rebuild it from a peer", k, err)
			}
			out = append(out, r)
			last = bytes.Clone(k)
		}
		return nil
	})
	return out, next, err
}
