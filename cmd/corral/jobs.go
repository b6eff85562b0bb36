package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/display"
	"corral/internal/getopt"
	"corral/internal/rlimit"
	"corral/submit"
)

// newRequestID returns a random idempotency key for one submission.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func runSubmit(ctx context.Context, env *cliEnv, args []string) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	// With a token the user is whom the controllers take it for; should
	// they not answer, the submission itself will say what is wrong.
	user, _ := tokenUser(ctx, cl)
	if user == "" {
		if user, err = claimedUser(env, cl.Auth); err != nil {
			return err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("cannot read the current directory: %w", err)
	}
	req, err := submit.Parse(args, submit.Context{
		Env: os.Environ(), Cwd: cwd, User: user, Stdin: env.stdin, Now: time.Now(), Privileged: os.Geteuid() == 0,
		Rlimit: rlimit.Submitter,
	})
	if err != nil {
		if errors.Is(err, submit.ErrHelp) {
			fmt.Fprint(env.stdout, submit.Usage())
			return errHelp
		}
		if errors.Is(err, submit.ErrVersion) {
			fmt.Fprintf(env.stdout, "corral %s\n", version)
			return nil
		}
		return err
	}
	if !req.Quiet {
		for _, w := range req.Warnings {
			fmt.Fprintf(env.stderr, "%s: warning: %s\n", env.prog, w)
		}
	}
	if req.Verbose > 0 {
		sp := &req.Spec
		fmt.Fprintf(env.stderr, "%s: job %s of user %s: %d task(s) × %d CPU(s), memory %s, time limit %s, partition %s, QoS %s, account %s, in %s\n",
			env.prog, display.Safe(sp.Name), display.Safe(sp.User), max(sp.NTasks, 1), max(sp.CPUsPerTask, 1), memText(sp), limitText(sp.TimeLimit),
			orDefault(sp.Partition), orDefault(sp.QOS), orDefault(sp.Account), display.Safe(cmp.Or(sp.WorkDir, sp.SubmitDir)))
	}
	if req.Cluster != "" {
		if err := checkCluster(ctx, cl, req.Cluster); err != nil {
			return err
		}
	}
	if req.TestOnly {
		return testOnly(ctx, env, cl, req)
	}
	req.Spec.RequestID = newRequestID()
	res, err := cl.Submit(ctx, []api.JobSpec{req.Spec})
	if err != nil {
		return fmt.Errorf("submitting %s: %w", req.Spec.Name, err)
	}
	id := res[0].JobID
	switch {
	case req.Parsable && req.Cluster != "":
		// sbatch's "ID;CLUSTER" when a cluster was named (-M).
		fmt.Fprintf(env.stdout, "%d;%s\n", id, req.Cluster)
	case req.Parsable:
		fmt.Fprintf(env.stdout, "%d\n", id)
	default:
		fmt.Fprintf(env.stdout, "Submitted batch job %d\n", id)
	}
	if !req.Wait {
		return nil
	}
	j, err := waitJob(ctx, cl, id)
	if err != nil {
		return err
	}
	if j.State != api.StateCompleted {
		if j.ExitCode != 0 {
			return exitStatus(j.ExitCode)
		}
		return exitStatus(1)
	}
	return nil
}

// memText is a job's memory request as sbatch -v says it.
func memText(sp *api.JobSpec) string {
	switch {
	case sp.MemPerNode > 0:
		return fmt.Sprintf("%d MiB", sp.MemPerNode)
	case sp.MemPerCPU > 0:
		return fmt.Sprintf("%d MiB per CPU", sp.MemPerCPU)
	}
	return "the partition's default per CPU"
}

// limitText is a time limit as sbatch -v says it.
func limitText(secs int64) string {
	if secs <= 0 {
		return "the partition's"
	}
	return (time.Duration(secs) * time.Second).String()
}

// orDefault names an option left to the cluster's default.
func orDefault(v string) string {
	if v == "" {
		return "(default)"
	}
	return display.Safe(v)
}

// testOnly prints, as sbatch --test-only does, when and where the
// controllers' pass would start the job; nothing is submitted.
func testOnly(ctx context.Context, env *cliEnv, cl *api.Client, req *submit.Request) error {
	runs, err := cl.TestOnly(ctx, []api.JobSpec{req.Spec})
	if err != nil {
		return fmt.Errorf("testing %s: %w", req.Spec.Name, err)
	}
	w := runs[0]
	if w.Start.IsZero() {
		fmt.Fprintf(env.stderr, "%s: Job %d has no expected start: it would wait with reason %s (corral why explains each reason)\n", env.prog, w.JobID, w.Reason)
		return exitStatus(1)
	}
	// sbatch prints this on stderr, in the local time of the host.
	fmt.Fprintf(env.stderr, "%s: Job %d to start at %s using %d processors on nodes %s in partition %s\n",
		env.prog, w.JobID, w.Start.Local().Format("2006-01-02T15:04:05"), w.CPUs, display.Safe(w.Node), display.Safe(w.Partition))
	return nil
}

// waitJob polls a job until it ends, as sbatch --wait does. The reads are
// consistent (the leader answers): a follower may not have applied the
// submission yet when the first read reaches it, and would say "no such
// job".
func waitJob(ctx context.Context, cl *api.Client, id uint64) (*api.Job, error) {
	ctx, stop := untilInterrupted(ctx)
	defer stop()
	delay := 20 * time.Millisecond
	for {
		j, err := cl.Job(ctx, id, true)
		if err != nil {
			return nil, fmt.Errorf("waiting for job %d: %w", id, err)
		}
		if j.State.Terminal() {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		if delay < time.Second {
			delay = delay * 3 / 2
		}
	}
}

func runCancel(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "cancel", getopt.Permute, args,
		valued('u', "user", "USER", "cancel the jobs of USER"),
		valued('n', "name", "NAME", "cancel the jobs named NAME"),
		valued('t', "state", "STATE", "cancel only jobs in STATE (PENDING, RUNNING, SUSPENDED)"),
		valued('p', "partition", "PART", "cancel only jobs in partition PART"),
		valued('A', "account", "ACCOUNT", "cancel only jobs of ACCOUNT"),
		valued('R', "reservation", "NAME", "cancel only jobs of reservation NAME"),
		flag('v', "verbose", "print each cancelled job"),
		valued('s', "signal", "SIG", "send SIG (USR1, TERM, 10, ...) to the jobs' processes instead of cancelling them"),
		flag('b', "batch", "with --signal: only the batch script's process group"),
		flag('f', "full", "with --signal: every process of the job (the default here)"),
		flag('i', "interactive", "ask for each job before cancelling it (y/n on standard input)"),
		flag('Q', "quiet", "say nothing about jobs that had already ended"),
		flag(0, "me", "cancel your own jobs (as -u YOURSELF)"),
	)
	if err != nil {
		return err
	}
	steps, rest, err := splitStepRefs(o.args)
	if err != nil {
		return err
	}
	if len(steps) > 0 {
		if len(rest) > 0 || o.has("signal") {
			return fmt.Errorf("cancel: give steps (JOB.STEP) alone, without jobs or --signal")
		}
		return cancelSteps(ctx, env, steps)
	}
	ids, tasks, err := parseJobRefs(o.args)
	if err != nil {
		return err
	}
	states, err := parseStates(o.list("state"))
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	f := api.JobFilter{IDs: ids, Tasks: tasks, Users: o.list("user"), Names: o.list("name"), States: states, Partitions: o.list("partition"),
		Accounts: o.list("account"), Reservations: o.list("reservation")}
	if o.has("me") {
		f.Users = append(f.Users, "") // filled in below, once the client says who we are
	}
	if !f.HasJobs() && len(f.Users) == 0 && len(f.Names) == 0 && len(f.States) == 0 && len(f.Partitions) == 0 && len(f.Accounts) == 0 &&
		len(f.Reservations) == 0 {
		return fmt.Errorf("no job specified: give job ids or a filter such as -u USER")
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if i := slices.Index(f.Users, ""); i >= 0 {
		if f.Users[i], err = claimedUser(env, cl.Auth); err != nil {
			return err
		}
	}
	if o.has("signal") {
		return signalJobs(ctx, env, cl, f, o.get("signal"), o.has("batch") && !o.has("full"), o.has("verbose"))
	}
	if o.has("interactive") {
		if f, err = confirmCancel(ctx, env, cl, f); err != nil || (!f.HasJobs()) {
			return err
		}
		ids = f.IDs
	}
	resp, err := cl.Cancel(ctx, api.CancelRequest{Filter: f, By: cl.User})
	if err != nil {
		return err
	}
	if o.has("verbose") {
		for _, id := range resp.Cancelled {
			fmt.Fprintf(env.stdout, "scancel: Terminating job %d\n", id)
		}
	}
	failed := false
	for _, id := range ids {
		msg, ok := resp.Errors[id]
		if !ok || o.has("quiet") && endedAlready(msg) {
			continue
		}
		fmt.Fprintf(env.stderr, "%s: error: Kill job error on job id %d: %s\n", env.prog, id, msg)
		failed = true
	}
	if failed {
		return exitStatus(1)
	}
	return nil
}

// signalJobs delivers a signal to running jobs, as scancel --signal does:
// the jobs named, or the running jobs a filter selects.
func signalJobs(ctx context.Context, env *cliEnv, cl *api.Client, f api.JobFilter, sigText string, batch, verbose bool) error {
	sig, err := api.ParseSignal(sigText)
	if err != nil {
		return fmt.Errorf("--signal: %w", err)
	}
	ids := f.IDs
	if len(f.Tasks) > 0 || len(ids) == 0 {
		f.States = []api.JobState{api.StateRunning}
		jobs, err := cl.Jobs(ctx, f, true)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if !slices.Contains(ids, j.ID) {
				ids = append(ids, j.ID)
			}
		}
	}
	failed := false
	for _, id := range ids {
		err := cl.SignalJob(ctx, id, api.SignalRequest{Signal: api.SignalName(sig), Batch: batch})
		if err != nil {
			fmt.Fprintf(env.stderr, "%s: error: Signal %s to job %d: %s\n", env.prog, api.SignalName(sig), id, display.SafeText(err.Error()))
			failed = true
		} else if verbose {
			fmt.Fprintf(env.stdout, "%s: Signal %s to job %d\n", env.prog, api.SignalName(sig), id)
		}
	}
	if failed {
		return exitStatus(1)
	}
	return nil
}

func runHold(ctx context.Context, env *cliEnv, args []string) error {
	return holdRelease(ctx, env, "hold", args, true)
}

func runRelease(ctx context.Context, env *cliEnv, args []string) error {
	return holdRelease(ctx, env, "release", args, false)
}

func runSuspend(ctx context.Context, env *cliEnv, args []string) error {
	return jobAction(ctx, env, "suspend", args, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Suspend(ctx, api.SuspendRequest{IDs: ids, Suspend: true})
	})
}

func runResume(ctx context.Context, env *cliEnv, args []string) error {
	return jobAction(ctx, env, "resume", args, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Suspend(ctx, api.SuspendRequest{IDs: ids, Suspend: false})
	})
}

func runRequeue(ctx context.Context, env *cliEnv, args []string) error {
	return requeue(ctx, env, "requeue", args, false)
}

// runRequeueHold is scontrol requeuehold: requeue and hold.
func runRequeueHold(ctx context.Context, env *cliEnv, args []string) error {
	return requeue(ctx, env, "requeuehold", args, true)
}

func requeue(ctx context.Context, env *cliEnv, cmd string, args []string, hold bool) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args, flag(0, "hold", "hold the jobs as well (scontrol requeuehold)"))
	if err != nil {
		return err
	}
	hold = hold || o.has("hold")
	return actOnJobs(ctx, env, cmd, o.args, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Requeue(ctx, api.RequeueRequest{IDs: ids, Hold: hold})
	})
}

// runTop is scontrol top: the jobs named, a comma-separated list in the
// order wanted, go to the top of their user's pending jobs.
func runTop(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "top", getopt.Permute, args)
	if err != nil {
		return err
	}
	var refs []string
	for _, a := range o.args {
		for r := range strings.SplitSeq(a, ",") {
			if r != "" {
				refs = append(refs, r)
			}
		}
	}
	return actOnJobs(ctx, env, "top", refs, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Top(ctx, api.TopRequest{IDs: ids})
	})
}

func holdRelease(ctx context.Context, env *cliEnv, cmd string, args []string, hold bool) error {
	return jobAction(ctx, env, cmd, args, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Hold(ctx, api.HoldRequest{IDs: ids, Hold: hold})
	})
}

// jobAction runs a per-job action on the ids given and reports, per job,
// those the controller refused.
func jobAction(ctx context.Context, env *cliEnv, cmd string, args []string, act func(*api.Client, []uint64) (*api.HoldResponse, error)) error {
	o, err := parseOpts(env, cmd, getopt.Permute, args)
	if err != nil {
		return err
	}
	return actOnJobs(ctx, env, cmd, o.args, act)
}

// actOnJobs is jobAction once the options are read: args are the job ids.
func actOnJobs(ctx context.Context, env *cliEnv, cmd string, args []string, act func(*api.Client, []uint64) (*api.HoldResponse, error)) error {
	ids, err := parseJobIDs(args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%s: give the job ids to %s", cmd, cmd)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	resp, err := act(cl, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if msg, ok := resp.Errors[id]; ok {
			fmt.Fprintf(env.stderr, "%s: error: %s\n", env.prog, msg)
		}
	}
	if len(resp.Errors) > 0 {
		return exitStatus(1)
	}
	return nil
}

// runMigrate moves running jobs to other nodes while they run: migrate
// [--to NODE] ID..., or migrate --cancel ID... (also scontrol migrate ID
// [Node=NODE]).
func runMigrate(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "migrate", getopt.Permute, args,
		valued(0, "to", "NODE", "the node to move to (default: any node that fits, chosen by the scheduler)"),
		flag(0, "cancel", "abort the jobs' migrations under way (those not switched over yet)"))
	if err != nil {
		return err
	}
	to := o.get("to")
	var ids []string
	for _, a := range o.args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.EqualFold(k, "node") {
			to = v // scontrol's form
			continue
		}
		ids = append(ids, a)
	}
	return actOnJobs(ctx, env, "migrate", ids, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Migrate(ctx, api.MigrateRequest{IDs: ids, To: to, Cancel: o.has("cancel")})
	})
}

// runCheckpoint saves running jobs to checkpoints (corral checkpoint ID...).
func runCheckpoint(ctx context.Context, env *cliEnv, args []string) error {
	return jobAction(ctx, env, "checkpoint", args, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Checkpoint(ctx, api.CheckpointRequest{IDs: ids})
	})
}

// runRestore restores checkpointed jobs (corral restore [--to NODE] ID...).
func runRestore(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "restore", getopt.Permute, args,
		valued(0, "to", "NODE", "the node to restore on (default: any that can read the checkpoint, chosen by the scheduler)"))
	if err != nil {
		return err
	}
	return actOnJobs(ctx, env, "restore", o.args, func(cl *api.Client, ids []uint64) (*api.HoldResponse, error) {
		return cl.Checkpoint(ctx, api.CheckpointRequest{IDs: ids, Restore: true, To: o.get("to")})
	})
}

func runNodeAdmin(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "node", getopt.Permute, args, valued(0, "reason", "TEXT", "why the node is drained"),
		flag(0, "migrate", "drain by moving the node's running jobs to other nodes (live migration)"),
		flag(0, "reset-features", "give the node's features back to what its daemon reports (node update)"))
	if err != nil {
		return err
	}
	const usage = "usage: corral node drain NAME --reason TEXT [--migrate] | corral node resume NAME | corral node forget-key NAME | corral node update NAME Features=a,b | corral node update NAME --reset-features"
	if len(o.args) >= 2 && o.args[0] == "update" {
		return updateNode(ctx, env, o.args[1], o.args[2:], o.has("reset-features"))
	}
	if len(o.args) != 2 || (o.args[0] != "drain" && o.args[0] != "resume" && o.args[0] != "forget-key") {
		return errors.New(usage)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if o.args[0] == "forget-key" {
		return cl.ForgetNodeKey(ctx, o.args[1])
	}
	return cl.Drain(ctx, api.DrainRequest{Node: o.args[1], Drain: o.args[0] == "drain", Reason: o.get("reason"), Migrate: o.has("migrate")})
}

// checkCluster checks that -M names this cluster (its ClusterName
// setting), as sbatch refuses a cluster its database does not know.
func checkCluster(ctx context.Context, cl *api.Client, name string) error {
	pv, err := cl.Policy(ctx)
	if err != nil {
		return fmt.Errorf("reading the cluster's name for -M: %w", err)
	}
	if pv.Config.ClusterName == "" {
		return fmt.Errorf("-M %s: this cluster has no name; an administrator gives it one with corral config set ClusterName=NAME, or drop -M", display.Safe(name))
	}
	if name != pv.Config.ClusterName {
		return fmt.Errorf("-M %s: no such cluster: this is %s (corral runs one cluster per set of controllers)", display.Safe(name), display.Safe(pv.Config.ClusterName))
	}
	return nil
}

// endedAlready reports whether a cancel's refusal says the job had ended
// (scancel -Q is silent about those).
func endedAlready(msg string) bool {
	return strings.Contains(msg, "already finished") || strings.Contains(msg, "already completing")
}

// confirmCancel asks, as scancel -i does, about each job the filter
// selects that has not ended: "Cancel job_id=12 name=x partition=batch
// [y/n]? " on standard output, an answer on standard input. It returns a
// filter naming only the jobs confirmed (by id, or task).
func confirmCancel(ctx context.Context, env *cliEnv, cl *api.Client, f api.JobFilter) (api.JobFilter, error) {
	jobs, err := cl.Jobs(ctx, f, true)
	if err != nil {
		return api.JobFilter{}, err
	}
	in := bufio.NewReader(env.stdin)
	var out api.JobFilter
	for _, j := range jobs {
		if j.State.Terminal() {
			continue
		}
		fmt.Fprintf(env.stdout, "Cancel job_id=%s name=%s partition=%s [y/n]? ", j.Ref(), display.Safe(j.Spec.Name), display.Safe(cmp.Or(j.Spec.Partition, api.DefaultPartition)))
		line, err := in.ReadString('\n')
		if ans := strings.TrimSpace(line); ans == "y" || ans == "Y" {
			if j.IsArrayTask() && len(f.Tasks) > 0 {
				out.Tasks = append(out.Tasks, api.TaskRef{Array: j.ArrayJobID, Task: j.ArrayTaskID})
			} else {
				out.IDs = append(out.IDs, j.ID)
			}
		}
		if err != nil {
			break // no more answers: the rest are not cancelled
		}
	}
	return out, nil
}
