package sched

import (
	"cmp"
	"math"
	"slices"
)

// This file holds the search gang placement stands on: the earliest time
// at which k nodes are free together for a run, over the nodes' profiles.
// A job of k nodes cannot start on the node that frees up first, as a
// single-node job does: it needs k nodes free over the same window, so
// EASY and conservative backfill reserve it that window on k nodes, and a
// narrow job backfills in front of it only where it ends before the
// window or leaves room in it. The pass does not place multi-node jobs
// yet (the controllers refuse them at submit, docs/scheduling.md); this
// is the part of it that does not depend on how the nodes are chosen.

// gangNode is one candidate node of a gang: its profile and what the
// job's part needs on it (a part's share, or the whole node for
// --exclusive; memory with the node runner's overhead).
type gangNode struct {
	p    profile
	cpus int
	mem  int64
}

// startWindow is a closed span of start times [from, to]; to is
// math.MaxInt64 when every later start fits too.
type startWindow struct{ from, to int64 }

// startWindows appends to out the times at or after from at which cpus
// and mem stay free for dur on p, as closed spans in time order. A run of
// steps with room from a to b (the next step without room, or for ever)
// holds every start from a to b-dur.
func (p profile) startWindows(out []startWindow, from, dur int64, cpus int, mem int64) []startWindow {
	var open int64 // start of the current run of steps with room, if inRun
	inRun := false
	for i := range p {
		room := p[i].cpus >= cpus && p[i].mem >= mem
		switch {
		case room && !inRun:
			open, inRun = p[i].at, true
		case !room && inRun:
			if lo, hi := max(open, from), p[i].at-dur; lo <= hi {
				out = append(out, startWindow{lo, hi})
			}
			inRun = false
		}
	}
	if inRun {
		out = append(out, startWindow{max(open, from), math.MaxInt64})
	}
	return out
}

// gangEvent is a node's start window opening (on) or closing (the first
// start time after the window) during the sweep.
type gangEvent struct {
	at   int64
	on   bool
	node int
}

// gangStart returns the earliest time at or after from at which k of
// nodes can each hold their part for dur, and which k (indexes into
// nodes, the first k in nodes' order of those that can): false when that
// never happens. The earliest such time is from or a step of some node's
// profile, and each node's possible starts are a few spans, so one sweep
// over the spans' edges finds it: O(S log S) in the nodes' steps S.
func gangStart(nodes []gangNode, from, dur int64, k int) (int64, []int, bool) {
	if k <= 0 || k > len(nodes) {
		return 0, nil, false
	}
	var events []gangEvent
	var ws []startWindow
	for i := range nodes {
		n := &nodes[i]
		ws = n.p.startWindows(ws[:0], from, dur, n.cpus, n.mem)
		for _, w := range ws {
			events = append(events, gangEvent{at: w.from, on: true, node: i})
			if w.to < math.MaxInt64 {
				events = append(events, gangEvent{at: w.to + 1, node: i})
			}
		}
	}
	// The count is read once every event of a time is applied, so a
	// window closing at t (its last start t-1) and one opening at t never
	// count together, whatever their order.
	slices.SortFunc(events, func(a, b gangEvent) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.node, b.node)
	})
	active := make([]bool, len(nodes))
	count := 0
	for e := 0; e < len(events); {
		t := events[e].at
		for ; e < len(events) && events[e].at == t; e++ {
			ev := events[e]
			switch {
			case ev.on && !active[ev.node]:
				active[ev.node] = true
				count++
			case !ev.on && active[ev.node]:
				active[ev.node] = false
				count--
			}
		}
		if count >= k {
			chosen := make([]int, 0, k)
			for i := 0; len(chosen) < k; i++ {
				if active[i] {
					chosen = append(chosen, i)
				}
			}
			return t, chosen, true
		}
	}
	return 0, nil, false
}
