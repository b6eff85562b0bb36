package api

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fullRecord returns a record with every field set, strings holding the
// characters the listing escapes; reflection checks that no field was
// left zero, so that a field added to AcctRecord and not to the listing
// fails TestAcctRowsRoundTrip.
func fullRecord(t testing.TB) AcctRecord {
	at := time.Date(2027, 1, 2, 3, 4, 5, 6, time.UTC)
	r := AcctRecord{
		JobID: 42, Ref: "41_3", ArrayJobID: 41, ArrayTaskID: 3, AllocID: 7, Final: true,
		Name: "a\tname\\with\nbreaks", User: "alice", Tenant: "phys", Account: "phys-lab", Partition: "gpu", QOS: "normal", WorkDir: "/home/alice/w d",
		Submit: at, Eligible: at.Add(time.Second), Start: at.Add(time.Minute), End: at.Add(time.Hour),
		TimeLimit: 7200, Elapsed: 3540, State: StateTimeout, ExitCode: 1, Signal: 15, Reason: "TimeLimit", Message: "ran past 2h", NodeList: "n[1-2]",
		ReqTRES:    TRES{CPU: 8, MemMB: 16384, GPUs: map[string]int{"a100": 2, "": 1}, Nodes: 2, Hugepages: map[string]int64{"2048": 512}, VFs: 1},
		AllocTRES:  TRES{CPU: 8, MemMB: 16384, GPUs: map[string]int{"a=b,c": 3}, Nodes: 1, Hugepages: map[string]int64{"1048576": 2}, VFs: 2},
		CPUSeconds: 28320, MemSeconds: 1.5e7, GPUSeconds: 0.1, BillingRate: 1.0 / 3, Billing: 1180.000001,
		Restarts: 2, Preemptions: 1, TotalCPU: 12.25, MaxRSSKB: 1 << 40,
		BatchNode: "n\t2", BatchTRES: TRES{CPU: 4, MemMB: 8192, GPUs: map[string]int{"a100": 1}, Nodes: 1, Hugepages: map[string]int64{"2048": 256}, VFs: 1},
		Steps: []AcctStep{{ID: 0, Name: "hostname\t-f", NodeList: "n[1-2]", Nodes: 2, NTasks: 4, CPUs: 4, State: StateCompleted,
			Start: at.Add(2 * time.Minute), End: at.Add(3 * time.Minute)},
			{ID: 1, Name: "sleep", NodeList: "n1", Nodes: 1, NTasks: 1, CPUs: 1, State: StateCancelled, ExitCode: 0, Signal: 9,
				Start: at.Add(3 * time.Minute), End: at.Add(4 * time.Minute)}},
	}
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fullRecord leaves %s zero: set it, and make sure the listing carries it", v.Type().Field(i).Name)
		}
	}
	return r
}

func TestAcctRowsRoundTrip(t *testing.T) {
	recs := []AcctRecord{fullRecord(t), {JobID: 9, State: StateCancelled, End: time.Unix(1, 0).UTC()}}
	var buf bytes.Buffer
	w := NewAcctRowWriter(&buf)
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAcctRows(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, recs)
	}
}

func TestAcctRowsRefuse(t *testing.T) {
	for name, text := range map[string]string{
		"another version":  "corral-acct 9\n",
		"too few fields":   acctRowsVersion + "\n1\t2\n",
		"a bad number":     acctRowsVersion + "\nx" + strings.Repeat("\t0", acctRowFields-1) + "\n",
		"a bad count list": acctRowsVersion + "\n1" + strings.Repeat("\t0", 28) + "\tgpu" + strings.Repeat("\t0", acctRowFields-30) + "\n",
	} {
		if _, err := DecodeAcctRows(strings.NewReader(text)); err == nil {
			t.Errorf("%s: decoded %q", name, text)
		}
	}
}

// FuzzDecodeAcctRows: any input decodes or is refused without a panic,
// and what decodes encodes to rows that decode to the same records.
func FuzzDecodeAcctRows(f *testing.F) {
	var buf bytes.Buffer
	w := NewAcctRowWriter(&buf)
	r := fullRecord(f)
	_ = w.Write(&r)
	_ = w.Flush()
	f.Add(buf.String())
	f.Add(acctRowsVersion + "\n1\t2\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		got, err := DecodeAcctRows(strings.NewReader(text))
		if err != nil {
			return
		}
		var out bytes.Buffer
		w := NewAcctRowWriter(&out)
		for i := range got {
			if err := w.Write(&got[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		again, err := DecodeAcctRows(&out)
		if err != nil {
			t.Fatalf("re-encoded rows do not decode: %v", err)
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("rows changed through a round trip:\n%+v\n%+v", got, again)
		}
	})
}
