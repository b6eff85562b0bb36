package accounting

import (
	"math"
	"time"

	"corral/api"
)

// Utilization sums sreport's cluster Utilization over a window: node time
// from the node facts, allocated time from the runs, planned (reserved)
// time from the waits. Feed it with AddNodes and AddRun, then read Result.
// The window's end is the caller's now at the latest: a node's last fact
// lasts until the window ends.
type Utilization struct {
	start, end time.Time
	cpu, gpu   tresTime
}

// tresTime is one TRES's seconds, by what they were spent on.
type tresTime struct {
	up, down, plannedDown float64
	alloc, planned        float64
}

// NewUtilization starts the sums of [start, end).
func NewUtilization(start, end time.Time) *Utilization {
	return &Utilization{start: start, end: end}
}

// overlap is the seconds [from, to) shares with the window.
func (u *Utilization) overlap(from, to time.Time) float64 {
	return overlapSeconds(from, to, u.start, u.end)
}

func overlapSeconds(from, to, start, end time.Time) float64 {
	if from.Before(start) {
		from = start
	}
	if to.After(end) {
		to = end
	}
	if !to.After(from) {
		return 0
	}
	return to.Sub(from).Seconds()
}

// AddNodes adds the node time of facts, which are ordered by node, then
// time (as Store.NodeFacts returns them): each fact lasts until its node's
// next one, the last until the window's end.
func (u *Utilization) AddNodes(facts []NodeFact) {
	for i := range facts {
		f := &facts[i]
		until := u.end
		if i+1 < len(facts) && facts[i+1].Node == f.Node {
			until = facts[i+1].At
		}
		secs := u.overlap(f.At, until)
		if secs == 0 {
			continue
		}
		for _, t := range []struct {
			sum   *tresTime
			count int
		}{{&u.cpu, f.CPUs}, {&u.gpu, f.GPUs}} {
			x := secs * float64(t.count)
			switch f.State {
			case NodeUp:
				t.sum.up += x
			case NodeDown:
				t.sum.down += x
			case NodePlannedDown:
				t.sum.plannedDown += x
			}
		}
	}
}

// AddRun adds a run's allocated time (its share of its totals that falls
// in the window) and its wait.
func (u *Utilization) AddRun(r *Run) {
	if !r.Start.IsZero() && r.End.After(r.Start) {
		share := u.overlap(r.Start, r.End) / r.End.Sub(r.Start).Seconds()
		u.cpu.alloc += share * r.CPUSeconds
		u.gpu.alloc += share * r.GPUSeconds
	}
	if from, to, ok := r.Waited(); ok {
		secs := u.overlap(from, to)
		u.cpu.planned += secs * float64(r.CPUs)
		u.gpu.planned += secs * float64(r.GPUs)
	}
}

// Result returns the rows of cpu and, when the cluster had GPUs in the
// window, gres/gpu. Allocated time beyond what the nodes reported is not
// shown (sreport's Over Comm); allocated time on a node while it was down
// or drained (a draining node's last jobs) comes out of its down time, as
// slurmdbd's rollup takes it; planned time is at most what was left idle.
func (u *Utilization) Result() []api.ClusterUtilization {
	out := []api.ClusterUtilization{u.cpu.row("cpu", u.end.Sub(u.start))}
	if u.gpu.up+u.gpu.down+u.gpu.plannedDown > 0 {
		out = append(out, u.gpu.row("gres/gpu", u.end.Sub(u.start)))
	}
	return out
}

func (t tresTime) row(name string, window time.Duration) api.ClusterUtilization {
	reported := t.up + t.down + t.plannedDown
	r := api.ClusterUtilization{TRES: name, Reported: reported}
	r.Allocated = math.Min(t.alloc, reported)
	r.Down = math.Min(t.down, reported-r.Allocated)
	r.PlannedDown = math.Min(t.plannedDown, reported-r.Allocated-r.Down)
	r.Planned = math.Min(t.planned, reported-r.Allocated-r.Down-r.PlannedDown)
	r.Idle = math.Max(0, reported-r.Allocated-r.Down-r.PlannedDown-r.Planned)
	if window > 0 {
		r.Count = int(math.Round(reported / window.Seconds()))
	}
	return r
}
