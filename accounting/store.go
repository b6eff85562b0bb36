package accounting

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"go.etcd.io/bbolt"
)

// Store is the accounting store of one controller: a bbolt file in its
// data directory (see doc.go for why bbolt). Records are keyed by (end
// time, job, allocation), so a time window is a range; indexes by user,
// account and array find one user's or account's records without reading
// the others'. It is safe for concurrent use (bbolt serialises writers).
//
// Buckets:
//
//	rec    end|job|alloc → the record (codec.go)
//	key    job|alloc → end|job|alloc, change index (idempotence: a key written again replaces its record)
//	user   user 0x00 end|job|alloc → nothing
//	acct   account 0x00 end|job|alloc → usage (see usageValue)
//	array  arrayjob|end|job|alloc → nothing
//	day    account 0x00 user 0x00 day → the day's usage sums (rollup.go)
//	run    end|job|alloc → what time-spread reports read of it (runs.go)
//	node   node 0x00 time → the node's state from then on (nodes.go)
//	chg    index|job|alloc → nothing: the records by the Raft index that last changed them (changes.go)
//	meta   count, digest (XOR of each record's SHA-256), longest run,
//	       longest span (runs.go), the records' encoding (upgrade.go)
type Store struct {
	db *bbolt.DB
}

var (
	bRec   = []byte("rec")
	bKey   = []byte("key")
	bUser  = []byte("user")
	bAcct  = []byte("acct")
	bArray = []byte("array")
	bDay   = []byte("day")
	bMeta  = []byte("meta")
	bChg   = []byte("chg")

	mCount   = []byte("count")
	mDigest  = []byte("digest")
	mLongest = []byte("longest")
)

// fillPercent is how full bbolt fills a page before it splits it.
const fillPercent = 0.95

// Open opens (or creates) the store at path.
func Open(path string) (*Store, error) { return OpenLogged(path, nil) }

// OpenLogged opens (or creates) the store at path, telling log (may be
// nil) how the conversion of a store written in an older encoding goes.
func OpenLogged(path string, log *slog.Logger) (*Store, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bbolt.ErrTimeout) {
			return nil, fmt.Errorf("opening the accounting store %s: another process holds it; is another controller using this data directory?", path)
		}
		return nil, fmt.Errorf("opening the accounting store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		// A store written before the run index existed gets it built
		// from its records, once.
		fill := tx.Bucket(bRec) != nil && tx.Bucket(bRun) == nil
		for _, b := range [][]byte{bRec, bKey, bUser, bAcct, bArray, bDay, bRun, bNode, bMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if fill {
			if err := buildRunIndex(tx); err != nil {
				return err
			}
		}
		return openChanges(tx)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("preparing the accounting store %s: %w", path, err)
	}
	if err := upgradeCodec(db, log); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("converting the accounting store %s's records to the current encoding: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the store's file.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the store's file.
func (s *Store) Path() string { return s.db.Path() }

// Write stores w in one transaction: w.Replace replaces any record of the
// same key, w.IfAbsent is written only where its key is not stored. A
// record equal to the stored one changes nothing, so writing the same
// records again (a log replayed after a restart) is idempotent.
func (s *Store) Write(w Written) error { return s.WriteAll([]Written{w}) }

// WriteAll stores the writes of several entries in one transaction, in
// order, each at its own index in the change feed (so that the feed is the
// same on every member however a member's writes were batched); the
// records past retention are expired once, at the latest cutoff, after
// them: records written after a purge end after its cutoff.
func (s *Store) WriteAll(ws []Written) error {
	var expire time.Time
	empty := true
	for _, w := range ws {
		empty = empty && w.Empty()
		if w.ExpireBefore.After(expire) {
			expire = w.ExpireBefore
		}
	}
	if empty {
		return nil
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		t := newWriteTx(tx)
		for _, w := range ws {
			if err := t.write(w); err != nil {
				return err
			}
		}
		if !expire.IsZero() {
			if err := t.expire(expire, ExpireMax); err != nil {
				return err
			}
		}
		return t.finish()
	})
}

// write stores one entry's records and node facts (WriteAll).
func (t *writeTx) write(w Written) error {
	for i := range w.Replace {
		if err := t.put(&w.Replace[i], true, w.Index); err != nil {
			return err
		}
	}
	for i := range w.IfAbsent {
		if err := t.put(&w.IfAbsent[i], false, w.Index); err != nil {
			return err
		}
	}
	// A restored member's guesses come before the facts of the entries
	// it applies after the snapshot (which come in later writes).
	for i := range w.NodesIfNone {
		if err := t.putNodeFact(&w.NodesIfNone[i], true); err != nil {
			return err
		}
	}
	for i := range w.Nodes {
		if err := t.putNodeFact(&w.Nodes[i], false); err != nil {
			return err
		}
	}
	if w.Index > 0 {
		return t.setApplied(w.Index)
	}
	return nil
}

// writeTx is one write transaction and the meta figures it changes.
type writeTx struct {
	tx                                                     *bbolt.Tx
	rec, key, user, acct, array, day, run, node, meta, chg *bbolt.Bucket
	count                                                  uint64
	digest                                                 [sha256.Size]byte
	longest, span                                          int64
}

func newWriteTx(tx *bbolt.Tx) *writeTx {
	t := &writeTx{tx: tx, rec: tx.Bucket(bRec), key: tx.Bucket(bKey), user: tx.Bucket(bUser),
		acct: tx.Bucket(bAcct), array: tx.Bucket(bArray), day: tx.Bucket(bDay), run: tx.Bucket(bRun),
		node: tx.Bucket(bNode), meta: tx.Bucket(bMeta), chg: tx.Bucket(bChg)}
	// Keys arrive in ascending order within each bucket's prefixes (end
	// times grow with the log), so a split page is never written to
	// again: fill pages before splitting, or the file is twice as large.
	for _, b := range []*bbolt.Bucket{t.rec, t.key, t.user, t.acct, t.array, t.day, t.run, t.chg} {
		b.FillPercent = fillPercent
	}
	if v := t.meta.Get(mCount); len(v) == 8 {
		t.count = binary.BigEndian.Uint64(v)
	}
	copy(t.digest[:], t.meta.Get(mDigest))
	if v := t.meta.Get(mLongest); len(v) == 8 {
		t.longest = int64(binary.BigEndian.Uint64(v))
	}
	if v := t.meta.Get(mSpan); len(v) == 8 {
		t.span = int64(binary.BigEndian.Uint64(v))
	}
	return t
}

func (t *writeTx) finish() error {
	for k, v := range map[string]uint64{string(mCount): t.count, string(mLongest): uint64(t.longest), string(mSpan): uint64(t.span)} {
		if err := t.meta.Put([]byte(k), be64(v)); err != nil {
			return err
		}
	}
	return t.meta.Put(mDigest, t.digest[:])
}

// put writes r, replacing a stored record of its key when replace is set;
// index is the Raft index of the entry that writes it (the change feed's
// order, changes.go).
func (t *writeTx) put(r *Record, replace bool, index uint64) error {
	k := KeyOf(r)
	old := t.key.Get(idKey(k))
	if old != nil && !replace {
		return nil
	}
	val := appendRecord(nil, r)
	pk := primaryKey(r.End, k)
	if old != nil {
		oldPK, oldChange := splitKeyValue(old)
		oldVal := t.rec.Get(oldPK)
		if bytes.Equal(oldPK, pk) && bytes.Equal(oldVal, val) {
			return nil
		}
		if err := t.remove(oldPK, oldVal); err != nil {
			return err
		}
		if err := t.chg.Delete(changeKey(oldChange, k)); err != nil {
			return err
		}
	}
	if err := t.rec.Put(pk, val); err != nil {
		return err
	}
	if err := t.key.Put(idKey(k), binary.BigEndian.AppendUint64(pk, index)); err != nil {
		return err
	}
	if err := t.chg.Put(changeKey(index, k), nil); err != nil {
		return err
	}
	if err := t.user.Put(indexKey(r.User, pk), nil); err != nil {
		return err
	}
	if err := t.acct.Put(indexKey(r.Account, pk), usageValue(r)); err != nil {
		return err
	}
	if r.ArrayJobID != 0 {
		if err := t.array.Put(append(be64(r.ArrayJobID), pk...), nil); err != nil {
			return err
		}
	}
	if err := t.putRun(pk, r); err != nil {
		return err
	}
	if err := t.roll(r, 1); err != nil {
		return err
	}
	t.count++
	t.mix(pk, val)
	if !r.Start.IsZero() {
		t.longest = max(t.longest, int64(r.End.Sub(r.Start)))
	}
	return nil
}

// remove deletes the record stored at pk (val) and its index entries.
func (t *writeTx) remove(pk, val []byte) error {
	var old Record
	if err := unmarshalRecord(pk, val, &old); err != nil {
		return err
	}
	t.mix(pk, val)
	t.count--
	return errors.Join(t.roll(&old, -1), t.rec.Delete(pk), t.user.Delete(indexKey(old.User, pk)),
		t.acct.Delete(indexKey(old.Account, pk)), t.array.Delete(append(be64(old.ArrayJobID), pk...)), t.run.Delete(pk))
}

// unmarshalRecord decodes the record stored at pk.
func unmarshalRecord(pk, val []byte, r *Record) error {
	if err := decodeRecord(val, r); err != nil {
		return fmt.Errorf("reading the stored record at %x: %w; the store is damaged, rebuild it from a peer", pk, err)
	}
	return nil
}

// expire deletes up to limit records that ended before cutoff, oldest
// first, with their index entries and their key.
func (t *writeTx) expire(cutoff time.Time, limit int) error {
	hi := timeKey(cutoff)
	c := t.rec.Cursor()
	for n := 0; n < limit; n++ {
		k, v := c.First()
		if k == nil || binary.BigEndian.Uint64(k) >= hi {
			return nil
		}
		pk, val := bytes.Clone(k), bytes.Clone(v)
		if err := t.remove(pk, val); err != nil {
			return err
		}
		if err := t.unlink(pk[8:]); err != nil {
			return err
		}
	}
	return nil
}

// mix XORs a record's hash into the digest: adding and removing it are
// the same step, and the order records were written in does not matter.
func (t *writeTx) mix(pk, val []byte) {
	h := sha256.New()
	h.Write(pk)
	h.Write(val)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	for i := range sum {
		t.digest[i] ^= sum[i]
	}
}

// Summary is the store's record count and digest.
type Summary struct {
	Records uint64
	Digest  string
}

// Summary returns the store's record count and digest: two members whose
// stores hold the same records agree on it.
func (s *Store) Summary() (Summary, error) {
	var out Summary
	err := s.db.View(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bMeta)
		if v := m.Get(mCount); len(v) == 8 {
			out.Records = binary.BigEndian.Uint64(v)
		}
		d := make([]byte, sha256.Size)
		copy(d, m.Get(mDigest))
		out.Digest = hex.EncodeToString(d)
		return nil
	})
	return out, err
}

func be64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// timeKey orders times as big-endian bytes: nanoseconds since 1970 offset
// by 2^63; a zero time sorts first.
func timeKey(t time.Time) uint64 {
	if t.IsZero() || t.Year() < 1700 {
		return 0
	}
	if t.Year() > 2200 {
		return math.MaxUint64
	}
	return uint64(t.UnixNano()) ^ 1<<63
}

func primaryKey(end time.Time, k Key) []byte {
	b := make([]byte, 24)
	binary.BigEndian.PutUint64(b, timeKey(end))
	binary.BigEndian.PutUint64(b[8:], k.Job)
	binary.BigEndian.PutUint64(b[16:], k.Alloc)
	return b
}

func idKey(k Key) []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, k.Job)
	binary.BigEndian.PutUint64(b[8:], k.Alloc)
	return b
}

// indexKey is name 0x00 pk: names hold no NUL (the controller refuses
// them), so one name's keys are one range.
func indexKey(name string, pk []byte) []byte {
	b := make([]byte, 0, len(name)+1+len(pk))
	b = append(b, name...)
	b = append(b, 0)
	return append(b, pk...)
}

// usageValue is what an account report reads of a record without decoding
// it: start (8 bytes), CPU-, GPU-, memory-seconds and billing (float64
// each), flags (1: final), then the user.
func usageValue(r *Record) []byte {
	b := make([]byte, 41, 41+len(r.User))
	binary.BigEndian.PutUint64(b, timeKey(r.Start))
	binary.BigEndian.PutUint64(b[8:], math.Float64bits(r.CPUSeconds))
	binary.BigEndian.PutUint64(b[16:], math.Float64bits(r.GPUSeconds))
	binary.BigEndian.PutUint64(b[24:], math.Float64bits(r.MemSeconds))
	binary.BigEndian.PutUint64(b[32:], math.Float64bits(r.Billing))
	if r.Final {
		b[40] = 1
	}
	return append(b, r.User...)
}
