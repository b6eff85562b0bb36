package display

import (
	"io"
	"strconv"
	"testing"
	"time"

	"corral/api"
)

// benchJobs returns n pending jobs shaped like a busy queue: distinct ids,
// a handful of users and partitions, and mixed pending reasons.
func benchJobs(n int) []api.Job {
	users := []string{"alice", "bob", "carol", "dave", "erin"}
	parts := []string{"batch", "gpu", "long"}
	reasons := []api.Reason{api.ReasonPriority, api.ReasonResources, api.ReasonDependency, api.ReasonJobHeldUser}
	jobs := make([]api.Job, n)
	for i := range jobs {
		jobs[i] = api.Job{
			ID: uint64(1000 + i),
			Spec: api.JobSpec{
				Name: "job-" + strconv.Itoa(i%100), User: users[i%len(users)], Partition: parts[i%len(parts)],
				NTasks: 1, CPUsPerTask: 1 + i%4, TimeLimit: int64(3600 * (1 + i%5)),
			},
			State:      api.StatePending,
			Reason:     reasons[i%len(reasons)],
			SubmitTime: t0.Add(-time.Duration(i) * time.Second),
			Priority:   int64(n - i),
		}
	}
	return jobs
}

func benchmarkQueue(b *testing.B, n int) {
	jobs := benchJobs(n)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Queue(io.Discard, jobs, QueueOptions{}, t0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/job")
}

// BenchmarkQueue5000 renders 5,000 pending jobs in the default format.
func BenchmarkQueue5000(b *testing.B) { benchmarkQueue(b, 5000) }

// BenchmarkQueue100000 renders 100,000 pending jobs in the default format;
// `corral queue` must stay well under 200 ms for this.
func BenchmarkQueue100000(b *testing.B) { benchmarkQueue(b, 100000) }

// BenchmarkSortJobs100000 sorts 100,000 jobs of mixed states.
func BenchmarkSortJobs100000(b *testing.B) {
	base := benchJobs(100000)
	for i := range base {
		if i%3 == 0 {
			base[i].State = api.StateRunning
		}
	}
	jobs := make([]api.Job, len(base))
	b.ReportAllocs()
	for b.Loop() {
		copy(jobs, base)
		SortJobs(jobs)
	}
}

// BenchmarkQueueJSON5000 encodes 5,000 jobs as JSON.
func BenchmarkQueueJSON5000(b *testing.B) {
	jobs := benchJobs(5000)
	b.ReportAllocs()
	for b.Loop() {
		if err := QueueJSON(io.Discard, jobs); err != nil {
			b.Fatal(err)
		}
	}
}
