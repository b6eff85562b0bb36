package ctld

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// checkChanges checks the changes of an update to job j as the
// controller checks a submission: the job as it would be after them
// passes the same stateless rules, and, pending, the same state checks
// (partition, QoS, account, that some node could hold it). Beyond those,
// only an operator or administrator may lower a nice value or raise a
// time limit past what the job's QoS and partition allow. It returns the
// entry that makes the changes.
func (c *Controller) checkChanges(s *state.State, j *state.Job, req *api.UpdateJobRequest, p principal, now time.Time) (*state.UpdateJob, error) {
	ch := req.Changes
	e := &state.JobEdits{TimeLimit: ch.TimeLimit, Name: ch.Name, Comment: ch.Comment, Nice: ch.Nice, Partition: ch.Partition,
		QOS: ch.QOS, NTasks: ch.NumTasks, MemPerNode: ch.MinMemoryNode, Begin: ch.StartTime, Throttle: ch.ArrayTaskThrottle,
		SetDependency: ch.SetDependency, TmpMB: ch.MinTmpDiskNode}
	cmd := &state.UpdateJob{Now: now, ID: j.ID, By: p.name, Changes: e}
	if j.State.Terminal() {
		return nil, badRequest("job %d has ended (%s); it cannot be updated", j.ID, j.State)
	}
	if err := resolveChanges(j, ch, e); err != nil {
		return nil, err
	}
	// The job as the apply will make it, as the API shows it.
	edited := *j.Spec
	e.Apply(&edited)
	sp := apiSpec(&edited)
	if what := e.PendingOnly(); what != "" && j.State != api.StatePending {
		return nil, badRequest("job %d is %s; %s can change only while it is pending (TimeLimit, Name and Comment can change until it ends)", j.ID, j.State, what)
	}
	if err := submit.ValidateSpec(&sp, now); err != nil {
		return nil, refuseUpdate(j.ID, err)
	}
	privileged := p.privileged()
	if ch.Nice != nil && *ch.Nice < j.Spec.Nice && !privileged {
		return nil, forbidden("job %d: Nice=%d is below its nice of %d, which raises its priority: only an operator or administrator may do that", j.ID, *ch.Nice, j.Spec.Nice)
	}
	if ch.TimeLimit != nil && !privileged {
		if err := checkLimitRaise(s, j, &sp, *ch.TimeLimit); err != nil {
			return nil, err
		}
	}
	if ch.SetDependency {
		dep, err := checkDependencyChange(s, j, req.Dependency)
		if err != nil {
			return nil, err
		}
		cmd.Dependency = dep
	}
	if j.State == api.StatePending {
		// The state's checks of a submission, on the job as changed: its
		// nice was judged above, and its dependency (whose targets may
		// have been purged since) only when it changes.
		sp.Dependency = nil
		sp.Nice = max(sp.Nice, 0)
		parts := s.PartitionList()
		if err := c.validateSpec(0, &sp, s, parts, now, newFitChecker(s, parts, s.Config.DefMemPerCPU), map[qosKey]int{}); err != nil {
			return nil, asUpdateRefusal(j.ID, err)
		}
	}
	return cmd, nil
}

// resolveChanges fills in what the entry records that ch gives in other
// terms (NumCPUs as CPUs per task, for the tasks the job will have), and
// refuses what cannot apply to job j whatever its state.
func resolveChanges(j *state.Job, ch *api.JobChanges, e *state.JobEdits) error {
	if ch.NumCPUs != nil {
		tasks := max(j.Spec.NTasks, 1)
		if ch.NumTasks != nil {
			tasks = max(*ch.NumTasks, 1)
		}
		if *ch.NumCPUs < tasks || *ch.NumCPUs%tasks != 0 {
			return &fieldError{Field: "num_cpus", Msg: fmt.Sprintf("job %d: NumCPUs=%d is not a multiple of its %d tasks (set NumTasks too, or give a multiple)", j.ID, *ch.NumCPUs, tasks)}
		}
		per := *ch.NumCPUs / tasks
		e.CPUsPerTask = &per
	}
	if ch.ArrayTaskThrottle != nil && j.Spec.Array == nil {
		return &fieldError{Field: "array_task_throttle", Msg: fmt.Sprintf("job %d is no array; ArrayTaskThrottle applies to arrays (sbatch --array=...%%N)", j.ID)}
	}
	return nil
}

// checkLimitRaise refuses a user's new time limit when it raises the
// job's past the longest its QoS (MaxWall) and partition (MaxTime) allow,
// or raises it at all when neither sets one: an extension within the
// bounds the job was submitted under needs no operator.
func checkLimitRaise(s *state.State, j *state.Job, sp *api.JobSpec, limit int64) error {
	var bound, defTime, maxTime int64
	var by []string
	if q := s.QOS[sp.QOS]; q != nil && q.MaxWall > 0 {
		bound, by = q.MaxWall, append(by, "QoS "+q.Name+"'s MaxWall")
	}
	for _, part := range s.PartitionList() {
		if part.Name == sp.Partition {
			defTime, maxTime = part.DefaultTime, part.MaxTime
			if maxTime > 0 && (bound == 0 || maxTime < bound) {
				bound = maxTime
			}
			if maxTime > 0 {
				by = append(by, "partition "+part.Name+"'s MaxTime")
			}
		}
	}
	// A limit of 0 is the partition's: its default, else its maximum,
	// else none (infinite, shown as 0 here too).
	effective := func(l int64) int64 {
		switch {
		case l > 0:
			return l
		case defTime > 0:
			return defTime
		}
		return maxTime
	}
	old, next := effective(j.Spec.TimeLimit), effective(limit)
	switch {
	case old == 0 || (next > 0 && next <= old):
		return nil // a lowering, or no change
	case bound == 0:
		return forbidden("job %d: TimeLimit=%s raises its limit of %s, and neither its QoS nor its partition sets a bound a user may extend to: ask an operator",
			j.ID, limitText(next), limitText(old))
	case next == 0 || next > bound:
		return forbidden("job %d: TimeLimit=%s is beyond %s, the most %s allows a user to ask for: ask an operator",
			j.ID, limitText(next), limitText(bound), strings.Join(by, " and "))
	}
	return nil
}

// asUpdateRefusal words a submission check's refusal of the changed job
// (made for "job 1 of the batch") for job id.
func asUpdateRefusal(id uint64, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &fieldError{Field: fe.Field, Msg: fmt.Sprintf("job %d: ", id) + strings.TrimPrefix(fe.Msg, "job 1 of the batch: ")}
	}
	return err
}
