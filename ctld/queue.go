package ctld

import (
	"net/http"
	"slices"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
	"corral/display"
)

// handleQueue renders a job listing as squeue does, from the records in
// memory: the fastest way to show 100,000 jobs is to send only their text.
func (c *Controller) handleQueue(w http.ResponseWriter, r *http.Request) error {
	f, err := filterFromQuery(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	opts := display.QueueOptions{
		Format: q.Get("format"), NoHeader: q.Get("noheader") != "", Long: q.Get("long") != "", Start: q.Get("start") != "",
	}
	if _, err := display.ParseQueueFormat(orDefaultFormat(opts)); err != nil {
		return badRequest("--format: %v", err)
	}
	now := c.clock.Now()
	prio := c.priorityFunc(now)
	jobs := c.matchJobs(principalFrom(r), &f)
	sortForQueue(jobs, prio)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	// The rows are rendered a chunk at a time from views converted into
	// one reused buffer, so a listing of 100,000 jobs copies no more than
	// a chunk of them at once.
	buf := make([]api.Job, 0, queueChunk)
	refs := make([]*api.Job, 0, queueChunk)
	for start := 0; start == 0 || start < len(jobs); start += queueChunk {
		buf, refs = buf[:0], refs[:0]
		for _, v := range jobs[start:min(start+queueChunk, len(jobs))] {
			buf = append(buf, v.slim())
			buf[len(buf)-1].Priority = prio(v.job)
		}
		for i := range buf {
			refs = append(refs, &buf[i])
		}
		if err := display.QueueRefs(w, refs, opts, now); err != nil {
			return err
		}
		opts.NoHeader = true
	}
	return nil
}

// queueChunk is how many jobs one chunk of a queue listing renders.
const queueChunk = 2048

// sortForQueue orders jobs as squeue does (display.SortJobRefsBy): by
// state (running first, then pending), then priority, then id.
func sortForQueue(jobs []jobView, prio func(*state.Job) int64) {
	keys := make([]display.QueueKey, len(jobs))
	for i, v := range jobs {
		keys[i] = display.QueueKeyOf(v.job.State, prio(v.job), v.job.ID)
	}
	order := make([]int32, len(jobs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return display.CompareQueueKeys(keys[a], keys[b]) })
	sorted := make([]jobView, len(jobs))
	for i, k := range order {
		sorted[i] = jobs[k]
	}
	copy(jobs, sorted)
}

// priorityFunc returns each job's priority as squeue's %Q and scontrol show
// job print it: a job that has not finished gets the multifactor priority
// the scheduler would give it at now (sched.Priority, the same weights,
// QoS and fair-share); a finished one keeps its stored value.
func (c *Controller) priorityFunc(now time.Time) func(*state.Job) int64 {
	snap := &sched.Snapshot{Now: now.UTC()}
	total := 0
	c.fsm.Read(func(s *state.State) {
		snap.Config = s.Config
		snap.QOS = make(map[string]*api.QOS, len(s.QOS))
		for k, q := range s.QOS {
			snap.QOS[k] = q
		}
		snap.Fairshare = s.FairshareFactors(snap.Now)
		for _, n := range s.Nodes {
			total += n.CPUs
		}
	})
	return func(j *state.Job) int64 {
		if j.State.Terminal() {
			return j.Priority
		}
		return sched.Priority(j, snap, total).Priority
	}
}

// withPriority returns the view's job as the API shows it, carrying prio's
// priority.
func withPriority(v jobView, prio func(*state.Job) int64) *api.Job {
	c := v.api()
	c.Priority = prio(v.job)
	return &c
}

func orDefaultFormat(o display.QueueOptions) string {
	switch {
	case o.Format != "":
		return o.Format
	case o.Start:
		return display.StartQueueFormat
	case o.Long:
		return display.LongQueueFormat
	}
	return display.DefaultQueueFormat
}
