package sched

import (
	"cmp"
	"slices"
	"sort"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// Horizon stands for "no time limit" when the pass plans ahead: a job
// without one is taken to hold its resources this long, so a reservation
// behind it lands beyond every limited job and a job without a limit never
// overlaps a reservation.
const Horizon = 365 * 24 * time.Hour

// step is a node's free resources from at until the next step's at.
type step struct {
	at   int64 // Unix nanoseconds
	cpus int
	mem  int64
}

// profile is one node's free CPUs and memory over time, from the pass's
// "now" on: a step function whose last step lasts for ever. It starts from
// what is free now, gains what each running job holds at the job's
// expected end, and loses what the pass starts or reserves.
type profile []step

// buildProfile returns the profile of a node with free resources now and
// the given releases (resources that come back at a time), in buf's array
// when it is large enough (nil makes a new one). It sorts rel.
func buildProfile(buf profile, now int64, cpus int, mem int64, rel []release) profile {
	sortReleases(rel)
	p := buf[:0]
	if cap(p) < len(rel)+1 {
		p = make(profile, 0, len(rel)+1)
	}
	p = append(p, step{at: now, cpus: cpus, mem: mem})
	for _, r := range rel {
		last := &p[len(p)-1]
		if r.at <= last.at {
			last.cpus += r.cpus
			last.mem += r.mem
			continue
		}
		p = append(p, step{at: r.at, cpus: last.cpus + r.cpus, mem: last.mem + r.mem})
	}
	return p
}

// sortReleases sorts rel by time: by insertion for the few runs of a
// node (no comparison function to call), else as slices.SortFunc.
func sortReleases(rel []release) {
	if len(rel) > 16 {
		slices.SortFunc(rel, func(a, b release) int { return cmp.Compare(a.at, b.at) })
		return
	}
	for i := 1; i < len(rel); i++ {
		for k := i; k > 0 && rel[k].at < rel[k-1].at; k-- {
			rel[k], rel[k-1] = rel[k-1], rel[k]
		}
	}
}

// release is what a running job gives back when it is expected to end.
type release struct {
	at   int64
	cpus int
	mem  int64
}

// index returns the step in force at t (t at or after the first step).
func (p profile) index(t int64) int {
	return sort.Search(len(p), func(i int) bool { return p[i].at > t }) - 1
}

// fits reports whether cpus and mem are free during all of [start, end).
func (p profile) fits(start, end int64, cpus int, mem int64) bool {
	for i := p.index(start); i < len(p) && p[i].at < end; i++ {
		if p[i].cpus < cpus || p[i].mem < mem {
			return false
		}
	}
	return true
}

// earliest returns the first time at or after from when cpus and mem stay
// free for dur, and false when that never happens.
func (p profile) earliest(from int64, dur int64, cpus int, mem int64) (int64, bool) {
	i := p.index(from)
	start := from
	for i < len(p) {
		// Scan from start until the window closes or a step is too small.
		j := i
		for ; j < len(p) && p[j].at < start+dur; j++ {
			if p[j].cpus < cpus || p[j].mem < mem {
				break
			}
		}
		if j == len(p) || p[j].at >= start+dur {
			return start, true
		}
		// Step j is too small: no window can include it; try after it.
		i = j + 1
		if i < len(p) {
			start = p[i].at
		}
	}
	return 0, false
}

// take subtracts cpus and mem during [start, end), splitting steps at the
// window's edges.
func (p *profile) take(start, end int64, cpus int, mem int64) {
	p.split(start)
	p.split(end)
	q := *p
	for i := q.index(start); i < len(q) && q[i].at < end; i++ {
		q[i].cpus -= cpus
		q[i].mem -= mem
	}
}

// split makes t the start of a step (no-op when it is one already or lies
// before the profile).
func (p *profile) split(t int64) {
	q := *p
	i := q.index(t)
	if i < 0 || q[i].at == t {
		return
	}
	q = append(q, step{})
	copy(q[i+2:], q[i+1:])
	q[i+1] = step{at: t, cpus: q[i].cpus, mem: q[i].mem}
	*p = q
}

// jobLimit returns how long the pass plans a pending job to run: its time
// limit, else its partition's default, else the partition's maximum, else
// Horizon.
func jobLimit(j *state.Job, part *api.Partition) time.Duration {
	if j.Spec.TimeLimit > 0 {
		return time.Duration(j.Spec.TimeLimit) * time.Second
	}
	if part != nil {
		if part.DefaultTime > 0 {
			return time.Duration(part.DefaultTime) * time.Second
		}
		if part.MaxTime > 0 {
			return time.Duration(part.MaxTime) * time.Second
		}
	}
	return Horizon
}

// expectedEnd returns when a run is planned to free its resources: its
// start plus its job's limit plus the time it spent suspended (a suspended
// run's clock is stopped, so it is planned to resume now), never before
// now.
func expectedEnd(r Run, part *api.Partition, now time.Time) time.Time {
	limit := jobLimit(r.Job, part)
	if limit >= Horizon {
		return now.Add(Horizon)
	}
	end := now.Add(limit - r.Alloc.Elapsed(now))
	if end.Before(now) {
		return now
	}
	return end
}

// Bounds of the times expectedEndNanos computes with in integers: Unix
// seconds from 1970 to 2200, so that differences of such times, limits
// under Horizon and suspensions under suspendedMax stay far inside int64
// nanoseconds.
const (
	unixSec2200  = 7_258_118_400
	suspendedMax = 100 * 365 * 24 * time.Hour
)

// expectedEndNanos is expectedEnd(r, part, now) in Unix nanoseconds, nowNs
// being now's. A run that is neither ended nor suspended, with times and a
// limit in ordinary bounds (the usual case, once per running job and
// pass), is computed in integers; any other goes through expectedEnd.
func expectedEndNanos(r Run, part *api.Partition, now time.Time, nowNs int64) int64 {
	a := r.Alloc
	limit := jobLimit(r.Job, part)
	start := a.StartTime.Unix()
	if !a.EndTime.IsZero() || !a.SuspendTime.IsZero() || limit >= Horizon || limit < 0 ||
		start < 0 || start > unixSec2200 || nowNs < 0 || nowNs/1e9 > unixSec2200 ||
		a.SuspendedFor < 0 || a.SuspendedFor > suspendedMax {
		return expectedEnd(r, part, now).UnixNano()
	}
	elapsed := max(nowNs-(start*1e9+int64(a.StartTime.Nanosecond()))-int64(a.SuspendedFor), 0)
	return max(nowNs+int64(limit)-elapsed, nowNs)
}
