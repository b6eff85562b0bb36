package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
	"corral/internal/hostlist"
)

// activeStates are the states squeue lists when -t is not given.
var activeStates = []api.JobState{api.StatePending, api.StateRunning, api.StateSuspended, api.StateCompleting, api.StateRequeued, api.StateMigrating}

func runQueue(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "queue", getopt.Permute, args,
		valued('u', "user", "USER", "only jobs of USER (comma-separated list)"),
		flag(0, "me", "only your own jobs (--user=$USER)"),
		valued('t', "states", "STATES", "only jobs in STATES, e.g. PD,R or all"),
		valued('j', "jobs", "IDS", "only the jobs with these ids"),
		valued('p', "partition", "PART", "only jobs in these partitions"),
		valued('n', "name", "NAME", "only jobs with these names"),
		valued('A', "account", "ACCOUNT", "only jobs of these accounts"),
		valued('q', "qos", "QOS", "only jobs of these QoS"),
		valued('w', "nodelist", "NODES", "only jobs on these nodes (hostlist, e.g. n[1-4])"),
		valued('R', "reservation", "NAME", "only jobs of these reservations"),
		valued('o', "format", "FORMAT", "output format with squeue's % field codes, e.g. \"%.18i %.9P %j\""),
		valued('O', "Format", "FIELDS", "output fields by squeue's long names, e.g. \"jobid:.10,name:20,state\""),
		valued('S', "sort", "KEYS", "sort by these keys, e.g. \"-p,i\" (default P,t,-p)"),
		flag('r', "array", "one line per array task, pending tasks too"),
		valued('i', "iterate", "SECONDS", "print again every SECONDS until interrupted"),
		flag('s', "steps", "list job steps: STEPID NAME PARTITION USER TIME NODELIST"),
		flag('h', "noheader", "do not print the header line"),
		flag('l', "long", "long format"),
		flag(0, "start", "show pending jobs' expected start times"),
		flag(0, "json", "print the jobs as JSON"),
		flag('a', "all", "accepted for compatibility; every partition is shown"),
	)
	if err != nil {
		return err
	}
	q, err := queueQuery(o, env.getenv)
	if err != nil {
		return err
	}
	every, err := iterateEvery(o)
	if err != nil {
		return err
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if o.has("steps") {
		return listSteps(ctx, env, cl, o, q)
	}
	if o.has("me") {
		me, err := meUser(ctx, env, cl)
		if err != nil {
			return fmt.Errorf("--me: %w", err)
		}
		q.Filter.Users = append(q.Filter.Users, me)
	}
	q.Dated = every > 0 && !q.Long
	return iterate(ctx, every, sleepCtx, func(first bool) error {
		if !first {
			fmt.Fprintln(env.stdout)
		}
		if o.has("json") {
			return printQueueJSON(ctx, env, cl, q)
		}
		text, err := cl.QueueText(ctx, q)
		if err != nil {
			return err
		}
		_, err = env.stdout.Write(text)
		return err
	})
}

// queueQuery reads squeue's filters and display options, refusing a bad
// state, job id, format or sort before anything is fetched. As squeue,
// SQUEUE_FORMAT, SQUEUE_FORMAT2 and SQUEUE_SORT stand for -o, -O and -S
// when those are not given.
func queueQuery(o *optSet, getenv func(string) string) (api.QueueQuery, error) {
	var q api.QueueQuery
	ids, tasks, err := parseJobRefs(append(o.list("jobs"), o.args...))
	if err != nil {
		return q, err
	}
	states, err := parseStates(o.list("states"))
	if err != nil {
		return q, invalidJobState(o.list("states"))
	}
	if len(states) == 0 && len(ids) == 0 && len(tasks) == 0 {
		states = activeStates
	}
	f := api.JobFilter{IDs: ids, Tasks: tasks, Users: o.list("user"), States: states, Partitions: o.list("partition"),
		Names: o.list("name"), Accounts: o.list("account"), QOS: o.list("qos"), Reservations: o.list("reservation")}
	if o.has("nodelist") {
		if f.Nodes, err = hostlist.Expand(strings.Join(o.all["nodelist"], ","), hostlistLimit); err != nil {
			return q, fmt.Errorf("--nodelist: %w", err)
		}
		if len(f.Nodes) == 0 {
			return q, fmt.Errorf("--nodelist: no node named; give names or a host list such as n[1-4]")
		}
	}
	q = api.QueueQuery{Filter: f, Format: o.get("format"), Fields: o.get("Format"), Sort: o.get("sort"),
		NoHeader: o.has("noheader"), Long: o.has("long"), Start: o.has("start"), Array: o.has("array")}
	if !o.has("format") && !o.has("Format") {
		q.Format, q.Fields = getenv("SQUEUE_FORMAT"), getenv("SQUEUE_FORMAT2")
	}
	if !o.has("sort") {
		q.Sort = getenv("SQUEUE_SORT")
	}
	opts := display.QueueOptions{Format: q.Format, LongFormat: q.Fields, Long: q.Long, Start: q.Start}
	if _, err := opts.Layout(); err != nil {
		if q.Fields != "" {
			return q, err
		}
		return q, fmt.Errorf("--format: %w", err)
	}
	if q.Sort != "" {
		if _, err := display.ParseQueueSort(q.Sort); err != nil {
			return q, err
		}
	}
	return q, nil
}

// invalidJobState is squeue's refusal of a -t list, in its words, naming
// the first state it cannot read and the states it can.
func invalidJobState(values []string) error {
	bad := ""
	for _, v := range values {
		if _, err := api.ParseJobState(v); err != nil && !strings.EqualFold(v, "all") {
			bad = v
			break
		}
	}
	valid := make([]string, 0, len(api.AllJobStates))
	for _, st := range api.AllJobStates {
		valid = append(valid, string(st)+" ("+st.Short()+")")
	}
	return fmt.Errorf("Invalid job state specified: %s (valid states: all, %s)", display.Safe(bad), strings.Join(valid, ", "))
}

// printQueueJSON prints the jobs q selects as squeue --json, in -S order.
func printQueueJSON(ctx context.Context, env *cliEnv, cl *api.Client, q api.QueueQuery) error {
	jobs, err := cl.Jobs(ctx, q.Filter, false)
	if err != nil {
		return err
	}
	if q.Sort == "" {
		display.SortJobs(jobs)
	} else {
		order, err := display.ParseQueueSort(q.Sort)
		if err != nil {
			return err
		}
		now := time.Now()
		slices.SortStableFunc(jobs, func(a, b api.Job) int { return order.Compare(&a, &b, now) })
	}
	return display.QueueJSON(env.stdout, jobs)
}

// meUser is who --me means: the user the controllers take the caller's
// token for, else the user the CLI claims to be.
func meUser(ctx context.Context, env *cliEnv, cl *api.Client) (string, error) {
	if u, err := tokenUser(ctx, cl); err != nil || u != "" {
		return u, err
	}
	return claimedUser(env, cl.Auth)
}

func runNodes(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "nodes", getopt.Permute, args,
		flag('N', "Node", "one line per node"),
		flag('l', "long", "long format"),
		flag('h', "noheader", "do not print the header line"),
		valued('p', "partition", "PART", "only these partitions"),
		valued('o', "format", "FORMAT", "output format with sinfo's % field codes, e.g. \"%#P %.6D %.6t %N\""),
		valued('O', "Format", "FIELDS", "output fields by sinfo's long names, e.g. \"partition:10,nodes:.6,statecompact\""),
		flag('s', "summarize", "one line per partition with NODES(A/I/O/T)"),
		flag('R', "list-reasons", "why nodes are down, drained or draining, who said so and when"),
		valued('t', "states", "STATES", "only nodes in these states, e.g. idle,mix or drain"),
		valued('n', "nodes", "NODES", "only these nodes (hostlist, e.g. n[1-4])"),
		flag('e', "exact", "group nodes only when their CPUs, memory and sizes are equal"),
		valued('i', "iterate", "SECONDS", "print again every SECONDS until interrupted"),
		flag('d', "dead", "only nodes that stopped responding"),
		flag('r', "responding", "only nodes that respond"),
		flag('T', "reservation", "list the advance reservations: name, state, window, duration and nodes"),
		flag('a', "all", "accepted for compatibility; every partition is shown"),
		flag(0, "json", "print the nodes as JSON"),
	)
	if err != nil {
		return err
	}
	opts, every, err := nodesOptions(o)
	if err != nil {
		return err
	}
	if o.has("reservation") {
		return iterate(ctx, every, sleepCtx, func(first bool) error {
			if !first {
				fmt.Fprintln(env.stdout)
			}
			return listReservations(ctx, env, o.has("noheader"))
		})
	}
	if !o.has("format") && !o.has("Format") {
		// As sinfo, SINFO_FORMAT stands for -o when neither -o nor -O is
		// given.
		opts.Format = env.getenv("SINFO_FORMAT")
		if _, err := opts.Layout(); err != nil {
			return fmt.Errorf("SINFO_FORMAT: %w", err)
		}
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	return iterate(ctx, every, sleepCtx, func(first bool) error {
		if !first {
			fmt.Fprintln(env.stdout)
		}
		return printNodes(ctx, env, cl, o, opts, every > 0)
	})
}

// nodesOptions reads sinfo's display options, refusing a bad format, state
// or host list before anything is fetched, and returns -i's interval.
func nodesOptions(o *optSet) (display.NodesOptions, time.Duration, error) {
	opts := display.NodesOptions{
		NodeOriented: o.has("Node"), Long: o.has("long"), NoHeader: o.has("noheader"),
		Format: o.get("format"), LongFormat: o.get("Format"), Summarize: o.has("summarize"),
		ListReasons: o.has("list-reasons"), Exact: o.has("exact"), States: o.list("states"),
	}
	if _, err := opts.Layout(); err != nil {
		return opts, 0, err
	}
	if _, err := display.ParseNodeStates(opts.States); err != nil {
		return opts, 0, err
	}
	if o.has("nodes") {
		names, err := hostlist.Expand(strings.Join(o.all["nodes"], ","), hostlistLimit)
		if err != nil {
			return opts, 0, fmt.Errorf("--nodes: %w", err)
		}
		if len(names) == 0 {
			return opts, 0, fmt.Errorf("--nodes: no node named; give names or a host list such as n[1-4]")
		}
		opts.Names = names
	}
	if o.has("dead") && o.has("responding") {
		return opts, 0, fmt.Errorf("--dead and --responding exclude each other: a node either responds or does not")
	}
	opts.Dead, opts.Responding = o.has("dead"), o.has("responding")
	every, err := iterateEvery(o)
	return opts, every, err
}

// printNodes fetches and prints one sinfo listing.
func printNodes(ctx context.Context, env *cliEnv, cl *api.Client, o *optSet, opts display.NodesOptions, dated bool) error {
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
	now := time.Now()
	for i := range nodes {
		if !nodes[i].ReasonTime.IsZero() {
			nodes[i].ReasonTime = nodes[i].ReasonTime.Local()
		}
	}
	if o.has("json") {
		kept, err := display.FilterNodes(nodes, opts)
		if err != nil {
			return err
		}
		return writeJSON(env, map[string]any{"nodes": kept, "partitions": parts})
	}
	if opts.Long || dated {
		opts.Now, opts.Dated = now, true
	}
	return display.Nodes(env.stdout, nodes, parts, opts)
}

// iterateEvery reads -i/--iterate: whole seconds, at least one.
func iterateEvery(o *optSet) (time.Duration, error) {
	if !o.has("iterate") {
		return 0, nil
	}
	secs, err := strconv.Atoi(o.get("iterate"))
	if err != nil || secs < 1 {
		return 0, fmt.Errorf("--iterate=%q: give the seconds between listings, a whole number of at least 1", o.get("iterate"))
	}
	return time.Duration(secs) * time.Second, nil
}

// iterate runs once, then with every > 0 again each time sleep waits that
// long, until sleep returns an error (an interrupt ends it: not an error).
func iterate(ctx context.Context, every time.Duration, sleep func(context.Context, time.Duration) error, once func(first bool) error) error {
	if every > 0 {
		var stop context.CancelFunc
		ctx, stop = untilInterrupted(ctx)
		defer stop()
	}
	for first := true; ; first = false {
		if err := once(first); err != nil {
			return err
		}
		if every <= 0 {
			return nil
		}
		if err := sleep(ctx, every); err != nil {
			return nil
		}
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
	first := ""
	if len(o.args) > 0 {
		// scontrol takes its entity names in any case: show JOB 12.
		first, o.args[0] = o.args[0], strings.ToLower(o.args[0])
	}
	if len(o.args) > 0 && o.args[0] == "partition" {
		return showPartitions(ctx, env, o.args[1:])
	}
	if len(o.args) > 0 && o.args[0] == "hostnames" {
		return showHostnames(env, o.args[1:], false)
	}
	if len(o.args) > 0 && (o.args[0] == "hostlist" || o.args[0] == "hostlistsorted") {
		return showHostnames(env, o.args[1:], true)
	}
	if len(o.args) > 0 && (o.args[0] == "reservation" || o.args[0] == "reservations" || o.args[0] == "res") {
		return resvShow(ctx, env, "show reservation", o.args[1:])
	}
	if len(o.args) > 0 && strings.HasPrefix(o.args[0], "reservationname=") {
		// scontrol show ReservationName=NAME
		return resvShow(ctx, env, "show reservation", []string{first[len("reservationname="):]})
	}
	if len(o.args) > 0 && o.args[0] == "config" {
		return configShow(ctx, env, "show config", o.args[1:])
	}
	if len(o.args) > 0 && (o.args[0] == "lic" || o.args[0] == "license" || o.args[0] == "licenses") {
		return showLicenses(ctx, env, o.args[1:])
	}
	if len(o.args) == 0 || (o.args[0] != "job" && o.args[0] != "node") {
		return fmt.Errorf("usage: corral show job [ID] | corral show node [NAME] | corral show partition [NAME] | corral show reservation [NAME] | corral show config | corral show hostnames [LIST] | corral show hostlist LIST")
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
