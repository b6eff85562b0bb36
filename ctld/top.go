package ctld

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// handleTop is scontrol top: the pending jobs named move to the top of
// their user's pending jobs of the same partition, account and QoS as the
// first of them, by nice values exchanged among those jobs (sched.TopNice).
// A user may top their own jobs (Slurm's enable_user_top: the exchange
// gains them nothing against others), an operator anyone's.
func (c *Controller) handleTop(w http.ResponseWriter, r *http.Request) error {
	var req api.TopRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.IDs) == 0 {
		return badRequest("no job ids given")
	}
	if err := validateIDs("ids", req.IDs); err != nil {
		return err
	}
	p := principalFrom(r)
	ids, denied := c.managedJobs(p, req.IDs)
	noteTarget(r, "jobs %s", idsText(req.IDs))
	resp := api.HoldResponse{Errors: denied}
	now := c.clock.Now().UTC()
	var targets []uint64
	var nice map[uint64]int
	c.fsm.Read(func(s *state.State) { targets, nice = topNice(s, now, ids, resp.Errors) })
	if len(nice) > 0 {
		cmd := &state.TopJobs{Now: now, By: p.name}
		for _, id := range slices.Sorted(maps.Keys(nice)) {
			cmd.Nice = append(cmd.Nice, state.JobNice{ID: id, Nice: nice[id]})
		}
		res, err := c.propose(state.CmdTopJobs, cmd)
		if err != nil {
			return err
		}
		for id, e := range res.(*state.IDsResult).Errors {
			if slices.Contains(targets, id) {
				resp.Errors[id] = e
			}
		}
	}
	for _, id := range targets {
		if _, failed := resp.Errors[id]; !failed {
			resp.Changed = append(resp.Changed, id)
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// topNice picks the jobs scontrol top reorders in s: the user's pending
// jobs of the first named pending job's partition, account and QoS; the
// named ones among them are the targets, the others named get a refusal
// in errs. It returns the targets and the nice values to set.
func topNice(s *state.State, now time.Time, ids []uint64, errs map[uint64]string) ([]uint64, map[uint64]int) {
	var first *state.Job
	for _, id := range ids {
		if j := s.Jobs[id]; j != nil && j.State == api.StatePending && first == nil {
			first = j
		}
	}
	if first == nil {
		for _, id := range ids {
			if _, done := errs[id]; !done {
				errs[id] = fmt.Sprintf("job %d: no such pending job", id)
			}
		}
		return nil, nil
	}
	same := func(j *state.Job) bool {
		a, b := j.Spec, first.Spec
		return a.User == b.User && a.Partition == b.Partition && a.Account == b.Account && a.QOS == b.QOS
	}
	snap := sched.NewSnapshot(s, now)
	total := 0
	for _, n := range snap.Nodes {
		total += n.CPUs
	}
	var jobs []sched.TopJob
	for _, j := range snap.Pending {
		if same(j) {
			jobs = append(jobs, sched.TopJob{ID: j.ID, Priority: sched.Priority(j, snap, total).Priority, Nice: j.Spec.Nice})
		}
	}
	var targets []uint64
	for _, id := range ids {
		if _, done := errs[id]; done || slices.Contains(targets, id) {
			continue
		}
		j := s.Jobs[id]
		switch {
		case j == nil || j.State != api.StatePending:
			errs[id] = fmt.Sprintf("job %d: no such pending job", id)
		case !same(j):
			errs[id] = fmt.Sprintf("job %d: not of the same user, partition, account and QoS as job %d; top them separately", id, first.ID)
		default:
			targets = append(targets, id)
		}
	}
	return targets, sched.TopNice(jobs, targets)
}
