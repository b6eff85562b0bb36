package main

import (
	"errors"
	"fmt"
	"strings"

	"corral/api"
	"corral/internal/getopt"
)

// errHelp ends a command after it printed its help.
var errHelp = errors.New("help shown")

// optSet is a parsed command line: the last value of each option (by long
// name, or short name for options with no long one), every value of
// repeatable options, and the positional arguments.
type optSet struct {
	last map[string]string
	all  map[string][]string
	args []string
}

func (o *optSet) has(name string) bool   { _, ok := o.last[name]; return ok }
func (o *optSet) get(name string) string { return o.last[name] }
func (o *optSet) list(name string) []string {
	var out []string
	for _, v := range o.all[name] {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

func optKey(o getopt.Option) string {
	if o.Long != "" {
		return o.Long
	}
	return string(o.Short)
}

// parseOpts parses args against table plus --help. With helpShort set, -h
// is also help (squeue and sinfo use -h for --noheader instead).
func parseOpts(env *cliEnv, cmd string, mode getopt.Mode, args []string, table ...getopt.Option) (*optSet, error) {
	table = append(table, getopt.Option{Long: "help", Help: "show this help"})
	p, err := getopt.New(mode, table...)
	if err != nil {
		return nil, err
	}
	res, err := p.Parse(args)
	if err != nil {
		if slurmAliases[env.prog] == cmd {
			// Under its Slurm name the message is Slurm's: "squeue: error:
			// unknown option --bogus", never corral's subcommand.
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	set := &optSet{last: map[string]string{}, all: map[string][]string{}, args: res.Args}
	for _, o := range res.Options {
		k := optKey(o.Option)
		if k == "help" {
			fmt.Fprintf(env.stdout, "usage: %s [options]\n\n%s", usageName(env.prog, cmd), p.Usage())
			return nil, errHelp
		}
		set.last[k] = o.Value
		set.all[k] = append(set.all[k], o.Value)
	}
	return set, nil
}

// usageName is how a help text names the command: "squeue" when the binary
// runs as the squeue alias of queue (not "squeue queue"), "scontrol show"
// for scontrol's subcommands, "corral queue" otherwise.
func usageName(prog, cmd string) string {
	if slurmAliases[prog] == cmd {
		return prog
	}
	return prog + " " + cmd
}

// parseJobRefs reads job ids ("12", which names a whole array too) and
// array tasks ("12_3").
func parseJobRefs(args []string) ([]uint64, []api.TaskRef, error) {
	var ids []uint64
	var tasks []api.TaskRef
	for _, a := range args {
		for _, item := range strings.Split(a, ",") {
			if item == "" {
				continue
			}
			ref, err := api.ParseJobRef(item)
			if err != nil {
				return nil, nil, err
			}
			if ref.HasTask {
				tasks = append(tasks, api.TaskRef{Array: ref.ID, Task: ref.Task})
			} else {
				ids = append(ids, ref.ID)
			}
		}
	}
	return ids, tasks, nil
}

// parseJobIDs reads job ids such as "12" or "12_3" (an array element of
// job 12) from arguments that may be comma-separated.
func parseJobIDs(args []string) ([]uint64, error) {
	var ids []uint64
	for _, a := range args {
		for _, item := range strings.Split(a, ",") {
			if item == "" {
				continue
			}
			ref, err := api.ParseJobRef(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a job id (job ids are positive numbers, e.g. 42)", item)
			}
			ids = append(ids, ref.ID)
		}
	}
	return ids, nil
}

// parseStates reads job states by name or short code; "all" is every
// state. Callers name their option in the error: scancel's is --state,
// squeue's --states.
func parseStates(values []string) ([]api.JobState, error) {
	var out []api.JobState
	for _, v := range values {
		if strings.EqualFold(v, "all") {
			return append([]api.JobState(nil), api.AllJobStates...), nil
		}
		st, err := api.ParseJobState(v)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func flag(short rune, long, help string) getopt.Option {
	return getopt.Option{Short: short, Long: long, Help: help}
}

func valued(short rune, long, argName, help string) getopt.Option {
	return getopt.Option{Short: short, Long: long, Arg: getopt.RequiredArgument, ArgName: argName, Help: help}
}
