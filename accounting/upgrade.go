package accounting

import (
	"bytes"
	"log/slog"

	"go.etcd.io/bbolt"
)

// mCodec is the meta key that records which encoding the store's records
// are in: absent for JSON (stores written before codec.go), codecV1 once
// every record is in it.
var mCodec = []byte("codec")

// upgradeBatch is how many records one transaction of the upgrade
// rewrites (a transaction holds its dirty pages in memory).
var upgradeBatch = 20000

// upgradeCodec rewrites a store's JSON records in the current encoding,
// a batch a transaction, and marks the store done. The digest follows
// each rewrite (the old bytes' hash out, the new one's in), so that it is
// again the hash of what the store holds, as on a member whose records
// were written in this encoding from the start. A store interrupted half
// way is finished the next time it is opened: records already rewritten
// are passed over. log (may be nil) hears of each batch: a million
// records take a minute or so.
func upgradeCodec(db *bbolt.DB, log *slog.Logger) error {
	var after []byte
	converted := 0
	for {
		done := false
		err := db.Update(func(tx *bbolt.Tx) error {
			if v := tx.Bucket(bMeta).Get(mCodec); len(v) == 1 && v[0] == codecV1 {
				done = true
				return nil
			}
			t := newWriteTx(tx)
			type change struct{ pk, val []byte }
			var batch []change
			c := t.rec.Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(batch) < upgradeBatch; k, v = c.Next() {
				after = bytes.Clone(k)
				if len(v) == 0 || v[0] != '{' {
					continue
				}
				var r Record
				if err := unmarshalRecord(k, v, &r); err != nil {
					return err
				}
				t.mix(k, v)
				batch = append(batch, change{pk: after, val: appendRecord(nil, &r)})
			}
			converted += len(batch)
			for _, ch := range batch {
				t.mix(ch.pk, ch.val)
				if err := t.rec.Put(ch.pk, ch.val); err != nil {
					return err
				}
			}
			if k == nil {
				done = true
				if err := t.meta.Put(mCodec, []byte{codecV1}); err != nil {
					return err
				}
			}
			return t.finish()
		})
		if err != nil || done {
			if err == nil && converted > 0 && log != nil {
				log.Info("converted the accounting store's records to the compact encoding", "records", converted)
			}
			return err
		}
		if log != nil {
			log.Info("converting the accounting store's records to the compact encoding", "converted", converted)
		}
	}
}
