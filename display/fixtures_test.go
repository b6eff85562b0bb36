package display

import (
	"errors"
	"time"

	"corral/api"
)

// t0 is the "now" of every test: Friday 1 March 2024, 10:00 UTC.
var t0 = time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)

// runningJob is job 42: two tasks of two CPUs, 1.5 GiB, two A100s, a
// two-hour limit, started 1:02:03 before t0 on gpu01.
func runningJob() api.Job {
	return api.Job{
		ID: 42,
		Spec: api.JobSpec{
			Name: "train.sh", User: "alice", Account: "physics", Partition: "gpu", QOS: "high",
			Script: "#!/bin/sh\necho hi\n", SubmitDir: "/home/alice", WorkDir: "/home/alice/run",
			NTasks: 2, CPUsPerTask: 2, MemPerNode: 1536, TimeLimit: 2 * 3600,
			Output: "out-%j.txt", Comment: "nightly", Nice: 10, Requeue: true,
			Gres:       []api.Gres{{Name: "gpu", Type: "a100", Count: 2}},
			Dependency: &api.Dependency{Raw: "afterok:41", Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"41"}}}},
			Array:      &api.ArraySpec{Raw: "0-3", Ranges: []api.ArrayRange{{First: 0, Last: 3, Step: 1}}},
		},
		State:      api.StateRunning,
		Reason:     api.ReasonNone,
		SubmitTime: t0.Add(-2 * time.Hour),
		StartTime:  t0.Add(-(time.Hour + 2*time.Minute + 3*time.Second)),
		Node:       "gpu01",
		CPUs:       4,
		MemMB:      1536,
		Priority:   1 << 31,
		Restarts:   1,
		StartIndex: 77,
	}
}

// pendingJob is job 12 of bob, waiting on priority in the default
// partition with no limits of its own.
func pendingJob() api.Job {
	return api.Job{
		ID: 12,
		Spec: api.JobSpec{
			Name: "sim", User: "bob", Script: "#!/bin/sh\n", SubmitDir: "/home/bob", WorkDir: "/home/bob",
			NTasks: 1, CPUsPerTask: 1,
		},
		State:      api.StatePending,
		Reason:     api.ReasonPriority,
		SubmitTime: t0.Add(-time.Minute),
		Priority:   100,
	}
}

// finishedJob is job 7, which failed with exit code 3 after 30 seconds.
func finishedJob() api.Job {
	return api.Job{
		ID: 7,
		Spec: api.JobSpec{
			Name: "build", User: "carol", Account: "eng", Partition: "batch", SubmitDir: "/src",
			WorkDir: "/src", NTasks: 1, CPUsPerTask: 1, MemPerCPU: 500, TimeLimit: 600, Error: "/src/err.log",
		},
		State:      api.StateFailed,
		SubmitTime: t0.Add(-2 * time.Hour),
		StartTime:  t0.Add(-time.Hour),
		EndTime:    t0.Add(-time.Hour + 30*time.Second),
		Node:       "n3",
		CPUs:       1,
		MemMB:      500,
		ExitCode:   3,
		Message:    "script exited with status 3",
		Priority:   5,
	}
}

// failingWriter fails every write.
type failingWriter struct{}

var errWrite = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

// countingWriter counts writes and bytes.
type countingWriter struct{ writes, bytes int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	c.bytes += len(p)
	return len(p), nil
}
