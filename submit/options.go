package submit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"corral/api"
	"corral/internal/getopt"
)

// optionDef is one sbatch option: its grammar and how it changes a request.
type optionDef struct {
	getopt.Option
	// apply checks the value and records it in b. has is false only for an
	// OptionalArgument option given without a value.
	apply func(b *builder, value string, has bool) error
	// cliOnly, when set, says why the option is refused on a #SBATCH line.
	cliOnly string
}

const (
	req  = getopt.RequiredArgument
	none = getopt.NoArgument
	opt  = getopt.OptionalArgument
)

// supportedOptions lists the options corral implements, in help order:
// jobOptions with nodeOptions after -c.
var supportedOptions = withNodeOptions(jobOptions)

// withNodeOptions returns defs with nodeOptions inserted after
// --cpus-per-task.
func withNodeOptions(defs []optionDef) []optionDef {
	i := slices.IndexFunc(defs, func(d optionDef) bool { return d.Long == "cpus-per-task" }) + 1
	return slices.Concat(defs[:i], nodeOptions, defs[i:])
}

// jobOptions are the options of a job's other requests, in help order.
var jobOptions = []optionDef{
	{Option: getopt.Option{Short: 'J', Long: "job-name", Arg: req, ArgName: "NAME", Help: "name of the job (default: the script's file name)"},
		apply: func(b *builder, v string, _ bool) error { return setWord(&b.spec.Name, "--job-name", v, true) }},
	{Option: getopt.Option{Short: 'p', Long: "partition", Arg: req, ArgName: "PARTITION", Help: "partition to run in (default: the cluster's default)"},
		apply: func(b *builder, v string, _ bool) error { return setWord(&b.spec.Partition, "--partition", v, false) }},
	{Option: getopt.Option{Short: 't', Long: "time", Arg: req, ArgName: "TIME", Help: "time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED"},
		apply: applyTime},
	{Option: getopt.Option{Short: 'n', Long: "ntasks", Arg: req, ArgName: "N", Help: "number of tasks (default 1)"},
		apply: func(b *builder, v string, _ bool) error {
			b.ntasksSet = true
			return setCount(&b.spec.NTasks, "--ntasks", "-n 4", v)
		}},
	{Option: getopt.Option{Short: 'c', Long: "cpus-per-task", Arg: req, ArgName: "N", Help: "CPUs per task (default 1)"},
		apply: func(b *builder, v string, _ bool) error {
			b.cpusPerTaskSet = true
			return setCount(&b.spec.CPUsPerTask, "--cpus-per-task", "-c 4", v)
		}},
	{Option: getopt.Option{Long: "cpus-per-gpu", Arg: req, ArgName: "N", Help: "CPUs per GPU asked for: the job gets at least N × its GPUs CPUs (excludes -c)"},
		apply: func(b *builder, v string, _ bool) error {
			return setCount(&b.spec.CPUsPerGPU, "--cpus-per-gpu", "--cpus-per-gpu=8", v)
		}},
	{Option: getopt.Option{Long: "tmp", Arg: req, ArgName: "SIZE", Help: "node-local scratch space the job holds, e.g. 10G (units K, M, G, T; default M)"},
		apply: func(b *builder, v string, _ bool) error {
			mib, err := ParseMemory(v)
			if err != nil {
				return wrapValueError("--tmp", v, err)
			}
			b.spec.TmpMB = mib
			return nil
		}},
	{Option: getopt.Option{Long: "hint", Arg: req, ArgName: "TYPE", Help: "nomultithread or compute_bound (one thread per core, the others held idle), memory_bound (that, spread over NUMA nodes), or multithread (the default)"},
		apply: func(b *builder, v string, _ bool) error {
			switch h := strings.ToLower(v); h {
			case api.HintNoMultithread, api.HintComputeBound, api.HintMemoryBound:
				b.spec.Hint = h
			case api.HintMultithread:
				b.spec.Hint = ""
			default:
				return optionError("--hint", v, nil, "use nomultithread, multithread, compute_bound or memory_bound")
			}
			return nil
		}},
	{Option: getopt.Option{Long: "threads-per-core", Arg: req, ArgName: "N", Help: "threads per core the job uses: 1 runs it on one thread of each core, the others held idle"},
		apply: func(b *builder, v string, _ bool) error {
			return setCount(&b.spec.ThreadsPerCore, "--threads-per-core", "--threads-per-core=1", v)
		}},
	{Option: getopt.Option{Long: "ntasks-per-core", Arg: req, ArgName: "N", Help: "tasks per core: 1 (with one CPU per task) gives each task a core of its own"},
		apply: func(b *builder, v string, _ bool) error {
			return setCount(&b.spec.NTasksPerCore, "--ntasks-per-core", "--ntasks-per-core=1", v)
		}},
	{Option: getopt.Option{Long: "mem-bind", Arg: req, ArgName: "[quiet|verbose,]TYPE", Help: "where the job's memory is: none, local or rank (its CPUs' NUMA nodes only), prefer, map_mem:NODES or mask_mem:MASKS (those NUMA nodes)"},
		apply: applyMemBind},
	{Option: getopt.Option{Short: 'O', Long: "overcommit", Help: "allocate CPUs as for one task: -c CPUs, however many tasks (-n) share them"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.Overcommit = true; return nil }},
	{Option: getopt.Option{Long: "mem", Arg: req, ArgName: "SIZE", Help: "memory for the job, e.g. 4G (units K, M, G, T; default M)"},
		apply: func(b *builder, v string, _ bool) error { return b.setMemory("--mem", v) }},
	{Option: getopt.Option{Long: "mem-per-cpu", Arg: req, ArgName: "SIZE", Help: "memory per CPU, e.g. 2G; excludes --mem"},
		apply: func(b *builder, v string, _ bool) error { return b.setMemory("--mem-per-cpu", v) }},
	{Option: getopt.Option{Short: 'o', Long: "output", Arg: req, ArgName: "PATTERN", Help: "standard output file (default slurm-%j.out); %j %x %u %N %A %a expand"},
		apply: func(b *builder, v string, _ bool) error { return setPath(&b.spec.Output, "--output=job-%j.out", v) }},
	{Option: getopt.Option{Short: 'e', Long: "error", Arg: req, ArgName: "PATTERN", Help: "standard error file (default: the output file)"},
		apply: func(b *builder, v string, _ bool) error { return setPath(&b.spec.Error, "--error=job-%j.err", v) }},
	{Option: getopt.Option{Short: 'D', Long: "chdir", Arg: req, ArgName: "DIR", Help: "directory the job runs in (relative to the current one)"},
		apply: func(b *builder, v string, _ bool) error { return setPath(&b.chdir, "--chdir=/scratch/run1", v) }},
	{Option: getopt.Option{Long: "export", Arg: req, ArgName: "LIST", Help: "environment to pass: ALL (default), NONE, or [ALL,]VAR[=value],..."},
		apply: applyExport},
	{Option: getopt.Option{Long: "wrap", Arg: req, ArgName: "COMMAND", Help: `run COMMAND in a generated "#!/bin/sh" script instead of a script file`},
		apply: applyWrap, cliOnly: "a script already holds its commands"},
	{Option: getopt.Option{Short: 'A', Long: "account", Arg: req, ArgName: "ACCOUNT", Help: "account to charge"},
		apply: func(b *builder, v string, _ bool) error { return setWord(&b.spec.Account, "--account", v, false) }},
	{Option: getopt.Option{Short: 'q', Long: "qos", Arg: req, ArgName: "QOS", Help: "quality of service"},
		apply: func(b *builder, v string, _ bool) error { return setWord(&b.spec.QOS, "--qos", v, false) }},
	{Option: getopt.Option{Long: "reservation", Arg: req, ArgName: "NAME", Help: "run inside advance reservation NAME (scontrol show reservation lists them): on its nodes, within its window"},
		apply: func(b *builder, v string, _ bool) error {
			return setWord(&b.spec.Reservation, "--reservation", v, false)
		}},
	{Option: getopt.Option{Long: "signal", Arg: req, ArgName: "[B:]SIG[@TIME]", Help: "send SIG to the job's processes TIME seconds (default 60) before its time limit; B: only to the batch script"},
		apply: applySignal},
	{Option: getopt.Option{Long: "requeue", Help: "requeue the job if its node fails or it is preempted"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.Requeue = true; return nil }},
	{Option: getopt.Option{Long: "no-requeue", Help: "never requeue the job"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.Requeue = false; return nil }},
	{Option: getopt.Option{Short: 'H', Long: "hold", Help: "submit the job held; release it to let it run"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.Hold = true; return nil }},
	{Option: getopt.Option{Short: 'b', Long: "begin", Arg: req, ArgName: "TIME", Help: "start no earlier than TIME, e.g. 16:00, 2024-05-01T08:00, now+1hour, tomorrow"},
		apply: applyBegin},
	{Option: getopt.Option{Long: "deadline", Arg: req, ArgName: "TIME", Help: "cancel the job (DEADLINE) if it could no longer end by TIME, in --begin's forms"},
		apply: func(b *builder, v string, _ bool) error {
			t, err := ParseDeadline(v, b.now)
			if err != nil {
				return err
			}
			b.spec.Deadline = t
			return nil
		}},
	{Option: getopt.Option{Long: "priority", Arg: req, ArgName: "N|TOP", Help: "a fixed priority for the job instead of the scheduler's factors (operators and administrators only)"},
		apply: applyPriority},
	{Option: getopt.Option{Long: "export-file", Arg: req, ArgName: "FILE|FD", Help: "add the NAME=value entries of FILE (or descriptor FD), NUL-separated, to the job's environment"},
		apply: func(b *builder, v string, _ bool) error { return setPath(&b.exportFile, "--export-file=vars.env", v) }},
	{Option: getopt.Option{Short: 'M', Long: "clusters", Arg: req, ArgName: "NAME", Help: "the cluster to submit to: this cluster's name (corral config set ClusterName=...); --parsable then prints ID;NAME"},
		apply: func(b *builder, v string, _ bool) error { return setWord(&b.clusters, "--clusters", v, false) }},
	{Option: getopt.Option{Long: "comment", Arg: req, ArgName: "TEXT", Help: "free text stored with the job"},
		apply: func(b *builder, v string, _ bool) error { b.spec.Comment = v; return nil }},
	{Option: getopt.Option{Long: "nice", Arg: opt, ArgName: "N", Help: "lower the job's priority by N (default 100)"},
		apply: applyNice},
	{Option: getopt.Option{Long: "gres", Arg: req, ArgName: "LIST", Help: "generic resources, e.g. gpu:2 or gpu:a100:1"},
		apply: applyGres},
	{Option: getopt.Option{Short: 'd', Long: "dependency", Arg: req, ArgName: "LIST", Help: "wait for other jobs, e.g. afterok:12:13 or after:12+5?afterany:14"},
		apply: applyDependency},
	{Option: getopt.Option{Long: "kill-on-invalid-dep", Arg: req, ArgName: "yes|no", Help: "cancel the job when its dependency can never be met (default no: it stays pending)"},
		apply: applyKillOnInvalidDep},
	{Option: getopt.Option{Short: 'a', Long: "array", Arg: req, ArgName: "INDEXES", Help: "submit a job array, e.g. 0-99, 1,3,5-7 or 0-15:4%2"},
		apply: applyArray},
	{Option: getopt.Option{Long: "parsable", Help: "print only the job id"},
		apply: func(b *builder, _ string, _ bool) error { b.parsable = true; return nil }},
	{Option: getopt.Option{Short: 'W', Long: "wait", Help: "wait for the job to end and exit with its exit code"},
		apply: func(b *builder, _ string, _ bool) error { b.wait = true; return nil }},
	{Option: getopt.Option{Long: "test-only", Help: "say when and where the job would start (one scheduling pass over the current queue); submit nothing"},
		apply: func(b *builder, _ string, _ bool) error { b.testOnly = true; return nil }},
	{Option: getopt.Option{Short: 'G', Long: "gpus", Arg: req, ArgName: "[TYPE:]N", Help: "GPUs for the job in all, e.g. --gpus=2 or --gpus=h100:2 (on one node the same as --gres=gpu:[TYPE:]N; on several split evenly over them)"},
		apply: func(b *builder, v string, _ bool) error {
			b.gpusTotal = v
			return addGPUs(b, "--gpus", v, 1)
		}},
	{Option: getopt.Option{Long: "gpus-per-task", Arg: req, ArgName: "[TYPE:]N", Help: "GPUs per task: N × the tasks on a node, on each node"},
		apply: func(b *builder, v string, _ bool) error {
			b.gpusPerTask = v
			_, count, ok := strings.Cut(v, ":")
			if !ok {
				count = v
			}
			if n, err := strconv.Atoi(count); err != nil || n < 1 || n > MaxGresCount {
				return optionError("--gpus-per-task", v, nil, "give a GPU count from 1 to %d, optionally with a type: e.g. --gpus-per-task=1 or --gpus-per-task=h100:1", MaxGresCount)
			}
			return nil
		}},
	{Option: getopt.Option{Long: "sriov", Arg: req, ArgName: "N", Help: "SR-IOV virtual functions for the job (same as --gres=vf:N)"},
		apply: applySRIOV},
	{Option: getopt.Option{Long: "hugepages", Arg: req, ArgName: "SIZE:COUNT", Help: "hugepages for the job's memory, e.g. 2M:512 or 1G:4 (comma-separated for both)"},
		apply: applyHugepages},
	{Option: getopt.Option{Long: "numa", Arg: req, ArgName: "POLICY", Help: "prefer (default: as local as possible), strict (CPUs, memory and devices on the chosen NUMA nodes only) or none"},
		apply: applyNUMA},
	{Option: getopt.Option{Long: "image", Arg: req, ArgName: "NAME", Help: "guest image for jobs run in a VM"},
		apply: func(b *builder, v string, _ bool) error { return setWord(&b.spec.Image, "--image", v, false) }},
	{Option: getopt.Option{Long: "no-migrate", Help: "share the node's files with the job's VM over virtiofs: faster, but the VM cannot be live-migrated"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.NoMigrate = true; return nil }},
	{Option: getopt.Option{Long: "no-warm", Help: "boot the job's VM rather than restore it from a snapshot of a guest the node booted earlier (a warm start)"},
		apply: func(b *builder, _ string, _ bool) error { b.spec.NoWarm = true; return nil }},
	{Option: getopt.Option{Short: 'L', Long: "licenses", Arg: req, ArgName: "NAME[:N],...", Help: "cluster licenses the job holds while it runs, e.g. matlab:2,fluent"},
		apply: func(b *builder, v string, _ bool) error {
			ls, err := api.ParseLicenses(v)
			if err != nil {
				return optionError("--licenses", v, nil, "%v", err)
			}
			b.spec.Licenses = ls
			return nil
		}},
	{Option: getopt.Option{Long: "gpus-per-node", Arg: req, ArgName: "[TYPE:]N", Help: "GPUs on each node of the job (same as --gres=gpu:[TYPE:]N)"},
		apply: func(b *builder, v string, _ bool) error {
			b.gpusTotal = ""
			return addGPUs(b, "--gpus-per-node", v, 1)
		}},
	{Option: getopt.Option{Long: "open-mode", Arg: req, ArgName: "append|truncate", Help: "how output files are opened: truncate (each run writes them anew, the default) or append"},
		apply: applyOpenMode},
	{Option: getopt.Option{Short: 'i', Long: "input", Arg: req, ArgName: "PATTERN", Help: "the batch script's standard input, a file (%j %x %u %N %A %a expand; default /dev/null)"},
		apply: func(b *builder, v string, _ bool) error { return setPath(&b.spec.Input, "--input=in-%j.txt", v) }},
	{Option: getopt.Option{Long: "propagate", Arg: opt, ArgName: "[LIMIT,...]", Help: "give the job this shell's soft resource limits: ALL (the default), NONE, or AS, CORE, CPU, DATA, FSIZE, MEMLOCK, NOFILE, NPROC, RSS, STACK"},
		apply: func(b *builder, v string, _ bool) error {
			names, err := api.ParsePropagate(v)
			if err != nil {
				return optionError("--propagate", v, nil, "%v", err)
			}
			b.propagate, b.propagateSet = names, true
			return nil
		}},
	{Option: getopt.Option{Long: "get-user-env", Arg: opt, ArgName: "[TIMEOUT][S|L]", Help: "add the user's login environment on the node under the exported one"},
		apply: func(b *builder, v string, _ bool) error {
			if strings.Trim(strings.TrimRight(v, "SLsl"), "0123456789") != "" || len(v) > 12 {
				return optionError("--get-user-env", v, nil, "give nothing, a timeout in seconds and/or S or L, e.g. --get-user-env=10L")
			}
			b.spec.GetUserEnv = true
			return nil
		}},
	{Option: getopt.Option{Long: "mail-type", Arg: req, ArgName: "TYPE,...", Help: "notify on job events: NONE, BEGIN, END, FAIL, REQUEUE, ALL, INVALID_DEPEND, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50, ARRAY_TASKS (STAGE_OUT never occurs)"},
		apply: func(b *builder, v string, _ bool) error {
			types, err := api.ParseMailType(v)
			if err != nil {
				return optionError("--mail-type", v, nil, "%v", err)
			}
			b.spec.MailType = types
			return nil
		}},
	{Option: getopt.Option{Long: "mail-user", Arg: req, ArgName: "USER", Help: "who gets the job's notifications (default: the submitting user)"},
		apply: func(b *builder, v string, _ bool) error {
			if why := api.MailUserProblem(v); why != "" {
				return optionError("--mail-user", v, nil, "%s (give a user name or an address, e.g. --mail-user=alice@example.org)", why)
			}
			b.spec.MailUser = v
			return nil
		}},
	{Option: getopt.Option{Long: "ignore-pbs", Help: "ignore #PBS lines in the script (corral reads none)"},
		apply: func(*builder, string, bool) error { return nil }},
	{Option: getopt.Option{Short: 'Q', Long: "quiet", Help: "print no warnings"},
		apply: func(b *builder, _ string, _ bool) error { b.quiet = true; return nil }},
	{Option: getopt.Option{Short: 'v', Long: "verbose", Help: "say what is submitted, on stderr (repeatable)"},
		apply: func(b *builder, _ string, _ bool) error { b.verbose++; return nil }},
	{Option: getopt.Option{Short: 'V', Long: "version", Help: "print the version and submit nothing"},
		apply: func(*builder, string, bool) error { return ErrVersion }, cliOnly: "it only makes sense on the command line"},
	{Option: getopt.Option{Long: "usage", Help: "show this help"},
		apply: func(*builder, string, bool) error { return ErrHelp }, cliOnly: "it only makes sense on the command line"},
	{Option: getopt.Option{Short: 'h', Long: "help", Help: "show this help"},
		apply: func(*builder, string, bool) error { return ErrHelp }, cliOnly: "it only makes sense on the command line"},
}

// applyOpenMode takes --open-mode=truncate (the default: each run writes
// its output files anew) or append.
func applyOpenMode(b *builder, v string, _ bool) error {
	switch strings.ToLower(v) {
	case "truncate", "t":
		b.spec.OpenMode = ""
		return nil
	case "append", "a":
		b.spec.OpenMode = api.OpenModeAppend
		return nil
	}
	return optionError("--open-mode", v, nil, "use append or truncate")
}

// applySignal reads --signal=[{R|B}:]SIG[@TIME] as sbatch does. R: is
// refused: in Slurm it lets the job overlap a reservation that has
// MaxStartDelay set (and be preempted when the reservation's jobs need its
// nodes), and corral's reservations have no MaxStartDelay: a reservation's
// nodes are held for its jobs, never lent.
func applySignal(b *builder, v string, _ bool) error {
	w := &api.WarnSignal{BeforeS: 60}
	rest := v
	if flags, after, ok := strings.Cut(rest, ":"); ok {
		switch flags {
		case "B":
			w.Batch = true
		case "R", "RB", "BR":
			return optionError("--signal", v, ErrRefused, "R: lets a job overlap a reservation with MaxStartDelay set, and corral's reservations never lend their nodes; drop R: (--signal=[B:]SIG[@TIME])")
		default:
			return optionError("--signal", v, nil, "the prefix must be B: (batch script only), e.g. --signal=B:USR1@120")
		}
		rest = after
	}
	sig, at, hasAt := strings.Cut(rest, "@")
	n, err := api.ParseSignal(sig)
	if err != nil {
		return optionError("--signal", v, err, "give [B:]SIG[@TIME], e.g. --signal=USR1@120 or --signal=B:10")
	}
	w.Signal = n
	if hasAt {
		t, err := strconv.ParseInt(at, 10, 64)
		if err != nil || t < 0 || t > api.MaxWarnBefore {
			return optionError("--signal", v, err, "TIME is whole seconds from 0 to %d", api.MaxWarnBefore)
		}
		w.BeforeS = t
	}
	b.spec.Signal = w
	return nil
}

func applyTime(b *builder, v string, _ bool) error {
	secs, err := ParseTimeLimit(v)
	if err != nil {
		return err
	}
	b.spec.TimeLimit = secs
	return nil
}

func applyExport(b *builder, v string, _ bool) error {
	if _, err := ExportEnv(v, nil); err != nil {
		return err
	}
	b.export, b.exportSet = v, true
	return nil
}

func applyWrap(b *builder, v string, _ bool) error {
	if strings.TrimSpace(v) == "" {
		return optionError("--wrap", v, nil, "empty command (give the command to run, e.g. --wrap='hostname')")
	}
	b.wrap, b.wrapSet = v, true
	return nil
}

func applyBegin(b *builder, v string, _ bool) error {
	t, err := ParseBegin(v, b.now)
	if err != nil {
		return err
	}
	b.spec.Begin = t
	return nil
}

func applyNice(b *builder, v string, has bool) error {
	if !has {
		b.spec.Nice = 100
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < -MaxNice || n > MaxNice {
		return optionError("--nice", v, err, "must be a whole number between -%d and %d (e.g. --nice=50)", MaxNice, MaxNice)
	}
	b.spec.Nice = n
	return nil
}

func applyGres(b *builder, v string, _ bool) error {
	g, err := ParseGres(v)
	if err != nil {
		return err
	}
	b.spec.Gres, b.gpusTotal = g, ""
	return nil
}

// addGPUs sets the gpu entry of --gres from --gpus, --gpus-per-node
// ([TYPE:]N) or --gpus-per-task (N per task, times the tasks on a node,
// mult, when the job is built).
func addGPUs(b *builder, opt, v string, mult int) error {
	typ, count, hasType := strings.Cut(v, ":")
	if !hasType {
		typ, count = "", v
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > MaxGresCount {
		return optionError(opt, v, nil, "give a GPU count from 1 to %d, optionally with a type: e.g. %s=2 or %s=h100:2", MaxGresCount, opt, opt)
	}
	n *= mult
	for i, g := range b.spec.Gres {
		if g.Name == "gpu" && g.Type == typ {
			b.spec.Gres[i].Count = n
			return nil
		}
	}
	b.spec.Gres = append(b.spec.Gres, api.Gres{Name: "gpu", Type: typ, Count: n})
	return nil
}

func applySRIOV(b *builder, v string, _ bool) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return optionError("--sriov", v, nil, "give a number of virtual functions ≥ 1, e.g. --sriov=2")
	}
	b.spec.Gres = append(slices.DeleteFunc(b.spec.Gres, func(g api.Gres) bool { return g.Name == "vf" }), api.Gres{Name: "vf", Count: n})
	return nil
}

// applyHugepages reads --hugepages=2M:COUNT[,1G:COUNT].
func applyHugepages(b *builder, v string, _ bool) error {
	b.spec.Hugepages = nil
	for _, item := range strings.Split(v, ",") {
		size, count, ok := strings.Cut(item, ":")
		n, err := strconv.ParseInt(count, 10, 64)
		var kb int64
		switch strings.ToUpper(size) {
		case "2M", "2MB", "2048K":
			kb = 2048
		case "1G", "1GB", "1048576K":
			kb = 1 << 20
		}
		if !ok || err != nil || n < 1 || kb == 0 {
			return optionError("--hugepages", v, nil, "use SIZE:COUNT with SIZE 2M or 1G and COUNT ≥ 1, e.g. --hugepages=2M:512 or --hugepages=1G:4")
		}
		b.spec.Hugepages = append(b.spec.Hugepages, api.HugepageRequest{SizeKB: kb, Count: n})
	}
	return nil
}

func applyNUMA(b *builder, v string, _ bool) error {
	switch p := strings.ToLower(v); p {
	case api.NUMAPrefer, api.NUMAStrict, api.NUMANone:
		b.spec.NUMA = p
		return nil
	}
	return optionError("--numa", v, nil, "use prefer, strict or none")
}

func applyKillOnInvalidDep(b *builder, v string, _ bool) error {
	switch strings.ToLower(v) {
	case "yes":
		b.spec.KillOnInvalidDep = true
	case "no":
		b.spec.KillOnInvalidDep = false
	default:
		return optionError("--kill-on-invalid-dep", v, nil, "use yes or no")
	}
	return nil
}

func applyDependency(b *builder, v string, _ bool) error {
	d, err := ParseDependency(v)
	if err != nil {
		return err
	}
	b.spec.Dependency = d
	return nil
}

func applyArray(b *builder, v string, _ bool) error {
	a, err := ParseArray(v)
	if err != nil {
		return err
	}
	b.spec.Array = a
	return nil
}

// setWord stores a name-like value: not empty and without white space (a
// job name may contain spaces).
func setWord(dst *string, field, v string, spacesOK bool) error {
	switch {
	case strings.TrimSpace(v) == "":
		return optionError(field, v, nil, "empty value (give a name, e.g. %s=NAME)", field)
	case !spacesOK && strings.ContainsAny(v, " \t\n"):
		return optionError(field, v, nil, "must not contain spaces")
	case strings.ContainsAny(v, "\x00\n"):
		return optionError(field, v, nil, "must be a single line of text")
	}
	*dst = v
	return nil
}

// setPath stores a file or directory path, which must not be empty;
// example is the option with a good value, e.g. "--chdir=/scratch/run1".
func setPath(dst *string, example, v string) error {
	field, _, _ := strings.Cut(example, "=")
	if v == "" {
		return optionError(field, v, nil, "empty path (give one, e.g. %s)", example)
	}
	if strings.ContainsAny(v, "\x00\n") {
		return optionError(field, v, nil, "a path must be a single line without NUL bytes")
	}
	*dst = v
	return nil
}

// setCount stores a positive task or CPU count.
func setCount(dst *int, field, example, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxTasks {
		return optionError(field, v, err, "must be a whole number between 1 and %d (e.g. %s)", MaxTasks, example)
	}
	*dst = n
	return nil
}

// applyPriority reads --priority: a number from 1 to api.MaxPriority, or
// TOP for the highest.
func applyPriority(b *builder, v string, _ bool) error {
	if strings.EqualFold(v, "TOP") {
		b.spec.Priority = api.MaxPriority
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > api.MaxPriority {
		return optionError("--priority", v, err, "give a priority from 1 to %d, or TOP (a held job is submitted with --hold)", int64(api.MaxPriority))
	}
	b.spec.Priority = n
	return nil
}

// MaxNUMANodeID bounds a NUMA node named by --mem-bind.
const MaxNUMANodeID = 1023

// applyMemBind reads --mem-bind=[{quiet|verbose},]TYPE onto corral's NUMA
// placement: none (memory anywhere: --numa=none), local and rank (only the
// NUMA nodes of the job's CPUs: --numa=strict), prefer (--numa=prefer),
// map_mem:N,... and mask_mem:M,... (only those NUMA nodes, CPUs and memory
// alike, strictly); sort and nosort (kernel page orderings) change nothing.
func applyMemBind(b *builder, v string, _ bool) error {
	rest := v
	for _, p := range []string{"quiet,", "verbose,", "v,", "q,"} {
		rest = strings.TrimPrefix(rest, p)
	}
	kind, list, _ := strings.Cut(rest, ":")
	bad := func(why string) error {
		return optionError("--mem-bind", v, nil, "%s (use none, local, rank, prefer, map_mem:0,1 or mask_mem:0x3)", why)
	}
	b.spec.MemBind, b.spec.MemNodes = v, nil
	switch strings.ToLower(kind) {
	case "none", "no":
		b.spec.NUMA = api.NUMANone
	case "local", "rank":
		b.spec.NUMA = api.NUMAStrict
	case "prefer", "p":
		b.spec.NUMA = api.NUMAPrefer
	case "sort", "nosort", "quiet", "verbose":
	case "map_mem", "map-mem", "mask_mem", "mask-mem":
		nodes, err := memNodes(strings.HasPrefix(kind, "mask"), list)
		if err != nil {
			return bad(err.Error())
		}
		b.spec.MemNodes, b.spec.NUMA = nodes, api.NUMAStrict
	default:
		return bad("unknown type " + strconv.Quote(kind))
	}
	return nil
}

// memNodes reads the NUMA nodes of map_mem (ids) or mask_mem (masks),
// sorted and each once.
func memNodes(masks bool, list string) ([]int, error) {
	var out []int
	for item := range strings.SplitSeq(list, ",") {
		if masks {
			m, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(item), "0x"), 16, 64)
			if err != nil || m == 0 {
				return nil, fmt.Errorf("%q is not a NUMA node mask", item)
			}
			for bit := 0; bit < 64; bit++ {
				if m&(1<<bit) != 0 && !slices.Contains(out, bit) {
					out = append(out, bit)
				}
			}
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 0 || n > MaxNUMANodeID {
			return nil, fmt.Errorf("%q is not a NUMA node id from 0 to %d", item, MaxNUMANodeID)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no NUMA nodes named")
	}
	slices.Sort(out)
	return out, nil
}
