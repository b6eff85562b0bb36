package state

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"

	"corral/api"
)

// UpdateJob changes a pending job's dependency (scontrol update
// JobId=12 Dependency=...). Nil removes it.
type UpdateJob struct {
	Now        time.Time   `json:"now"`
	ID         uint64      `json:"id"`
	Dependency *Dependency `json:"dependency"`
}

func (s *State) applyUpdateJob(c *UpdateJob) error {
	j := s.editJob(c.ID)
	if j == nil {
		return fmt.Errorf("job %d: no such job", c.ID)
	}
	if j.State != api.StatePending {
		return fmt.Errorf("job %d is %s; only pending jobs can be updated", c.ID, j.State)
	}
	j.Spec.Dependency = c.Dependency
	j.Reason = api.ReasonNone
	s.putJob(j)
	return nil
}

// DependencyCycle returns a cycle of waiting jobs (each waiting on the next,
// the last on the first) that giving job id the dependency dep would
// close, or nil. The graph has an edge from each pending job to each job
// its dependency names that is pending too (finished and running jobs wait
// on nothing, so no cycle passes through them); gonum's topological sort
// finds the strongly connected components that hold cycles.
func DependencyCycle(s *State, id uint64, dep *Dependency) []uint64 {
	targets := func(jid uint64, d *Dependency) []uint64 {
		var out []uint64
		if d == nil {
			return nil
		}
		for _, cl := range d.Clauses {
			for _, raw := range cl.JobIDs {
				if t, ok := refID(raw); ok {
					if tj := s.Jobs[t]; tj != nil && tj.State == api.StatePending {
						out = append(out, t)
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

// refID returns the job id a dependency reference names: 12 for "12" and
// for "12_5".
func refID(raw string) (uint64, bool) {
	r, err := api.ParseJobRef(raw)
	return r.ID, err == nil
}
