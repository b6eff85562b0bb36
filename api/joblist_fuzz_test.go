package api

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeJobRows checks the CLI's reader of the controller's job rows:
// it never panics, and what it reads encodes back to rows that read the
// same.
func FuzzDecodeJobRows(f *testing.F) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	jobs := []*Job{
		{ID: 1, State: StatePending, Reason: ReasonPriority, SubmitTime: now, Spec: JobSpec{Name: "a\tb\\n", User: "u", NTasks: 1, CPUsPerTask: 2}},
		{ID: 2, State: StateRunning, Node: "n1", CPUs: 2, MemMB: 512, StartTime: now, ArrayJobID: 2, ArrayTaskID: 5, Spec: JobSpec{Name: "x"}},
	}
	var buf bytes.Buffer
	if err := EncodeJobRows(&buf, jobs); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.String())
	f.Add(jobRowsVersion + "\n1\t2\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		got, err := DecodeJobRows(strings.NewReader(text))
		if err != nil {
			return
		}
		ptrs := make([]*Job, len(got))
		for i := range got {
			ptrs[i] = &got[i]
		}
		var out bytes.Buffer
		if err := EncodeJobRows(&out, ptrs); err != nil {
			t.Fatalf("rows that decoded do not encode: %v", err)
		}
		again, err := DecodeJobRows(&out)
		if err != nil {
			t.Fatalf("re-encoded rows do not decode: %v", err)
		}
		if !reflect.DeepEqual(normalRows(got), normalRows(again)) {
			t.Fatalf("rows changed in a round trip:\n%+v\n%+v", got, again)
		}
	})
}

// normalRows makes decoded jobs comparable: times compare by instant.
func normalRows(jobs []Job) []Job {
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		for _, tp := range []*time.Time{&j.SubmitTime, &j.StartTime, &j.EndTime, &j.EstStart, &j.Spec.Begin} {
			if !tp.IsZero() {
				*tp = tp.UTC()
			}
		}
		out[i] = j
	}
	return out
}
