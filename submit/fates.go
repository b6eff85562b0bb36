package submit

import (
	"corral/internal/getopt"
)

// fate is what corral does with a Slurm 22.05 sbatch option it does not
// honour. Every sbatch option is honoured (supportedOptions), or has one
// of these: docs/cli.md lists each with its fate, and TestOptionFates
// checks that list against the parser.
type fate int

const (
	// fateWarn accepts the option, which has no meaning under corral, and
	// says so in one line on stderr (Request.Warnings).
	fateWarn fate = iota + 1
	// fateRefuse refuses the option with the reason: accepting it would
	// mislead, since the job would not get what it asks for.
	fateRefuse
)

func (f fate) String() string {
	if f == fateWarn {
		return "accepted with a warning"
	}
	return "refused"
}

// otherOptions are the sbatch options corral does not honour, each with
// its fate and why. They are parsed with their real argument kind, so that
// what follows them is not misread, and hidden from help and from "did you
// mean" suggestions.
var otherOptions = []struct {
	short rune
	long  string
	arg   getopt.ArgKind
	fate  fate
	why   string
}{
	{0, "acctg-freq", req, fateWarn, "the node measures a job's CPU time and peak memory from its cgroup once, at its end"},
	{0, "batch", req, fateRefuse, "the batch script runs on the job's first node; choose nodes with --constraint"},
	{0, "bb", req, fateRefuse, "corral has no burst buffers; stage data in the script"},
	{0, "bbf", req, fateRefuse, "corral has no burst buffers; stage data in the script"},
	{0, "cluster-constraint", req, fateRefuse, "corral runs one cluster"},
	{0, "container", req, fateRefuse, "every job runs in its own VM; use --image to give it another root"},
	{0, "container-id", req, fateRefuse, "every job runs in its own VM; use --image to give it another root"},
	{'S', "core-spec", req, fateRefuse, "corral reserves no cores for system use per job; " + hintCPUs},
	{0, "cores-per-socket", req, fateRefuse, "corral places a job's CPUs by NUMA node (--numa), not by socket counts; " + hintCPUs},
	{0, "cpu-freq", req, fateWarn, "a job's CPUs are a VM's virtual CPUs, whose frequency the job cannot set"},
	{0, "delay-boot", req, fateWarn, "nodes are never rebooted for a job"},
	{0, "extra", req, fateRefuse, "corral keeps no extra node data; choose nodes by feature with --constraint"},
	{'B', "extra-node-info", req, fateRefuse, "corral places a job's CPUs by NUMA node (--numa), not by socket, core and thread counts; " + hintCPUs},
	{0, "gid", req, fateRefuse, "a job runs with the groups of the user the controllers authenticated"},
	{0, "gpu-bind", req, fateWarn, "corral binds a job's GPUs to the NUMA nodes of its CPUs when it can, always"},
	{0, "gpu-freq", req, fateWarn, "a job's GPUs are passed through to its VM, which may not set their clocks"},
	{0, "gpus-per-socket", req, fateRefuse, "corral places GPUs by NUMA node, not by socket; " + hintGPUs},
	{0, "gres-flags", req, fateWarn, "corral places a job's GPUs on the NUMA nodes of its CPUs when it can, always"},
	{0, "mcs-label", req, fateWarn, "corral has no MCS labels; tenants are walled off by account"},
	{0, "mem-per-gpu", req, fateRefuse, "use --mem or --mem-per-cpu"},
	{0, "mincpus", req, fateRefuse, "ask for the CPUs on each node with --ntasks-per-node and -c"},
	{0, "network", req, fateWarn, "corral configures no interconnect windows; a job's VM gets its network from the node"},
	{'k', "no-kill", opt, fateWarn, "when a node of a job fails, corral ends the whole job (NODE_FAIL), or requeues it with --requeue"},
	{0, "ntasks-per-gpu", req, fateRefuse, hintCPUs + " beside --gres=gpu:N"},
	{0, "ntasks-per-socket", req, fateRefuse, hintCPUs},
	{'s', "oversubscribe", none, fateWarn, "every partition is OverSubscribe=NO (scontrol show partition), which Slurm lets override the job's option: the job gets its CPUs to itself"},
	{0, "power", req, fateWarn, "corral has no power management"},
	{0, "prefer", req, fateRefuse, "corral has no soft feature preferences; --constraint is a requirement"},
	{0, "profile", req, fateWarn, "corral records no profiles; the node measures a job's CPU time and peak memory"},
	{0, "reboot", none, fateWarn, "nodes are never rebooted for a job; every job boots a VM of its own"},
	{0, "sockets-per-node", req, fateRefuse, "corral places a job's CPUs by NUMA node (--numa), not by socket counts; " + hintCPUs},
	{0, "switches", req, fateWarn, "corral does not know the network's switches; --contiguous keeps a job on nodes with consecutive names"},
	{0, "thread-spec", req, fateRefuse, "corral reserves no threads for system use per job; " + hintCPUs},
	{0, "time-min", req, fateWarn, "corral never shortens a job's time limit to start it sooner; --time is its limit"},
	{0, "tres-bind", req, fateWarn, "corral binds a job's devices to the NUMA nodes of its CPUs when it can, always"},
	{0, "tres-per-task", req, fateRefuse, hintGPUs},
	{0, "uid", req, fateRefuse, "a job runs as the user the controllers authenticated"},
	{0, "use-min-nodes", none, fateWarn, "a job with a node range -N MIN-MAX gets MIN nodes unless --spread-job asks for as many as it may have"},
	{0, "wait-all-nodes", req, fateWarn, "a job starts on all its nodes at once: the controllers place every node's part together"},
	{0, "wckey", req, fateWarn, "corral keeps no workload keys; --comment is recorded with the job"},
}

const (
	hintCPUs = "ask for CPUs with -n (tasks) and -c (CPUs per task)"
	hintGPUs = "ask for GPUs with --gres=gpu:N or --gres=gpu:TYPE:N"
)

// otherDefs turns otherOptions into hidden option entries whose apply
// warns or refuses.
func otherDefs() []optionDef {
	defs := make([]optionDef, 0, len(otherOptions))
	for _, o := range otherOptions {
		field, why := "--"+o.long, o.why
		apply := func(_ *builder, v string, _ bool) error {
			return optionError(field, v, ErrRefused, "%s", why)
		}
		if o.fate == fateWarn {
			apply = func(b *builder, _ string, _ bool) error {
				b.warn(field, why)
				return nil
			}
		}
		defs = append(defs, optionDef{Option: getopt.Option{Short: o.short, Long: o.long, Arg: o.arg, Hidden: true}, apply: apply})
	}
	return defs
}
