package noded

import (
	"sort"
	"strconv"
	"strings"

	"corral/api"
	"corral/internal/hostlist"
)

// defaultPath is the PATH a job gets when its submitter exported none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// JobEnv returns the environment a job runs with on node: the environment
// exported at submit (job.Spec.Env), overlaid with the job's own variables
// under both the CORRAL_ and the Slurm names, so Slurm scripts work
// unchanged. A variable whose value is empty (no account, say) is removed
// rather than left with a stale value exported from a submitting job. PATH
// gets a default when none was exported. The result is sorted by name.
func JobEnv(job *api.Job, node string) []string {
	env := make(map[string]string, len(job.Spec.Env)+40)
	for _, kv := range job.Spec.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		env[k] = v
	}
	if env["PATH"] == "" {
		env["PATH"] = defaultPath
	}
	for _, v := range jobVars(job, node) {
		for _, name := range v.names {
			if v.value == "" {
				delete(env, name)
			} else {
				env[name] = v.value
			}
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

type jobVar struct {
	names []string
	value string
}

// jobVars lists the variables the daemon sets, each under every name it is
// known by.
func jobVars(job *api.Job, node string) []jobVar {
	s := &job.Spec
	cpus := job.CPUs
	if cpus <= 0 {
		cpus = s.CPUs()
	}
	mem := job.MemMB
	if mem <= 0 {
		mem = s.MemMB()
	}
	// A multi-node job's run names its nodes in rank order; a
	// single-node run is its one node.
	nodes := job.Nodes
	if len(nodes) == 0 {
		nodes = []string{node}
	}
	counts := api.TaskCounts(s.NTasks, s.NTasksPerNode, len(nodes))
	ntasks := 0
	for _, c := range counts {
		ntasks += c
	}
	ntasks = max(ntasks, 1)
	cpt := max(s.CPUsPerTask, 1)
	itoa := strconv.Itoa
	memStr := ""
	if mem > 0 {
		memStr = strconv.FormatInt(mem, 10)
	}
	id := strconv.FormatUint(job.ID, 10)
	return append([]jobVar{
		{[]string{"CORRAL_JOB_ID", "SLURM_JOB_ID", "SLURM_JOBID"}, id},
		{[]string{"CORRAL_JOB_NAME", "SLURM_JOB_NAME"}, s.Name},
		{[]string{"CORRAL_SUBMIT_DIR", "SLURM_SUBMIT_DIR"}, s.SubmitDir},
		{[]string{"CORRAL_CPUS_ON_NODE", "SLURM_CPUS_ON_NODE"}, itoa(cpus)},
		{[]string{"CORRAL_JOB_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}, hostlist.Compress(nodes)},
		{[]string{"CORRAL_NODENAME", "SLURMD_NODENAME"}, node},
		{[]string{"CORRAL_JOB_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"}, itoa(len(nodes))},
		{[]string{"CORRAL_NODEID", "SLURM_NODEID"}, itoa(job.NodeRank)},
		{[]string{"CORRAL_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, api.TasksPerNodeText(counts)},
		{[]string{"CORRAL_JOB_CPUS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE"}, cpusPerNodeText(cpus, len(nodes))},
		{[]string{"CORRAL_NTASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}, positive(s.NTasksPerNode)},
		{[]string{"CORRAL_DISTRIBUTION", "SLURM_DISTRIBUTION"}, s.Distribution},
		{[]string{"CORRAL_NTASKS", "SLURM_NTASKS", "SLURM_NPROCS"}, itoa(ntasks)},
		{[]string{"CORRAL_CPUS_PER_TASK", "SLURM_CPUS_PER_TASK"}, itoa(cpt)},
		{[]string{"CORRAL_MEM_PER_NODE", "SLURM_MEM_PER_NODE"}, memStr},
		{[]string{"CORRAL_JOB_PARTITION", "SLURM_JOB_PARTITION"}, s.Partition},
		{[]string{"CORRAL_JOB_ACCOUNT", "SLURM_JOB_ACCOUNT"}, s.Account},
		{[]string{"CORRAL_JOB_USER", "SLURM_JOB_USER"}, s.User},
		{[]string{"CORRAL_JOB_QOS", "SLURM_JOB_QOS"}, s.QOS},
		{[]string{"CORRAL_RESTART_COUNT", "SLURM_RESTART_COUNT"}, itoa(job.Restarts)},
	}, append(arrayVars(job), placementVars(job)...)...)
}

// cpusPerNodeText is SLURM_JOB_CPUS_PER_NODE: every node of a run holds
// the same CPUs, "4" on one node, "4(x3)" on three.
func cpusPerNodeText(cpus, nodes int) string {
	if nodes <= 1 {
		return strconv.Itoa(cpus)
	}
	return strconv.Itoa(cpus) + "(x" + strconv.Itoa(nodes) + ")"
}

// positive is n as text, or "" (unset) when it is not positive.
func positive(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// placementVars tell a job what it got inside its node: its GPUs (as
// UUIDs, which CUDA_VISIBLE_DEVICES accepts), MIG slices, VFs and CPUs.
func placementVars(job *api.Job) []jobVar {
	p := job.Placement
	if p == nil {
		return nil
	}
	gpus := strings.Join(append(append([]string(nil), p.GPUs...), p.MIG...), ",")
	cpus := make([]string, len(p.CPUs))
	for i, c := range p.CPUs {
		cpus[i] = strconv.Itoa(c)
	}
	return []jobVar{
		{[]string{"CORRAL_GPUS", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS"}, gpus},
		{[]string{"CORRAL_VFS"}, strings.Join(p.VFs, ",")},
		{[]string{"CORRAL_CPUS"}, strings.Join(cpus, ",")},
	}
}

// arrayVars are the variables of a task of an array; none for other jobs.
func arrayVars(job *api.Job) []jobVar {
	if !job.IsArrayTask() {
		return nil
	}
	itoa := strconv.Itoa
	vars := []jobVar{
		{[]string{"CORRAL_ARRAY_JOB_ID", "SLURM_ARRAY_JOB_ID"}, strconv.FormatUint(job.ArrayJobID, 10)},
		{[]string{"CORRAL_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_ID"}, itoa(job.ArrayTaskID)},
	}
	if a := job.Spec.Array; a != nil {
		set := api.NewIndexSet(a.Ranges)
		step := ""
		if len(set.Ranges) == 1 {
			step = itoa(set.Ranges[0].Step)
		}
		vars = append(vars,
			jobVar{[]string{"CORRAL_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_COUNT"}, itoa(set.Len())},
			jobVar{[]string{"CORRAL_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MIN"}, itoa(set.Min())},
			jobVar{[]string{"CORRAL_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_MAX"}, itoa(set.Max())},
			jobVar{[]string{"CORRAL_ARRAY_TASK_STEP", "SLURM_ARRAY_TASK_STEP"}, step},
		)
	}
	return vars
}
