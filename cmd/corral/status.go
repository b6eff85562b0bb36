package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
)

// activeStates are the states squeue lists when -t is not given.
var activeStates = []api.JobState{api.StatePending, api.StateRunning, api.StateSuspended, api.StateCompleting, api.StateRequeued, api.StateMigrating}

func runQueue(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "queue", getopt.Permute, args,
		valued('u', "user", "USER", "only jobs of USER (comma-separated list)"),
		valued('t', "states", "STATES", "only jobs in STATES, e.g. PD,R or all"),
		valued('j', "jobs", "IDS", "only the jobs with these ids"),
		valued('p', "partition", "PART", "only jobs in these partitions"),
		valued('n', "name", "NAME", "only jobs with these names"),
		valued('A', "account", "ACCOUNT", "only jobs of these accounts"),
		valued('o', "format", "FORMAT", "output format with squeue's % field codes, e.g. \"%.18i %.9P %j\""),
		flag('h', "noheader", "do not print the header line"),
		flag('l', "long", "long format"),
		flag(0, "start", "show pending jobs' expected start times"),
		flag(0, "json", "print the jobs as JSON"),
		flag('a', "all", "accepted for compatibility; every partition is shown"),
	)
	if err != nil {
		return err
	}
	ids, tasks, err := parseJobRefs(append(o.list("jobs"), o.args...))
	if err != nil {
		return err
	}
	states, err := parseStates(o.list("states"))
	if err != nil {
		return fmt.Errorf("--states: %w", err)
	}
	if len(states) == 0 && len(ids) == 0 && len(tasks) == 0 {
		states = activeStates
	}
	f := api.JobFilter{IDs: ids, Tasks: tasks, Users: o.list("user"), States: states, Partitions: o.list("partition"), Names: o.list("name"), Accounts: o.list("account")}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if o.has("json") {
		jobs, err := cl.Jobs(ctx, f, false)
		if err != nil {
			return err
		}
		display.SortJobs(jobs)
		return display.QueueJSON(env.stdout, jobs)
	}
	q := api.QueueQuery{Filter: f, Format: o.get("format"), NoHeader: o.has("noheader"), Long: o.has("long"), Start: o.has("start")}
	if q.Format != "" {
		if _, err := display.ParseQueueFormat(q.Format); err != nil {
			return fmt.Errorf("--format: %w", err)
		}
	}
	text, err := cl.QueueText(ctx, q)
	if err != nil {
		return err
	}
	_, err = env.stdout.Write(text)
	return err
}

func runNodes(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "nodes", getopt.Permute, args,
		flag('N', "Node", "one line per node"),
		flag('l', "long", "long format"),
		flag('h', "noheader", "do not print the header line"),
		valued('p', "partition", "PART", "only these partitions"),
		flag(0, "json", "print the nodes as JSON"),
	)
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return err
	}
	parts, err := cl.Partitions(ctx)
	if err != nil {
		return err
	}
	if want := o.list("partition"); len(want) > 0 {
		nodes, parts = filterPartitions(nodes, parts, want)
	}
	if o.has("json") {
		return writeJSON(env, map[string]any{"nodes": nodes, "partitions": parts})
	}
	return display.Nodes(env.stdout, nodes, parts, display.NodesOptions{
		NodeOriented: o.has("Node"), Long: o.has("long"), NoHeader: o.has("noheader"),
	})
}

// filterPartitions keeps the partitions named in want and the nodes that
// serve them, each node reduced to its wanted partitions. Filtering the
// partitions alone is not enough: the display adds back every partition a
// node serves (and the default one for a node that names none), so
// `nodes -p debug` would still list batch.
func filterPartitions(nodes []api.Node, parts []api.Partition, want []string) ([]api.Node, []api.Partition) {
	wanted := func(name string) bool { return slices.Contains(want, name) }
	var keptParts []api.Partition
	listedBy := map[string][]string{} // node name -> partitions listing it
	for _, p := range parts {
		for _, n := range p.Nodes {
			listedBy[n] = append(listedBy[n], p.Name)
		}
		if wanted(p.Name) {
			keptParts = append(keptParts, p)
		}
	}
	var keptNodes []api.Node
	for _, n := range nodes {
		served := append(append([]string(nil), n.Partitions...), listedBy[n.Name]...)
		if len(served) == 0 {
			served = []string{api.DefaultPartition}
		}
		var keep []string
		for _, name := range served {
			if wanted(name) && !slices.Contains(keep, name) {
				keep = append(keep, name)
			}
		}
		if len(keep) == 0 {
			continue
		}
		n.Partitions = keep
		keptNodes = append(keptNodes, n)
	}
	return keptNodes, keptParts
}

func writeJSON(env *cliEnv, v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "status", getopt.Permute, args, flag(0, "json", "print the status as JSON"))
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	st, err := cl.Status(ctx)
	if err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, st)
	}
	display.Status(env.stdout, st)
	return nil
}

// showLicenses is scontrol show lic: each of the cluster's licenses, its
// total and what running jobs hold (NAME limits it to that one).
func showLicenses(ctx context.Context, env *cliEnv, args []string) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	lics, err := cl.Licenses(ctx)
	if err != nil {
		return err
	}
	var names []string
	shown := 0
	for _, l := range lics {
		names = append(names, l.Name)
		if len(args) > 0 && !slices.Contains(args, l.Name) {
			continue
		}
		shown++
		fmt.Fprintf(env.stdout, "LicenseName=%s\n    Total=%d Used=%d Free=%d Reserved=0 Remote=no\n", l.Name, l.Total, l.Used, l.Total-l.Used)
	}
	if shown == 0 && len(args) > 0 {
		return fmt.Errorf("no license named %s (the cluster's: %s)", strings.Join(args, ", "), cmp.Or(strings.Join(names, ", "), "none"))
	}
	return nil
}

// runPing is scontrol ping: each member, as Slurm names its controllers
// (the leader is the primary), and whether it answered.
func runPing(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "ping", getopt.Permute, args, flag(0, "json", "print the answers as JSON"))
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	pings, err := cl.Ping(ctx, 3*time.Second)
	if err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, map[string]any{"pings": pings})
	}
	down := 0
	for _, p := range pings {
		role, state := "backup", "UP"
		if p.Leader {
			role = "primary"
		}
		if !p.Up {
			state, down = "DOWN", down+1
		}
		fmt.Fprintf(env.stdout, "Slurmctld(%s) at %s is %s\n", role, display.Safe(p.ID), state)
		if !p.Up {
			fmt.Fprintf(env.stderr, "%s: member %s (%s): %s\n", env.prog, display.Safe(p.ID), display.Safe(p.HTTPAddr), p.Err)
		}
	}
	if down > 0 {
		return exitStatus(1)
	}
	return nil
}

func runShow(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "show", getopt.Permute, args, flag(0, "json", "print as JSON"))
	if err != nil {
		return err
	}
	if len(o.args) > 0 {
		// scontrol takes its entity names in any case: show JOB 12.
		o.args[0] = strings.ToLower(o.args[0])
	}
	if len(o.args) > 0 && o.args[0] == "partition" {
		return showPartitions(ctx, env, o.args[1:])
	}
	if len(o.args) > 0 && o.args[0] == "config" {
		return configShow(ctx, env, "show config", o.args[1:])
	}
	if len(o.args) > 0 && (o.args[0] == "lic" || o.args[0] == "license" || o.args[0] == "licenses") {
		return showLicenses(ctx, env, o.args[1:])
	}
	if len(o.args) == 0 || (o.args[0] != "job" && o.args[0] != "node") {
		return fmt.Errorf("usage: corral show job [ID] | corral show node [NAME] | corral show partition [NAME] | corral show config")
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	now := time.Now()
	if o.args[0] == "node" {
		return showNodes(ctx, env, cl, o, now)
	}
	var jobs []api.Job
	if len(o.args) > 1 {
		if _, err := parseJobIDs(o.args[1:]); err != nil {
			return err
		}
		// As typed, so that 12_5 shows task 5 of array 12.
		for _, ref := range strings.FieldsFunc(strings.Join(o.args[1:], ","), func(r rune) bool { return r == ',' }) {
			j, err := cl.JobByRef(ctx, ref, false)
			if err != nil {
				return err
			}
			jobs = append(jobs, *j)
		}
	} else if jobs, err = cl.Jobs(ctx, api.JobFilter{}, false); err != nil {
		return err
	}
	if o.has("json") {
		return writeJSON(env, map[string]any{"jobs": jobs})
	}
	for i := range jobs {
		display.ShowJob(env.stdout, &jobs[i], now)
		fmt.Fprintln(env.stdout)
	}
	return nil
}

func showNodes(ctx context.Context, env *cliEnv, cl *api.Client, o *optSet, now time.Time) error {
	var nodes []api.Node
	if len(o.args) > 1 {
		for _, name := range o.args[1:] {
			n, err := cl.Node(ctx, name)
			if err != nil {
				return err
			}
			nodes = append(nodes, *n)
		}
	} else {
		var err error
		if nodes, err = cl.Nodes(ctx); err != nil {
			return err
		}
	}
	if o.has("json") {
		return writeJSON(env, map[string]any{"nodes": nodes})
	}
	for i := range nodes {
		display.ShowNode(env.stdout, &nodes[i], now)
		fmt.Fprintln(env.stdout)
	}
	return nil
}
