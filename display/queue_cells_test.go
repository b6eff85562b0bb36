package display

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestQueueTableMatchesQueue: the cells of QueueTable are the values
// Queue prints, field by field, without the padding and cutting (a name
// longer than its column whole), escaped the same way.
func TestQueueTableMatchesQueue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	jobs := []*api.Job{
		{ID: 7, State: api.StateRunning, Node: "n1", StartTime: now.Add(-90 * time.Second), Spec: api.JobSpec{Name: "a-rather-long-name", User: "ada", Partition: "batch", Nodes: 1}},
		{ID: 8, State: api.StatePending, Reason: api.ReasonResources, Spec: api.JobSpec{Name: "esc\x1b[2J", User: "bob", Partition: "batch"}},
	}
	header, rows, err := QueueTable(jobs, QueueOptions{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(header, ",") != "JOBID,PARTITION,NAME,USER,ST,TIME,NODES,NODELIST(REASON)" {
		t.Errorf("header %q", header)
	}
	var text bytes.Buffer
	if err := QueueRefs(&text, jobs, QueueOptions{Format: "%i|%P|%j|%u|%t|%M|%D|%R", NoHeader: true}, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(text.String(), "\n"), "\n")
	for i, r := range rows {
		if r.Job != jobs[i] || strings.Join(r.Cells, "|") != lines[i] {
			t.Errorf("row %d: %q, want Queue's %q", i, r.Cells, lines[i])
		}
	}
	if rows[0].Cells[2] != "a-rather-long-name" || rows[1].Cells[2] != `esc\x1b[2J` {
		t.Errorf("names %q and %q: want the whole name, escaped", rows[0].Cells[2], rows[1].Cells[2])
	}
	arr := &api.Job{ID: 20, State: api.StatePending, Reason: api.ReasonPriority, ArrayPending: api.NewIndexSet([]api.ArrayRange{{First: 3, Last: 4, Step: 1}}), Spec: api.JobSpec{User: "ada"}}
	_, rows, _ = QueueTable([]*api.Job{arr}, QueueOptions{Array: true, Format: "%i %r"}, now)
	if len(rows) != 2 || rows[0].Cells[0] != "20_3" || rows[1].Cells[0] != "20_4" || rows[1].Job.ArrayTaskID != 4 {
		t.Errorf("-r rows of an array: %+v", rows)
	}
	if _, _, err := QueueTable(jobs, QueueOptions{Format: "%!"}, now); err == nil {
		t.Error("a bad format gave no error")
	}
}
