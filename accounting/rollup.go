package accounting

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"go.etcd.io/bbolt"
)

// The day bucket holds each account's and user's usage summed by UTC day
// of the records' ends, kept as records are written and replaced, so that
// a report over a year reads a few thousand sums instead of every record
// (as slurmdbd's rollup tables do). A report's window that does not begin
// or end at midnight reads the records of its first and last part-day from
// the account index instead.

// day is a UTC day: days since 1970-01-01.
type day int64

func dayOf(t time.Time) day { return day(t.UTC().Unix() / 86400) }

func (d day) time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// rollKey is account 0x00 user 0x00 day (8 bytes, offset by 2^63).
func rollKey(account, user string, d day) []byte {
	b := make([]byte, 0, len(account)+len(user)+10)
	b = append(b, account...)
	b = append(b, 0)
	b = append(b, user...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, uint64(d)^1<<63)
}

// rollFields is the layout of a day's sums: records, CPU-, GPU-,
// memory-seconds and billing, float64 each.
const rollFields = 5

// roll adds (sign 1) or takes away (sign -1) record r's usage to its day.
func (t *writeTx) roll(r *Record, sign float64) error {
	k := rollKey(r.Account, r.User, dayOf(r.End))
	var sums [rollFields]float64
	if v := t.day.Get(k); len(v) == rollFields*8 {
		for i := range sums {
			sums[i] = math.Float64frombits(binary.BigEndian.Uint64(v[i*8:]))
		}
	}
	for i, x := range [rollFields]float64{1, r.CPUSeconds, r.GPUSeconds, r.MemSeconds, r.Billing} {
		sums[i] += sign * x
	}
	if sums[0] <= 0 {
		return t.day.Delete(k)
	}
	v := make([]byte, rollFields*8)
	for i, x := range sums {
		binary.BigEndian.PutUint64(v[i*8:], math.Float64bits(x))
	}
	return t.day.Put(k, v)
}

// addUsage adds day sums or one record's usage into u.
func addUsage(u *Usage, records int, cpu, gpu, mem, billing float64) {
	u.Records += records
	u.CPUSeconds += cpu
	u.GPUSeconds += gpu
	u.MemSeconds += mem
	u.Billing += billing
}

// addDays adds the day sums of days [from, to) to sums.
func addDays(tx *bbolt.Tx, from, to day, sums *usageSums) error {
	c := tx.Bucket(bDay).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		i := bytes.IndexByte(k, 0)
		j := bytes.IndexByte(k[i+1:], 0) + i + 1
		if i < 0 || j <= i || len(k) != j+9 || len(v) != rollFields*8 {
			return fmt.Errorf("the day bucket holds a malformed entry %x; the store is damaged, rebuild it from a peer", k)
		}
		d := day(binary.BigEndian.Uint64(k[j+1:]) ^ 1<<63)
		if d < from || d >= to {
			continue
		}
		f := func(n int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(v[n*8:])) }
		addUsage(sums.get(k[:i], k[i+1:j]), int(math.Round(f(0))), f(1), f(2), f(3), f(4))
	}
	return nil
}

// usageSums are Usage rows by account and user.
type usageSums map[string]map[string]*Usage

// get returns the row of account and user, made on first use; looking a
// row up does not allocate.
func (s usageSums) get(account, user []byte) *Usage {
	byUser := s[string(account)]
	if byUser == nil {
		byUser = map[string]*Usage{}
		s[string(account)] = byUser
	}
	u := byUser[string(user)]
	if u == nil {
		u = &Usage{Account: string(account), User: string(user)}
		byUser[string(user)] = u
	}
	return u
}
