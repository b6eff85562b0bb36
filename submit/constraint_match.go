package submit

// This file decides whether a set of nodes satisfies a constraint: the
// check the scheduling pass makes of the nodes it chose and the state's
// apply makes again of a start (both pure, so every replica agrees).

// SatisfiedBy reports whether nodes, each given by the features it has,
// satisfy c as a job's nodes: every node satisfies All; each Counted
// expression holds on at least its count of them; with Match, one
// alternative holds on every node; with Split, disjoint sets of nodes of
// the given sizes satisfy their expressions.
func (c *Constraint) SatisfiedBy(nodes []func(feature string) bool) bool {
	if c.All != nil {
		for _, has := range nodes {
			if !c.All.Holds(has) {
				return false
			}
		}
	}
	for _, x := range c.Counted {
		n := 0
		for _, has := range nodes {
			if x.Expr.Holds(has) {
				n++
			}
		}
		if n < x.Count {
			return false
		}
	}
	if len(c.Match) > 0 && !matchingOr(c.Match, nodes) {
		return false
	}
	return len(c.Split) == 0 || splitFits(c.Split, nodes)
}

// matchingOr reports whether one alternative holds on every node.
func matchingOr(alts []*FeatureExpr, nodes []func(string) bool) bool {
	for _, alt := range alts {
		all := true
		for _, has := range nodes {
			if !alt.Holds(has) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// splitFits reports whether disjoint sets of nodes of the terms' counts
// satisfy the terms: a flow from the terms (each its count) to the nodes
// (each one), through the terms each node satisfies, that carries every
// count. Nodes that satisfy the same terms are one class, so the network
// has at most len(nodes) + len(terms) + 2 vertices however many nodes
// alike there are.
func splitFits(terms []CountedExpr, nodes []func(string) bool) bool {
	need := 0
	for _, t := range terms {
		need += t.Count
	}
	if need > len(nodes) {
		return false
	}
	classes := map[uint64]int{}
	var order []uint64
	for _, has := range nodes {
		var mask uint64
		for i, t := range terms {
			if i < 64 && t.Expr.Holds(has) {
				mask |= 1 << i
			}
		}
		if mask == 0 {
			continue
		}
		if classes[mask] == 0 {
			order = append(order, mask)
		}
		classes[mask]++
	}
	// Vertices: 0 the source, 1..T the terms, then the classes, then the
	// sink.
	T, C := len(terms), len(order)
	g := newFlow(T + C + 2)
	sink := T + C + 1
	for i, t := range terms {
		g.edge(0, 1+i, t.Count)
		for k, mask := range order {
			if i < 64 && mask&(1<<i) != 0 {
				g.edge(1+i, 1+T+k, t.Count)
			}
		}
	}
	for k, mask := range order {
		g.edge(1+T+k, sink, classes[mask])
	}
	return g.maxFlow(0, sink) == need
}

// flow is a small flow network for Dinic's algorithm.
type flow struct {
	head  [][]int // edge indexes by vertex
	to    []int
	cap   []int
	level []int
	next  []int
}

func newFlow(n int) *flow {
	return &flow{head: make([][]int, n), level: make([]int, n), next: make([]int, n)}
}

// edge adds u→v of capacity c and its residual v→u.
func (g *flow) edge(u, v, c int) {
	g.head[u] = append(g.head[u], len(g.to))
	g.to, g.cap = append(g.to, v), append(g.cap, c)
	g.head[v] = append(g.head[v], len(g.to))
	g.to, g.cap = append(g.to, u), append(g.cap, 0)
}

func (g *flow) maxFlow(s, t int) int {
	total := 0
	for g.levels(s, t) {
		clear(g.next)
		for {
			f := g.push(s, t, int(^uint(0)>>1))
			if f == 0 {
				break
			}
			total += f
		}
	}
	return total
}

// levels numbers the vertices by their distance from s over edges with
// room; it reports whether t is reachable.
func (g *flow) levels(s, t int) bool {
	for i := range g.level {
		g.level[i] = -1
	}
	g.level[s] = 0
	queue := []int{s}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, e := range g.head[u] {
			if v := g.to[e]; g.cap[e] > 0 && g.level[v] < 0 {
				g.level[v] = g.level[u] + 1
				queue = append(queue, v)
			}
		}
	}
	return g.level[t] >= 0
}

// push sends up to limit from u towards t along the levels.
func (g *flow) push(u, t, limit int) int {
	if u == t {
		return limit
	}
	for ; g.next[u] < len(g.head[u]); g.next[u]++ {
		e := g.head[u][g.next[u]]
		v := g.to[e]
		if g.cap[e] <= 0 || g.level[v] != g.level[u]+1 {
			continue
		}
		if f := g.push(v, t, min(limit, g.cap[e])); f > 0 {
			g.cap[e] -= f
			g.cap[e^1] += f
			return f
		}
	}
	return 0
}
