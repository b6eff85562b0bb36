package accounting

import (
	"bytes"
	"encoding/binary"
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
// the key after (nil: from the first), each with its place in the change
// feed, and the key to continue after (nil when there are no more).
func (s *Store) Page(after []byte, limit int) ([]Change, []byte, error) {
	limit = min(max(limit, 1), PageSize)
	var out []Change
	var next, last []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		keys := tx.Bucket(bKey)
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
			var ch Change
			if err := decodeRecord(v, &ch.Record); err != nil {
				return fmt.Errorf("reading the record at %x: %w; the store is damaged, rebuild it from a peer", k, err)
			}
			ch.Pos = ChangePos{Job: ch.Record.JobID, Alloc: ch.Record.AllocID}
			if kv := keys.Get(k[8:]); kv != nil {
				_, ch.Pos.Index = splitKeyValue(kv)
			}
			out = append(out, ch)
			last = bytes.Clone(k)
		}
		return nil
	})
	return out, next, err
}

// Copy writes records copied from a peer's store (Page), and its node
// facts: each record where its
// key is not stored, at the peer's place in the change feed; where the
// same record is stored, it takes the peer's place too. The records a
// member wrote from a restored snapshot sit at the snapshot's index, later
// than the entries that wrote them on the peers; once copied, every record
// sits where it sits on the peers, so a feed reader may move from this
// member to another without skipping a record (changes.go).
func (s *Store) Copy(recs []Change, nodes []NodeFact) error {
	if len(recs) == 0 && len(nodes) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		t := newWriteTx(tx)
		for i := range recs {
			if err := t.adopt(&recs[i].Record, recs[i].Pos.Index); err != nil {
				return err
			}
		}
		// The peer's node facts come from the same log: written over the
		// member's own.
		for i := range nodes {
			if err := t.putNodeFact(&nodes[i], false); err != nil {
				return err
			}
		}
		return t.finish()
	})
}

// adopt writes r where its key is absent, at index in the change feed;
// where the same record is stored, it moves it to index.
func (t *writeTx) adopt(r *Record, index uint64) error {
	k := KeyOf(r)
	old := t.key.Get(idKey(k))
	if old == nil {
		return t.put(r, false, index)
	}
	pk, was := splitKeyValue(old)
	if was == index {
		return nil
	}
	val := appendRecord(nil, r)
	if !bytes.Equal(pk, primaryKey(r.End, k)) || !bytes.Equal(t.rec.Get(pk), val) {
		return nil // this member's record is newer: it stays where its entry put it
	}
	if err := t.chg.Delete(changeKey(was, k)); err != nil {
		return err
	}
	if err := t.chg.Put(changeKey(index, k), nil); err != nil {
		return err
	}
	return t.key.Put(idKey(k), binary.BigEndian.AppendUint64(pk, index))
}
