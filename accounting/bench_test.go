package accounting

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// The benchmarks measure the targets of issue #13 over a synthetic history
// of benchRecords records (one job ending every 30 s, about a year; 200
// users, 20 accounts): writing them, one user's month, and an account
// report over all of them. ACCT_BENCH_RECORDS changes the size;
// ACCT_BENCH_DIR keeps the queries' store between runs (it is written
// once, when the directory holds none).
//
//	go test ./accounting -run XXX -bench Write -benchtime 1x
//	ACCT_BENCH_DIR=/tmp/acct go test ./accounting -run XXX -bench 'Month|Account' -benchtime 20x

const (
	benchUsers    = 200
	benchAccounts = 20
	benchStep     = 30 * time.Second
	benchBatch    = 1000
)

func benchRecords() int {
	if n, err := strconv.Atoi(os.Getenv("ACCT_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// writeSynthetic writes records [0, n) in batches, as the controller's
// writer does under load.
func writeSynthetic(tb testing.TB, s *Store, n int) {
	batch := make([]Record, 0, benchBatch)
	for i := range n {
		batch = append(batch, synthetic(i, benchUsers, benchAccounts, benchStep))
		if len(batch) == benchBatch || i == n-1 {
			if err := s.Write(Written{Replace: batch}); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkWrite writes benchRecords records into a new store per
// iteration and reports records per second.
func BenchmarkWrite(b *testing.B) {
	n := benchRecords()
	for b.Loop() {
		s, err := Open(filepath.Join(b.TempDir(), "acct.db"))
		if err != nil {
			b.Fatal(err)
		}
		writeSynthetic(b, s, n)
		_ = s.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

var (
	benchOnce  sync.Once
	benchStore *Store
	benchDir   string
)

// sharedStore is one store of benchRecords records for the query
// benchmarks, written once per process.
func sharedStore(b *testing.B) *Store {
	benchOnce.Do(func() {
		var err error
		keep := os.Getenv("ACCT_BENCH_DIR")
		if keep != "" {
			_ = os.MkdirAll(keep, 0o700)
			if benchStore, err = Open(filepath.Join(keep, "acct.db")); err != nil {
				b.Fatal(err)
			}
			if sum, _ := benchStore.Summary(); sum.Records == uint64(benchRecords()) {
				return
			}
		} else {
			if benchDir, err = os.MkdirTemp("", "acct-bench"); err != nil {
				b.Fatal(err)
			}
			if benchStore, err = Open(filepath.Join(benchDir, "acct.db")); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		writeSynthetic(b, benchStore, benchRecords())
		b.Logf("wrote %d records in %v", benchRecords(), time.Since(start))
	})
	return benchStore
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchStore != nil {
		_ = benchStore.Close()
		if benchDir != "" {
			_ = os.RemoveAll(benchDir)
		}
	}
	os.Exit(code)
}

// BenchmarkUserMonth selects one user's records of one month (sacct -u
// u7 -S … -E …) among benchRecords.
func BenchmarkUserMonth(b *testing.B) {
	s := sharedStore(b)
	start := t0.Add(time.Duration(benchRecords()) * benchStep / 2)
	q := Query{Users: []string{"u7"}, Start: start, End: start.Add(30 * 24 * time.Hour)}
	var n int
	for b.Loop() {
		recs, err := s.Select(q)
		if err != nil {
			b.Fatal(err)
		}
		n = len(recs)
	}
	b.ReportMetric(float64(n), "records")
}

// BenchmarkAccountUsage sums every record by account and user (an account
// report over the whole history).
func BenchmarkAccountUsage(b *testing.B) {
	s := sharedStore(b)
	var n int
	for b.Loop() {
		u, err := s.AccountUsage(time.Time{}, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		n = len(u)
	}
	b.ReportMetric(float64(n), "rows")
}

// BenchmarkAccountUsageScan sums every record from the account index
// alone, without the day sums: what a report costs without them.
func BenchmarkAccountUsageScan(b *testing.B) {
	s := sharedStore(b)
	for b.Loop() {
		err := s.db.View(func(tx *bbolt.Tx) error { return scanUsage(tx, 0, math.MaxUint64, usageSums{}) })
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportParquet writes benchRecords records (in memory) as one
// Parquet file and reports its size.
func BenchmarkExportParquet(b *testing.B) {
	n := benchRecords()
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = synthetic(i, benchUsers, benchAccounts, benchStep)
	}
	var size int
	for b.Loop() {
		var w countingWriter
		if err := WriteParquet(&w, recs); err != nil {
			b.Fatal(err)
		}
		size = int(w)
	}
	b.ReportMetric(float64(size)/1e6, "MB")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkExportFromStore exports every record of the store (1,000,000
// by default) as corral acct export -a does on the controller: read in
// chunks by Each (decoded on one goroutine) and written as Parquet (on
// another).
func BenchmarkExportFromStore(b *testing.B) {
	s := sharedStore(b)
	var size countingWriter
	n := 0
	for b.Loop() {
		size, n = 0, 0
		e, err := NewExporter("parquet", &size)
		if err != nil {
			b.Fatal(err)
		}
		err = s.Each(Query{AllUsers: true}, func(recs []Record) error {
			n += len(recs)
			return e.Write(recs)
		})
		if err == nil {
			err = e.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size)/1e6, "MB")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// BenchmarkEveryUsersMonth selects every user's records of the history's
// last 30 days (sacct -a -S … -E …: 86,400 records) and encodes them as
// the API does.
func BenchmarkEveryUsersMonth(b *testing.B) {
	s := sharedStore(b)
	end := t0.Add(time.Duration(benchRecords()) * benchStep)
	q := Query{AllUsers: true, Start: end.Add(-30 * 24 * time.Hour), End: end}
	var n int
	var selectTime, encodeTime time.Duration
	var size countingWriter
	for b.Loop() {
		began := time.Now()
		recs, err := s.Select(q)
		if err != nil {
			b.Fatal(err)
		}
		selectTime += time.Since(began)
		began = time.Now()
		size = 0
		if err := json.NewEncoder(&size).Encode(recs); err != nil {
			b.Fatal(err)
		}
		encodeTime += time.Since(began)
		n = len(recs)
	}
	b.ReportMetric(float64(n), "records")
	b.ReportMetric(float64(selectTime.Milliseconds())/float64(b.N), "select-ms")
	b.ReportMetric(float64(encodeTime.Milliseconds())/float64(b.N), "encode-ms")
	b.ReportMetric(float64(size)/1e6, "wire-MB")
}
