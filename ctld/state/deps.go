package state

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"

	"corral/api"
)

// UpdateJob changes a job (scontrol update JobId=12 ...). Without
// Changes (every entry written before they existed) it sets a pending
// job's dependency, nil removing it; with Changes it makes those changes
// and sets the dependency only when Changes.SetDependency says so.
type UpdateJob struct {
	Now        time.Time   `json:"now"`
	ID         uint64      `json:"id"`
	Dependency *Dependency `json:"dependency"`
	// By is who asked (the request's principal), as the leader stamps it.
	By      string    `json:"by,omitempty"`
	Changes *JobEdits `json:"changes,omitempty"`
}

// JobEdits are an update's changes, as the leader checked them; nil ones
// stay. TimeLimit, Name and Comment apply to a job that has not ended,
// the others only to a pending one.
type JobEdits struct {
	TimeLimit   *int64  `json:"time_limit_s,omitempty"`
	Name        *string `json:"name,omitempty"`
	Comment     *string `json:"comment,omitempty"`
	Nice        *int    `json:"nice,omitempty"`
	Partition   *string `json:"partition,omitempty"`
	QOS         *string `json:"qos,omitempty"`
	NTasks      *int    `json:"ntasks,omitempty"`
	CPUsPerTask *int    `json:"cpus_per_task,omitempty"`
	// MemPerNode replaces the job's memory request (and any per-CPU one).
	MemPerNode    *int64     `json:"mem_per_node_mb,omitempty"`
	Begin         *time.Time `json:"begin,omitempty"`
	Throttle      *int       `json:"throttle,omitempty"`
	SetDependency bool       `json:"set_dependency,omitempty"`
	// TmpMB replaces the scratch space the job asks for (--tmp).
	TmpMB *int64 `json:"tmp_mb,omitempty"`
}

// PendingOnly names the first change that applies only to a pending job;
// "" when none does.
func (e *JobEdits) PendingOnly() string {
	switch {
	case e.Nice != nil:
		return "Nice"
	case e.Partition != nil:
		return "Partition"
	case e.QOS != nil:
		return "QOS"
	case e.NTasks != nil || e.CPUsPerTask != nil:
		return "NumCPUs"
	case e.MemPerNode != nil:
		return "MinMemoryNode"
	case e.TmpMB != nil:
		return "MinTmpDiskNode"
	case e.Begin != nil:
		return "StartTime"
	case e.Throttle != nil:
		return "ArrayTaskThrottle"
	case e.SetDependency:
		return "Dependency"
	}
	return ""
}

func (s *State) applyUpdateJob(c *UpdateJob, index uint64) error {
	j := s.editJob(c.ID)
	if j == nil {
		return fmt.Errorf("job %d: no such job", c.ID)
	}
	if c.Changes == nil {
		if j.State != api.StatePending {
			return fmt.Errorf("job %d is %s; only pending jobs can be updated", c.ID, j.State)
		}
		j.editSpec().Dependency = s.ResolveDependency(c.Dependency)
		j.Reason = api.ReasonNone
		s.putJob(j)
		return nil
	}
	e := c.Changes
	if j.State.Terminal() {
		return fmt.Errorf("job %d has ended (%s); it cannot be updated", c.ID, j.State)
	}
	if f := e.PendingOnly(); f != "" && j.State != api.StatePending {
		return fmt.Errorf("job %d is %s; %s can change only while it is pending", c.ID, j.State, f)
	}
	if e.Throttle != nil && j.Spec.Array == nil {
		return fmt.Errorf("job %d is no array; ArrayTaskThrottle applies to arrays", c.ID)
	}
	sp := j.editSpec()
	e.Apply(sp)
	if e.SetDependency {
		sp.Dependency = s.ResolveDependency(c.Dependency)
	}
	s.internSpec(sp)
	if j.State == api.StatePending && !sp.Hold {
		j.Reason = api.ReasonNone // the next pass gives the new one
	}
	s.putJob(j)
	// The nodes of a running job learn its new time limit (or name) with
	// their next desired state.
	for _, a := range s.activeAllocs(j) {
		if n := s.editNode(a.Node); n != nil {
			s.putNode(n, index)
		}
	}
	return nil
}

// Apply makes the edits on sp, all but the dependency (which the state
// resolves): the apply's, and the controller's check of the job as it
// will be. An array's spec is replaced, not changed: its task records
// share it.
func (e *JobEdits) Apply(sp *JobSpec) {
	set(&sp.TimeLimit, e.TimeLimit)
	set(&sp.Name, e.Name)
	set(&sp.Comment, e.Comment)
	set(&sp.Nice, e.Nice)
	set(&sp.Partition, e.Partition)
	set(&sp.QOS, e.QOS)
	set(&sp.NTasks, e.NTasks)
	set(&sp.CPUsPerTask, e.CPUsPerTask)
	if e.MemPerNode != nil {
		sp.MemPerNode, sp.MemPerCPU = *e.MemPerNode, 0
	}
	set(&sp.Begin, e.Begin)
	set(&sp.TmpMB, e.TmpMB)
	if e.Throttle != nil && sp.Array != nil {
		sp.Array = sp.Array.WithThrottle(*e.Throttle)
	}
}

// set stores *v in *dst when v is given.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// ResolveDependency returns d with its targets resolved, parsed from the
// references users give (JobIDs): "12_5" names a task, "12" a whole array
// when job 12 is one, else the job. The controller resolves a request's
// dependency when it admits it; the apply resolves those of entries
// written before targets were typed. d itself is not changed.
func (s *State) ResolveDependency(d *Dependency) *Dependency {
	return ResolveTargets(d, func(id uint64) bool {
		j := s.Jobs[id]
		return j != nil && j.ArrayJobID == j.ID
	})
}

// ResolveTargets is ResolveDependency with isArray telling which ids name
// arrays. A reference that does not parse names nothing (its clause can
// never be met); validation refuses those before they are proposed.
func ResolveTargets(d *Dependency, isArray func(id uint64) bool) *Dependency {
	if d == nil || !slices.ContainsFunc(d.Clauses, func(c DepClause) bool { return len(c.JobIDs) > 0 }) {
		return d
	}
	out := &Dependency{Any: d.Any, Raw: d.Raw, Clauses: make([]DepClause, len(d.Clauses))}
	for i, c := range d.Clauses {
		c.Targets = slices.Clone(c.Targets)
		for _, raw := range c.JobIDs {
			ref, err := api.ParseJobRef(raw)
			t := DepTarget{Kind: DepJob, Job: ref.ID}
			switch {
			case err != nil:
				t.Job = 0
			case ref.HasTask:
				t.Kind, t.Task = DepTask, ref.Task
			case isArray(ref.ID):
				t.Kind = DepArray
			}
			c.Targets = append(c.Targets, t)
		}
		c.JobIDs = nil
		out.Clauses[i] = c
	}
	return out
}

// DepLookups returns the lookups that resolve a dependency target against
// the state (DepTarget.Records).
func (s *State) DepLookups() DepLookups {
	return DepLookups{
		Job: func(id uint64) *Job { return s.Jobs[id] },
		Task: func(array uint64, task int) *Job {
			j, _ := s.ResolveTask(api.TaskRef{Array: array, Task: task})
			return j
		},
		Array: func(id uint64) []*Job { return s.ArrayRecords(id) },
	}
}

// ArrayRecords returns every record of array id: its pending record, if it
// still has tasks to start, then each started task's, in start order.
func (s *State) ArrayRecords(id uint64) []*Job {
	j := s.Jobs[id]
	if j == nil || j.ArrayJobID != j.ID {
		return nil
	}
	var recs []*Job
	if j.IsArrayPending() {
		recs = append(recs, j)
	}
	for _, tid := range s.ArrayTasks[id] {
		if t := s.Jobs[tid]; t != nil {
			recs = append(recs, t)
		}
	}
	return recs
}

// DependencyCycle returns a cycle of waiting jobs (each waiting on the next,
// the last on the first) that giving job id the dependency dep would
// close, or nil. The graph has an edge from each pending job to each record
// its dependency names (DepTarget.Records, as the pass reads them) that is
// pending too (finished and running jobs wait
// on nothing, so no cycle passes through them); gonum's topological sort
// finds the strongly connected components that hold cycles.
func DependencyCycle(s *State, id uint64, dep *Dependency) []uint64 {
	lookups := s.DepLookups()
	targets := func(jid uint64, d *Dependency) []uint64 {
		var out []uint64
		if d == nil {
			return nil
		}
		for _, cl := range d.Clauses {
			for _, t := range cl.Targets {
				for _, tj := range t.Records(lookups) {
					if tj.State == api.StatePending {
						out = append(out, tj.ID)
					}
				}
			}
		}
		return out
	}
	for _, t := range targets(id, dep) {
		if t == id {
			return []uint64{id}
		}
	}
	g := simple.NewDirectedGraph()
	node := func(n uint64) graph.Node {
		if x := g.Node(int64(n)); x != nil {
			return x
		}
		x := simple.Node(int64(n))
		g.AddNode(x)
		return x
	}
	for pid := range s.Pending {
		d := s.Jobs[pid].Spec.Dependency
		if pid == id {
			d = dep
		}
		for _, t := range targets(pid, d) {
			if t != pid {
				g.SetEdge(g.NewEdge(node(pid), node(t)))
			}
		}
	}
	if g.Node(int64(id)) == nil {
		return nil
	}
	_, err := topo.Sort(g)
	sccs, ok := err.(topo.Unorderable)
	if !ok {
		return nil
	}
	for _, scc := range sccs {
		in := map[int64]bool{}
		for _, n := range scc {
			in[n.ID()] = true
		}
		if in[int64(id)] {
			return cycleThrough(g, int64(id), in)
		}
	}
	return nil
}

// cycleThrough finds a shortest cycle from start back to it inside one
// strongly connected component (breadth first).
func cycleThrough(g *simple.DirectedGraph, start int64, in map[int64]bool) []uint64 {
	prev := map[int64]int64{}
	queue := []int64{start}
	seen := map[int64]bool{start: true}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		succ := graph.NodesOf(g.From(cur))
		sort.Slice(succ, func(a, b int) bool { return succ[a].ID() < succ[b].ID() })
		for _, n := range succ {
			nid := n.ID()
			if !in[nid] {
				continue
			}
			if nid == start {
				path := []uint64{uint64(cur)}
				for p := cur; p != start; {
					p = prev[p]
					path = append(path, uint64(p))
				}
				// path runs backwards from cur to start.
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if !seen[nid] {
				seen[nid] = true
				prev[nid] = cur
				queue = append(queue, nid)
			}
		}
	}
	return nil
}

// CycleText writes a cycle as "12 → 13 → 12".
func CycleText(cycle []uint64) string {
	parts := make([]string, 0, len(cycle)+1)
	for _, id := range cycle {
		parts = append(parts, strconv.FormatUint(id, 10))
	}
	parts = append(parts, strconv.FormatUint(cycle[0], 10))
	return strings.Join(parts, " → ")
}
