package submit

import (
	"corral/internal/getopt"
)

// unsupported lists sbatch options corral recognises but does not implement
// yet. They are parsed with their real argument kind, so that what follows
// them is not misread, and then refused by name with a hint; they are
// hidden from help and from "did you mean" suggestions.
var unsupported = []struct {
	short rune
	long  string
	arg   getopt.ArgKind
	hint  string
}{
	{0, "acctg-freq", req, ""},
	{0, "batch", req, ""},
	{0, "bb", req, ""},
	{0, "bbf", req, ""},
	{0, "cluster-constraint", req, ""},
	{'M', "clusters", req, "corral runs one cluster"},
	{'C', "constraint", req, hintPartition},
	{0, "container", req, "use --image to run the job in a VM image"},
	{0, "container-id", req, ""},
	{0, "contiguous", none, ""},
	{'S', "core-spec", req, ""},
	{0, "cores-per-socket", req, hintCPUs},
	{0, "cpu-freq", req, ""},
	{0, "cpus-per-gpu", req, hintCPUs},
	{0, "deadline", req, "use --time to bound the run time"},
	{0, "delay-boot", req, ""},
	{'m', "distribution", req, ""},
	{'x', "exclude", req, hintPartition},
	{0, "exclusive", opt, "ask for the CPUs and memory the job needs with -n, -c and --mem"},
	{0, "export-file", req, "use --export=VAR=value"},
	{0, "extra", req, ""},
	{'B', "extra-node-info", req, hintCPUs},
	{0, "get-user-env", opt, "use --export"},
	{0, "gid", req, ""},
	{0, "gpu-bind", req, ""},
	{0, "gpu-freq", req, ""},
	{0, "gpus-per-node", req, hintGPUs},
	{0, "gpus-per-socket", req, hintGPUs},
	{0, "gres-flags", req, ""},
	{0, "hint", req, ""},
	{0, "ignore-pbs", none, ""},
	{'i', "input", req, "redirect input inside the script"},
	{'L', "licenses", req, ""},
	{0, "mail-type", req, "corral does not send mail; use --wait or poll the job"},
	{0, "mail-user", req, "corral does not send mail; use --wait or poll the job"},
	{0, "mcs-label", req, ""},
	{0, "mem-bind", req, ""},
	{0, "mem-per-gpu", req, "use --mem or --mem-per-cpu"},
	{0, "mincpus", req, hintCPUs},
	{0, "network", req, ""},
	{'k', "no-kill", opt, ""},
	{'F', "nodefile", req, hintPartition},
	{'w', "nodelist", req, hintPartition},
	{0, "ntasks-per-core", req, hintCPUs},
	{0, "ntasks-per-gpu", req, hintCPUs},
	{0, "ntasks-per-node", req, "every job runs on one node, so use -n for its task count"},
	{0, "ntasks-per-socket", req, hintCPUs},
	{0, "open-mode", req, ""},
	{'O', "overcommit", none, hintCPUs},
	{'s', "oversubscribe", none, ""},
	{0, "power", req, ""},
	{0, "prefer", req, hintPartition},
	{0, "priority", req, "use --nice to lower a job's priority"},
	{0, "profile", req, ""},
	{0, "propagate", opt, ""},
	{'Q', "quiet", none, ""},
	{0, "reboot", none, ""},
	{0, "reservation", req, ""},
	{0, "sockets-per-node", req, hintCPUs},
	{0, "spread-job", none, ""},
	{0, "switches", req, ""},
	{0, "thread-spec", req, ""},
	{0, "threads-per-core", req, hintCPUs},
	{0, "time-min", req, "use --time"},
	{0, "tmp", req, ""},
	{0, "tres-bind", req, ""},
	{0, "tres-per-task", req, hintGPUs},
	{0, "uid", req, ""},
	{0, "usage", none, "use --help"},
	{0, "use-min-nodes", none, ""},
	{'v', "verbose", none, ""},
	{'V', "version", none, ""},
	{0, "wait-all-nodes", req, ""},
	{0, "wckey", req, ""},
}

const (
	hintPartition = "choose where the job runs with -p PARTITION"
	hintCPUs      = "ask for CPUs with -n (tasks) and -c (CPUs per task)"
	hintGPUs      = "ask for GPUs with --gres=gpu:N or --gres=gpu:TYPE:N"
)

// unsupportedDefs turns the unsupported list into hidden option entries
// whose apply refuses them.
func unsupportedDefs() []optionDef {
	defs := make([]optionDef, 0, len(unsupported))
	for _, u := range unsupported {
		hint := u.hint
		if hint == "" {
			hint = "remove it from the command line or the script"
		}
		field := "--" + u.long
		defs = append(defs, optionDef{
			Option: getopt.Option{Short: u.short, Long: u.long, Arg: u.arg, Hidden: true},
			apply: func(_ *builder, v string, _ bool) error {
				return optionError(field, v, ErrUnsupported, "not supported by corral yet; %s", hint)
			},
		})
	}
	return defs
}
