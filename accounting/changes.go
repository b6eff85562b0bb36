package accounting

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"
)

// The change feed lists the stored records by the Raft index of the entry
// that last changed them (the chg bucket: index|job|alloc), for a reader
// that copies the store elsewhere and resumes where it stopped: the
// PostgreSQL sink (package accounting/pgsink). Every member writes the
// same records at the same indexes, so a position in the feed means the
// same on every member, and a reader can continue on another member where
// one stopped. A record written again unchanged keeps its place; a changed
// one moves to its new index. A member that copies records from a peer
// (sync.go) or restores a snapshot places them at the snapshot's index,
// never before the index they were written at on the peers, so a reader
// past a position has read everything the feed ever held before it.

// ChangePos is a position in the change feed: the Raft index of a change
// and the record's key. The zero position is before every change.
type ChangePos struct {
	Index uint64
	Job   uint64
	Alloc uint64
}

// Less reports whether p comes before q in the feed.
func (p ChangePos) Less(q ChangePos) bool {
	if p.Index != q.Index {
		return p.Index < q.Index
	}
	if p.Job != q.Job {
		return p.Job < q.Job
	}
	return p.Alloc < q.Alloc
}

// Change is a record at its place in the change feed.
type Change struct {
	Pos    ChangePos
	Record Record
}

// Changes returns up to limit (at least 1) records of the change feed
// after position after, in feed order.
func (s *Store) Changes(after ChangePos, limit int) ([]Change, error) {
	limit = max(limit, 1)
	var out []Change
	err := s.db.View(func(tx *bbolt.Tx) error {
		keys, recs := tx.Bucket(bKey), tx.Bucket(bRec)
		c := tx.Bucket(bChg).Cursor()
		for k, _ := seekAfter(c, after); k != nil && len(out) < limit; k, _ = c.Next() {
			pos := posOf(k)
			kv := keys.Get(k[8:])
			if kv == nil {
				return fmt.Errorf("the change feed names job %d allocation %d, which has no record; the store is damaged, rebuild it from a peer", pos.Job, pos.Alloc)
			}
			pk, _ := splitKeyValue(kv)
			var r Record
			if err := decodeRecord(recs.Get(pk), &r); err != nil {
				return fmt.Errorf("reading the record of job %d allocation %d: %w; the store is damaged, rebuild it from a peer", pos.Job, pos.Alloc, err)
			}
			out = append(out, Change{Pos: pos, Record: r})
		}
		return nil
	})
	return out, err
}

// ChangesAfter counts the records of the change feed after position
// after: how far a reader at after is behind.
func (s *Store) ChangesAfter(after ChangePos) (int, error) {
	n := 0
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bChg).Cursor()
		for k, _ := seekAfter(c, after); k != nil; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}

// seekAfter moves c to the first key after position p.
func seekAfter(c *bbolt.Cursor, p ChangePos) ([]byte, []byte) {
	from := changeKey(p.Index, Key{Job: p.Job, Alloc: p.Alloc})
	k, v := c.Seek(from)
	if k != nil && bytes.Equal(k, from) {
		k, v = c.Next()
	}
	return k, v
}

func posOf(k []byte) ChangePos {
	return ChangePos{Index: binary.BigEndian.Uint64(k), Job: binary.BigEndian.Uint64(k[8:]), Alloc: binary.BigEndian.Uint64(k[16:])}
}

// changeKey is the chg bucket's key: index|job|alloc.
func changeKey(index uint64, k Key) []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b, index)
	binary.BigEndian.PutUint64(b[8:], k.Job)
	binary.BigEndian.PutUint64(b[16:], k.Alloc)
	return b
}

// splitKeyValue splits the key bucket's value into the record's primary
// key and the index of its last change (0 in a store written before the
// feed existed).
func splitKeyValue(v []byte) (pk []byte, index uint64) {
	pk = bytes.Clone(v[:24])
	if len(v) == 32 {
		index = binary.BigEndian.Uint64(v[24:])
	}
	return pk, index
}

// unlink deletes the key (job|alloc) of a record that was removed, and its
// place in the change feed.
func (t *writeTx) unlink(id []byte) error {
	v := t.key.Get(id)
	if v == nil {
		return nil
	}
	_, index := splitKeyValue(v)
	if err := t.chg.Delete(append(be64(index), id...)); err != nil {
		return err
	}
	return t.key.Delete(id)
}

// openChanges creates the change feed's bucket; in a store written before
// it existed, it places every stored record at index 0, so that a reader
// starting from the beginning reads them all.
func openChanges(tx *bbolt.Tx) error {
	if tx.Bucket(bChg) != nil {
		return nil
	}
	chg, err := tx.CreateBucket(bChg)
	if err != nil {
		return err
	}
	chg.FillPercent = fillPercent
	return tx.Bucket(bKey).ForEach(func(k, _ []byte) error {
		return chg.Put(append(be64(0), k...), nil)
	})
}
