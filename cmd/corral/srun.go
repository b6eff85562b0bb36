package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"corral/api"
	"corral/internal/getopt"
	"corral/internal/hostlist"
	"corral/internal/pmi"
)

// srun inside a job (SLURM_JOB_ID set) launches a step: it asks the
// controllers for one (its id and its tasks' layout over the job's
// nodes), runs every task with an exec on its node, relays their output
// here (into the job's output, for a batch script) line by line, with
// "TASK: " in front under --label, and exits with the worst task's status.
// From inside a job it reaches the controllers through its node's daemon
// (CORRAL_STEP_ADDR, CORRAL_STEP_TOKEN), elsewhere with the caller's
// credentials (CORRAL_ADDR).

// srunOptions are the options srun takes.
var srunOptions = []getopt.Option{
	valued(0, "jobid", "JOB", "the job to run in (default: SLURM_JOB_ID); with --overlap, a command in a running job (corral exec)"),
	flag(0, "overlap", "share the job's resources with its other steps (how every step runs)"),
	flag(0, "pty", "give the command a terminal (with --jobid)"),
	flag('u', "unbuffered", "accepted: output is relayed as it comes"),
	valued('D', "chdir", "DIR", "working directory of the tasks (default: this one)"),
	valued('n', "ntasks", "N", "tasks of the step (default: the job's, or one per node of -N)"),
	valued('N', "nodes", "N", "nodes of the job the step runs on (default: as many as the tasks need)"),
	valued(0, "ntasks-per-node", "N", "the most tasks on one node"),
	valued('c', "cpus-per-task", "N", "CPUs per task (default: the job's)"),
	flag('l', "label", "put the task id in front of every line of output"),
	valued('J', "job-name", "NAME", "the step's name (default: the command's)"),
	valued('m', "distribution", "block|cyclic", "how tasks are laid out over the step's nodes (default: the job's, block)"),
	valued(0, "mpi", "pmi2|none", "MPI plug-in: pmi2 (the default: a PMI server for the step's tasks, PMI-2 and PMI-1 wires) or none"),
	// Outside a job srun gets an allocation first, with these of sbatch's
	// options too.
	valued('t', "time", "TIME", "outside a job: the allocation's time limit"),
	valued('p', "partition", "PARTITION", "outside a job: the allocation's partition"),
	valued(0, "mem", "SIZE", "outside a job: memory on each node of the allocation"),
	valued(0, "mem-per-cpu", "SIZE", "outside a job: memory per CPU of the allocation"),
	valued('A', "account", "ACCOUNT", "outside a job: the account to charge"),
	valued('q', "qos", "QOS", "outside a job: the allocation's QoS"),
	valued('w', "nodelist", "HOSTLIST", "outside a job: nodes the allocation must include"),
	valued('x', "exclude", "HOSTLIST", "outside a job: nodes the allocation must not use"),
	valued('C', "constraint", "LIST", "outside a job: node features the allocation needs"),
	flag(0, "exclusive", "outside a job: whole nodes"),
	valued(0, "gres", "LIST", "outside a job: generic resources on each node"),
}

// allocationOptions are srun's options that shape an allocation, passed to
// it as sbatch takes them.
var allocationOptions = []string{"ntasks", "nodes", "ntasks-per-node", "cpus-per-task", "time", "partition", "mem", "mem-per-cpu",
	"account", "qos", "nodelist", "exclude", "constraint", "gres"}

func runSrun(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "srun", getopt.StopAtNonOption, args, srunOptions...)
	if err != nil {
		return err
	}
	if len(o.args) == 0 {
		return fmt.Errorf("srun: give a command to run, e.g. srun -n 2 hostname")
	}
	if o.has("jobid") && (o.has("overlap") || o.has("pty")) {
		id, err := parseOneJobID(o.get("jobid"))
		if err != nil {
			return fmt.Errorf("srun: --jobid: %w", err)
		}
		return execInto(ctx, env, id, api.ExecRequest{Argv: o.args, Dir: o.get("chdir"), TTY: o.has("pty")})
	}
	req, err := stepRequest(o)
	if err != nil {
		return err
	}
	mpi := orString(o.get("mpi"), orString(env.getenv("SLURM_MPI_TYPE"), "pmi2"))
	switch mpi {
	case "pmi2", "none":
	case "pmix", "pmix_v3", "pmix_v4":
		return fmt.Errorf("srun: --mpi=%s: corral offers PMI-2 (--mpi=pmi2, which MPICH and its derivatives use), not PMIx", mpi)
	default:
		return fmt.Errorf("srun: --mpi=%s: use pmi2 or none", mpi)
	}
	l := &launcher{env: env, argv: o.args, label: o.has("label"), dir: o.get("chdir"), pty: o.has("pty"), pmi: mpi == "pmi2",
		cyclic: strings.HasPrefix(orString(o.get("distribution"), env.getenv("SLURM_DISTRIBUTION")), "cyclic")}
	jobText := o.get("jobid")
	if jobText == "" {
		jobText = firstEnv(env, "SLURM_JOB_ID", "CORRAL_JOB_ID")
	}
	if jobText == "" {
		// Outside any job: an allocation for this one step, given up
		// when it ends.
		a, err := allocate(ctx, env, "srun", allocationArgs(o), req.Name)
		if err != nil {
			return err
		}
		defer a.release(context.WithoutCancel(ctx))
		l.cl, l.job = a.cl, a.job.ID
		return l.run(ctx, req)
	}
	if l.job, err = parseOneJobID(jobText); err != nil {
		return fmt.Errorf("srun: job %q: %w", jobText, err)
	}
	if l.cl, err = stepClient(env); err != nil {
		return err
	}
	return l.run(ctx, req)
}

// allocationArgs are sbatch's options for the allocation srun's options
// ask for.
func allocationArgs(o *optSet) []string {
	var out []string
	for _, name := range allocationOptions {
		for _, v := range o.all[name] {
			out = append(out, "--"+name+"="+v)
		}
	}
	if o.has("exclusive") {
		out = append(out, "--exclusive")
	}
	return out
}

// stepRequest reads srun's layout options.
func stepRequest(o *optSet) (api.StepRequest, error) {
	req := api.StepRequest{Name: o.get("job-name")}
	if req.Name == "" {
		req.Name = filepath.Base(o.args[0])
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"ntasks", &req.NTasks}, {"nodes", &req.Nodes}, {"ntasks-per-node", &req.NTasksPerNode}, {"cpus-per-task", &req.CPUsPerTask}} {
		if v := o.get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return req, fmt.Errorf("srun: --%s=%s: give a whole number of at least 1", f.name, v)
			}
			*f.dst = n
		}
	}
	return req, req.Validate()
}

// stepClient reaches the controllers: through the node's daemon from
// inside a job, else as the CLI does.
func stepClient(env *cliEnv) (*api.Client, error) {
	addr, token := env.getenv("CORRAL_STEP_ADDR"), env.getenv("CORRAL_STEP_TOKEN")
	if addr == "" || token == "" {
		return env.client()
	}
	cl, err := api.NewClient(addr)
	if err != nil {
		return nil, err
	}
	cl.Auth = api.BearerToken(token)
	return cl, nil
}

func firstEnv(env *cliEnv, names ...string) string {
	for _, n := range names {
		if v := env.getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// launcher runs one step.
type launcher struct {
	env    *cliEnv
	cl     *api.Client
	job    uint64
	argv   []string
	label  bool
	cyclic bool
	dir    string
	// pty runs the step's one task on a terminal: this one, in raw mode.
	pty bool
	// pmi offers the step's tasks a PMI server (--mpi=pmi2), pmiServer
	// and pmiAddr once the step has one.
	pmi       bool
	pmiServer *pmi.Server
	pmiAddr   string
	term      *rawTerminal
	outMu     sync.Mutex
}

// task is one task of the step: its rank, its node and its stream.
type task struct {
	rank, local, node int
	stream            *api.ExecStream
}

func (l *launcher) run(ctx context.Context, req api.StepRequest) error {
	ctx = context.WithoutCancel(ctx) // signals go to the tasks
	st, err := l.cl.BeginStep(ctx, l.job, req)
	if err != nil {
		return fmt.Errorf("srun: job %d: %w", l.job, err)
	}
	if l.dir == "" {
		l.dir, _ = os.Getwd()
	}
	if l.pty && st.NTasks != 1 {
		l.cl.EndStep(ctx, l.job, st.ID, api.StepEnd{State: api.StateFailed, ExitCode: 1})
		return fmt.Errorf("srun: --pty gives one task a terminal; this step has %d (ask for -n 1)", st.NTasks)
	}
	if l.pty {
		if t, err := makeRawTerminal(os.Stdin); err == nil {
			l.term = t
			defer t.restore()
		}
	}
	if l.pmi {
		if err := l.servePMI(st); err != nil {
			l.cl.EndStep(ctx, l.job, st.ID, api.StepEnd{State: api.StateFailed, ExitCode: 1})
			return err
		}
		defer l.pmiServer.Close()
	}
	tasks, err := l.start(ctx, st)
	if err != nil {
		for _, t := range tasks {
			t.stream.Close()
		}
		l.cl.EndStep(ctx, l.job, st.ID, api.StepEnd{State: api.StateFailed, ExitCode: 1})
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if sig == syscall.SIGWINCH {
				if l.term != nil {
					tasks[0].stream.Resize(l.term.size())
				}
				continue
			}
			for _, t := range tasks {
				t.stream.Signal(api.SignalName(int(sig.(syscall.Signal))))
			}
		}
	}()
	go l.feed(tasks)
	if l.pmiServer != nil {
		go func() {
			// A rank that aborts (MPI_Abort) ends the step's other tasks.
			<-l.pmiServer.Aborted()
			if err := l.pmiServer.Err(); err != nil && !strings.Contains(err.Error(), "closed") {
				fmt.Fprintf(l.env.stderr, "srun: step %s: %v\n", st.Ref(), err)
				for _, t := range tasks {
					t.stream.Signal("KILL")
				}
			}
		}()
	}
	codes := make([]int, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.pty {
				codes[i] = l.relayTerminal(t)
				return
			}
			codes[i] = l.relay(t)
		}()
	}
	wg.Wait()
	worst := 0
	for _, c := range codes {
		worst = max(worst, c)
	}
	end := api.StepEnd{State: api.StateCompleted}
	if worst != 0 {
		end = api.StepEnd{State: api.StateFailed, ExitCode: min(worst, 255)}
	}
	if err := l.cl.EndStep(ctx, l.job, st.ID, end); err != nil {
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != 409 { // 409: cancelled meanwhile
			fmt.Fprintf(l.env.stderr, "srun: step %s: its end was not recorded: %v\n", st.Ref(), err)
		}
	}
	if worst != 0 {
		return exitStatus(worst)
	}
	return nil
}

// start runs every task of step st on its node.
func (l *launcher) start(ctx context.Context, st *api.Step) ([]task, error) {
	where := api.TaskNodes(st.Tasks, l.cyclic)
	local := make([]int, len(st.Tasks))
	var tasks []task
	for rank, node := range where {
		req := api.ExecRequest{Argv: l.argv, Dir: l.dir, Env: l.taskEnv(st, rank, local[node], node)}
		if l.pmiServer != nil {
			req.Env = append(req.Env, l.pmiServer.TaskEnv(l.pmiAddr, rank)...)
		}
		if l.pty {
			req.TTY = true
			if t := l.env.getenv("TERM"); t != "" {
				req.Env = append(req.Env, "TERM="+t)
			}
			if l.term != nil {
				req.Rows, req.Cols = l.term.size()
			}
		}
		s, err := l.cl.ExecTask(ctx, l.job, st.Nodes[node], st.ID, req)
		if err != nil {
			return tasks, fmt.Errorf("srun: step %s: task %d on node %s: %w", st.Ref(), rank, st.Nodes[node], err)
		}
		tasks = append(tasks, task{rank: rank, local: local[node], node: node, stream: s})
		local[node]++
	}
	return tasks, nil
}

// taskEnv is what task rank, the local-th on the step's node index node,
// gets on top of the job's environment.
func (l *launcher) taskEnv(st *api.Step, rank, local, node int) []string {
	itoa := strconv.Itoa
	vars := [][2]string{
		{"STEP_ID", itoa(st.ID)}, {"STEPID", itoa(st.ID)}, {"PROCID", itoa(rank)}, {"LOCALID", itoa(local)},
		{"NODEID", itoa(node)}, {"STEP_NODELIST", hostlist.Compress(st.Nodes)}, {"STEP_NUM_NODES", itoa(len(st.Nodes))},
		{"STEP_NUM_TASKS", itoa(st.NTasks)}, {"STEP_TASKS_PER_NODE", api.TasksPerNodeText(st.Tasks)},
		{"NTASKS", itoa(st.NTasks)}, {"NPROCS", itoa(st.NTasks)}, {"NNODES", itoa(len(st.Nodes))},
		{"TASKS_PER_NODE", api.TasksPerNodeText(st.Tasks)},
	}
	env := make([]string, 0, 2*len(vars))
	for _, v := range vars {
		env = append(env, "SLURM_"+v[0]+"="+v[1], "CORRAL_"+v[0]+"="+v[1])
	}
	return env
}

// servePMI starts the step's PMI server: on loopback when every task runs
// on this node (srun in a batch script of a one-node job, or in its VM),
// else on every address, named by this host's name (CORRAL_PMI_HOST
// overrides it), which the tasks' nodes reach.
func (l *launcher) servePMI(st *api.Step) error {
	here := firstEnv(l.env, "SLURMD_NODENAME", "CORRAL_NODENAME")
	local := here != "" && !slices.ContainsFunc(st.Nodes, func(n string) bool { return n != here })
	listen, host := "127.0.0.1:0", "127.0.0.1"
	if !local {
		listen = ":0"
		if host = l.env.getenv("CORRAL_PMI_HOST"); host == "" {
			host, _ = os.Hostname()
		}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("srun: step %s: the PMI server cannot listen: %w", st.Ref(), err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	l.pmiServer = pmi.NewServer(st.Ref(), api.TaskNodes(st.Tasks, l.cyclic))
	l.pmiAddr = net.JoinHostPort(host, port)
	go func() {
		l.pmiServer.Serve(ln)
	}()
	go func() {
		<-l.pmiServer.Aborted()
		ln.Close()
	}()
	return nil
}

// feed copies srun's standard input to every task (Slurm's --input=all),
// then closes theirs.
func (l *launcher) feed(tasks []task) {
	buf := make([]byte, 32<<10)
	for {
		n, err := l.env.stdin.Read(buf)
		for _, t := range tasks {
			if n > 0 {
				t.stream.Write(buf[:n])
			}
		}
		if err != nil {
			for _, t := range tasks {
				t.stream.CloseStdin()
			}
			return
		}
	}
}

// relayTerminal copies a --pty task's terminal output here as it comes
// and returns its exit status.
func (l *launcher) relayTerminal(t task) int {
	defer t.stream.Close()
	err := relayOutput(l.env, t.stream)
	var st exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	}
	fmt.Fprintf(l.env.stderr, "srun: %v\n", err)
	return 1
}

// relay copies task t's output here, a line at a time (labelled under
// --label), and returns its exit status: its code, or 128+N when signal N
// killed it.
func (l *launcher) relay(t task) int {
	defer t.stream.Close()
	var out, errb bytes.Buffer
	for {
		typ, p, err := t.stream.Next()
		if err != nil {
			l.flush(t.rank, l.env.stdout, &out, true)
			l.flush(t.rank, l.env.stderr, &errb, true)
			fmt.Fprintf(l.env.stderr, "srun: task %d: its stream broke: %v\n", t.rank, err)
			return 1
		}
		switch typ {
		case api.StreamStdout:
			out.Write(p)
			l.flush(t.rank, l.env.stdout, &out, false)
		case api.StreamStderr:
			errb.Write(p)
			l.flush(t.rank, l.env.stderr, &errb, false)
		case api.StreamExit:
			l.flush(t.rank, l.env.stdout, &out, true)
			l.flush(t.rank, l.env.stderr, &errb, true)
			var x api.ExecExit
			if err := json.Unmarshal(p, &x); err != nil || x.Error != "" {
				fmt.Fprintf(l.env.stderr, "srun: task %d: %s\n", t.rank, orString(x.Error, fmt.Sprint(err)))
				return 1
			}
			if x.Signal > 0 {
				return 128 + x.Signal
			}
			return x.Code
		}
	}
}

// flush writes buf's whole lines to w (its rest too, when all), under the
// launcher's lock so that lines of tasks never mix.
func (l *launcher) flush(rank int, w io.Writer, buf *bytes.Buffer, all bool) {
	l.outMu.Lock()
	defer l.outMu.Unlock()
	for {
		line, err := buf.ReadBytes('\n')
		if err != nil { // no newline: keep the rest for later
			if all && len(line) > 0 {
				l.write(rank, w, append(line, '\n'))
			} else if len(line) > 0 {
				buf.Write(line)
			}
			return
		}
		l.write(rank, w, line)
	}
}

func (l *launcher) write(rank int, w io.Writer, line []byte) {
	if l.label {
		fmt.Fprintf(w, "%d: ", rank)
	}
	w.Write(line)
}
