package noded

import (
	"slices"
	"strings"
	"testing"

	"corral/api"
)

func TestJobEnv(t *testing.T) {
	job := &api.Job{
		ID: 42, CPUs: 8, MemMB: 2048, Restarts: 1,
		Spec: api.JobSpec{
			Name: "train", User: "alice", Account: "", Partition: "gpu", QOS: "high",
			SubmitDir: "/home/alice/run", NTasks: 2, CPUsPerTask: 4,
			Env: []string{
				"HOME=/home/alice", "LANG=C.UTF-8", "EQUALS=a=b",
				"SLURM_JOB_ID=1", "SLURM_JOB_ACCOUNT=stale", "CORRAL_JOB_QOS=stale",
			},
		},
	}
	env := JobEnv(job, "n3")
	if !slices.IsSorted(env) {
		t.Errorf("JobEnv is not sorted: %v", env)
	}
	got := make(map[string]string)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice", k)
		}
		got[k] = v
	}
	want := map[string]string{
		"HOME": "/home/alice", "LANG": "C.UTF-8", "EQUALS": "a=b", "PATH": defaultPath,
		"CORRAL_JOB_ID": "42", "SLURM_JOB_ID": "42", "SLURM_JOBID": "42",
		"CORRAL_JOB_NAME": "train", "SLURM_JOB_NAME": "train",
		"CORRAL_SUBMIT_DIR": "/home/alice/run", "SLURM_SUBMIT_DIR": "/home/alice/run",
		"CORRAL_CPUS_ON_NODE": "8", "SLURM_CPUS_ON_NODE": "8",
		"CORRAL_JOB_NODELIST": "n3", "SLURM_JOB_NODELIST": "n3", "SLURM_NODELIST": "n3",
		"CORRAL_NODENAME": "n3", "SLURMD_NODENAME": "n3",
		"CORRAL_JOB_NUM_NODES": "1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NNODES": "1",
		"CORRAL_NODEID": "0", "SLURM_NODEID": "0",
		"CORRAL_TASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "2",
		"CORRAL_JOB_CPUS_PER_NODE": "8", "SLURM_JOB_CPUS_PER_NODE": "8",
		"CORRAL_NTASKS": "2", "SLURM_NTASKS": "2", "SLURM_NPROCS": "2",
		"CORRAL_CPUS_PER_TASK": "4", "SLURM_CPUS_PER_TASK": "4",
		"CORRAL_MEM_PER_NODE": "2048", "SLURM_MEM_PER_NODE": "2048",
		"CORRAL_JOB_PARTITION": "gpu", "SLURM_JOB_PARTITION": "gpu",
		"CORRAL_JOB_USER": "alice", "SLURM_JOB_USER": "alice",
		"CORRAL_JOB_QOS": "high", "SLURM_JOB_QOS": "high",
		"CORRAL_RESTART_COUNT": "1", "SLURM_RESTART_COUNT": "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	// No account: the stale exported value must go, not linger.
	for _, k := range []string{"CORRAL_JOB_ACCOUNT", "SLURM_JOB_ACCOUNT"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s=%q set for a job without an account", k, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("JobEnv has %d variables, want %d: %v", len(got), len(want), env)
	}
}

func TestJobEnvDefaults(t *testing.T) {
	job := &api.Job{ID: 1, Spec: api.JobSpec{Env: []string{"PATH=/opt/bin"}}}
	env := JobEnv(job, "n1")
	for _, want := range []string{"PATH=/opt/bin", "CORRAL_CPUS_ON_NODE=1", "SLURM_NTASKS=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("JobEnv lacks %s: %v", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "SLURM_MEM_PER_NODE=") {
			t.Errorf("memory set for a job that asked for none: %s", kv)
		}
	}
}

// TestJobEnvMultiNode checks the variables of one node of a multi-node
// run: the run's nodes, this node's rank, the tasks on each node.
func TestJobEnvMultiNode(t *testing.T) {
	job := &api.Job{ID: 7, CPUs: 4, Nodes: []string{"n3", "n1", "n2"}, NodeRank: 1,
		Spec: api.JobSpec{Nodes: 3, NTasks: 0, NTasksPerNode: 2, CPUsPerTask: 2, Distribution: "cyclic"}}
	env := JobEnv(job, "n1")
	for _, want := range []string{
		"SLURM_JOB_NODELIST=n[1-3]", "CORRAL_JOB_NODELIST=n[1-3]", "SLURM_NNODES=3", "SLURM_JOB_NUM_NODES=3",
		"SLURM_NODEID=1", "CORRAL_NODEID=1", "SLURMD_NODENAME=n1", "SLURM_TASKS_PER_NODE=2(x3)", "SLURM_NTASKS=6",
		"SLURM_NTASKS_PER_NODE=2", "SLURM_CPUS_ON_NODE=4", "SLURM_JOB_CPUS_PER_NODE=4(x3)", "SLURM_DISTRIBUTION=cyclic",
	} {
		if !slices.Contains(env, want) {
			t.Errorf("JobEnv lacks %s: %v", want, env)
		}
	}
}
