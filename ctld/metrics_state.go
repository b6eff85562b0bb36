package ctld

import (
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"corral/api"
	"corral/ctld/state"
	"corral/fairshare"
)

// stateCollector computes the cluster's gauges from the replicated state
// at scrape time: one pass over the jobs and one over the nodes' active
// allocations, under the state's read lock, with no series per job.
// Where the widely used Slurm exporter has a name for a figure, it is
// published under that name (slurm_queue_pending, slurm_nodes_idle,
// slurm_cpus_alloc, ...) so that its dashboards work unchanged; the rest
// are corral_*.
type stateCollector struct {
	c *Controller
}

func newStateCollector(c *Controller) *stateCollector { return &stateCollector{c: c} }

// desc makes a gauge's description.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// slurmQueueStates are the exporter's slurm_queue_* gauges and the job
// states each counts.
var slurmQueueStates = []struct {
	name   string
	states []api.JobState
}{
	{"pending", []api.JobState{api.StatePending}},
	{"running", []api.JobState{api.StateRunning, api.StateMigrating}},
	{"suspended", []api.JobState{api.StateSuspended}},
	{"cancelled", []api.JobState{api.StateCancelled}},
	{"completing", []api.JobState{api.StateCompleting}},
	{"completed", []api.JobState{api.StateCompleted}},
	{"configuring", nil},
	{"failed", []api.JobState{api.StateFailed, api.StateOutOfMemory}},
	{"timeout", []api.JobState{api.StateTimeout}},
	{"preempted", []api.JobState{api.StatePreempted}},
	{"node_fail", []api.JobState{api.StateNodeFail}},
}

// slurmNodeStates are the exporter's slurm_nodes_* gauges and the node
// states each counts (corral has no completing, error, failing,
// maintenance or reserved nodes: those stay 0).
var slurmNodeStates = []struct {
	name   string
	states []api.NodeState
}{
	{"alloc", []api.NodeState{api.NodeAllocated}},
	{"comp", nil},
	{"down", []api.NodeState{api.NodeDown}},
	{"drain", []api.NodeState{api.NodeDrained, api.NodeDraining}},
	{"err", nil},
	{"fail", nil},
	{"idle", []api.NodeState{api.NodeIdle}},
	{"maint", nil},
	{"mix", []api.NodeState{api.NodeMixed}},
	{"resv", nil},
}

var (
	allNodeStates = []api.NodeState{api.NodeIdle, api.NodeMixed, api.NodeAllocated, api.NodeDown, api.NodeDrained, api.NodeDraining, api.NodeUnknown}

	descJobs          = desc("corral_jobs", "Jobs by state and partition (each unstarted array task counts once).", "state", "partition")
	descPendingReason = desc("corral_jobs_pending_reason", "Pending jobs by the reason they wait.", "reason")
	descQueuePendDep  = desc("slurm_queue_pending_dependency", "Pending jobs waiting for a dependency.")
	descNodes         = desc("corral_nodes", "Nodes by state.", "state")
	descCPUs          = map[string]*prometheus.Desc{
		"alloc": desc("slurm_cpus_alloc", "Allocated CPUs."),
		"idle":  desc("slurm_cpus_idle", "Idle CPUs (on nodes that take jobs)."),
		"other": desc("slurm_cpus_other", "CPUs neither allocated nor idle (down, drained or probing nodes)."),
		"total": desc("slurm_cpus_total", "CPUs of every registered node."),
	}
	descGPUs = map[string]*prometheus.Desc{
		"alloc": desc("slurm_gpus_alloc", "Allocated GPUs."),
		"idle":  desc("slurm_gpus_idle", "GPUs not allocated."),
		"total": desc("slurm_gpus_total", "GPUs the nodes reported."),
	}
	descGPUUtil = desc("slurm_gpus_utilization", "Allocated GPUs as a fraction of all GPUs.")
	descMem     = map[string]*prometheus.Desc{
		"alloc": desc("corral_memory_alloc_bytes", "Memory allocated to runs (with the runners' overhead)."),
		"idle":  desc("corral_memory_idle_bytes", "Memory not allocated, on nodes that take jobs."),
		"total": desc("corral_memory_total_bytes", "Memory of every registered node."),
	}
	descPartJobsPending = desc("slurm_partition_jobs_pending", "Pending jobs by partition.", "partition")
	descPartCPUs        = map[string]*prometheus.Desc{
		"allocated": desc("slurm_partition_cpus_allocated", "Allocated CPUs by partition.", "partition"),
		"idle":      desc("slurm_partition_cpus_idle", "Idle CPUs by partition.", "partition"),
		"other":     desc("slurm_partition_cpus_other", "Other CPUs by partition.", "partition"),
		"total":     desc("slurm_partition_cpus_total", "CPUs by partition.", "partition"),
	}
	descNodeCPU = map[string]*prometheus.Desc{
		"alloc": desc("slurm_node_cpu_alloc", "Allocated CPUs per node.", "node", "status"),
		"idle":  desc("slurm_node_cpu_idle", "Idle CPUs per node.", "node", "status"),
		"other": desc("slurm_node_cpu_other", "Other CPUs per node.", "node", "status"),
		"total": desc("slurm_node_cpu_total", "CPUs per node.", "node", "status"),
	}
	descNodeMemAlloc  = desc("slurm_node_mem_alloc", "Allocated memory per node (MiB).", "node", "status")
	descNodeMemTotal  = desc("slurm_node_mem_total", "Memory per node (MiB).", "node", "status")
	descHeartbeatAge  = desc("corral_node_heartbeat_age_seconds", "Seconds since each node was last heard from.", "node")
	descAccountJobs   = map[api.JobState]*prometheus.Desc{api.StatePending: desc("slurm_account_jobs_pending", "Pending jobs by account.", "account"), api.StateRunning: desc("slurm_account_jobs_running", "Running jobs by account.", "account"), api.StateSuspended: desc("slurm_account_jobs_suspended", "Suspended jobs by account.", "account")}
	descAccountCPUs   = desc("slurm_account_cpus_running", "CPUs of running jobs by account.", "account")
	descAccountFS     = desc("slurm_account_fairshare", "Fair-share factor by account (as sshare's FairShare).", "account")
	descAccountUsage  = desc("corral_account_usage", "Decayed usage by account (billed TRES-seconds, as sshare's RawUsage), running jobs included.", "account")
	descUserJobs      = map[api.JobState]*prometheus.Desc{api.StatePending: desc("slurm_user_jobs_pending", "Pending jobs by user.", "user"), api.StateRunning: desc("slurm_user_jobs_running", "Running jobs by user.", "user"), api.StateSuspended: desc("slurm_user_jobs_suspended", "Suspended jobs by user.", "user")}
	descUserCPUs      = desc("slurm_user_cpus_running", "CPUs of running jobs by user.", "user")
	descSchedLast     = desc("slurm_scheduler_last_cycle", "Duration of the last scheduling pass, in microseconds (leader only).")
	descSchedMean     = desc("slurm_scheduler_mean_cycle", "Mean duration of the scheduling passes, in microseconds (leader only).")
	descSchedPerMin   = desc("slurm_scheduler_cycle_per_minute", "Scheduling passes in the last minute (leader only).")
	descSchedQueue    = desc("slurm_scheduler_queue_size", "Pending jobs the last scheduling pass considered (leader only).")
	descRaftLeader    = desc("corral_raft_leader", "1 when this member is the Raft leader, 0 otherwise.")
	descRaftState     = desc("corral_raft_state", "This member's Raft state (1 for the state it is in).", "state")
	descRaftTerm      = desc("corral_raft_term", "This member's current Raft term.")
	descRaftCommit    = desc("corral_raft_commit_index", "This member's Raft commit index.")
	descRaftApplied   = desc("corral_raft_applied_index", "The Raft index this member's state has applied.")
	descRaftLastIndex = desc("corral_raft_last_index", "The last Raft index in this member's log.")
	descStateJobs     = desc("corral_state_job_records", "Job records in the replicated state (finished jobs until they are purged).")
)

// Describe sends every description the collector may emit.
func (sc *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descPendingReason, descQueuePendDep, descNodes, descGPUUtil, descPartJobsPending,
		descNodeMemAlloc, descNodeMemTotal, descHeartbeatAge, descAccountCPUs, descAccountFS, descAccountUsage, descUserCPUs,
		descSchedLast, descSchedMean, descSchedPerMin, descSchedQueue, descRaftLeader, descRaftState, descRaftTerm, descRaftCommit,
		descRaftApplied, descRaftLastIndex, descStateJobs, descMigrations} {
		ch <- d
	}
	for _, q := range slurmQueueStates {
		ch <- queueDesc(q.name)
	}
	for _, n := range slurmNodeStates {
		ch <- nodesDesc(n.name)
	}
	for _, m := range []map[string]*prometheus.Desc{descCPUs, descGPUs, descMem, descPartCPUs, descNodeCPU} {
		for _, d := range m {
			ch <- d
		}
	}
	for _, m := range []map[api.JobState]*prometheus.Desc{descAccountJobs, descUserJobs} {
		for _, d := range m {
			ch <- d
		}
	}
}

var (
	queueDescs = map[string]*prometheus.Desc{}
	nodesDescs = map[string]*prometheus.Desc{}
)

func init() {
	for _, q := range slurmQueueStates {
		queueDescs[q.name] = desc("slurm_queue_"+q.name, "Jobs in the cluster in state "+strings.ToUpper(q.name)+" (as squeue -r counts them).")
	}
	for _, n := range slurmNodeStates {
		nodesDescs[n.name] = desc("slurm_nodes_"+n.name, "Nodes in state "+n.name+" (as sinfo names it).")
	}
}

func queueDesc(name string) *prometheus.Desc { return queueDescs[name] }
func nodesDesc(name string) *prometheus.Desc { return nodesDescs[name] }

// Collect reads the state once and sends its gauges, then this member's
// scheduler and Raft figures.
func (sc *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c := sc.c
	now := c.clock.Now().UTC()
	var fig clusterFigures
	c.fsm.Read(func(s *state.State) { fig = figuresOf(s, now, c.lastHeard()) })
	fig.send(ch)
	sc.collectMigrations(ch)
	sc.collectScheduler(ch, now)
	sc.collectRaft(ch)
}

// lastHeard copies the leader's record of when each node was last heard
// from (fresher than the state's, which heartbeats reach coalesced); nil
// on a follower.
func (c *Controller) lastHeard() map[string]time.Time {
	if !c.isLeading() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]time.Time, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (sc *stateCollector) collectScheduler(ch chan<- prometheus.Metric, now time.Time) {
	last, mean, perMin, queue, ok := sc.c.metrics.passes.read(now)
	if !ok || !sc.c.isLeading() {
		return
	}
	gauge(ch, descSchedLast, float64(last.Microseconds()))
	gauge(ch, descSchedMean, float64(mean.Microseconds()))
	gauge(ch, descSchedPerMin, float64(perMin))
	gauge(ch, descSchedQueue, float64(queue))
}

func (sc *stateCollector) collectRaft(ch chan<- prometheus.Metric) {
	rf := sc.c.node.raft
	st := rf.State()
	leader := 0.0
	if st == raft.Leader {
		leader = 1
	}
	gauge(ch, descRaftLeader, leader)
	for _, s := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		v := 0.0
		if s == st {
			v = 1
		}
		gauge(ch, descRaftState, v, strings.ToLower(s.String()))
	}
	gauge(ch, descRaftTerm, float64(rf.CurrentTerm()))
	gauge(ch, descRaftCommit, float64(rf.CommitIndex()))
	gauge(ch, descRaftApplied, float64(rf.AppliedIndex()))
	gauge(ch, descRaftLastIndex, float64(rf.LastIndex()))
}

// clusterFigures are the gauges one read of the state yields.
type clusterFigures struct {
	records int
	jobs    map[[2]string]int // state, partition
	reasons map[api.Reason]int
	queue   map[api.JobState]int

	nodes                          map[api.NodeState]int
	cpuAlloc, cpuIdle, cpuOther    int
	gpuAlloc, gpuTotal             int
	memAlloc, memIdle, memTotal    int64
	partPending                    map[string]int
	partCPUs                       map[string]*[4]int // allocated, idle, other, total
	perNode                        []nodeFigures
	accountJobs, userJobs          map[[2]string]int // (account|user, state)
	accountCPUs, userCPUs          map[string]int
	accountFairshare, accountUsage map[string]float64
}

// nodeFigures are one node's gauges.
type nodeFigures struct {
	name, status            string
	alloc, idle, other, cpu int
	memAlloc, mem           int64
	age                     float64
}

// figuresOf computes the figures from s: O(jobs + active allocations +
// nodes + associations).
func figuresOf(s *state.State, now time.Time, heard map[string]time.Time) clusterFigures {
	f := clusterFigures{
		records: len(s.Jobs), jobs: map[[2]string]int{}, reasons: map[api.Reason]int{}, queue: map[api.JobState]int{},
		nodes: map[api.NodeState]int{}, partPending: map[string]int{}, partCPUs: map[string]*[4]int{},
		accountJobs: map[[2]string]int{}, userJobs: map[[2]string]int{}, accountCPUs: map[string]int{}, userCPUs: map[string]int{},
	}
	// One map update per job, keyed by what the gauges group by (a few
	// hundred keys for any number of jobs), then spread over the gauges.
	groups := map[jobGroup]int{}
	for _, j := range s.Jobs {
		n := 1
		if j.ArrayPending != nil {
			n = j.ArrayPending.Len()
		}
		g := jobGroup{state: j.State, partition: j.Spec.Partition, account: j.Spec.Account, user: j.Spec.User}
		if j.State == api.StatePending {
			g.reason = j.Reason
		}
		groups[g] += n
	}
	f.addGroups(groups)
	for _, name := range sortedKeys(s.Nodes) {
		f.addNode(s, s.Nodes[name], now, heard)
	}
	fr, _ := fairshare.Compute(s.FairshareTree(now), s.FairshareAlgorithm())
	f.accountFairshare, f.accountUsage = map[string]float64{}, map[string]float64{}
	for _, x := range fr {
		if x.User == "" {
			f.accountFairshare[x.Account], f.accountUsage[x.Account] = x.FairShare, x.RawUsage
		}
	}
	return f
}

// jobGroup is what the job gauges group by: the state, the reason of a
// pending job, its partition, account and user.
type jobGroup struct {
	state                    api.JobState
	reason                   api.Reason
	partition, account, user string
}

// addGroups spreads the grouped job counts over the gauges.
func (f *clusterFigures) addGroups(groups map[jobGroup]int) {
	for g, n := range groups {
		st := g.state
		f.jobs[[2]string{string(st), g.partition}] += n
		f.queue[st] += n
		switch st {
		case api.StatePending:
			f.reasons[g.reason] += n
			f.partPending[g.partition] += n
		case api.StateMigrating:
			st = api.StateRunning
		}
		if st == api.StatePending || st == api.StateRunning || st == api.StateSuspended {
			f.accountJobs[[2]string{g.account, string(st)}] += n
			f.userJobs[[2]string{g.user, string(st)}] += n
		}
	}
}

// addNode counts one node: its state, CPUs, memory and GPUs, its
// partitions' CPUs, and what its active runs hold by account and user.
func (f *clusterFigures) addNode(s *state.State, n *state.Node, now time.Time, heard map[string]time.Time) {
	st := n.State()
	f.nodes[st]++
	takes := st == api.NodeIdle || st == api.NodeMixed || st == api.NodeAllocated
	alloc := min(n.AllocCPUs, n.CPUs)
	idle, other := 0, n.CPUs-alloc
	if takes {
		idle, other = other, 0
	}
	f.cpuAlloc += alloc
	f.cpuIdle += idle
	f.cpuOther += other
	f.memTotal += n.MemMB
	f.memAlloc += n.AllocMemMB
	if takes {
		f.memIdle += max(n.FreeMemMB(), 0)
	}
	for _, p := range n.Partitions {
		pc := f.partCPUs[p]
		if pc == nil {
			pc = &[4]int{}
			f.partCPUs[p] = pc
		}
		pc[0], pc[1], pc[2], pc[3] = pc[0]+alloc, pc[1]+idle, pc[2]+other, pc[3]+n.CPUs
	}
	if n.Inventory != nil {
		f.gpuTotal += len(n.Inventory.GPUs)
	}
	for _, id := range n.Allocs {
		a := s.Allocs[id]
		if a == nil || !a.Active() {
			continue
		}
		if a.Placement != nil {
			f.gpuAlloc += len(a.Placement.GPUs)
		}
		if j := s.Jobs[a.Job]; j != nil && (j.State == api.StateRunning || j.State == api.StateMigrating) {
			f.accountCPUs[j.Spec.Account] += a.CPUs
			f.userCPUs[j.Spec.User] += a.CPUs
		}
	}
	last := n.LastSeen
	if t, ok := heard[n.Name]; ok && t.After(last) {
		last = t
	}
	age := 0.0
	if !last.IsZero() {
		age = max(now.Sub(last).Seconds(), 0)
	}
	f.perNode = append(f.perNode, nodeFigures{name: n.Name, status: strings.ToLower(string(st)), alloc: alloc, idle: idle, other: other,
		cpu: n.CPUs, memAlloc: n.AllocMemMB, mem: n.MemMB, age: age})
}

// send emits the figures.
func (f *clusterFigures) send(ch chan<- prometheus.Metric) {
	gauge(ch, descStateJobs, float64(f.records))
	for k, v := range f.jobs {
		gauge(ch, descJobs, float64(v), k[0], k[1])
	}
	for r, v := range f.reasons {
		gauge(ch, descPendingReason, float64(v), string(r))
	}
	for _, q := range slurmQueueStates {
		v := 0
		for _, st := range q.states {
			v += f.queue[st]
		}
		gauge(ch, queueDesc(q.name), float64(v))
	}
	gauge(ch, descQueuePendDep, float64(f.reasons[api.ReasonDependency]))
	for _, st := range allNodeStates {
		gauge(ch, descNodes, float64(f.nodes[st]), string(st))
	}
	for _, n := range slurmNodeStates {
		v := 0
		for _, st := range n.states {
			v += f.nodes[st]
		}
		gauge(ch, nodesDesc(n.name), float64(v))
	}
	total := f.cpuAlloc + f.cpuIdle + f.cpuOther
	gauge(ch, descCPUs["alloc"], float64(f.cpuAlloc))
	gauge(ch, descCPUs["idle"], float64(f.cpuIdle))
	gauge(ch, descCPUs["other"], float64(f.cpuOther))
	gauge(ch, descCPUs["total"], float64(total))
	gauge(ch, descGPUs["alloc"], float64(f.gpuAlloc))
	gauge(ch, descGPUs["idle"], float64(f.gpuTotal-f.gpuAlloc))
	gauge(ch, descGPUs["total"], float64(f.gpuTotal))
	util := 0.0
	if f.gpuTotal > 0 {
		util = float64(f.gpuAlloc) / float64(f.gpuTotal)
	}
	gauge(ch, descGPUUtil, util)
	const mib = 1 << 20
	gauge(ch, descMem["alloc"], float64(f.memAlloc*mib))
	gauge(ch, descMem["idle"], float64(f.memIdle*mib))
	gauge(ch, descMem["total"], float64(f.memTotal*mib))
	for p, v := range f.partPending {
		gauge(ch, descPartJobsPending, float64(v), p)
	}
	for p, pc := range f.partCPUs {
		for i, k := range []string{"allocated", "idle", "other", "total"} {
			gauge(ch, descPartCPUs[k], float64(pc[i]), p)
		}
	}
	for _, n := range f.perNode {
		gauge(ch, descNodeCPU["alloc"], float64(n.alloc), n.name, n.status)
		gauge(ch, descNodeCPU["idle"], float64(n.idle), n.name, n.status)
		gauge(ch, descNodeCPU["other"], float64(n.other), n.name, n.status)
		gauge(ch, descNodeCPU["total"], float64(n.cpu), n.name, n.status)
		gauge(ch, descNodeMemAlloc, float64(n.memAlloc), n.name, n.status)
		gauge(ch, descNodeMemTotal, float64(n.mem), n.name, n.status)
		gauge(ch, descHeartbeatAge, n.age, n.name)
	}
	for k, v := range f.accountJobs {
		gauge(ch, descAccountJobs[api.JobState(k[1])], float64(v), k[0])
	}
	for k, v := range f.userJobs {
		gauge(ch, descUserJobs[api.JobState(k[1])], float64(v), k[0])
	}
	for a, v := range f.accountCPUs {
		gauge(ch, descAccountCPUs, float64(v), a)
	}
	for u, v := range f.userCPUs {
		gauge(ch, descUserCPUs, float64(v), u)
	}
	for a, v := range f.accountFairshare {
		gauge(ch, descAccountFS, v, a)
	}
	for a, v := range f.accountUsage {
		gauge(ch, descAccountUsage, v, a)
	}
}
