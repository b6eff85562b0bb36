package sched

import (
	"math"

	"corral/api"
	"corral/ctld/state"
)

// Factors are a job's multifactor priority: each factor in [0,1], and the
// resulting priority, Σ weight × factor + the job's own Priority (an
// administrator's adjustment) − its nice value.
type Factors struct {
	Age, Fairshare, QOS, Partition, JobSize, Site float64
	Nice                                          int
	Priority                                      int64
}

// Priority computes j's factors and priority under the snapshot's weights.
// totalCPUs is the cluster's CPU count (the job-size factor's scale).
//
//   - age: time since submission over PriorityMaxAge, at most 1;
//   - fair-share: the association's factor (package fairshare);
//   - QoS: the QoS's priority over the highest QoS priority;
//   - partition: the job's partition's PriorityTier over the highest tier
//     (1 when no partition has a tier);
//   - job size: the job's CPUs over the cluster's;
//   - site: 0 (no site factor is set per job yet).
func Priority(j *state.Job, s *Snapshot, totalCPUs int) Factors {
	f := Factors{Nice: j.Spec.Nice, Partition: partitionFactor(j, s.Partitions)}
	c := s.Config
	if c.PriorityMaxAge > 0 {
		f.Age = min(1, max(0, s.Now.Sub(j.SubmitTime).Seconds()/float64(c.PriorityMaxAge)))
	}
	if s.Fairshare != nil {
		f.Fairshare = s.Fairshare(j.Spec.Account, j.Spec.User)
	}
	if q := s.QOS[j.Spec.QOS]; q != nil {
		if top := maxQOSPriority(s.QOS); top > 0 {
			f.QOS = float64(q.Priority) / float64(top)
		}
	}
	if totalCPUs > 0 {
		f.JobSize = min(1, float64(j.Spec.CPUs())/float64(totalCPUs))
	}
	w := c.Weights
	sum := float64(w.Age)*f.Age + float64(w.Fairshare)*f.Fairshare + float64(w.QOS)*f.QOS +
		float64(w.Partition)*f.Partition + float64(w.JobSize)*f.JobSize + float64(w.Site)*f.Site
	f.Priority = int64(math.Round(sum)) + j.Priority - int64(f.Nice)
	if j.Spec.Priority != 0 {
		f.Priority = j.Spec.Priority // fixed by an operator (--priority)
	}
	return f
}

// partitionFactor is job j's partition's tier over the highest tier; 1 when
// no partition has one.
func partitionFactor(j *state.Job, parts []api.Partition) float64 {
	top, mine := 0, 0
	for i := range parts {
		top = max(top, parts[i].PriorityTier)
		if parts[i].Name == j.Spec.Partition {
			mine = parts[i].PriorityTier
		}
	}
	if top == 0 {
		return 1
	}
	return float64(mine) / float64(top)
}

func maxQOSPriority(qos map[string]*api.QOS) int64 {
	var top int64
	for _, q := range qos {
		top = max(top, q.Priority)
	}
	return top
}

func totalCPUs(nodes []*state.Node) int {
	n := 0
	for _, nd := range nodes {
		n += nd.CPUs
	}
	return n
}

// passPriority is Priority(j, s, total).Priority for every job of one
// pass, with what the jobs share computed once (the highest QoS priority,
// the partitions' tiers) and the factors whose weight is 0 left out (they
// add nothing): the pass orders thousands of jobs per call.
type passPriority struct {
	s       *Snapshot
	total   int
	topQOS  int64
	topTier int
	tiers   map[string]int
	// plain is set when no factor has a weight: every priority is then
	// the job's own, less its nice value.
	plain bool
}

func newPassPriority(s *Snapshot) passPriority {
	w := s.Config.Weights
	p := passPriority{s: s}
	if w.Age == 0 && w.Fairshare == 0 && w.QOS == 0 && w.Partition == 0 && w.JobSize == 0 {
		p.plain = true
		return p
	}
	p.total, p.topQOS = totalCPUs(s.Nodes), maxQOSPriority(s.QOS)
	if w.Partition == 0 {
		return p // the tiers are read only for the partition factor
	}
	p.tiers = make(map[string]int, len(s.Partitions))
	for i := range s.Partitions {
		p.topTier = max(p.topTier, s.Partitions[i].PriorityTier)
		if _, seen := p.tiers[s.Partitions[i].Name]; !seen {
			p.tiers[s.Partitions[i].Name] = s.Partitions[i].PriorityTier
		}
	}
	return p
}

// of returns job j's priority, as Priority does.
func (p *passPriority) of(j *state.Job) int64 {
	if j.Spec.Priority != 0 {
		return j.Spec.Priority // fixed by an operator (--priority)
	}
	if p.plain {
		return j.Priority - int64(j.Spec.Nice)
	}
	c := p.s.Config
	w := c.Weights
	var sum float64
	if w.Age != 0 && c.PriorityMaxAge > 0 {
		sum += float64(w.Age) * min(1, max(0, p.s.Now.Sub(j.SubmitTime).Seconds()/float64(c.PriorityMaxAge)))
	}
	if w.Fairshare != 0 && p.s.Fairshare != nil {
		sum += float64(w.Fairshare) * p.s.Fairshare(j.Spec.Account, j.Spec.User)
	}
	if w.QOS != 0 && p.topQOS > 0 {
		if q := p.s.QOS[j.Spec.QOS]; q != nil {
			sum += float64(w.QOS) * (float64(q.Priority) / float64(p.topQOS))
		}
	}
	if w.Partition != 0 {
		f := 1.0
		if p.topTier != 0 {
			f = float64(p.tiers[j.Spec.Partition]) / float64(p.topTier)
		}
		sum += float64(w.Partition) * f
	}
	if w.JobSize != 0 && p.total > 0 {
		sum += float64(w.JobSize) * min(1, float64(j.Spec.CPUs())/float64(p.total))
	}
	return int64(math.Round(sum)) + j.Priority - int64(j.Spec.Nice)
}
