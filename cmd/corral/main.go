package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"corral/api"
	"corral/display"
	"corral/internal/authd"
	"corral/internal/getopt"
	"corral/internal/pki"
)

// command is one subcommand of the corral binary.
type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"submit":          {"submit a batch script (sbatch)", runSubmit},
		"queue":           {"list jobs (squeue)", runQueue},
		"update":          {"change a pending job's dependency (scontrol update)", runUpdate},
		"nodes":           {"list nodes and partitions (sinfo)", runNodes},
		"status":          {"show the controllers, the leader and Raft indexes", runStatus},
		"sim":             {"replay a workload trace (SWF) through the scheduler in virtual time", runSim},
		"cancel":          {"cancel jobs (scancel)", runCancel},
		"show":            {"show a job or a node in detail (scontrol show)", runShow},
		"hold":            {"hold pending jobs (scontrol hold)", runHold},
		"release":         {"release held jobs (scontrol release)", runRelease},
		"suspend":         {"pause running jobs, keeping their allocation (scontrol suspend)", runSuspend},
		"resume":          {"continue suspended jobs (scontrol resume)", runResume},
		"requeue":         {"put running, suspended or finished jobs back in the queue: requeue [--hold] ID... (scontrol requeue, requeuehold)", runRequeue},
		"migrate":         {"move running jobs to other nodes while they run: migrate [--to NODE] ID... | migrate --cancel ID... (live migration)", runMigrate},
		"checkpoint":      {"park running jobs in checkpoint files, releasing their nodes (SUSPENDED, Checkpointed): checkpoint ID...", runCheckpoint},
		"restore":         {"run checkpointed jobs again from their checkpoints: restore [--to NODE] ID... (also scontrol resume)", runRestore},
		"ping":            {"ask each controller member whether it is up (scontrol ping)", runPing},
		"top":             {"move your pending jobs to the top of your queue, in the order given: top ID[,ID...] (scontrol top)", runTop},
		"attach":          {"stream a running job's output as it is produced, from its node (sattach)", runAttach},
		"exec":            {"run a command in a running job: exec JOB [--] CMD... (srun --jobid=JOB --overlap CMD)", runExec},
		"cp":              {"copy a file into or out of a running job: cp JOB:PATH LOCAL | cp LOCAL JOB:PATH", runCp},
		"salloc":          {"get an allocation, run a command (default your shell) here in it, give it up when the command exits (salloc)", runSalloc},
		"srun":            {"launch a step of tasks on a job's nodes (inside a job); srun --jobid=JOB --overlap [--pty] CMD...: exec into a running job", runSrun},
		"node":            {"drain or resume a node, or let a reinstalled one bring a new key: node drain NAME --reason TEXT [--migrate] | node resume NAME | node forget-key NAME", runNodeAdmin},
		"config":          {"show or change the scheduler's settings: config show | config set NAME=VALUE...", runConfig},
		"partition":       {"add, modify, delete or list partitions (scontrol update PartitionName=...)", runPartition},
		"reservation":     {"create, update, delete, list or show advance reservations (scontrol create|update|delete reservation, sinfo -T)", runReservation},
		"qos":             {"add, modify, delete or list QoS (sacctmgr ... qos)", runQOS},
		"account":         {"add, modify, delete or list fair-share accounts (sacctmgr ... account)", runAccount},
		"user":            {"add, modify or delete a user's place in an account (sacctmgr ... user)", runUser},
		"prio":            {"show pending jobs' priorities and their factors (sprio)", runPrio},
		"share":           {"show the fair-share tree: shares, usage and factors (sshare)", runShare},
		"why":             {"explain why a job waits, or where and why it runs", runWhy},
		"acct":            {"list finished jobs' accounting records (sacct)", runAcct},
		"token":           {"create, list, renew or revoke personal and service tokens (CORRAL_TOKEN)", runToken},
		"role":            {"give users a role: role set USER --role admin|operator|coordinator [--account A]", runRole},
		"whoami":          {"show who the controllers take you for, and how they know", runWhoami},
		"audit":           {"list the audit records you may read, or check them: audit [--tenant T] [--since 1h] | audit verify [--data DIR]", runAudit},
		"ctld":            {"run a controller member", runCtld},
		"ca":              {"make the cluster's TLS authority and its certificates: ca init | ca issue --role R --name N", runCA},
		"authd":           {"run the host's identity agent, which vouches for local Unix users with the host's certificate", runAuthd},
		"noded":           {"run a node daemon", runNoded},
		"dev":             {"run an embedded cluster (one controller, two nodes) in this process", runDev},
		"nfsd":            {"serve one job VM's files over NFS (started by the node daemon)", runNFSD},
		"install-aliases": {"create sbatch, squeue, sinfo, scancel, scontrol, sacct, sprio, sshare, srun, salloc and sattach symlinks in DIR", runInstallAliases},
		"version":         {"print the version", runVersion},
	}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultDevAddr is where `corral dev` serves and where the CLI looks when
// CORRAL_ADDR is unset (6817 is slurmctld's port).
const defaultDevAddr = "http://127.0.0.1:6817"

// interruptible names the commands that run until they are stopped: they
// get a context that SIGINT and SIGTERM end, so that they stop cleanly.
// Every other command is one request and leaves both signals their
// default action (the process ends at once, as Slurm's commands do):
// catching them costs each process two more threads (os/signal's), a
// fifth of what a short command costs to start. Commands that may wait
// under an option of theirs (submit --wait, queue --iterate) catch them
// when they start waiting (untilInterrupted).
var interruptible = map[string]bool{
	"ctld": true, "noded": true, "dev": true, "authd": true, "nfsd": true, "sim": true,
	"attach": true, "exec": true, "srun": true, "cp": true,
}

// untilInterrupted returns ctx ended by SIGINT or SIGTERM as well.
func untilInterrupted(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// cliEnv is what every command may use of its surroundings.
type cliEnv struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	prog           string
	// argv is the command line as dispatch was given it, for the client
	// binary to hand a command it does not hold to the full one.
	argv []string
}

func (e *cliEnv) client() (*api.Client, error) {
	addr := e.getenv("CORRAL_ADDR")
	if addr == "" {
		addr = defaultDevAddr
	}
	var tlsCfg *tls.Config
	if files := (pki.Files{CA: e.getenv("CORRAL_CA"), Cert: e.getenv("CORRAL_CERT"), Key: e.getenv("CORRAL_KEY")}); files.Enabled() {
		var err error
		if tlsCfg, err = files.Client(); err != nil {
			return nil, err
		}
	}
	cl, err := api.NewTLSClient(addr, tlsCfg)
	if err != nil {
		return nil, err
	}
	// What proves who the caller is (see callerCredentials), and whom it
	// says it is (see callerIdentity), which a cluster without --auth
	// believes.
	if cl.Auth, err = callerCredentials(e); err != nil {
		return nil, err
	}
	cl.User, _ = claimedUser(e, cl.Auth)
	return cl, nil
}

// slurmAliases maps a Slurm command name to a corral subcommand.
var slurmAliases = map[string]string{
	"sbatch": "submit", "squeue": "queue", "sinfo": "nodes", "scancel": "cancel", "scontrol": "scontrol",
	"sprio": "prio", "sshare": "share", "srun": "srun", "sattach": "attach", "sacct": "acct", "salloc": "salloc",
}

func main() {
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, getenv: os.Getenv}
	os.Exit(dispatch(context.Background(), env, os.Args))
}

// dispatch runs argv and returns the process exit code.
func dispatch(ctx context.Context, env *cliEnv, argv []string) int {
	if len(argv) == 0 {
		// execve allows an empty argv; run as corral rather than panic.
		argv = []string{"corral"}
	}
	env.argv = argv
	prog := filepath.Base(argv[0])
	args := argv[1:]
	name, isAlias := slurmAliases[prog]
	if !isAlias {
		prog = "corral"
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			usage(env.stdout)
			return 0
		}
		name, args = args[0], args[1:]
	}
	env.prog = prog
	if interruptible[name] {
		var stop context.CancelFunc
		ctx, stop = untilInterrupted(ctx)
		defer stop()
	}
	if name == "scontrol" {
		return runScontrol(ctx, env, args)
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(env.stderr, "corral: unknown command %q (run 'corral help' for the list)\n", name)
		return 2
	}
	return exitCode(env, cmd.run(ctx, env, args))
}

// exitStatus lets a command choose its exit code (submit --wait exits with
// the job's).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func exitCode(env *cliEnv, err error) int {
	err = handOff(env, err)
	var st exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	case errors.Is(err, errHelp):
		return 0
	}
	// The message may quote what the server sent: escaped for the terminal.
	fmt.Fprintf(env.stderr, "%s: error: %s\n", env.prog, display.SafeText(err.Error()))
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce.code
	}
	var ge *getopt.Error
	if errors.As(err, &ge) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "corral — a batch scheduler with Slurm's job model")
	fmt.Fprintln(w, "\nusage: corral COMMAND [options]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nThe CLI finds the cluster through CORRAL_ADDR (comma-separated controller URLs);")
	fmt.Fprintf(w, "unset, it uses the embedded cluster's %s.\n", defaultDevAddr)
	fmt.Fprintln(w, "It proves who you are with CORRAL_TOKEN (or a 0600 file named by CORRAL_TOKEN_FILE), else")
	fmt.Fprintln(w, "with the host's identity agent (corral authd) when its socket, CORRAL_AUTHD or "+authd.DefaultSocket+", exists.")
	fmt.Fprintln(w, "Run 'corral COMMAND --help' for a command's options.")
}

// scontrolCommands lists the scontrol commands corral supports.
const scontrolCommands = "show job|node|partition|reservation|config [ID], show hostnames|hostlist LIST, hold ID, release ID, suspend ID, resume ID, requeue ID, requeuehold ID, migrate ID [Node=NAME], top ID[,ID...], ping, update JobId=ID Dependency=LIST | update PartitionName=NAME KEY=VALUE... | update ReservationName=NAME KEY=VALUE..., create reservation KEY=VALUE..., delete ReservationName=NAME"

// runScontrol maps scontrol's "show job 12", "hold 12", "release 12" onto
// the matching subcommands.
func runScontrol(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "scontrol: give a command: "+scontrolCommands)
		return 2
	}
	sub := strings.ToLower(args[0])
	if sub == "-h" || sub == "--help" || sub == "help" {
		fmt.Fprintln(env.stdout, "usage: scontrol "+scontrolCommands)
		return 0
	}
	cmd, ok := map[string]command{"show": commands["show"], "hold": commands["hold"], "release": commands["release"],
		"suspend": commands["suspend"], "resume": commands["resume"], "update": commands["update"],
		"requeue": commands["requeue"], "requeuehold": {run: runRequeueHold}, "ping": commands["ping"], "migrate": commands["migrate"],
		"top": commands["top"], "create": {run: scontrolCreate}, "delete": {run: scontrolDelete}}[sub]
	if !ok {
		fmt.Fprintf(env.stderr, "scontrol: %q is not supported (supported: show, hold, release, suspend, resume, requeue, requeuehold, migrate, top, ping, update, create, delete)\n", args[0])
		return 2
	}
	return exitCode(env, cmd.run(ctx, env, args[1:]))
}

func runVersion(_ context.Context, env *cliEnv, _ []string) error {
	fmt.Fprintf(env.stdout, "corral %s\n", version)
	return nil
}

func orString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
