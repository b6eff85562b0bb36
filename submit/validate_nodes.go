package submit

import (
	"slices"
	"strconv"
	"time"

	"corral/api"
	"corral/internal/hostlist"
)

// checkNodes checks how many nodes the job asks for and which: the node
// range, tasks per node, that every node can run a task, the host lists
// (-w within the node range, -x apart from it), the constraint (its counts
// within the node range) and the distribution. Every product it allows
// stays within MaxTasks and MaxCPUs.
func checkNodes(sp *api.JobSpec, _ time.Time) error {
	lo, hi := sp.NodeRange()
	c := sp.CPUsPerTask
	switch {
	case sp.Nodes < 0 || sp.Nodes > MaxNodes:
		return fieldErr("nodes", strconv.Itoa(sp.Nodes), ErrInvalid, "--nodes must be between 1 and %d (or 0, unset: one node)", MaxNodes)
	case sp.NodesMax != 0 && (sp.NodesMax < lo || sp.NodesMax > MaxNodes):
		return fieldErr("nodes_max", strconv.Itoa(sp.NodesMax), ErrInvalid, "--nodes=MIN-MAX: MAX must be between MIN (%d) and %d (or 0, unset)", lo, MaxNodes)
	case sp.NTasksPerNode < 0 || sp.NTasksPerNode > MaxTasks || sp.NTasksPerNode > MaxCPUs/c:
		return fieldErr("ntasks_per_node", strconv.Itoa(sp.NTasksPerNode), ErrInvalid,
			"--ntasks-per-node × --cpus-per-task must be between 1 and %d CPUs (or 0, unset)", MaxCPUs)
	case sp.NTasks == 0 && (sp.NTasksPerNode > MaxTasks/hi || sp.NTasksPerNode*hi > MaxCPUs/c):
		return fieldErr("ntasks_per_node", strconv.Itoa(sp.NTasksPerNode), ErrInvalid,
			"%d nodes × %d tasks × %d CPUs: the most a job may ask for is %d tasks and %d CPUs", hi, sp.NTasksPerNode, c, MaxTasks, MaxCPUs)
	case sp.NTasks > 0 && sp.NTasks < lo:
		return fieldErr("ntasks", strconv.Itoa(sp.NTasks), ErrInvalid,
			"%d tasks on at least %d nodes: every node runs a task at least; ask for -n %d or more, or fewer nodes", sp.NTasks, lo, lo)
	case sp.NTasks > 0 && sp.NTasksPerNode > 0 && sp.NTasks > hi*sp.NTasksPerNode:
		return fieldErr("ntasks", strconv.Itoa(sp.NTasks), ErrInvalid,
			"%d tasks do not fit on %d nodes of %d tasks (--ntasks-per-node); ask for more nodes (-N) or more tasks per node", sp.NTasks, hi, sp.NTasksPerNode)
	}
	switch sp.Distribution {
	case "", "block", "cyclic":
	default:
		return fieldErr("distribution", sp.Distribution, ErrInvalid, "use block or cyclic")
	}
	include, err := checkHostList("nodelist", sp.NodeList)
	if err != nil {
		return err
	}
	if len(include) > hi {
		return fieldErr("nodelist", sp.NodeList, ErrInvalid,
			"names %d nodes, but the job may have at most %d; ask for -N %d (the job runs on every node the list names)", len(include), hi, len(include))
	}
	exclude, err := checkHostList("exclude", sp.Exclude)
	if err != nil {
		return err
	}
	for _, n := range exclude {
		if slices.Contains(include, n) {
			return fieldErr("exclude", sp.Exclude, ErrInvalid, "node %s is both in --nodelist and in --exclude", n)
		}
	}
	return checkConstraint(sp.Constraint, hi)
}

// checkHostList checks a host list field and returns its names; "" is
// none.
func checkHostList(field, v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	_, names, err := HostList(v)
	if err != nil {
		return nil, fieldErr(field, v, ErrInvalid, "%s", err.(*Error).Message)
	}
	if len(names) > 1 {
		// A repeated name would count one node twice.
		sorted := slices.Clone(names)
		slices.Sort(sorted)
		if i := firstRepeat(sorted); i >= 0 {
			return nil, fieldErr(field, v, ErrInvalid, "names node %s twice", sorted[i])
		}
	}
	return names, nil
}

func firstRepeat(sorted []string) int {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return i
		}
	}
	return -1
}

// checkConstraint checks a constraint's syntax, and that its counts fit
// a job of at most hi nodes.
func checkConstraint(v string, hi int) error {
	if v == "" {
		return nil
	}
	c, err := ParseConstraint(v)
	if err != nil {
		return fieldErr("constraint", v, ErrInvalid, "%s", err.(*Error).Message)
	}
	if need := c.NodesNeeded(); need > hi {
		return fieldErr("constraint", v, ErrInvalid, "its counts need %d nodes, but the job may have at most %d; ask for -N %d", need, hi, need)
	}
	return nil
}

// NodeNames expands a job's -w or -x host list (checked by ValidateSpec)
// into node names.
func NodeNames(list string) []string {
	if list == "" {
		return nil
	}
	names, err := hostlist.Expand(list, MaxNodes)
	if err != nil {
		return nil
	}
	return names
}
