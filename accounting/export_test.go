package accounting

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"corral/api"
)

func exportFixture() []Record {
	r := synthetic(3, 2, 2, time.Minute)
	r.ArrayJobID, r.ArrayTaskID, r.Ref, r.Tenant, r.Signal, r.ExitCode = 2, 5, "2_5", "lab", 9, 137
	r.ReqTRES.GPUs, r.AllocTRES.GPUs = map[string]int{"h100": 2}, map[string]int{"h100": 2}
	r.Reason, r.Name = "Timeout, \"quoted\"", "a,b\nc"
	pend := Record{JobID: 9, Ref: "9", Final: true, Name: "p", User: "u", End: t0, State: api.StateCancelled}
	return []Record{r, pend}
}

// TestNDJSONRoundTrip reads the export back with encoding/json: every
// field of every record.
func TestNDJSONRoundTrip(t *testing.T) {
	recs := exportFixture()
	var b bytes.Buffer
	if err := WriteNDJSON(&b, recs); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&b)
	for i := range recs {
		var got Record
		if err := dec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, recs[i]) {
			t.Errorf("record %d: got %+v, want %+v", i, got, recs[i])
		}
	}
}

// TestCSVRoundTrip reads the export back with encoding/csv and checks
// every column of every row against the record.
func TestCSVRoundTrip(t *testing.T) {
	recs := exportFixture()
	var b bytes.Buffer
	if err := WriteCSV(&b, recs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || !reflect.DeepEqual(rows[0], ExportColumns) {
		t.Fatalf("header %v and %d rows", rows[0], len(rows)-1)
	}
	for i, r := range recs {
		got := map[string]string{}
		for c, name := range ExportColumns {
			got[name] = rows[i+1][c]
		}
		want := map[string]string{
			"job_id": strconv.FormatUint(r.JobID, 10), "ref": r.Ref, "name": r.Name, "reason": r.Reason,
			"state": string(r.State), "exit_code": strconv.Itoa(r.ExitCode), "signal": strconv.Itoa(r.Signal),
			"end": r.End.UTC().Format(time.RFC3339Nano), "billing": strconv.FormatFloat(r.Billing, 'g', -1, 64),
			"alloc_gpus": gpuList(r.AllocTRES.GPUs), "tenant": r.Tenant, "final": strconv.FormatBool(r.Final),
		}
		if r.Start.IsZero() {
			want["start"] = ""
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("row %d column %s = %q, want %q", i+1, k, got[k], v)
			}
		}
		if len(rows[i+1]) != len(ExportColumns) {
			t.Errorf("row %d has %d columns, want %d", i+1, len(rows[i+1]), len(ExportColumns))
		}
	}
}
