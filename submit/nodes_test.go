package submit

import (
	"reflect"
	"slices"
	"testing"

	"corral/api"
)

// TestParseNodes checks the options that say on which nodes and on how
// many a job runs, and what finish derives from them: the task count
// without -n, the nodes a -w list or --ntasks-per-node implies, GPUs per
// node from --gpus and --gpus-per-task.
func TestParseNodes(t *testing.T) {
	tests := map[string]struct {
		args   []string
		script string // #SBATCH lines after the #! line
		files  map[string]string
		want   func(s *api.JobSpec)
		warns  int
	}{
		"two nodes, a task each": {args: []string{"-N", "2"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks = 2, 2 }},
		"a range": {args: []string{"-N", "2-4"},
			want: func(s *api.JobSpec) { s.Nodes, s.NodesMax, s.NTasks, s.NTasksPerNode = 2, 4, 0, 1 }},
		"a range of two per node": {args: []string{"-N", "2-4", "--ntasks-per-node=2"},
			want: func(s *api.JobSpec) { s.Nodes, s.NodesMax, s.NTasks, s.NTasksPerNode = 2, 4, 0, 2 }},
		"a range with -n": {args: []string{"-N", "2-4", "-n", "8"},
			want: func(s *api.JobSpec) { s.Nodes, s.NodesMax, s.NTasks = 2, 4, 8 }},
		"tasks per node": {args: []string{"-N", "2", "--ntasks-per-node=2"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NTasksPerNode = 2, 4, 2 }},
		"tasks per node on one node": {args: []string{"--ntasks-per-node=3"},
			want: func(s *api.JobSpec) { s.NTasks, s.NTasksPerNode = 3, 3 }},
		"-n over tasks per node": {args: []string{"-n", "8", "--ntasks-per-node=4"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NTasksPerNode = 2, 8, 4 }},
		"-n and -N": {args: []string{"-n", "5", "-N", "2"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks = 2, 5 }},
		"the command line wins": {args: []string{"-N", "3"}, script: "#SBATCH -N 2\n",
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks = 3, 3 }},
		"-N 1": {args: []string{"-N", "1"},
			want: func(s *api.JobSpec) { s.Nodes = 1 }},
		"nodelist": {args: []string{"-w", "n3,n1,n2"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NodeList = 3, 3, "n[1-3]" }},
		"nodelist of one": {args: []string{"--nodelist=gpu01"},
			want: func(s *api.JobSpec) { s.NodeList = "gpu01" }},
		"nodelist under -N": {args: []string{"-N", "4", "-w", "n[1-2]"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NodeList = 4, 4, "n[1-2]" }},
		"nodelist from a file": {args: []string{"-w", "./hosts"}, files: map[string]string{"hosts": "n1\nn2\n"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NodeList = 2, 2, "n[1-2]" }},
		"nodefile": {args: []string{"-F", "hosts"}, files: map[string]string{"hosts": "n[1-2] n4"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.NodeList = 3, 3, "n[1-2,4]" }},
		"exclude": {args: []string{"-x", "n[5-8],n1"},
			want: func(s *api.JobSpec) { s.Exclude = "n[1,5-8]" }},
		"constraint": {args: []string{"-C", "intel&(ib|roce)"},
			want: func(s *api.JobSpec) { s.Constraint = "intel&(ib|roce)" }},
		"constraint with counts": {args: []string{"-N", "6", "--constraint=[r1*2&r2*4]"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.Constraint = 6, 6, "[r1*2&r2*4]" }},
		"cyclic": {args: []string{"-m", "cyclic"},
			want: func(s *api.JobSpec) { s.Distribution = "cyclic" }},
		"block with a second level": {args: []string{"--distribution=block:cyclic"}, warns: 1,
			want: func(s *api.JobSpec) { s.Distribution = "block" }},
		"star": {args: []string{"-m", "*"},
			want: func(s *api.JobSpec) { s.Distribution = "block" }},
		"exclusive, spread, contiguous": {script: "#SBATCH --exclusive --spread-job --contiguous\n",
			want: func(s *api.JobSpec) { s.Exclusive, s.SpreadJob, s.Contiguous = true, true, true }},
		"gpus split over nodes": {args: []string{"-N", "2", "--gpus=a100:4"},
			want: func(s *api.JobSpec) {
				s.Nodes, s.NTasks, s.Gres = 2, 2, []api.Gres{{Name: "gpu", Type: "a100", Count: 2}}
			}},
		"gpus per node": {args: []string{"-N", "3", "--gpus-per-node=2"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.Gres = 3, 3, []api.Gres{{Name: "gpu", Count: 2}} }},
		"gres after gpus is per node": {args: []string{"-N", "2", "--gpus=4", "--gres=gpu:3"},
			want: func(s *api.JobSpec) { s.Nodes, s.NTasks, s.Gres = 2, 2, []api.Gres{{Name: "gpu", Count: 3}} }},
		"gpus per task on nodes": {args: []string{"-N", "2", "--ntasks-per-node=4", "--gpus-per-task=1"},
			want: func(s *api.JobSpec) {
				s.Nodes, s.NTasks, s.NTasksPerNode, s.Gres = 2, 8, 4, []api.Gres{{Name: "gpu", Count: 4}}
			}},
		"gpus per task on one node": {args: []string{"-n", "3", "--gpus-per-task=2"},
			want: func(s *api.JobSpec) { s.NTasks, s.Gres = 3, []api.Gres{{Name: "gpu", Count: 6}} }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{"job.sh": "#!/bin/bash\n" + tc.script + "echo hi\n"}
			for k, v := range tc.files {
				files[k] = v
			}
			r, err := Parse(append(slices.Clone(tc.args), "job.sh"), testContext(files))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			want := baseSpec()
			want.Script = files["job.sh"]
			tc.want(&want)
			if !reflect.DeepEqual(r.Spec, want) {
				t.Errorf("Parse(%q):\n got %+v\nwant %+v", tc.args, r.Spec, want)
			}
			if len(r.Warnings) != tc.warns {
				t.Errorf("warnings %q, want %d", r.Warnings, tc.warns)
			}
		})
	}
}

// TestNodeRangeAndTasks checks the arithmetic every reader of a request
// shares: the node range and the tasks on k nodes.
func TestNodeRangeAndTasks(t *testing.T) {
	tests := map[string]struct {
		nodes, max, ntasks, perNode int
		lo, hi, cpus                int
	}{
		"unset":            {0, 0, 4, 0, 1, 1, 4},
		"fixed":            {3, 0, 6, 0, 3, 3, 6},
		"range, per node":  {2, 4, 0, 2, 2, 4, 8},
		"range, -n":        {2, 4, 5, 0, 2, 4, 5},
		"max below nodes":  {3, 2, 3, 0, 3, 3, 3},
		"per node, no max": {2, 0, 0, 3, 2, 2, 6},
	}
	for name, tc := range tests {
		s := api.JobSpec{Nodes: tc.nodes, NodesMax: tc.max, NTasks: tc.ntasks, NTasksPerNode: tc.perNode, CPUsPerTask: 1}
		lo, hi := s.NodeRange()
		if lo != tc.lo || hi != tc.hi || s.CPUs() != tc.cpus {
			t.Errorf("%s: range %d-%d, CPUs %d; want %d-%d, %d", name, lo, hi, s.CPUs(), tc.lo, tc.hi, tc.cpus)
		}
	}
}
