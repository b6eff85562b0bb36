package sched

import (
	"fmt"
	"runtime/debug"
	"strings"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// The bounds of what one pass computes with. A job's are the controller's
// own (package submit, which every request passes through): a record beyond
// them reached the state some other way (an older controller's entry, a
// bug), and is reported InvalidJob and held instead of being scheduled, so
// one record can never stop the pass. A node's are looser than what its
// registration is checked against.
const (
	// MaxCPUs bounds a node's CPUs.
	MaxCPUs = 1 << 20
	// MaxMemMB bounds a job's memory and a node's (1 EiB in MiB).
	MaxMemMB = submit.MaxMemoryMiB
	// MaxDevices bounds a node's GPUs and SR-IOV functions, and the VFs of
	// one function.
	MaxDevices = 1 << 16
	// MaxHugepages bounds a NUMA node's hugepages of one size.
	MaxHugepages = 1 << 40
	// MaxNUMANodes bounds a node's NUMA nodes.
	MaxNUMANodes = 1 << 10
)

// knownDependencyTypes are the clause types the pass evaluates.
var knownDependencyTypes = map[string]bool{
	"after": true, "afterany": true, "afterok": true, "afternotok": true, "aftercorr": true, "singleton": true,
}

// CheckJob reports why the pass cannot handle a pending job, or nil. It
// checks what the pass computes with: counts in range and their products
// without overflow, index sets in canonical form, dependency types it
// knows.
func CheckJob(j *state.Job) error {
	sp := j.Spec
	switch {
	case sp == nil:
		return fmt.Errorf("the record holds no request")
	case sp.NTasks < 0 || sp.NTasks > submit.MaxTasks:
		return fmt.Errorf("ntasks=%d is outside 0..%d", sp.NTasks, submit.MaxTasks)
	case sp.CPUsPerTask < 0 || sp.CPUsPerTask > submit.MaxCPUsPerTask:
		return fmt.Errorf("cpus_per_task=%d is outside 0..%d", sp.CPUsPerTask, submit.MaxCPUsPerTask)
	case sp.NTasksPerNode < 0 || sp.NTasksPerNode > submit.MaxTasks:
		return fmt.Errorf("ntasks_per_node=%d is outside 0..%d", sp.NTasksPerNode, submit.MaxTasks)
	case int64(max(api.TasksOn(sp.NTasks, sp.NTasksPerNode, 1), 1))*int64(max(sp.CPUsPerTask, 1)) > submit.MaxCPUs:
		return fmt.Errorf("ntasks × cpus_per_task = %d × %d is more than %d CPUs", api.TasksOn(sp.NTasks, sp.NTasksPerNode, 1), sp.CPUsPerTask, submit.MaxCPUs)
	case sp.Nodes < 0 || sp.NodesMax < 0:
		return fmt.Errorf("nodes=%d, nodes_max=%d: negative", sp.Nodes, sp.NodesMax)
	case sp.Nodes > 1 || sp.NodesMax > 1:
		lo, hi := api.NodeRange(sp.Nodes, sp.NodesMax)
		return fmt.Errorf("nodes=%d-%d: this release's pass places jobs on one node", lo, hi)
	case sp.NodeList != "" || sp.Exclude != "" || sp.Constraint != "" || sp.Exclusive:
		return fmt.Errorf("nodelist, exclude, constraint and exclusive: this release's pass does not honour them")
	case sp.MemPerNode < 0 || sp.MemPerNode > MaxMemMB:
		return fmt.Errorf("mem_per_node_mb=%d is outside 0..%d", sp.MemPerNode, MaxMemMB)
	case sp.MemPerCPU < 0 || sp.MemPerCPU > MaxMemMB || sp.MemPerCPU*int64(sp.CPUs()) > MaxMemMB:
		return fmt.Errorf("mem_per_cpu_mb=%d for %d CPUs is outside 0..%d MiB", sp.MemPerCPU, sp.CPUs(), MaxMemMB)
	case sp.TimeLimit < 0 || sp.TimeLimit > submit.MaxTimeLimit:
		return fmt.Errorf("time_limit_s=%d is outside 0..%d", sp.TimeLimit, submit.MaxTimeLimit)
	case sp.Nice < -submit.MaxNice || sp.Nice > submit.MaxNice:
		return fmt.Errorf("nice=%d is outside ±%d", sp.Nice, submit.MaxNice)
	}
	if len(sp.Gres) > 0 || len(sp.Hugepages) > 0 {
		if err := checkDevices(sp); err != nil {
			return err
		}
	}
	if sp.Dependency != nil {
		if err := checkDependency(sp.Dependency); err != nil {
			return err
		}
	}
	if a := sp.Array; a != nil && a.Throttle < 0 {
		return fmt.Errorf("array task limit %%%d is negative", a.Throttle)
	}
	if j.ArrayPending != nil {
		if j.ArrayPending.Empty() {
			return fmt.Errorf("array record holds no task (its --array named none the controller could keep)")
		}
		if err := checkIndexSet(j.ArrayPending); err != nil {
			return fmt.Errorf("array tasks %s: %w", j.ArrayPending, err)
		}
	}
	return nil
}

func checkDevices(sp *state.JobSpec) error {
	if len(sp.Gres) > submit.MaxGresEntries {
		return fmt.Errorf("%d gres entries: at most %d", len(sp.Gres), submit.MaxGresEntries)
	}
	for _, g := range sp.Gres {
		if g.Count < 1 || g.Count > submit.MaxGresCount {
			return fmt.Errorf("gres %s count %d is outside 1..%d", g.Name, g.Count, submit.MaxGresCount)
		}
	}
	for _, h := range sp.Hugepages {
		if h.SizeKB < 1 || h.Count < 1 || h.Count > MaxMemMB*1024/h.SizeKB {
			return fmt.Errorf("hugepages %d × %d KiB is outside 1 page of a positive size .. %d MiB", h.Count, h.SizeKB, int64(MaxMemMB))
		}
	}
	return nil
}

func checkDependency(d *state.Dependency) error {
	if d == nil {
		return nil
	}
	for _, c := range d.Clauses {
		if !knownDependencyTypes[c.Type] {
			return fmt.Errorf("dependency type %q is unknown", c.Type)
		}
		if c.Minutes < 0 || c.Minutes > submit.MaxDelayMinutes {
			return fmt.Errorf("dependency delay +%d minutes is outside 0..%d", c.Minutes, submit.MaxDelayMinutes)
		}
	}
	return nil
}

// checkIndexSet checks the form IndexSet's methods rely on: ranges sorted
// and disjoint, positive steps, no negative index, Last on the step grid.
func checkIndexSet(s *api.IndexSet) error {
	for i, r := range s.Ranges {
		switch {
		case r.Step < 1:
			return fmt.Errorf("range %d-%d has step %d", r.First, r.Last, r.Step)
		case r.First < 0 || r.Last < r.First:
			return fmt.Errorf("range %d-%d is not ascending from 0 or more", r.First, r.Last)
		case r.Last > submit.MaxArrayIndex:
			return fmt.Errorf("index %d is above the largest, %d", r.Last, submit.MaxArrayIndex)
		case (r.Last-r.First)%r.Step != 0:
			return fmt.Errorf("range %d-%d:%d ends off its step", r.First, r.Last, r.Step)
		case i > 0 && r.First <= s.Ranges[i-1].Last:
			return fmt.Errorf("ranges overlap or are out of order at %d", r.First)
		}
	}
	return nil
}

// CheckNode reports why the pass cannot place jobs on a node, or nil: its
// size and its inventory must be what placement indexes and adds up
// safely.
func CheckNode(n *state.Node) error {
	switch {
	case n.CPUs < 1 || n.CPUs > MaxCPUs:
		return fmt.Errorf("cpus=%d is outside 1..%d", n.CPUs, MaxCPUs)
	case n.MemMB < 0 || n.MemMB > MaxMemMB:
		return fmt.Errorf("mem_mb=%d is outside 0..%d", n.MemMB, MaxMemMB)
	case n.OverheadMB < 0 || n.OverheadMB > MaxMemMB:
		return fmt.Errorf("overhead_mb=%d is outside 0..%d", n.OverheadMB, MaxMemMB)
	}
	if n.Inventory == nil {
		return nil
	}
	if err := checkTopology(n.Inventory.Topology); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	inv := n.Inventory
	if len(inv.GPUs) > MaxDevices || len(inv.PFs) > MaxDevices {
		return fmt.Errorf("%d GPUs and %d SR-IOV functions: at most %d each", len(inv.GPUs), len(inv.PFs), MaxDevices)
	}
	for _, pf := range inv.PFs {
		if len(pf.VFs) > MaxDevices {
			return fmt.Errorf("SR-IOV function %s has %d VFs: at most %d", pf.Addr, len(pf.VFs), MaxDevices)
		}
	}
	return nil
}

func checkTopology(t *api.Topology) error {
	if t == nil {
		return nil
	}
	k := len(t.Nodes)
	if k > MaxNUMANodes {
		return fmt.Errorf("%d NUMA nodes: at most %d", k, MaxNUMANodes)
	}
	if len(t.Distances) != 0 && len(t.Distances) != k {
		return fmt.Errorf("distance matrix has %d rows for %d NUMA nodes", len(t.Distances), k)
	}
	for i, row := range t.Distances {
		if len(row) != k {
			return fmt.Errorf("distance row %d has %d entries for %d NUMA nodes", i, len(row), k)
		}
		for _, d := range row {
			if d < 1 {
				return fmt.Errorf("distance %d in row %d is not positive", d, i)
			}
		}
	}
	ids, cpus := map[int]bool{}, map[int]bool{}
	for _, nn := range t.Nodes {
		if nn.ID < 0 || ids[nn.ID] {
			return fmt.Errorf("NUMA node id %d is negative or repeated", nn.ID)
		}
		ids[nn.ID] = true
		if nn.MemMB < 0 || nn.MemMB > MaxMemMB {
			return fmt.Errorf("NUMA node %d: mem_mb=%d is outside 0..%d", nn.ID, nn.MemMB, MaxMemMB)
		}
		for _, c := range nn.CPUs {
			if c.ID < 0 || cpus[c.ID] {
				return fmt.Errorf("NUMA node %d: CPU id %d is negative or repeated", nn.ID, c.ID)
			}
			cpus[c.ID] = true
		}
		if len(cpus) > MaxCPUs {
			return fmt.Errorf("more than %d CPUs", MaxCPUs)
		}
		for size, h := range nn.Hugepages {
			if size < 1 || h.Total < 0 || h.Free < 0 || h.Free > MaxHugepages || h.Total > MaxHugepages {
				return fmt.Errorf("NUMA node %d: hugepages of %d KiB (%d total, %d free) are out of range", nn.ID, size, h.Total, h.Free)
			}
		}
	}
	return nil
}

// contained runs f, which handles one job (or one node's jobs), and turns a
// panic into an error carrying the first lines of its stack: a bug that one
// record triggers must not stop every other job's scheduling.
func contained(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the scheduler failed on it: %v (at %s)", r, panicSite())
		}
	}()
	f()
	return nil
}

// panicSite names the function that panicked, from the stack of a
// recovering goroutine.
func panicSite() string {
	lines := strings.Split(string(debug.Stack()), "\n")
	// The stack reads: goroutine header, then pairs of function and file
	// lines; skip past runtime frames and this package's recovery.
	for i := 1; i+1 < len(lines); i += 2 {
		fn := strings.TrimSpace(lines[i])
		if strings.HasPrefix(fn, "runtime") || strings.Contains(fn, "sched.panicSite") ||
			strings.Contains(fn, "sched.contained") || strings.HasPrefix(fn, "panic(") {
			continue
		}
		return fn + " " + strings.TrimSpace(lines[i+1])
	}
	return "unknown"
}

// checkSnapshot leaves out of the pass the pending jobs and nodes it cannot
// handle, naming them in the plan. It returns s itself when all are fine,
// else a shallow copy with the lists filtered (the caller's slices are
// never changed).
func checkSnapshot(s *Snapshot, plan *Plan) *Snapshot {
	var badJobs map[uint64]bool
	for _, j := range s.Pending {
		if err := CheckJob(j); err != nil {
			plan.invalid(j.ID, err)
			if badJobs == nil {
				badJobs = map[uint64]bool{}
			}
			badJobs[j.ID] = true
		}
	}
	var badNodes map[string]bool
	for _, n := range s.Nodes {
		if err := CheckNode(n); err != nil {
			if plan.InvalidNodes == nil {
				plan.InvalidNodes = map[string]string{}
			}
			plan.InvalidNodes[n.Name] = err.Error()
			if badNodes == nil {
				badNodes = map[string]bool{}
			}
			badNodes[n.Name] = true
		}
	}
	if badJobs == nil && badNodes == nil {
		return s
	}
	c := *s
	if badJobs != nil {
		c.Pending = make([]*state.Job, 0, len(s.Pending)-len(badJobs))
		for _, j := range s.Pending {
			if !badJobs[j.ID] {
				c.Pending = append(c.Pending, j)
			}
		}
	}
	if badNodes != nil {
		c.Nodes = make([]*state.Node, 0, len(s.Nodes)-len(badNodes))
		for _, n := range s.Nodes {
			if !badNodes[n.Name] {
				c.Nodes = append(c.Nodes, n)
			}
		}
		c.Running = make([]Run, 0, len(s.Running))
		for _, r := range s.Running {
			if !badNodes[r.Alloc.Node] {
				c.Running = append(c.Running, r)
			}
		}
	}
	return &c
}

// invalid records that the pass cannot handle job id.
func (p *Plan) invalid(id uint64, err error) {
	if p.Invalid == nil {
		p.Invalid = map[uint64]string{}
	}
	p.Invalid[id] = err.Error()
	p.Reasons[id] = api.ReasonInvalidJob
}

// placeAll places the ready jobs in order, each contained: when placing
// one fails, whatever the attempt added to the plan is taken back and the
// job is named invalid. Resources the attempt took in the pass's own
// accounting stay taken for the rest of the pass, which can only delay
// another job by one pass (the plan applier re-checks every start against
// the state).
func (pl *placer) placeAll(ready []*state.Job, plan *Plan) {
	var starts, preempts, cancels, moves int
	eachContained(len(ready), func(i int) {
		starts, preempts, cancels, moves = len(plan.Starts), len(plan.Preemptions), len(plan.Cancels), len(plan.Migrations)
		if j := ready[i]; j.IsArrayPending() {
			pl.placeArray(j, plan)
		} else {
			pl.place(j, plan, -1)
		}
	}, func(i int, err error) {
		id := ready[i].ID
		plan.Starts = plan.Starts[:starts]
		plan.Preemptions = plan.Preemptions[:preempts]
		plan.Cancels = plan.Cancels[:cancels]
		plan.Migrations = plan.Migrations[:moves] // a preemption's moves
		delete(pl.estimates, id)
		delete(pl.reservations, id)
		plan.invalid(id, err)
	})
}

// eachContained calls f(i) for every i below n, contained: a failure in
// f(i) is handed to failed(i, err) and the loop goes on with i+1. One
// recovery serves the whole loop until something fails, rather than one
// per call: in a pass over a short queue, setting up a recovery per job
// cost about as much as placing the job.
func eachContained(n int, f func(i int), failed func(i int, err error)) {
	i := 0
	for i < n {
		err := contained(func() {
			for ; i < n; i++ {
				f(i)
			}
		})
		if err == nil {
			return
		}
		failed(i, err)
		i++
	}
}
