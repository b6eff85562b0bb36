package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"corral/api"
	"corral/display"
	"corral/internal/hostlist"
)

// stepRef is a step as users name it: JOB.STEP.
type stepRef struct {
	job  uint64
	step int
}

// splitStepRefs takes the JOB.STEP arguments out of args.
func splitStepRefs(args []string) ([]stepRef, []string, error) {
	var steps []stepRef
	var rest []string
	for _, a := range args {
		job, step, ok := strings.Cut(a, ".")
		if !ok {
			rest = append(rest, a)
			continue
		}
		id, err1 := strconv.ParseUint(job, 10, 64)
		n, err2 := strconv.Atoi(step)
		if err1 != nil || err2 != nil || id == 0 || n < 0 {
			return nil, nil, fmt.Errorf("%q is not a step (give JOB.STEP, e.g. 12.0)", a)
		}
		steps = append(steps, stepRef{job: id, step: n})
	}
	return steps, rest, nil
}

// cancelSteps is scancel JOB.STEP...: each step is cancelled and its tasks
// killed on their nodes.
func cancelSteps(ctx context.Context, env *cliEnv, steps []stepRef) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	failed := false
	for _, s := range steps {
		if err := cl.CancelStep(ctx, s.job, s.step); err != nil {
			fmt.Fprintf(env.stderr, "%s: error: Kill job error on job step id %d.%d: %v\n", env.prog, s.job, s.step, err)
			failed = true
		}
	}
	if failed {
		return exitStatus(1)
	}
	return nil
}

// listSteps is squeue -s: the running steps of the jobs the filters
// select (-t all shows ended ones too), as squeue lists steps.
func listSteps(ctx context.Context, env *cliEnv, cl *api.Client, o *optSet, q api.QueueQuery) error {
	var job uint64
	if len(q.Filter.IDs) == 1 {
		job = q.Filter.IDs[0]
	}
	steps, err := cl.Steps(ctx, job)
	if err != nil {
		return err
	}
	all := strings.EqualFold(o.get("states"), "all")
	w := tabwriter.NewWriter(env.stdout, 0, 0, 1, ' ', 0)
	if !o.has("noheader") {
		fmt.Fprintln(w, "STEPID\tNAME\tPARTITION\tUSER\tTIME\tNODELIST")
	}
	now := time.Now()
	for _, s := range steps {
		if s.State != api.StateRunning && !all {
			continue
		}
		if len(q.Filter.IDs) > 0 && !slices.Contains(q.Filter.IDs, s.Job) || len(q.Filter.Users) > 0 && !slices.Contains(q.Filter.Users, s.User) {
			continue
		}
		end := now
		if !s.End.IsZero() {
			end = s.End
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Ref(), display.Safe(s.Name), display.Safe(s.Partition), display.Safe(s.User), elapsedText(end.Sub(s.Start)), hostlist.Compress(s.Nodes))
	}
	return w.Flush()
}

// elapsedText writes a duration as squeue's TIME does: M:SS, H:MM:SS or
// D-HH:MM:SS.
func elapsedText(d time.Duration) string {
	s := int64(max(d, 0) / time.Second)
	days, h, m, sec := s/86400, s/3600%24, s/60%60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	case h > 0:
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%d:%02d", m, sec)
}
