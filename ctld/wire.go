package ctld

import (
	"corral/api"
	"corral/ctld/state"
)

// This file converts between the wire (package api: what clients and node
// daemons send and read) and the state's own records (package ctld/state:
// what the log and snapshots hold). The two are kept apart so that a change
// to one is a deliberate change to the other, made here.

// stateSpec is a validated request as the state records it.
func stateSpec(sp *api.JobSpec) state.JobSpec {
	out := state.JobSpec{
		RequestID: sp.RequestID, Name: sp.Name, User: sp.User, Account: sp.Account, Partition: sp.Partition,
		QOS: sp.QOS, Args: sp.Args, SubmitDir: sp.SubmitDir, WorkDir: sp.WorkDir,
		NTasks: sp.NTasks, CPUsPerTask: sp.CPUsPerTask, Nodes: sp.Nodes, MemPerNode: sp.MemPerNode,
		MemPerCPU: sp.MemPerCPU, TimeLimit: sp.TimeLimit, Output: sp.Output, Error: sp.Error,
		Requeue: sp.Requeue, Hold: sp.Hold, KillOnInvalidDep: sp.KillOnInvalidDep, Begin: sp.Begin,
		Comment: sp.Comment, Nice: sp.Nice, Gres: sp.Gres, Hugepages: sp.Hugepages, NUMA: sp.NUMA,
		Dependency: stateDependency(sp.Dependency), Array: sp.Array, Image: sp.Image, Signal: sp.Signal,
		NoMigrate: sp.NoMigrate, NoWarm: sp.NoWarm, Licenses: sp.Licenses, Reservation: sp.Reservation, MailType: sp.MailType, MailUser: sp.MailUser,
		Deadline: sp.Deadline, OpenMode: sp.OpenMode, Input: sp.Input, Rlimits: sp.Rlimits, GetUserEnv: sp.GetUserEnv,
		Priority: sp.Priority, CPUsPerGPU: sp.CPUsPerGPU, Overcommit: sp.Overcommit, MemAll: sp.MemAll,
		Hint: sp.Hint, ThreadsPerCore: sp.ThreadsPerCore, NTasksPerCore: sp.NTasksPerCore, MemBind: sp.MemBind, MemNodes: sp.MemNodes,
		TmpMB:    sp.TmpMB,
		NodesMax: sp.NodesMax, NTasksPerNode: sp.NTasksPerNode, Exclusive: sp.Exclusive, NodeList: sp.NodeList,
		Exclude: sp.Exclude, Constraint: sp.Constraint, Distribution: sp.Distribution, SpreadJob: sp.SpreadJob,
		Contiguous: sp.Contiguous,
	}
	// The script and environment go inline here; submit moves them out of
	// line (state.OutOfLine) before the job is proposed.
	return state.Inline(out, sp.Script, sp.Env)
}

// stateDependency is a dependency as the request gave it, its targets
// still the references users wrote; the state resolves them
// (State.ResolveDependency) before the job is proposed.
func stateDependency(d *api.Dependency) *state.Dependency {
	if d == nil {
		return nil
	}
	out := &state.Dependency{Any: d.Any, Raw: d.Raw, Clauses: make([]state.DepClause, len(d.Clauses))}
	for i, c := range d.Clauses {
		out.Clauses[i] = state.DepClause{Type: c.Type, JobIDs: c.JobIDs, Minutes: c.Minutes}
	}
	return out
}

// apiSpec is a recorded request as the API shows it, with its script and
// environment.
func apiSpec(sp *state.JobSpec) api.JobSpec {
	out := apiSpecSlim(sp)
	out.Script, out.Env = sp.Script.Text(), sp.Env.Lines()
	return out
}

// apiSpecSlim is apiSpec without the script and environment, as job
// listings show it.
func apiSpecSlim(sp *state.JobSpec) api.JobSpec {
	return api.JobSpec{
		RequestID: sp.RequestID, Name: sp.Name, User: sp.User, Account: sp.Account, Partition: sp.Partition,
		QOS: sp.QOS, Args: sp.Args, SubmitDir: sp.SubmitDir, WorkDir: sp.WorkDir,
		NTasks: sp.NTasks, CPUsPerTask: sp.CPUsPerTask, Nodes: sp.Nodes, MemPerNode: sp.MemPerNode,
		MemPerCPU: sp.MemPerCPU, TimeLimit: sp.TimeLimit, Output: sp.Output, Error: sp.Error,
		Requeue: sp.Requeue, Hold: sp.Hold, KillOnInvalidDep: sp.KillOnInvalidDep, Begin: sp.Begin,
		Comment: sp.Comment, Nice: sp.Nice, Gres: sp.Gres, Hugepages: sp.Hugepages, NUMA: sp.NUMA,
		Dependency: apiDependency(sp.Dependency), Array: sp.Array, Image: sp.Image, Signal: sp.Signal,
		NoMigrate: sp.NoMigrate, NoWarm: sp.NoWarm, Licenses: sp.Licenses, Reservation: sp.Reservation, MailType: sp.MailType, MailUser: sp.MailUser,
		Deadline: sp.Deadline, OpenMode: sp.OpenMode, Input: sp.Input, Rlimits: sp.Rlimits, GetUserEnv: sp.GetUserEnv,
		Priority: sp.Priority, CPUsPerGPU: sp.CPUsPerGPU, Overcommit: sp.Overcommit, MemAll: sp.MemAll,
		Hint: sp.Hint, ThreadsPerCore: sp.ThreadsPerCore, NTasksPerCore: sp.NTasksPerCore, MemBind: sp.MemBind, MemNodes: sp.MemNodes,
		TmpMB:    sp.TmpMB,
		NodesMax: sp.NodesMax, NTasksPerNode: sp.NTasksPerNode, Exclusive: sp.Exclusive, NodeList: sp.NodeList,
		Exclude: sp.Exclude, Constraint: sp.Constraint, Distribution: sp.Distribution, SpreadJob: sp.SpreadJob,
		Contiguous: sp.Contiguous,
	}
}

func apiDependency(d *state.Dependency) *api.Dependency {
	if d == nil {
		return nil
	}
	out := &api.Dependency{Any: d.Any, Raw: d.Raw, Clauses: make([]api.DepClause, len(d.Clauses))}
	for i, c := range d.Clauses {
		ids := c.JobIDs
		for _, t := range c.Targets {
			ids = append(ids, t.String())
		}
		out.Clauses[i] = api.DepClause{Type: c.Type, JobIDs: ids, Minutes: c.Minutes}
	}
	return out
}

// apiJob is job j as the API shows it: its request and lifecycle, with the
// node, resources and placement of its current run or, once it ended, of
// its last one (a pending job shows none).
func apiJob(s *state.State, j *state.Job) api.Job {
	out := apiJobOf(s, j)
	out.Migrations = apiMigrations(s, j)
	return out
}

// apiJobOf is apiJob without the job's migrations.
func apiJobOf(s *state.State, j *state.Job) api.Job {
	if j.State == api.StatePending {
		return apiJobRun(j, nil)
	}
	if !j.Spec.MultiNode() {
		return apiJobRun(j, currentAlloc(s, j)) // a multi-node job never migrates
	}
	run := s.RunAllocs(j)
	switch len(run) {
	case 0:
		return apiJobRun(j, nil)
	case 1:
		return apiJobRun(j, run[0])
	}
	return withRun(apiJobRun(j, run[0]), run)
}

// currentAlloc is job j's run as users see it: its newest allocation that
// no migration gave up (a migration's source, once the job switched over,
// or the destination of an aborted one), and while a migration has not
// switched over, the source the job still runs on.
func currentAlloc(s *state.State, j *state.Job) *state.Allocation {
	if m := s.LiveMigration(j); m != nil && m.Phase.BeforeSwitch() {
		if a := s.Allocs[m.Source]; a != nil {
			return a
		}
	}
	var ended *state.Allocation
	for i := len(j.Allocs) - 1; i >= 0; i-- {
		a := s.Allocs[j.Allocs[i]]
		switch {
		case a == nil || a.Leaving:
		case a.Active():
			return a
		case ended == nil:
			ended = a
		}
	}
	if ended != nil {
		return ended
	}
	return s.LastAlloc(j)
}

// withRun adds to job out, filled in from its multi-node run's first
// allocation, the nodes of the whole run and its CPUs in all.
func withRun(out api.Job, run []*state.Allocation) api.Job {
	out.Nodes = make([]string, len(run))
	cpus := 0
	for i, a := range run {
		out.Nodes[i] = a.Node
		cpus += a.CPUs
	}
	out.CPUs = cpus
	return out
}

// apiJobRun is job j with run a (nil: none) filled in.
func apiJobRun(j *state.Job, a *state.Allocation) api.Job {
	out := apiJobRunSlim(j, a)
	out.Spec.Script, out.Spec.Env = j.Spec.Script.Text(), j.Spec.Env.Lines()
	return out
}

// apiJobRunSlim is apiJobRun without the script and environment, which
// listings never show.
func apiJobRunSlim(j *state.Job, a *state.Allocation) api.Job {
	out := api.Job{
		ID: j.ID, Spec: apiSpecSlim(j.Spec), State: j.State, Reason: j.Reason, SubmitTime: j.SubmitTime,
		StartTime: j.StartTime, EstStart: j.EstStart, EndTime: j.EndTime, ExitCode: j.ExitCode, Signal: j.Signal,
		Message: j.Message, Priority: j.Priority, Restarts: j.Restarts, ArrayJobID: j.ArrayJobID,
		ArrayTaskID: j.ArrayTaskID, ArrayPending: j.ArrayPending, CPUs: j.Spec.CPUs(), Allocs: j.Allocs,
	}
	if a == nil {
		return out
	}
	out.Node, out.CPUs, out.MemMB, out.OverheadMB, out.Placement = a.Node, a.CPUs, a.MemMB, a.OverheadMB, a.Placement
	out.StartIndex, out.SuspendedFor, out.SuspendTime = a.StartIndex, a.SuspendedFor, a.SuspendTime
	out.CPUsLent, out.PreemptedBy = a.CPUsLent, a.PreemptedBy
	out.CPUSeconds, out.PeakMemKB, out.VMStart = a.CPUSeconds, a.PeakMemKB, a.VMStart
	if a.Active() && a.Desired == state.AllocStop {
		out.FinalState = a.StopAs
	}
	return out
}

// apiNode is node n as the API shows it.
func apiNode(s *state.State, n *state.Node) api.Node {
	out := api.Node{
		NodeInfo: api.NodeInfo{
			Name: n.Name, CPUs: n.CPUs, MemMB: n.MemMB, Partitions: n.Partitions, Runner: n.Runner,
			BootID: n.BootID, Version: n.Version, Images: n.Images, Inventory: n.Inventory, Accel: n.Accel,
			OverheadMB: n.OverheadMB, APIAddr: n.APIAddr, Probing: n.Probing, Migrate: n.Migrate, CheckpointDir: n.CheckpointDir,
			TmpMB: n.TmpMB, Overlay: n.Overlay, Features: n.Features,
		},
		AllocTmpMB: n.AllocTmpMB, ActiveFeatures: n.ActiveFeatures(), FeaturesBy: n.OpFeaturesBy,
		Down: n.Down, Drain: n.Drain, Reason: n.Reason, ReasonUser: n.ReasonUser, ReasonTime: n.ReasonTime,
		DrainMigrate: n.DrainMigrate, DrainNote: n.DrainNote,
		Registered: n.Registered, LastSeen: n.LastSeen,
		AllocCPUs: n.AllocCPUs, AllocMemMB: n.AllocMemMB, AllocIndex: n.AllocIndex, Allocs: n.Allocs,
	}
	for _, id := range n.Allocs {
		if a := s.Allocs[id]; a != nil {
			out.Jobs = append(out.Jobs, a.Job)
		}
	}
	return out
}

// desired returns the allocations node name should hold: those it is to
// run or keep suspended, each with its job as the run needs it. A run
// being stopped is left out, so its daemon stops it.
func desired(s *state.State, name string) api.Desired {
	n, ok := s.Nodes[name]
	if !ok {
		return api.Desired{Node: name, Index: s.Index}
	}
	d := api.Desired{Node: name, Index: n.AllocIndex, Known: true, Allocations: []api.Allocation{}}
	for _, id := range n.Allocs {
		a := s.Allocs[id]
		j := s.Jobs[a.Job]
		if j == nil || !a.Active() || a.Desired == state.AllocStop {
			continue
		}
		run := apiJobRun(j, a)
		if j.Spec.MultiNode() {
			for _, o := range s.RunAllocs(j) {
				run.Nodes = append(run.Nodes, o.Node)
			}
		} else {
			run.Nodes = []string{a.Node}
		}
		run.NodeRank = a.Rank
		run.State = api.StateRunning
		if a.Desired == state.AllocSuspend {
			run.State = api.StateSuspended
		}
		d.Allocations = append(d.Allocations, api.Allocation{ID: a.ID, Job: run, Migration: allocMigration(s, j, a),
			Checkpoint: s.AllocCheckpoint(j, a)})
	}
	d.Checkpoints = s.NodeCheckpoints(n)
	return d
}
