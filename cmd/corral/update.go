package main

import (
	"context"
	"fmt"
	"strings"

	"corral/api"
	"corral/submit"
)

// runUpdate changes a pending job: `corral update 12 Dependency=afterok:13`
// and scontrol's `update JobId=12 Dependency=afterok:13`. Dependency is
// the one field that can change for now; an empty value removes it.
func runUpdate(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(env.stdout, "usage: corral update JOBID Dependency=LIST   (scontrol update JobId=JOBID Dependency=LIST)")
		fmt.Fprintln(env.stdout, "       corral update PartitionName=NAME KEY=VALUE...   (scontrol update PartitionName=NAME State=DRAIN)")
		return nil
	}
	for i, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.EqualFold(k, "PartitionName") {
			return updatePartition(ctx, env, v, append(append([]string{}, args[:i]...), args[i+1:]...))
		}
	}
	var idText, depText string
	haveDep := false
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok && idText == "":
			idText = a
		case strings.EqualFold(k, "JobId"):
			idText = v
		case strings.EqualFold(k, "Dependency"):
			depText, haveDep = v, true
		default:
			return fmt.Errorf("update: %q: only JobId=ID and Dependency=LIST can be given (e.g. corral update 12 Dependency=afterok:13)", a)
		}
	}
	if idText == "" || !haveDep {
		return fmt.Errorf("update: give a job id and Dependency=LIST, e.g. corral update 12 Dependency=afterok:13 (Dependency= removes it)")
	}
	ids, err := parseJobIDs([]string{idText})
	if err != nil || len(ids) != 1 {
		return fmt.Errorf("update: %q is not one job id", idText)
	}
	var dep *api.Dependency
	if depText != "" {
		if dep, err = submit.ParseDependency(depText); err != nil {
			return err
		}
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if err := cl.UpdateJob(ctx, api.UpdateJobRequest{ID: ids[0], Dependency: dep}); err != nil {
		return fmt.Errorf("update job %d: %w", ids[0], err)
	}
	return nil
}
