package ctld

import (
	"fmt"
	"slices"
	"strings"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// checkNodeSelection refuses, as Slurm does at submit, a job whose -w or
// -x names a node the cluster does not have ("Invalid node name
// specified"), whose -w names a node outside its partition, whose
// constraint names a feature no node of its partition has ("Invalid
// feature specification"), or that asks for more nodes than its partition
// has. A partition without registered nodes, or one marked QueueUnfit,
// takes the job (its nodes may not have joined yet), as the fit check
// does. The syntax was checked by submit.ValidateSpec.
func checkNodeSelection(i int, sp *api.JobSpec, part *api.Partition, s *state.State) error {
	if len(part.Nodes) == 0 || part.QueueUnfit {
		return nil
	}
	for _, n := range submit.NodeNames(sp.NodeList) {
		switch {
		case s.Nodes[n] == nil:
			return refuse(i, "nodelist", "Invalid node name specified: --nodelist names node %s, which the cluster does not have", n)
		case !slices.Contains(part.Nodes, n):
			return refuse(i, "nodelist", "Requested node configuration is not available: --nodelist names node %s, which is not in partition %s", n, part.Name)
		}
	}
	for _, n := range submit.NodeNames(sp.Exclude) {
		if s.Nodes[n] == nil {
			return refuse(i, "exclude", "Invalid node name specified: --exclude names node %s, which the cluster does not have", n)
		}
	}
	if lo, _ := sp.NodeRange(); lo > len(part.Nodes) {
		return refuse(i, "nodes", "Requested node configuration is not available: the job asks for %d nodes; partition %s has %d", lo, part.Name, len(part.Nodes))
	}
	if sp.Constraint == "" {
		return nil
	}
	c, err := submit.ParseConstraint(sp.Constraint)
	if err != nil {
		return refuseSpec(i, err)
	}
	for _, f := range c.Features() {
		if !slices.ContainsFunc(part.Nodes, func(n string) bool { return s.Nodes[n] != nil && s.Nodes[n].HasFeature(f) }) {
			return refuse(i, "constraint", "Invalid feature specification: no node of partition %s has feature %s (%s)", part.Name, f, partitionFeatures(part, s))
		}
	}
	return nil
}

// partitionFeatures lists the features of a partition's nodes, for a
// refusal.
func partitionFeatures(part *api.Partition, s *state.State) string {
	var all []string
	for _, name := range part.Nodes {
		if n := s.Nodes[name]; n != nil {
			all = append(all, n.ActiveFeatures()...)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) == 0 {
		return "its nodes have none; an operator sets them with corral noded --features or corral node update NAME Features=..."
	}
	const most = 20
	if len(all) > most {
		return "its nodes have " + strings.Join(all[:most], ", ") + fmt.Sprintf(" and %d more", len(all)-most)
	}
	return "its nodes have " + strings.Join(all, ", ")
}

// refuseUnplaced refuses what the scheduling pass does not place yet: a
// job of more than one node, or one that chooses its nodes (-w, -x,
// --constraint, --exclusive). The request is valid (submit.ValidateSpec
// took it); the refusal says so, and that the pass cannot honour it yet,
// rather than keeping a job that would wait for ever or run on a node it
// did not ask for.
func refuseUnplaced(i int, sp *api.JobSpec) error {
	const pass = "the scheduler of this release places each job on one node of its choosing"
	if lo, hi := sp.NodeRange(); hi > 1 {
		what := fmt.Sprintf("a job of %d nodes", lo)
		if hi > lo {
			what = fmt.Sprintf("a job of %d to %d nodes", lo, hi)
		}
		return refuse(i, "nodes", "%s: %s, so it cannot run %s yet; submit it on one node (-N 1, the default), where srun's steps share that node", what, pass, what)
	}
	opt := ""
	switch {
	case sp.NodeList != "":
		opt = "--nodelist"
	case sp.Exclude != "":
		opt = "--exclude"
	case sp.Constraint != "":
		opt = "--constraint"
	case sp.Exclusive:
		opt = "--exclusive"
	default:
		return nil
	}
	return refuse(i, "nodes", "%s: %s, so it would not honour %s; submit it without %s", opt, pass, opt, opt)
}
