package main

import (
	"fmt"
	"strings"

	"corral/internal/hostlist"
)

// hostlistLimit bounds the names one host list on the command line may
// stand for (scontrol show hostnames, squeue -w, sinfo -n), so that
// "n[0-999999999999]" is refused instead of filling memory.
const hostlistLimit = 1 << 20

// showHostnames is `scontrol show hostnames [LIST]`: every name of a host
// list, one a line, in the order the list gives them; without LIST, the
// list in SLURM_JOB_NODELIST (a job's nodes), as in Slurm. With compress it
// is `scontrol show hostlist LIST`: the names written as one compressed,
// sorted host list.
func showHostnames(env *cliEnv, args []string, compress bool) error {
	what := map[bool]string{false: "hostnames", true: "hostlist"}[compress]
	list, err := hostlistArg(env, what, args)
	if err != nil {
		return err
	}
	names, err := hostlist.Expand(list, hostlistLimit)
	if err != nil {
		return fmt.Errorf("show %s: %w", what, err)
	}
	if compress {
		fmt.Fprintln(env.stdout, hostlist.Compress(names))
		return nil
	}
	for _, n := range names {
		fmt.Fprintln(env.stdout, n)
	}
	return nil
}

// hostlistArg joins the arguments into one list, or takes
// SLURM_JOB_NODELIST when there are none.
func hostlistArg(env *cliEnv, what string, args []string) (string, error) {
	if len(args) > 0 {
		return strings.Join(args, ","), nil
	}
	if v := env.getenv("SLURM_JOB_NODELIST"); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("show %s: give a host list (e.g. n[1-4],gpu01), or run it in a job, where SLURM_JOB_NODELIST names the job's nodes", what)
}
