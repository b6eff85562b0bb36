package sched

import (
	"cmp"
	"slices"
)

// TopJob is one of a user's pending jobs that scontrol top may reorder:
// its priority now and its nice value.
type TopJob struct {
	ID       uint64
	Priority int64
	Nice     int
}

// TopNice computes scontrol top's nice values: jobs (the user's pending
// jobs of one partition, account and QoS) are reordered so that targets
// come first, in the order given, then the others in their order now; the
// priorities the jobs hold now are dealt out again in that order, highest
// first, and each job's nice changes by what its priority changes, so the
// jobs' priorities (and nice values) sum to what they did: the user gains
// nothing against anyone else's jobs. It returns the jobs whose nice value
// changes, with their new value.
func TopNice(jobs []TopJob, targets []uint64) map[uint64]int {
	prios := make([]int64, len(jobs))
	for i, j := range jobs {
		prios[i] = j.Priority
	}
	slices.SortFunc(prios, func(a, b int64) int { return cmp.Compare(b, a) })
	rank := func(id uint64) int {
		if i := slices.Index(targets, id); i >= 0 {
			return i
		}
		return len(targets)
	}
	order := slices.Clone(jobs)
	slices.SortStableFunc(order, func(a, b TopJob) int {
		if c := cmp.Compare(rank(a.ID), rank(b.ID)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	out := map[uint64]int{}
	for i, j := range order {
		if delta := j.Priority - prios[i]; delta != 0 {
			out[j.ID] = j.Nice + int(delta)
		}
	}
	return out
}
