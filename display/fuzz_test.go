package display

import (
	"bytes"
	"testing"
	"time"

	"corral/api"
)

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
