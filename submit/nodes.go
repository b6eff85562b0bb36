package submit

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"corral/internal/getopt"
	"corral/internal/hostlist"
)

// This file holds the options that say on which nodes, and on how many, a
// job runs: -N, --ntasks-per-node, --exclusive, -w, -F, -x, -C, -m,
// --spread-job, --contiguous, and how finish settles what depends on
// them (the task count, --gpus over several nodes).

// nodeOptions are the supported options of this file, in help order;
// supportedOptions lists them after -c.
var nodeOptions = []optionDef{
	{Option: optNodes, apply: applyNodes},
	{Option: getopt.Option{Long: "ntasks-per-node", Arg: req, ArgName: "N", Help: "tasks on each node (with -n, the most on one node)"},
		apply: func(b *builder, v string, _ bool) error {
			return setCount(&b.spec.NTasksPerNode, "--ntasks-per-node", "--ntasks-per-node=2", v)
		}},
	{Option: getopt.Option{Long: "exclusive", Arg: opt, Help: "whole nodes: no other job shares the job's nodes, and it gets all their CPUs and memory"},
		apply: applyExclusive},
	{Option: getopt.Option{Short: 'w', Long: "nodelist", Arg: req, ArgName: "HOSTLIST", Help: "nodes the job must include, e.g. n[1-4],gpu01 (a path with '/' names a file of names)"},
		apply: func(b *builder, v string, _ bool) error {
			return b.setHostList(&b.spec.NodeList, "--nodelist", v, strings.Contains(v, "/"))
		}},
	{Option: getopt.Option{Short: 'F', Long: "nodefile", Arg: req, ArgName: "FILE", Help: "like --nodelist, with the names read from FILE"},
		apply: func(b *builder, v string, _ bool) error {
			return b.setHostList(&b.spec.NodeList, "--nodefile", v, true)
		}},
	{Option: getopt.Option{Short: 'x', Long: "exclude", Arg: req, ArgName: "HOSTLIST", Help: "nodes the job must not use, e.g. n[5-8]"},
		apply: func(b *builder, v string, _ bool) error { return b.setHostList(&b.spec.Exclude, "--exclude", v, false) }},
	{Option: getopt.Option{Short: 'C', Long: "constraint", Arg: req, ArgName: "LIST", Help: "node features the job needs: a&b, a|b, gpu*2, [rack1|rack2], [a*2&b*4]"},
		apply: func(b *builder, v string, _ bool) error {
			if _, err := ParseConstraint(v); err != nil {
				return err
			}
			b.spec.Constraint = v
			return nil
		}},
	{Option: getopt.Option{Short: 'm', Long: "distribution", Arg: req, ArgName: "block|cyclic", Help: "how tasks are laid out over the nodes: block (the default: fill a node, then the next) or cyclic (round-robin)"},
		apply: applyDistribution},
	{Option: getopt.Option{Long: "spread-job", Help: "spread the job over as many nodes as it may have"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.SpreadJob = true; return nil }},
	{Option: getopt.Option{Long: "contiguous", Help: "nodes with consecutive names (n3,n4,n5)"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.Contiguous = true; return nil }},
}

var optNodes = getopt.Option{Short: 'N', Long: "nodes", Arg: req, ArgName: "MIN[-MAX]", Help: "number of nodes, or a range: the job runs on at least MIN and at most MAX"}

// applyNodes reads -N MIN[-MAX].
func applyNodes(b *builder, v string, _ bool) error {
	lo, hi, isRange := strings.Cut(v, "-")
	n, err := strconv.Atoi(lo)
	m := n
	if isRange && err == nil {
		m, err = strconv.Atoi(hi)
	}
	if err != nil || n < 1 || m < n || m > MaxNodes {
		return optionError("--nodes", v, err, "give a node count from 1 to %d, or a range MIN-MAX (e.g. -N 2 or -N 2-4)", MaxNodes)
	}
	b.spec.Nodes, b.spec.NodesMax = n, 0
	if m > n {
		b.spec.NodesMax = m
	}
	return nil
}

// applyExclusive takes --exclusive alone; =user and =mcs share nodes
// between jobs of one user or label, which corral does not do.
func applyExclusive(b *builder, v string, has bool) error {
	if has && v != "" {
		return optionError("--exclusive", v, ErrUnsupported,
			"corral takes --exclusive alone (whole nodes for the job); =user and =mcs are not supported")
	}
	b.spec.Exclusive = true
	return nil
}

// applyDistribution reads -m's first level: block or cyclic over nodes.
// The levels after ':' (sockets, cores) are inside a node, where corral
// places CPUs by NUMA node; they are accepted with a warning.
func applyDistribution(b *builder, v string, _ bool) error {
	first, _, inNode := strings.Cut(v, ":")
	if i := strings.IndexByte(first, ','); i >= 0 {
		first, inNode = first[:i], true // ,Pack or ,NoPack
	}
	switch first {
	case "block", "*":
		b.spec.Distribution = "block"
	case "cyclic":
		b.spec.Distribution = "cyclic"
	default:
		return optionError("--distribution", v, ErrUnsupported, "use block or cyclic (arbitrary and plane=N are not supported)")
	}
	if inNode {
		b.warn("--distribution", fmt.Sprintf("the part after %q is how Slurm lays tasks out inside a node; corral places a job's CPUs by NUMA node (--numa)", first))
	}
	return nil
}

// setHostList stores a host list (-w, -x) in its compressed form; with
// fromFile, v is the path of a file of names (sbatch's -F, and -w with a
// '/' in its value).
func (b *builder) setHostList(dst *string, field, v string, fromFile bool) error {
	if fromFile {
		data, err := b.readNames(v)
		if err != nil {
			return optionError(field, v, err, "cannot read the file of node names: %v", err)
		}
		v = string(data)
	}
	text, _, err := HostList(v)
	if err != nil {
		return wrapValueError(field, v, err)
	}
	*dst = text
	return nil
}

// readNames reads a file of node names, at most MaxHostListBytes of it.
func (b *builder) readNames(path string) ([]byte, error) {
	read := b.ctx.ReadFile
	if read == nil {
		read = ReadScriptFile
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(b.ctx.Cwd, path)
	}
	data, err := read(path)
	if err == nil && len(data) > MaxHostListBytes {
		err = fmt.Errorf("%s is over %d bytes", path, MaxHostListBytes)
	}
	return data, err
}

// HostList checks a host list as -w and -x take it and returns it
// compressed, with its names: at most MaxNodes valid node names, written
// in at most MaxHostListBytes.
func HostList(v string) (string, []string, error) {
	if len(v) > MaxHostListBytes {
		return "", nil, optionError("", Shown(v), nil, "the list is %d bytes long; the most is %d", len(v), MaxHostListBytes)
	}
	names, err := hostlist.Expand(v, MaxNodes)
	if err != nil {
		why := "use node names and ranges, e.g. n[1-4],gpu01"
		if errors.Is(err, hostlist.ErrTooMany) {
			why = fmt.Sprintf("a job has at most %d nodes", MaxNodes)
		}
		return "", nil, optionError("", Shown(v), err, "%v (%s)", err, why)
	}
	if len(names) == 0 {
		return "", nil, optionError("", v, nil, "names no node (give node names, e.g. n[1-4])")
	}
	for _, n := range names {
		if why := NameProblem(n, MaxNameBytes); why != "" {
			return "", nil, optionError("", n, nil, "node name %q %s", Shown(n), why)
		}
	}
	return hostlist.Compress(names), names, nil
}

// settleNodes works out, once every option is in, what depends on several
// of them: the task count when -n was not given, the node count a -w list
// or --ntasks-per-node implies, and --gpus spread over the nodes.
func (b *builder) settleNodes() error {
	sp := &b.spec
	if sp.NodeList != "" && sp.Nodes == 0 {
		// As Slurm: the job has at least the nodes it names.
		n, _ := hostlist.Count(sp.NodeList, MaxNodes)
		if n > 1 {
			sp.Nodes = n
		}
	}
	if sp.Nodes == 0 && b.ntasksSet && sp.NTasksPerNode > 0 && sp.NTasks > sp.NTasksPerNode {
		// -n 8 --ntasks-per-node=4 is two nodes.
		sp.Nodes = (sp.NTasks + sp.NTasksPerNode - 1) / sp.NTasksPerNode
	}
	if !b.ntasksSet {
		switch {
		case sp.NodesMax > 0:
			// A range: a task per node (or --ntasks-per-node) on
			// however many nodes the job gets.
			sp.NTasks, sp.NTasksPerNode = 0, max(sp.NTasksPerNode, 1)
		case sp.Nodes > 1 || sp.NTasksPerNode > 0:
			sp.NTasks = max(sp.Nodes, 1) * max(sp.NTasksPerNode, 1)
		}
	}
	return b.spreadGPUs()
}

// spreadGPUs turns --gpus (the job's GPUs in all) into GPUs on each node
// of a multi-node job, and --gpus-per-task into GPUs per node.
func (b *builder) spreadGPUs() error {
	sp := &b.spec
	nodes := max(sp.Nodes, 1)
	if b.gpusPerTask != "" {
		perNode := sp.NTasks
		if nodes > 1 || sp.NodesMax > 0 {
			if sp.NTasksPerNode == 0 {
				return optionError("--gpus-per-task", b.gpusPerTask, nil,
					"on several nodes give --ntasks-per-node too, so the GPUs each node needs are known; or use --gpus-per-node")
			}
			perNode = sp.NTasksPerNode
		}
		if err := addGPUs(b, "--gpus-per-task", b.gpusPerTask, max(perNode, 1)); err != nil {
			return err
		}
	}
	if b.gpusTotal == "" || (nodes == 1 && sp.NodesMax == 0) {
		return nil
	}
	typ, _, hasType := strings.Cut(b.gpusTotal, ":")
	if !hasType {
		typ = ""
	}
	for i, g := range sp.Gres {
		if g.Name != "gpu" || g.Type != typ {
			continue
		}
		if sp.NodesMax > 0 || g.Count%nodes != 0 {
			return optionError("--gpus", b.gpusTotal, nil,
				"--gpus counts the job's GPUs in all, which must split evenly over a fixed node count (-N %d); use --gpus-per-node", nodes)
		}
		sp.Gres[i].Count = g.Count / nodes
	}
	return nil
}
