package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"corral/api"
	"corral/qos"
)

// PutPartition adds, replaces or deletes a partition. The leader builds the
// whole partition (the current one with the request's settings applied);
// the apply checks it.
type PutPartition struct {
	Partition api.Partition `json:"partition"`
	Delete    bool          `json:"delete,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// SeedConfig seeds a new cluster's configuration from the flags of the
// first member that leads it: its partitions, the memory per CPU of jobs
// that ask for none and the scheduling policy. It applies once; on a
// cluster already seeded it changes nothing (flags only seed a new
// cluster; later changes go through PutPartition and SetConfig).
type SeedConfig struct {
	Partitions   []api.Partition `json:"partitions"`
	DefMemPerCPU int64           `json:"def_mem_per_cpu_mb"`
	Policy       string          `json:"policy"`
	// QOS are added unless a QoS of the name exists (a cluster seeded
	// since Slurm's "normal" was added gets it this way).
	QOS []api.QOS `json:"qos,omitempty"`
}

func (s *State) applyPutPartition(c *PutPartition) error {
	p := c.Partition
	if err := s.CheckPartition(&p, c.Delete); err != nil {
		return err
	}
	if c.Delete {
		delete(s.Partitions, p.Name)
		return nil
	}
	s.putPartition(p)
	return nil
}

// putPartition stores a checked partition; one marked default takes the
// mark from any other.
func (s *State) putPartition(p api.Partition) {
	p.Nodes = slices.Clone(p.Nodes)
	if p.Default {
		for _, name := range sortedKeys(s.Partitions) {
			if o := s.Partitions[name]; o.Default && name != p.Name {
				c := *o
				c.Default = false
				s.Partitions[name] = &c
			}
		}
	}
	s.Partitions[p.Name] = &p
}

// CheckPartition says why a partition change cannot be applied, or nil.
// It stores the state and preemption mode in the form the scheduler
// compares.
func (s *State) CheckPartition(p *api.Partition, del bool) error {
	if p.Name == "" {
		return errors.New("a partition needs a name")
	}
	if del {
		if s.Partitions[p.Name] == nil {
			return fmt.Errorf("partition %s: no such partition (partitions: %v)", p.Name, sortedKeys(s.Partitions))
		}
		for _, id := range slices.Sorted(maps.Keys(s.Jobs)) {
			if j := s.Jobs[id]; j.Spec.Partition == p.Name && !j.State.Terminal() {
				return fmt.Errorf("partition %s: job %d is pending or running in it; cancel its jobs or wait until they end", p.Name, id)
			}
		}
		return nil
	}
	if p.State != "" {
		st, err := api.ParsePartitionState(string(p.State))
		if err != nil {
			return fmt.Errorf("partition %s: %w", p.Name, err)
		}
		p.State = st
	}
	if p.PreemptMode != "" {
		m, err := api.ParsePreemptMode(string(p.PreemptMode))
		if err != nil {
			return fmt.Errorf("partition %s: %w", p.Name, err)
		}
		p.PreemptMode = m
	}
	switch {
	case p.MaxTime < 0 || p.DefaultTime < 0:
		return fmt.Errorf("partition %s: MaxTime and DefaultTime must be ≥ 0 (0 is unlimited)", p.Name)
	case p.MaxTime > 0 && p.DefaultTime > p.MaxTime:
		return fmt.Errorf("partition %s: DefaultTime %ds is above MaxTime %ds", p.Name, p.DefaultTime, p.MaxTime)
	case p.PriorityTier < 0 || p.MaxNodes < 0 || p.MinNodes < 0:
		return fmt.Errorf("partition %s: PriorityTier, MaxNodes and MinNodes must be ≥ 0", p.Name)
	case p.MaxNodes > 0 && p.MinNodes > p.MaxNodes:
		return fmt.Errorf("partition %s: MinNodes %d is above MaxNodes %d", p.Name, p.MinNodes, p.MaxNodes)
	}
	if err := p.CheckVM(); err != nil {
		return fmt.Errorf("partition %s: %w", p.Name, err)
	}
	return nil
}

func (s *State) applySeed(c *SeedConfig) bool {
	if s.Seeded {
		return false
	}
	for _, p := range c.Partitions {
		if s.CheckPartition(&p, false) == nil {
			s.putPartition(p)
		}
	}
	cfg := s.Config
	if c.DefMemPerCPU > 0 {
		cfg.DefMemPerCPU = c.DefMemPerCPU
	}
	if c.Policy != "" && cfg.Set("SchedulerPolicy", c.Policy) != nil {
		cfg.SchedulerPolicy = s.Config.SchedulerPolicy
	}
	s.Config = cfg
	if len(c.QOS) > 0 {
		m := maps.Clone(s.QOS) // replaced, not changed: see applyPutQOS
		for _, q := range c.QOS {
			if m[q.Name] == nil && qos.Check(&q, m) == nil {
				m[q.Name] = &q
			}
		}
		s.QOS = m
	}
	s.Seeded = true
	return true
}

// PartitionList returns the partitions: the configured ones, by name, then
// those that only node daemons name, each with its nodes (configured for
// it, or serving it), sorted. Exactly one is marked default when any is:
// the one configured so, else the one named api.DefaultPartition, else the
// first.
//
// The list is built after each entry that can change it (partitions,
// seeding, node registrations) rather than for each call: the pass reads
// it every time. The list is the state's own, replaced (never changed in
// place) when an entry changes it, so a pass may keep it after the read
// lock: callers must not change it or the partitions' node lists.
func (s *State) PartitionList() []api.Partition {
	if s.partitionList == nil {
		return s.buildPartitionList() // a state changed outside an entry (tests)
	}
	return s.partitionList
}

// buildPartitionList builds what PartitionList returns.
func (s *State) buildPartitionList() []api.Partition {
	var out []api.Partition
	byName := map[string]int{}
	members := map[string]map[string]bool{}
	for _, name := range sortedKeys(s.Partitions) {
		p := *s.Partitions[name]
		p.Nodes = slices.Clone(p.Nodes)
		byName[name] = len(out)
		members[name] = map[string]bool{}
		for _, n := range p.Nodes {
			members[name][n] = true
		}
		out = append(out, p)
	}
	for _, name := range s.NodeNames() {
		parts := s.Nodes[name].Partitions
		if len(parts) == 0 {
			parts = []string{api.DefaultPartition}
		}
		for _, pn := range parts {
			i, ok := byName[pn]
			if !ok {
				i = len(out)
				byName[pn] = i
				members[pn] = map[string]bool{}
				out = append(out, api.Partition{Name: pn})
			}
			if !members[pn][name] {
				members[pn][name] = true
				out[i].Nodes = append(out[i].Nodes, name)
			}
		}
	}
	for i := range out {
		slices.Sort(out[i].Nodes)
	}
	if len(out) > 0 && !slices.ContainsFunc(out, func(p api.Partition) bool { return p.Default }) {
		i := byName[api.DefaultPartition]
		if _, ok := byName[api.DefaultPartition]; !ok {
			i = 0
		}
		out[i].Default = true
	}
	return out
}
