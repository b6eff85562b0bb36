package ctld

import (
	"net/http"
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
	now := time.Now()
	opts.Priority = c.priorityFunc(now)
	jobs := c.matchJobs(&f)
	display.SortJobRefsBy(jobs, opts.Priority)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	return display.QueueRefs(w, jobs, opts, now)
}

// priorityFunc returns each job's priority as squeue's %Q and scontrol show
// job print it: a job that has not finished gets the multifactor priority
// the scheduler would give it at now (sched.Priority, the same weights,
// QoS and fair-share); a finished one keeps its stored value.
func (c *Controller) priorityFunc(now time.Time) func(*api.Job) int64 {
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
	return func(j *api.Job) int64 {
		if j.State.Terminal() {
			return j.Priority
		}
		return sched.Priority(j, snap, total).Priority
	}
}

// withPriority returns a copy of j carrying prio's priority.
func withPriority(j *api.Job, prio func(*api.Job) int64) *api.Job {
	c := *j
	c.Priority = prio(j)
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
