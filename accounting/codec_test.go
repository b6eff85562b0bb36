package accounting

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"corral/api"
)

// filled returns a record whose every field, however deep, holds a value
// other than its zero (different ones for different seeds): a field added
// to the record that the codec leaves out comes back zero and fails the
// round trips below.
func filled(seed uint64) Record {
	rng := rand.New(rand.NewPCG(seed, 7))
	var r Record
	fill(reflect.ValueOf(&r).Elem(), rng)
	return r
}

func fill(v reflect.Value, rng *rand.Rand) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e9)+1, rng.Int64N(1e9)).UTC()))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), rng)
		}
	case reflect.String:
		v.SetString(string(rune('a'+rng.IntN(26))) + "-é\x00" + string(rune('a'+rng.IntN(26))))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rng.Int64N(1<<40) - 1<<39 | 1)
	case reflect.Uint64:
		v.SetUint(rng.Uint64() | 1)
	case reflect.Float64:
		v.SetFloat(rng.NormFloat64()*1e6 + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		n := 1 + rng.IntN(3)
		sl := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(sl.Index(i), rng)
		}
		v.Set(sl)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 1 + rng.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, rng)
			fill(e, rng)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic("fill: a record field of kind " + v.Kind().String() + ": teach the codec and this test about it")
	}
}

func TestCodecCoversEveryField(t *testing.T) {
	for seed := range uint64(50) {
		r := filled(seed)
		var got Record
		if err := decodeRecord(appendRecord(nil, &r), &got); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("seed %d: the record came back as\n%+v\nnot\n%+v", seed, got, r)
		}
	}
}

// TestCodecReadsAsJSONDid: a record means the same whether the store
// holds it in JSON (as stores written before the codec do) or encoded.
func TestCodecReadsAsJSONDid(t *testing.T) {
	for seed := range uint64(20) {
		for _, r := range []Record{filled(seed), {JobID: seed + 1, End: time.Unix(int64(seed)*1000, 0).UTC()}} {
			js, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			var fromJSON, fromCodec Record
			if err := decodeRecord(js, &fromJSON); err != nil {
				t.Fatal(err)
			}
			if err := decodeRecord(appendRecord(nil, &r), &fromCodec); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromJSON, fromCodec) {
				t.Fatalf("seed %d: JSON reads as\n%+v\nthe codec as\n%+v", seed, fromJSON, fromCodec)
			}
		}
	}
}

func TestCodecRefusesCutAndTrailingBytes(t *testing.T) {
	r := filled(3)
	enc := appendRecord(nil, &r)
	// A record stored before the multi-node fields existed ends where
	// they begin: it reads with them zero, and is the only cut that does.
	old := r
	old.BatchNode, old.BatchTRES, old.Steps = "", api.TRES{}, nil
	boundary := len(appendRecord(nil, &old)) - len(emptyMultiNode())
	var got Record
	for n := range len(enc) {
		err := decodeRecord(enc[:n], &got)
		if n == boundary {
			if err != nil || !reflect.DeepEqual(got, old) {
				t.Fatalf("a record without the multi-node fields: %v\n%+v\nwant\n%+v", err, got, old)
			}
			continue
		}
		if err == nil {
			t.Fatalf("the first %d of %d bytes decoded", n, len(enc))
		}
	}
	if err := decodeRecord(append(enc, 0), &got); err == nil {
		t.Fatal("a byte after the record decoded")
	}
	if err := decodeRecord([]byte{9, 1, 2}, &got); err == nil {
		t.Fatal("an unknown version decoded")
	}
}

// TestCodecOneEncodingARecord: maps are written by sorted key, so equal
// records have equal bytes (the store's digest hashes them).
func TestCodecOneEncodingARecord(t *testing.T) {
	r := filled(5)
	r.AllocTRES.GPUs = map[string]int{"a100": 1, "h100": 2, "": 3, "l4": 4}
	first := appendRecord(nil, &r)
	for range 20 {
		c := r
		c.AllocTRES.GPUs = map[string]int{"l4": 4, "": 3, "h100": 2, "a100": 1}
		if !bytes.Equal(appendRecord(nil, &c), first) {
			t.Fatal("one record, two encodings")
		}
	}
}

// emptyMultiNode is the encoding of the multi-node group when it is
// empty.
func emptyMultiNode() []byte {
	e := encoder{}
	e.str("")
	e.tres(&api.TRES{})
	e.uint(0)
	return e.b
}

func FuzzDecodeRecord(f *testing.F) {
	for seed := range uint64(3) {
		r := filled(seed)
		f.Add(appendRecord(nil, &r))
	}
	f.Add(appendRecord(nil, &Record{}))
	f.Add([]byte(`{"job_id":3,"end":"2026-01-02T03:04:05Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if decodeRecord(b, &r) != nil || len(b) == 0 || b[0] != codecV1 {
			return
		}
		again := appendRecord(nil, &r)
		var r2 Record
		if err := decodeRecord(again, &r2); err != nil {
			t.Fatalf("a decoded record's encoding does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("a decoded record changed through its encoding:\n%+v\n%+v", r, r2)
		}
	})
}

// TestUpgradeFromJSON: a store whose records are JSON (written before
// the codec) is converted when opened, a batch a transaction, and ends
// up as a store written in the codec from the start: same records, same
// digest.
func TestUpgradeFromJSON(t *testing.T) {
	defer func(n int) { upgradeBatch = n }(upgradeBatch)
	upgradeBatch = 7
	path := filepath.Join(t.TempDir(), "acct.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for i := range 40 {
		r := filled(uint64(i))
		r.JobID, r.AllocID, r.Final = uint64(i+1), uint64(i+1), true
		recs = append(recs, r)
	}
	if err := s.Write(Written{Replace: recs, Index: 5}); err != nil {
		t.Fatal(err)
	}
	want, err := s.Summary()
	if err != nil {
		t.Fatal(err)
	}
	wantRecs, err := s.Select(Query{AllUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Turn it into a store of JSON records, with the digest such a store
	// had.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		w := newWriteTx(tx)
		type kv struct{ k, v []byte }
		var all []kv
		if err := w.rec.ForEach(func(k, v []byte) error {
			all = append(all, kv{bytes.Clone(k), bytes.Clone(v)})
			return nil
		}); err != nil {
			return err
		}
		for _, e := range all {
			var r Record
			if err := decodeRecord(e.v, &r); err != nil {
				return err
			}
			js, _ := json.Marshal(&r)
			w.mix(e.k, e.v)
			w.mix(e.k, js)
			if err := w.rec.Put(e.k, js); err != nil {
				return err
			}
		}
		if err := w.meta.Delete(mCodec); err != nil {
			return err
		}
		return w.finish()
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("after the upgrade the store's summary is %+v, want %+v", got, want)
	}
	gotRecs, err := s.Select(Query{AllUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotRecs, wantRecs) {
		t.Error("the upgraded store selects other records")
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bRec).ForEach(func(k, v []byte) error {
			if v[0] != codecV1 {
				t.Errorf("record %x is still JSON", k)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
