package sched

import (
	"corral/api"
)

// licenses is a pass's accounting of the cluster's licenses (Slurm's
// local licenses, SchedConfig.Licenses): what is free of each, and which
// a job of higher priority waits for. Licenses are cluster-wide, so they
// queue in priority order: once a job waits for one, later jobs that ask
// for it wait too (reason Licenses), and a run of narrower jobs cannot
// starve a wide one. A job waiting for licenses holds no reservation of
// CPUs: its start time is not known.
type licenses struct {
	free map[string]int
	held map[string]bool
}

// reset readies l for a pass over s: the totals less what active
// allocations' jobs hold (suspended ones keep theirs, as in Slurm). It
// makes nothing when the cluster has no licenses.
func (l *licenses) reset(s *Snapshot) {
	if len(s.Config.Licenses) == 0 {
		l.free, l.held = nil, nil
		return
	}
	if l.free == nil {
		l.free, l.held = map[string]int{}, map[string]bool{}
	} else {
		clear(l.free)
		clear(l.held)
	}
	for _, lic := range s.Config.Licenses {
		l.free[lic.Name] = lic.Count
	}
	for _, r := range s.Running {
		for _, lic := range r.Job.Spec.Licenses {
			l.free[lic.Name] -= lic.Count
		}
	}
}

// wait says whether job asking for want must wait for licenses; when it
// must, the licenses it asks for are held for it.
func (l *licenses) wait(want []api.License) bool {
	if len(want) == 0 {
		return false
	}
	short := false
	for _, lic := range want {
		if l.held[lic.Name] || l.free[lic.Name] < lic.Count {
			short = true
		}
	}
	if short && l.held != nil {
		for _, lic := range want {
			l.held[lic.Name] = true
		}
	}
	return short
}

// hold keeps the licenses in want for a job that waits for something else
// (CPUs, memory): later jobs that ask for them wait behind it.
func (l *licenses) hold(want []api.License) {
	if l.held == nil {
		return
	}
	for _, lic := range want {
		l.held[lic.Name] = true
	}
}

// take charges a started job's licenses.
func (l *licenses) take(want []api.License) {
	for _, lic := range want {
		l.free[lic.Name] -= lic.Count
	}
}
