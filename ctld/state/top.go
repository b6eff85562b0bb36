package state

import (
	"fmt"
	"time"

	"corral/api"
)

// TopJobs sets the nice values of pending jobs, as scontrol top does: the
// leader computed them (sched.TopNice) so that the jobs named come first
// among their user's pending jobs of the same partition, account and QoS;
// the apply only sets them, on the jobs still pending.
type TopJobs struct {
	Now  time.Time `json:"now"`
	Nice []JobNice `json:"nice"`
	By   string    `json:"by,omitempty"`
}

// JobNice is one job's new nice value.
type JobNice struct {
	ID   uint64 `json:"id"`
	Nice int    `json:"nice"`
}

// maxNice bounds a nice value set through TopJobs (submit.MaxNice).
const maxNice = 10_000

func (s *State) applyTop(c *TopJobs) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, n := range c.Nice {
		j := s.editJob(n.ID)
		switch {
		case j == nil:
			res.Errors[n.ID] = fmt.Sprintf("job %d: no such job", n.ID)
			continue
		case j.State != api.StatePending:
			res.Errors[n.ID] = fmt.Sprintf("job %d: is %s; only pending jobs can be moved in the queue", n.ID, j.State)
			continue
		}
		j.editSpec().Nice = min(max(n.Nice, -maxNice), maxNice)
		s.putJob(j)
		res.Changed = append(res.Changed, n.ID)
	}
	return res
}
