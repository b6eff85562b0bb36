package ctld

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"

	"corral/api"
	"corral/submit"
)

// UpdateJob changes a pending job's dependency (scontrol update
// JobId=12 Dependency=...). Nil removes it.
type UpdateJob struct {
	Now        time.Time       `json:"now"`
	ID         uint64          `json:"id"`
	Dependency *api.Dependency `json:"dependency"`
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

func (c *Controller) handleUpdateJob(w http.ResponseWriter, r *http.Request) error {
	var req api.UpdateJobRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := submit.ValidateDependency(req.Dependency); err != nil {
		return refuseUpdate(req.ID, err)
	}
	var err error
	c.fsm.Read(func(s *State) {
		j := s.Jobs[req.ID]
		switch {
		case j == nil:
			err = notFound("job %d: no such job", req.ID)
		case j.State != api.StatePending:
			err = badRequest("job %d is %s; only pending jobs can be updated", req.ID, j.State)
		case req.Dependency != nil:
			for _, cl := range req.Dependency.Clauses {
				for _, ref := range cl.JobIDs {
					id, ok := parseJobRef(ref)
					if !ok || s.Jobs[id] == nil {
						err = &fieldError{Field: "dependency", Msg: fmt.Sprintf("job %d: --dependency=%s names %s, which is no job", req.ID, req.Dependency.Raw, ref)}
						return
					}
				}
			}
			if cycle := dependencyCycle(s, req.ID, req.Dependency); cycle != nil {
				err = &fieldError{Field: "dependency", Msg: fmt.Sprintf("job %d: --dependency=%s would make a cycle: %s; a job in a cycle could never start", req.ID, req.Dependency.Raw, cycleText(cycle))}
			}
		}
	})
	if err != nil {
		return err
	}
	if _, err := c.propose(CmdUpdateJob, &UpdateJob{Now: time.Now().UTC(), ID: req.ID, Dependency: req.Dependency}); err != nil {
		return badRequest("%v", err)
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// dependencyCycle returns a cycle of waiting jobs (each waiting on the next,
// the last on the first) that giving job id the dependency dep would
// close, or nil. The graph has an edge from each pending job to each job
// its dependency names that is pending too (finished and running jobs wait
// on nothing, so no cycle passes through them); gonum's topological sort
// finds the strongly connected components that hold cycles.
func dependencyCycle(s *State, id uint64, dep *api.Dependency) []uint64 {
	targets := func(jid uint64, d *api.Dependency) []uint64 {
		var out []uint64
		if d == nil {
			return nil
		}
		for _, cl := range d.Clauses {
			for _, raw := range cl.JobIDs {
				if t, ok := parseJobRef(raw); ok {
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

// cycleText writes a cycle as "12 → 13 → 12".
func cycleText(cycle []uint64) string {
	parts := make([]string, 0, len(cycle)+1)
	for _, id := range cycle {
		parts = append(parts, strconv.FormatUint(id, 10))
	}
	parts = append(parts, strconv.FormatUint(cycle[0], 10))
	return strings.Join(parts, " → ")
}

// refuseUpdate names the job an update was refused for, keeping the field
// of a *submit.Error.
func refuseUpdate(id uint64, err error) error {
	var se *submit.Error
	if errors.As(err, &se) {
		return &fieldError{Field: se.Field, Msg: fmt.Sprintf("job %d: %v", id, err)}
	}
	return badRequest("job %d: %v", id, err)
}
