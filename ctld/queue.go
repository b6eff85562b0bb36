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
		LongFormat: q.Get("fields"), Array: q.Get("array") != "", Dated: q.Get("dated") != "",
	}
	if _, err := opts.Layout(); err != nil {
		if opts.LongFormat != "" {
			return badRequest("%v", err)
		}
		return badRequest("--format: %v", err)
	}
	if opts.Array && len(f.Tasks) > 0 {
		opts.ShowTask = namedTask(&f)
	}
	var order *display.QueueSort
	if spec := q.Get("sort"); spec != "" {
		if order, err = display.ParseQueueSort(spec); err != nil {
			return badRequest("%v", err)
		}
	}
	now := c.clock.Now()
	prio := c.priorityFunc(now)
	jobs := c.matchJobs(principalFrom(r), &f)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if order != nil {
		return writeSortedQueue(w, jobs, prio, order, opts, now)
	}
	sortForQueue(jobs, prio)
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

// writeSortedQueue renders jobs in the order of squeue -S keys, which may
// compare any field of a job: every job is converted once, sorted, and
// rendered from those copies.
func writeSortedQueue(w http.ResponseWriter, jobs []jobView, prio func(*state.Job) int64, order *display.QueueSort,
	opts display.QueueOptions, now time.Time) error {
	refs := slimJobs(jobs, prio)
	slices.SortFunc(refs, func(a, b *api.Job) int { return order.Compare(a, b, now) })
	return display.QueueRefs(w, refs, opts, now)
}

// slimJobs converts every job once, as a listing shows it (the slim
// view), with its priority.
func slimJobs(jobs []jobView, prio func(*state.Job) int64) []*api.Job {
	rows := make([]api.Job, len(jobs))
	refs := make([]*api.Job, len(jobs))
	for i, v := range jobs {
		rows[i] = v.slim()
		rows[i].Priority = prio(v.job)
		refs[i] = &rows[i]
	}
	return refs
}

// namedTask is squeue -r's choice of pending tasks when the listing names
// tasks ("-j 12_5"): those named, or all of an array named by its id.
func namedTask(f *api.JobFilter) func(array uint64, task int) bool {
	return func(array uint64, task int) bool {
		return slices.Contains(f.IDs, array) || slices.Contains(f.Tasks, api.TaskRef{Array: array, Task: task})
	}
}

// queueChunk is how many jobs one chunk of a queue listing renders.
const queueChunk = 2048

// sortForQueue orders jobs as squeue does by default (display.SortJobRefsBy,
// "P,t,-p"): by partition, then compact state, then priority, then id.
func sortForQueue(jobs []jobView, prio func(*state.Job) int64) {
	keys := make([]display.QueueKey, len(jobs))
	for i, v := range jobs {
		keys[i] = display.QueueKeyOf(v.job.Spec.Partition, v.job.State, prio(v.job), v.job.ID)
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
