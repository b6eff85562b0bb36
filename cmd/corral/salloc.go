package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"corral/api"
	"corral/internal/hostlist"
	"corral/submit"
)

// salloc and srun outside a job get an allocation: a job whose script only
// holds its nodes, submitted with sbatch's options, waited for until it
// runs, and cancelled when the command run here is done. The commands run
// on this host (salloc's shell) or as a step in the allocation (srun).

// holdScript is an allocation's batch script: it keeps the job's nodes
// until the job is cancelled.
const allocationScript = "while :; do sleep 3600; done"

// allocation is a running job that holds nodes for commands run here.
type allocation struct {
	cl  *api.Client
	job *api.Job
	env *cliEnv
	// prog names the command in its messages: salloc or srun, as Slurm's.
	prog string
}

// allocate submits an allocation with options (sbatch's) and waits until
// it runs, saying so on stderr as salloc does. An interrupt while it waits
// cancels it.
func allocate(ctx context.Context, env *cliEnv, prog string, options []string, name string) (*allocation, error) {
	cl, err := env.client()
	if err != nil {
		return nil, err
	}
	user, _ := tokenUser(ctx, cl)
	if user == "" {
		if user, err = claimedUser(env, cl.Auth); err != nil {
			return nil, err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("cannot read the current directory: %w", err)
	}
	args := append(append([]string{"--job-name=" + name, "--output=/dev/null"}, options...), "--wrap", allocationScript)
	req, err := submit.Parse(args, submit.Context{Env: os.Environ(), Cwd: cwd, User: user, Now: time.Now(), Privileged: os.Geteuid() == 0})
	if err != nil {
		return nil, err
	}
	if !req.Quiet {
		for _, w := range req.Warnings {
			fmt.Fprintf(env.stderr, "%s: warning: %s\n", prog, w)
		}
	}
	req.Spec.RequestID = newRequestID()
	res, err := cl.Submit(ctx, []api.JobSpec{req.Spec})
	if err != nil {
		return nil, fmt.Errorf("%s: allocating nodes: %w", prog, err)
	}
	a := &allocation{cl: cl, env: env, prog: prog, job: &api.Job{ID: res[0].JobID}}
	fmt.Fprintf(env.stderr, "%s: Pending job allocation %d\n", prog, a.job.ID)
	if err := a.wait(ctx); err != nil {
		a.release(context.WithoutCancel(ctx))
		return nil, err
	}
	fmt.Fprintf(env.stderr, "%s: Granted job allocation %d\n", prog, a.job.ID)
	return a, nil
}

// wait waits until the allocation's job runs; it fails when the job ends
// first or ctx is cancelled (^C).
func (a *allocation) wait(ctx context.Context) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	said := false
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		j, err := a.cl.Job(ctx, a.job.ID, false)
		if err != nil {
			return err
		}
		switch {
		case j.State == api.StateRunning:
			a.job = j
			return nil
		case j.State.Terminal():
			return fmt.Errorf("%s: job %d ended %s before it ran: %s", a.prog, j.ID, j.State, j.Message)
		case !said && j.Reason != "" && j.Reason != api.ReasonNone:
			fmt.Fprintf(a.env.stderr, "%s: job %d queued and waiting for resources (%s)\n", a.prog, j.ID, j.Reason)
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case sig := <-sigs:
			return fmt.Errorf("%s: job allocation %d abandoned (%v)", a.prog, a.job.ID, sig)
		case <-time.After(delay):
		}
	}
}

// release cancels the allocation's job.
func (a *allocation) release(ctx context.Context) {
	if _, err := a.cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{a.job.ID}}, By: a.cl.User}); err != nil {
		fmt.Fprintf(a.env.stderr, "%s: job %d: cancelling the allocation: %v\n", a.prog, a.job.ID, err)
		return
	}
	fmt.Fprintf(a.env.stderr, "%s: Relinquishing job allocation %d\n", a.prog, a.job.ID)
}

// jobEnv is what a command run here in the allocation gets: Slurm's
// variables of the job (srun in it finds the job by SLURM_JOB_ID).
func (a *allocation) jobEnv() []string {
	j := a.job
	nodes := j.Nodes
	if len(nodes) == 0 && j.Node != "" {
		nodes = []string{j.Node}
	}
	counts := api.TaskCounts(j.Spec.NTasks, j.Spec.NTasksPerNode, max(len(nodes), 1))
	ntasks := 0
	for _, c := range counts {
		ntasks += c
	}
	id, itoa := strconv.FormatUint(j.ID, 10), strconv.Itoa
	vars := [][2]string{
		{"JOB_ID", id}, {"JOBID", id}, {"JOB_NAME", j.Spec.Name}, {"JOB_NODELIST", hostlist.Compress(nodes)},
		{"NODELIST", hostlist.Compress(nodes)}, {"JOB_NUM_NODES", itoa(len(nodes))}, {"NNODES", itoa(len(nodes))},
		{"NTASKS", itoa(ntasks)}, {"NPROCS", itoa(ntasks)}, {"TASKS_PER_NODE", api.TasksPerNodeText(counts)},
		{"JOB_PARTITION", j.Spec.Partition}, {"JOB_ACCOUNT", j.Spec.Account}, {"CPUS_PER_TASK", itoa(max(j.Spec.CPUsPerTask, 1))},
	}
	out := os.Environ()
	for _, v := range vars {
		out = append(out, "SLURM_"+v[0]+"="+v[1], "CORRAL_"+v[0]+"="+v[1])
	}
	return out
}

// runSalloc is `salloc [options] [command [args]]`: an allocation with
// sbatch's options, then the command (default: the user's shell) run
// here with the job's variables; the allocation ends when it exits, and
// salloc exits with its status.
func runSalloc(ctx context.Context, env *cliEnv, args []string) error {
	options, command, err := submit.SplitCommand(args)
	if err != nil {
		return err
	}
	if slicesContainsHelp(options) {
		fmt.Fprintln(env.stdout, "usage: salloc [sbatch options] [command [args...]]: an allocation, the command (default $SHELL) run here in it; srun in it launches steps")
		return nil
	}
	if len(command) == 0 {
		command = []string{orString(env.getenv("SHELL"), "/bin/sh")}
	}
	a, err := allocate(ctx, env, "salloc", options, filepath.Base(command[0]))
	if err != nil {
		return err
	}
	defer a.release(context.WithoutCancel(ctx))
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.Env = env.stdin, env.stdout, env.stderr, a.jobEnv()
	// The command handles the terminal's signals; salloc waits for it.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitStatus(128 + int(ws.Signal()))
		}
		return exitStatus(ee.ExitCode())
	case err != nil:
		return fmt.Errorf("salloc: %s: %w", command[0], err)
	}
	return nil
}

// slicesContainsHelp reports whether -h, --help or --usage is among the
// options.
func slicesContainsHelp(options []string) bool {
	return slices.ContainsFunc(options, func(o string) bool { return o == "-h" || o == "--help" || o == "--usage" })
}
