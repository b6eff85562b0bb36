package ctld

import (
	"net/http"
	"time"

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
	jobs := c.matchJobs(&f)
	display.SortJobRefs(jobs)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	return display.QueueRefs(w, jobs, opts, time.Now())
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
