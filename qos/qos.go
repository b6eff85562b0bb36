package qos

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"corral/api"
)

// Check says why q cannot be put next to the QoS in all (by name), or nil;
// it stores q's preemption mode and fallback in canonical form. Whether a QoS can be
// deleted (no job uses it) is the state's to say.
func Check(q *api.QOS, all map[string]*api.QOS) error {
	if q.Name == "" {
		return errors.New("a QoS needs a name")
	}
	for _, p := range q.Preempt {
		if p == q.Name {
			return fmt.Errorf("qos %s: a QoS cannot preempt itself", q.Name)
		}
		if all[p] == nil {
			return fmt.Errorf("qos %s: --preempt names %s, which is no QoS (QoS: %s)", q.Name, p, strings.Join(Names(all), ", "))
		}
	}
	if q.PreemptMode != "" {
		m, err := api.ParsePreemptMode(string(q.PreemptMode))
		if err != nil {
			return fmt.Errorf("qos %s: %w", q.Name, err)
		}
		q.PreemptMode = m // stored in the form the scheduler compares
	}
	if q.PreemptFallback != "" {
		m, err := api.ParsePreemptFallback(string(q.PreemptFallback))
		if err != nil {
			return fmt.Errorf("qos %s: %w", q.Name, err)
		}
		q.PreemptFallback = m
	}
	if q.Priority < 0 {
		return fmt.Errorf("qos %s: --priority must be ≥ 0", q.Name)
	}
	if q.MaxWall < 0 || q.MaxJobsPerUser < 0 || q.MaxSubmitPerUser < 0 || q.GrpCPUs < 0 || q.PreemptExemptTime < 0 {
		return fmt.Errorf("qos %s: limits must be positive (0 is unlimited)", q.Name)
	}
	return nil
}

// Names returns the QoS names, sorted.
func Names(all map[string]*api.QOS) []string {
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// PreemptedBy returns the QoS that may preempt q, by name: a QoS cannot be
// deleted while one does.
func PreemptedBy(q string, all map[string]*api.QOS) []string {
	var out []string
	for _, name := range Names(all) {
		if o := all[name]; o.Name != q && slices.Contains(o.Preempt, q) {
			out = append(out, name)
		}
	}
	return out
}

// SubmitLimit says why a user who has active jobs in q (pending or
// running, the ones before this job in its own batch included) may not
// submit one more, or nil. It is applied where a batch is committed, so
// one request of many jobs is held to the limit job by job.
func SubmitLimit(q *api.QOS, user string, active int) error {
	if q == nil || q.MaxSubmitPerUser <= 0 || active < q.MaxSubmitPerUser {
		return nil
	}
	return fmt.Errorf("QOSMaxSubmitJobPerUserLimit: user %s already has %d jobs pending or running in QoS %s, its limit is %d",
		user, active, q.Name, q.MaxSubmitPerUser)
}

// WallLimit returns ReasonQOSMaxWallDurationLimit when a job's planned
// time limit is longer than q allows, else "".
func WallLimit(q *api.QOS, limit time.Duration) api.Reason {
	if q != nil && q.MaxWall > 0 && int64(limit.Seconds()) > q.MaxWall {
		return api.ReasonQOSMaxWallDurationLimit
	}
	return ""
}

// Usage counts, for one scheduling pass, each QoS's running jobs per user
// and CPUs, and says which limit a start would pass.
type Usage struct {
	jobs map[[2]string]int
	cpus map[string]int
}

// NewUsage returns empty counts.
func NewUsage() *Usage { return &Usage{jobs: map[[2]string]int{}, cpus: map[string]int{}} }

// Add counts one running job of user in QoS q holding cpus.
func (u *Usage) Add(q, user string, cpus int) {
	if q == "" {
		return
	}
	u.jobs[[2]string{q, user}]++
	u.cpus[q] += cpus
}

// Limit returns the reason q's running limits hold back a start of user's
// job of cpus CPUs, or "".
func (u *Usage) Limit(q *api.QOS, user string, cpus int) api.Reason {
	switch {
	case q == nil:
		return ""
	case q.MaxJobsPerUser > 0 && u.jobs[[2]string{q.Name, user}] >= q.MaxJobsPerUser:
		return api.ReasonQOSMaxJobsPerUserLimit
	case q.GrpCPUs > 0 && u.cpus[q.Name]+cpus > q.GrpCPUs:
		return api.ReasonQOSGrpCpuLimit
	}
	return ""
}

// MayPreempt reports whether a job of QoS preemptor may preempt a job of
// QoS victim that has run for elapsed: the preemptor lists the victim's
// QoS, and the victim is past its QoS's exempt time.
func MayPreempt(preemptor, victim *api.QOS, elapsed time.Duration) bool {
	return preemptor != nil && victim != nil && slices.Contains(preemptor.Preempt, victim.Name) &&
		elapsed.Seconds() >= float64(victim.PreemptExemptTime)
}

// Mode is how a victim of QoS q in a partition whose mode is part is
// preempted: its QoS's mode, else its partition's, else cancel.
//
// Mode migrate moves the victim to a node with room; Fallback says what
// happens to it when there is none.
func Mode(q *api.QOS, part api.PreemptMode) api.PreemptMode {
	switch {
	case q != nil && q.PreemptMode != "":
		return q.PreemptMode
	case part != "":
		return part
	}
	return api.PreemptCancel
}

// Fallback returns what preempts a victim of q by migration when no node
// has room for it: q's PreemptFallback, else cancel.
func Fallback(q *api.QOS) api.PreemptMode {
	if q != nil && q.PreemptFallback != "" {
		return q.PreemptFallback
	}
	return api.PreemptCancel
}

// Victim is a running job as the victim order sees it.
type Victim struct {
	ID       uint64
	Priority int64
	Elapsed  time.Duration
}

// CompareVictims orders candidates for preemption, cheapest first: lowest
// priority, then least run time lost, then lowest job id — so candidates
// that tie are taken in the same order on every member and every pass.
func CompareVictims(a, b Victim) int {
	switch {
	case a.Priority != b.Priority:
		return cmp.Compare(a.Priority, b.Priority)
	case a.Elapsed != b.Elapsed:
		return cmp.Compare(a.Elapsed, b.Elapsed)
	}
	return cmp.Compare(a.ID, b.ID)
}
