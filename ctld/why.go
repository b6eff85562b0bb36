package ctld

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// reasonText says what each pending reason means and what to do about it.
var reasonText = map[api.Reason]string{
	api.ReasonResources:                "no node of its partition has the CPUs and memory it asks for free now",
	api.ReasonPriority:                 "a job ahead of it in the queue waits for the same nodes, and starting this one now would delay that job",
	api.ReasonDependency:               "its --dependency is not met yet",
	api.ReasonDependencyNeverSatisfied: "its --dependency can never be met; cancel it, or it stays pending",
	api.ReasonBeginTime:                "its --begin time has not come",
	api.ReasonJobHeldUser:              "it is held; `corral release` lets it run",
	api.ReasonJobArrayTaskLimit:        "its array already runs as many tasks as its %N limit allows",
	api.ReasonQOSMaxJobsPerUserLimit:   "its user already runs as many jobs in its QoS as the QoS allows (MaxJobsPerUser)",
	api.ReasonQOSGrpCpuLimit:           "the jobs of its QoS already use the CPUs the QoS allows (GrpCPUs)",
	api.ReasonQOSMaxWallDurationLimit:  "its time limit is longer than its QoS allows (MaxWall); it will not start",
	api.ReasonGresUnavailable:          "no node of its partition has the GPUs, MIG slices or SR-IOV VFs it asks for, even when idle; it waits until such a node joins: cancel it or ask for fewer devices",
	api.ReasonLicenses:                 "the licenses it asks for (-L) are held by running jobs, or a job ahead of it waits for them; it starts when enough are free",
	api.ReasonHugepagesUnavailable:     "no node of its partition has the hugepages it asks for, even when idle; it waits until such a node joins: cancel it or ask for fewer",
	api.ReasonInvalidJob:               "the scheduler cannot handle its request, so the job is held; cancel it and submit it again with a valid request (`corral release` tries again)",
	api.ReasonJobHeldAdmin:             "an administrator holds it; `corral release` lets it run",
	api.ReasonPartitionDown:            "its partition is DOWN: it starts no jobs until an administrator sets it UP (scontrol update PartitionName=... State=UP)",
	api.ReasonPartitionInactive:        "its partition is INACTIVE: it starts no jobs until an administrator sets it UP",
	api.ReasonPartitionNodeLimit:       "it asks for more or fewer nodes than its partition's MaxNodes and MinNodes allow; it will not start there",
	api.ReasonReservation:              "it runs only inside its reservation (--reservation), whose window has not opened, is too short for its time limit, or does not admit it",
	api.ReasonReservationDeleted:       "the reservation it names (--reservation) was deleted or ended; it cannot start: cancel it and submit it again without --reservation, or with another",
	api.ReasonReservedForMaint:         "the nodes that could hold it now are in a maintenance reservation its run would overlap; it starts when the maintenance ends, or sooner with a --time that ends before it",
}

func (c *Controller) handleWhy(w http.ResponseWriter, r *http.Request) error {
	why, err := c.why(principalFrom(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, why)
	return nil
}

// why explains job id's state to p (corral why); another tenant's job is
// not found.
func (c *Controller) why(p principal, id string) (api.Why, error) {
	ref, err := api.ParseJobRef(id)
	if err != nil {
		return api.Why{}, badRequest("%v", err)
	}
	now := c.clock.Now().UTC()
	var rec *state.Job
	var v jobView
	c.fsm.Read(func(s *state.State) {
		if ref.HasTask {
			rec, _ = s.ResolveTask(api.TaskRef{Array: ref.ID, Task: ref.Task})
		} else {
			rec = s.Jobs[ref.ID]
		}
		if rec != nil {
			if v = viewOf(s, rec, viewerOf(s, p)); v.lvl == hidden {
				rec = nil // another tenant's job does not exist for the caller
			}
		}
	})
	if rec == nil {
		return api.Why{}, notFound("job %s: no such job", id)
	}
	aj := v.api()
	j := &aj
	why := api.Why{JobID: j.ID, Ref: j.Ref(), State: j.State}
	say := func(format string, args ...any) { why.Lines = append(why.Lines, fmt.Sprintf(format, args...)) }
	switch j.State {
	case api.StatePending:
		c.explainPending(rec, now, say)
	case api.StateRunning, api.StateSuspended, api.StateCompleting:
		say("Job %s is %s on node %s since %s (%s elapsed, time limit %s).", j.Ref(), j.State, j.Node,
			j.StartTime.Format(time.RFC3339), j.Elapsed(now).Round(time.Second), limitText(j.Spec.TimeLimit))
		say("It runs there because %s was the first node, in name order, of partition %s with %d CPUs and %d MiB free when the job's turn came (first fit; backfill only starts a job where it delays no reservation).",
			j.Node, j.Spec.Partition, j.CPUs, j.MemMB)
		if j.CPUsLent {
			say("It is suspended by preemption: its CPUs are lent to a job of a QoS allowed to preempt its own; it resumes when they are free.")
		}
	default:
		say("Job %s is %s (ended %s). %s", j.Ref(), j.State, j.EndTime.Format(time.RFC3339), j.Message)
	}
	return why, nil
}

// explainPending runs a pass on the current state (without committing it)
// and says why j waits, where it ranks, and what it waits for.
func (c *Controller) explainPending(j *state.Job, now time.Time, say func(string, ...any)) {
	snap := c.snapshotForSched(now)
	plan, err := runPass(snap)
	if err != nil {
		say("Job %s is PENDING; the scheduling pass could not be run to explain it: %v", j.Ref(), err)
		return
	}
	reason := plan.Reasons[j.ID]
	started := false
	for _, st := range plan.Starts {
		started = started || st.JobID == j.ID
	}
	switch {
	case started:
		say("Job %s is PENDING but starts at the next scheduling pass: there is room for it now.", j.Ref())
	case reason != "" && reasonText[reason] != "":
		say("Job %s is PENDING, reason %s: %s.", j.Ref(), reason, reasonText[reason])
	case reason != "":
		say("Job %s is PENDING, reason %s.", j.Ref(), reason)
	default:
		say("Job %s is PENDING.", j.Ref())
	}
	if reason == api.ReasonResources && !sched.CouldEverFit(snap, j) {
		say("No node of partition %s could hold it even when idle (%d CPUs, %d MiB): it stays pending until a larger node joins; cancel it or ask for less.",
			j.Spec.Partition, j.Spec.CPUs(), sched.MemRequest(j, snap.DefMemPerCPU))
	}
	explainReservations(j, reason, snap, say)
	if reason == api.ReasonInvalidJob {
		why := plan.Invalid[j.ID]
		if why == "" {
			why = j.Message
		}
		say("What the scheduler found: %s.", why)
	}
	rows := priorityRows(snap)
	for i, r := range rows {
		if r.JobID != j.ID {
			continue
		}
		w := r.Weights
		say("Priority %d, rank %d of %d pending: age %.2f×%d + fair-share %.2f×%d + QoS %.2f×%d + partition %.2f×%d + job size %.3f×%d + site %.2f×%d − nice %d.",
			r.Priority, i+1, len(rows), r.Age, w.Age, r.Fairshare, w.Fairshare, r.QOSF, w.QOS, r.PartF, w.Partition, r.JobSize, w.JobSize, r.Site, w.Site, r.Nice)
	}
	if at, ok := plan.Estimates[j.ID]; ok {
		if at.After(now.Add(sched.Horizon / 2)) {
			say("It holds a reservation on node %s behind a job without a time limit: its start cannot be estimated.", plan.Reservations[j.ID].Node)
		} else {
			say("It holds a reservation on node %s and is expected to start at %s (in %s), when the running jobs there reach their time limits.",
				plan.Reservations[j.ID].Node, at.Format(time.RFC3339), at.Sub(now).Round(time.Second))
		}
	}
	if reason == api.ReasonPriority {
		var holders []string
		for id, at := range plan.Estimates {
			if id != j.ID {
				holders = append(holders, fmt.Sprintf("job %d (expected to start %s on %s)", id, at.Format(time.RFC3339), plan.Reservations[id].Node))
			}
		}
		sort.Strings(holders)
		if len(holders) > 0 {
			say("It waits behind %s.", strings.Join(holders, ", "))
		}
	}
	if d := j.Spec.Dependency; d != nil && (reason == api.ReasonDependency || reason == api.ReasonDependencyNeverSatisfied) {
		var parts []string
		c.fsm.Read(func(s *state.State) {
			for _, cl := range d.Clauses {
				for _, t := range cl.Targets {
					st := "unknown"
					if t.Kind == state.DepTask {
						if recs := t.Records(s.DepLookups()); len(recs) > 0 {
							st = string(recs[0].State)
						}
					} else if tj := s.Jobs[t.Job]; tj != nil {
						st = string(tj.State)
					}
					parts = append(parts, fmt.Sprintf("%s:%s is %s", cl.Type, t, st))
				}
				if cl.Type == "singleton" {
					parts = append(parts, "singleton: waits for the other jobs named "+j.Spec.Name+" of user "+j.Spec.User)
				}
			}
		})
		say("Dependency %s: %s.", d.Raw, strings.Join(parts, "; "))
	}
	if reason == api.ReasonBeginTime {
		say("Its begin time is %s.", j.Spec.Begin.Format(time.RFC3339))
	}
	for _, p := range plan.Preemptions {
		if p.Preemptor == j.ID {
			say("It is preempting job %d (%s) to make room.", p.Victim, p.Mode)
		}
	}
}

func limitText(secs int64) string {
	if secs <= 0 {
		return "none"
	}
	return (time.Duration(secs) * time.Second).String()
}
