package accounting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
)

// eachChunk is how many records Each reads in one read transaction and
// hands over at once.
var eachChunk = 4096

// errStop ends Each's reader when the caller's function failed.
var errStop = errors.New("stopped")

// Each calls f with the records q selects, in chunks, in Select's order
// (by job then allocation, each job once unless q.Duplicates), without
// holding them all: an export of a year's records (a million) streams
// through in constant memory. A query naming jobs, users (not all) or
// accounts reads their indexes through Select, as sacct does; any other
// walks the records by job and allocation, reading a record only when its
// end is in the window's range. Each read transaction reads one chunk,
// so that a slow consumer never holds one open (bbolt's writer waits for
// readers when it grows the file), and the next chunk is read and decoded
// on another goroutine while f handles this one. f must not keep the
// chunk's slice after it returns (its records it may).
func (s *Store) Each(q Query, f func([]Record) error) error {
	if len(q.Jobs) > 0 || (!q.AllUsers && len(q.Users) > 0) || len(q.Accounts) > 0 {
		recs, err := s.Select(q)
		if err != nil {
			return err
		}
		for len(recs) > 0 {
			n := min(len(recs), eachChunk)
			if err := f(recs[:n]); err != nil {
				return err
			}
			recs = recs[n:]
		}
		return nil
	}
	chunks := make(chan []Record, 1)
	stop := make(chan struct{})
	read := make(chan error, 1)
	go func() {
		defer close(chunks)
		read <- s.eachByKey(q, func(recs []Record) error {
			select {
			case chunks <- recs:
				return nil
			case <-stop:
				return errStop
			}
		})
	}()
	var err error
	for recs := range chunks {
		if err == nil {
			err = f(recs)
			if err != nil {
				close(stop)
			}
		}
	}
	if rerr := <-read; err == nil && rerr != errStop {
		err = rerr
	}
	return err
}

// eachByKey walks the key index (job|alloc) in chunks, one read
// transaction each, and gives f each chunk of the records q selects; a
// job's latest record is held back until its next job's comes (or the
// end), so that a job is given once without q.Duplicates even across
// chunks.
func (s *Store) eachByKey(q Query, f func([]Record) error) error {
	var after []byte
	var held *Record
	for {
		out := make([]Record, 0, eachChunk+1)
		if held != nil {
			out = append(out, *held)
			held = nil
		}
		done := false
		err := s.db.View(func(tx *bbolt.Tx) error {
			lo, hi := scanRange(tx, q.Start, q.End)
			recs := tx.Bucket(bRec)
			c := tx.Bucket(bKey).Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil; k, v = c.Next() {
				if len(out) > eachChunk {
					return nil
				}
				after = append(after[:0], k...)
				if len(v) < 24 {
					return fmt.Errorf("the key index's entry for %x is cut short; the store is damaged, rebuild it from a peer", k)
				}
				pk := v[:24]
				if end := binary.BigEndian.Uint64(pk); end < lo || end > hi {
					continue
				}
				var r Record
				if err := unmarshalRecord(pk, recs.Get(pk), &r); err != nil {
					return err
				}
				if !Matches(&q, &r) {
					continue
				}
				if n := len(out); !q.Duplicates && n > 0 && out[n-1].JobID == r.JobID {
					if later(&r, &out[n-1]) {
						out[n-1] = r
					}
					continue
				}
				out = append(out, r)
			}
			done = true
			return nil
		})
		if err != nil {
			return err
		}
		if !done && len(out) > 0 {
			// The last job's later records may be in the next chunk.
			last := out[len(out)-1]
			held, out = &last, out[:len(out)-1]
		}
		if len(out) > 0 {
			if err := f(out); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}
