package display

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"corral/api"
)

// FuzzHostlist checks that hostlist notation never panics or explodes, and
// that what CompressHostlist writes expands back to the same names.
func FuzzHostlist(f *testing.F) {
	for _, s := range []string{"n[1-3,5],login", "r[1-2]n[01-02]", "n[9-10]", "n[", "n[1-999999999]", "a,b c\td", "n[3-1]", "x[000000000000000000001-2]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, err := ExpandHostlist(s)
		if err != nil {
			return
		}
		if len(names) > maxExpand {
			t.Fatalf("ExpandHostlist(%q) gave %d names, more than %d", s, len(names), maxExpand)
		}
		compressed := CompressHostlist(names)
		again, err := ExpandHostlist(compressed)
		if err != nil {
			t.Fatalf("ExpandHostlist(%q) = %v; CompressHostlist gives %q, which does not expand: %v", s, names, compressed, err)
		}
		want := slices.Clone(names)
		want = slices.DeleteFunc(want, func(n string) bool { return n == "" })
		slices.Sort(want)
		want = slices.Compact(want)
		slices.Sort(again)
		if !slices.Equal(again, want) {
			t.Fatalf("%q: expanded %v, compressed %q, expanded again %v", s, want, compressed, again)
		}
	})
}

// FuzzQueueFormat checks squeue's -o parser and that any accepted format
// renders a job.
func FuzzQueueFormat(f *testing.F) {
	for _, s := range []string{DefaultQueueFormat, LongQueueFormat, StartQueueFormat, "%.18i %9P %Q %p", "%-20j%%", "%99999999999i", "%", "%Z"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := &api.Job{ID: 7, State: api.StatePending, Reason: api.ReasonPriority, SubmitTime: now.Add(-time.Minute),
		Spec: api.JobSpec{Name: "x\x1b[2J", User: "u", Partition: "batch", NTasks: 1, CPUsPerTask: 2, TimeLimit: 60}}
	f.Fuzz(func(t *testing.T, format string) {
		if _, err := ParseQueueFormat(format); err != nil {
			return
		}
		var b bytes.Buffer
		if err := QueueRefs(&b, []*api.Job{j}, QueueOptions{Format: format}, now); err != nil {
			t.Fatalf("format %q parsed but does not render: %v", format, err)
		}
	})
}
