package accounting

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// readWithArrow reads a Parquet file with Apache Arrow's implementation
// (not the one that wrote it) into one map of column values per row.
func readWithArrow(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), nil, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	rows := make([]map[string]any, tbl.NumRows())
	for i := range rows {
		rows[i] = map[string]any{}
	}
	for c := 0; c < int(tbl.NumCols()); c++ {
		col := tbl.Column(c)
		name := col.Name()
		n := 0
		for _, chunk := range col.Data().Chunks() {
			for i := 0; i < chunk.Len(); i++ {
				rows[n][name] = arrowValue(t, chunk, i)
				n++
			}
		}
	}
	return rows
}

func arrowValue(t *testing.T, a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit)
	}
	t.Fatalf("column type %s is not read by this test", a.DataType())
	return nil
}

// TestParquetRoundTrip writes records with the export and reads them back
// with Apache Arrow's Parquet reader: every column of every row equals
// the record's field, types included (int64, int32, timestamps, strings).
func TestParquetRoundTrip(t *testing.T) {
	recs := exportFixture()
	for i := range 5000 { // more than one batch
		recs = append(recs, synthetic(i+10, 7, 3, 13*time.Second))
	}
	var b bytes.Buffer
	if err := WriteParquet(&b, recs); err != nil {
		t.Fatal(err)
	}
	rows := readWithArrow(t, b.Bytes())
	if len(rows) != len(recs) {
		t.Fatalf("read %d rows, wrote %d", len(rows), len(recs))
	}
	typ := reflect.TypeOf(ParquetRow{})
	for i := range recs {
		want := reflect.ValueOf(ToParquetRow(&recs[i]))
		for f := 0; f < typ.NumField(); f++ {
			name := parquetName(typ.Field(f))
			got, w := rows[i][name], want.Field(f).Interface()
			if p, ok := w.(*time.Time); ok {
				if p == nil {
					w = nil
				} else {
					w = *p
				}
			}
			if wt, ok := w.(time.Time); ok {
				if gt, ok := got.(time.Time); !ok || !gt.Equal(wt.Truncate(time.Microsecond)) {
					t.Fatalf("row %d column %s: got %v, want %v", i, name, got, wt)
				}
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(w) || reflect.TypeOf(got) != reflect.TypeOf(w) {
				t.Fatalf("row %d column %s: got %#v, want %#v", i, name, got, w)
			}
		}
	}
}

func parquetName(f reflect.StructField) string {
	tag := f.Tag.Get("parquet")
	for i, c := range tag {
		if c == ',' {
			return tag[:i]
		}
	}
	return tag
}
