package api

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestJobRowsRoundTrip(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 123)
	jobs := map[string]*Job{
		"pending":       {ID: 1, State: StatePending, Reason: ReasonPriority, SubmitTime: t0, Spec: JobSpec{Name: "a", User: "u", NTasks: 1, CPUsPerTask: 2, TimeLimit: 60, Hold: true}},
		"running":       {ID: 2, State: StateRunning, Node: "n1", CPUs: 4, MemMB: 2048, SubmitTime: t0, StartTime: t0.Add(time.Second), Spec: JobSpec{Name: "b", User: "u", Requeue: true, MemPerCPU: 512}},
		"escapes":       {ID: 3, State: StateFailed, ExitCode: 3, Signal: 9, Message: "line1\nline2\twith tab \\ and backslash", Spec: JobSpec{Name: "tab\tname", Comment: "c\\n"}},
		"array pending": {ID: 5, State: StatePending, ArrayJobID: 5, ArrayPending: &IndexSet{Ranges: []ArrayRange{{0, 12, 4}, {20, 20, 1}}}, EstStart: t0.Add(time.Hour)},
		"array task":    {ID: 6, State: StateRunning, ArrayJobID: 5, ArrayTaskID: 16, Node: "n1"},
		"nodes": {ID: 7, State: StatePending, Spec: JobSpec{Nodes: 2, NodesMax: 4, NTasksPerNode: 2, Exclusive: true, SpreadJob: true,
			Contiguous: true, Constraint: "a&[b|c]", NodeList: "n[1-2]", Exclude: "n9", Distribution: "cyclic"}},
		"deps": {ID: 4, State: StatePending, Spec: JobSpec{Dependency: &Dependency{Raw: "afterok:1"}, Array: &ArraySpec{Raw: "0-9%2", Throttle: 2}, Nice: -5, Gres: []Gres{{Name: "gpu", Type: "a100", Count: 2}, {Name: "vf", Count: 1}}}},
	}
	for name, j := range jobs {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := EncodeJobRows(&buf, []*Job{j}); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeJobRows(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("decoded %d jobs", len(got))
			}
			want := *j
			for _, p := range []*time.Time{&want.SubmitTime, &want.StartTime} {
				if !p.IsZero() {
					*p = time.Unix(0, p.UnixNano())
				}
			}
			if !reflect.DeepEqual(got[0], want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got[0], want)
			}
		})
	}
}

func TestJobRowsRejectsOtherVersions(t *testing.T) {
	if _, err := DecodeJobRows(strings.NewReader("corral-jobs 99\n")); err == nil {
		t.Fatal("an unknown listing version was accepted")
	}
	if _, err := DecodeJobRows(strings.NewReader(jobRowsVersion + "\n1\tPENDING\n")); err == nil {
		t.Fatal("a short row was accepted")
	}
}

func BenchmarkDecodeJobRows100000(b *testing.B) {
	jobs := make([]*Job, 100_000)
	for i := range jobs {
		jobs[i] = &Job{ID: uint64(i + 1), State: StatePending, Reason: ReasonPriority, SubmitTime: time.Unix(1_700_000_000, 0),
			Spec: JobSpec{Name: fmt.Sprintf("job%d", i), User: "alice", Partition: "batch", WorkDir: "/home/alice", NTasks: 1, CPUsPerTask: 1}}
	}
	var buf bytes.Buffer
	if err := EncodeJobRows(&buf, jobs); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeJobRows(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeJobRows100000(b *testing.B) {
	jobs := make([]*Job, 100_000)
	for i := range jobs {
		jobs[i] = &Job{ID: uint64(i + 1), State: StatePending, Reason: ReasonPriority, SubmitTime: time.Unix(1_700_000_000, 0),
			Spec: JobSpec{Name: fmt.Sprintf("job%d", i), User: "alice", Partition: "batch", WorkDir: "/home/alice", NTasks: 1, CPUsPerTask: 1}}
	}
	var buf bytes.Buffer
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		if err := EncodeJobRows(&buf, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len())/100_000, "bytes/job")
}
