package ctld

import (
	"testing"

	"corral/api"
)

// TestSubmitNodeSelection submits jobs that choose their nodes: names and
// features the cluster does not have are refused as Slurm refuses them,
// and what the scheduling pass does not place yet (several nodes, -w, -x,
// --constraint, --exclusive) is refused saying so.
func TestSubmitNodeSelection(t *testing.T) {
	c := startOne(t, HTTPTimeouts{}, func(cfg *Config) {
		cfg.Partitions = []api.Partition{{Name: "batch", Default: true}, {Name: "later", QueueUnfit: true}}
	})
	base := "http://" + c.HTTPAddr()
	g1 := gpuNode()
	g1.Features = []string{"intel", "ib"}
	later := gpuNode()
	later.Name, later.Partitions, later.BootID, later.Inventory, later.Features = "l1", []string{"later"}, "c", nil, []string{"amd"}
	for _, n := range []api.NodeInfo{g1, later} {
		if a := post(t, base, "/v1/nodes/register", n); a.status != 200 {
			t.Fatalf("register %s: %d %q", n.Name, a.status, a.err.Error)
		}
	}
	tests := map[string]submitCase{
		"tasks per node on one node": {edit: func(s *api.JobSpec) { s.NTasks, s.NTasksPerNode = 2, 2 }},
		"a distribution, a spread":   {edit: func(s *api.JobSpec) { s.Distribution, s.SpreadJob, s.Contiguous = "cyclic", true, true }},
		"an unknown node": {edit: func(s *api.JobSpec) { s.NodeList = "n9" }, field: "nodelist",
			want: "Invalid node name specified: --nodelist names node n9, which the cluster does not have"},
		"a node of another partition": {edit: func(s *api.JobSpec) { s.NodeList = "l1" }, field: "nodelist",
			want: "--nodelist names node l1, which is not in partition batch"},
		"an unknown node excluded": {edit: func(s *api.JobSpec) { s.Exclude = "x[1-2]" }, field: "exclude",
			want: "Invalid node name specified: --exclude names node x1"},
		"a feature no node has": {edit: func(s *api.JobSpec) { s.Constraint = "intel&gpu" }, field: "constraint",
			want: "Invalid feature specification: no node of partition batch has feature gpu (its nodes have ib, intel)"},
		"another partition's feature": {edit: func(s *api.JobSpec) { s.Constraint = "amd" }, field: "constraint",
			want: "no node of partition batch has feature amd"},
		"more nodes than the partition's": {edit: func(s *api.JobSpec) { s.Nodes, s.NTasks = 2, 2 }, field: "nodes",
			want: "Requested node configuration is not available: the job asks for 2 nodes; partition batch has 1"},
		"a known node, not placed yet": {edit: func(s *api.JobSpec) { s.NodeList = "g1" }, field: "nodes",
			want: "--nodelist: the scheduler of this release places each job on one node of its choosing, so it would not honour --nodelist; submit it without --nodelist"},
		"a known feature, not placed yet": {edit: func(s *api.JobSpec) { s.Constraint = "intel&ib" }, field: "nodes", want: "would not honour --constraint"},
		"excluded, not placed yet":        {edit: func(s *api.JobSpec) { s.Exclude = "g1" }, field: "nodes", want: "would not honour --exclude"},
		"exclusive, not placed yet":       {edit: func(s *api.JobSpec) { s.Exclusive = true }, field: "nodes", want: "would not honour --exclusive"},
		"several nodes, not placed yet": {edit: func(s *api.JobSpec) {
			s.Partition, s.Nodes, s.NodesMax, s.NTasks, s.NTasksPerNode = "later", 2, 3, 0, 1
		},
			field: "nodes", want: "a job of 2 to 3 nodes: the scheduler of this release places each job on one node of its choosing, " +
				"so it cannot run a job of 2 to 3 nodes yet; submit it on one node (-N 1, the default)"},
		"two nodes, not placed yet": {edit: func(s *api.JobSpec) { s.Partition, s.Nodes, s.NTasks = "later", 2, 2 },
			field: "nodes", want: "a job of 2 nodes: the scheduler"},
	}
	submitCases(t, base, tests)
}
