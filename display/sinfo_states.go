package display

import (
	"fmt"
	"slices"
	"strings"

	"corral/api"
)

// This file reads sinfo's -t state names and builds the filter -t, -n and
// -R apply to nodes.

// nodeStateMatch selects the nodes one -t name names.
type nodeStateMatch func(n *api.Node) bool

func inState(st api.NodeState) nodeStateMatch {
	return func(n *api.Node) bool { return n.State() == st }
}

func matchNone(*api.Node) bool { return false }

// nodeStates maps sinfo's state names, long and compact, to the nodes they
// select. "drain" is any node an operator drained (drained or draining,
// down or not), as Slurm's DRAIN flag; a DOWN corral node is one that
// stopped responding, so "no_respond" selects it too. Slurm's other names
// are accepted and select no corral node, so that a site's scripts run.
var nodeStates = map[string]nodeStateMatch{
	"idle":       inState(api.NodeIdle),
	"mix":        inState(api.NodeMixed),
	"mixed":      inState(api.NodeMixed),
	"alloc":      inState(api.NodeAllocated),
	"allocated":  inState(api.NodeAllocated),
	"down":       func(n *api.Node) bool { return n.Down },
	"no_respond": func(n *api.Node) bool { return n.Down },
	"drain":      func(n *api.Node) bool { return n.Drain },
	"drained":    inState(api.NodeDrained),
	"drng":       inState(api.NodeDraining),
	"draining":   inState(api.NodeDraining),
	"unk":        inState(api.NodeUnknown),
	"unknown":    inState(api.NodeUnknown),
	"maint":      func(n *api.Node) bool { return n.Maint },
	"resv":       func(n *api.Node) bool { return len(n.Reservations) > 0 },
	"reserved":   func(n *api.Node) bool { return len(n.Reservations) > 0 },
}

// slurmOnlyStates are Slurm node states no corral node is ever in.
var slurmOnlyStates = []string{
	"blocked", "cloud", "comp", "completing", "fail", "failing", "future", "futr", "inval", "npc",
	"perfctrs", "planned", "power_down", "powered_down", "powering_down", "powering_up", "reboot",
	"reboot_issued", "reboot_requested",
}

// ParseNodeStates checks sinfo -t names (any case; "all" is every state)
// and returns the filter they make; nil selects every node.
func ParseNodeStates(names []string) (func(*api.Node) bool, error) {
	var matches []nodeStateMatch
	for _, name := range names {
		low := strings.ToLower(strings.TrimSpace(name))
		if low == "all" {
			return nil, nil
		}
		if m, ok := nodeStates[low]; ok {
			matches = append(matches, m)
			continue
		}
		if slices.Contains(slurmOnlyStates, low) {
			matches = append(matches, matchNone)
			continue
		}
		return nil, fmt.Errorf("Bad state string: %q (valid states: %s)", name, nodeStateList())
	}
	if len(matches) == 0 {
		return nil, nil
	}
	return func(n *api.Node) bool {
		return slices.ContainsFunc(matches, func(m nodeStateMatch) bool { return m(n) })
	}, nil
}

func nodeStateList() string {
	names := make([]string, 0, len(nodeStates)+1)
	for name := range nodeStates {
		names = append(names, name)
	}
	slices.Sort(names)
	return "all," + strings.Join(names, ",")
}

// reasonStates are the nodes sinfo -R lists when -t names none: down,
// drained and draining ones.
func reasonStates(n *api.Node) bool { return n.Down || n.Drain }

// nodeFilter is the filter of -t, -n, -d, -r and -R together.
func nodeFilter(opts NodesOptions) (func(*api.Node) bool, error) {
	state, err := ParseNodeStates(opts.States)
	if err != nil {
		return nil, err
	}
	if state == nil && opts.ListReasons {
		state = reasonStates
	}
	var names map[string]bool
	if len(opts.Names) > 0 {
		names = make(map[string]bool, len(opts.Names))
		for _, n := range opts.Names {
			names[n] = true
		}
	}
	return func(n *api.Node) bool {
		return (state == nil || state(n)) && (names == nil || names[n.Name]) &&
			(!opts.Dead || n.Down) && (!opts.Responding || !n.Down)
	}, nil
}
