package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
	"corral/submit"
)

// runUpdate changes a job: `corral update 12 TimeLimit=2:00:00` and
// scontrol's `update JobId=12 TimeLimit=2:00:00 Name=x`. Dependency alone
// is the update it always was (an empty value removes it); with other
// fields every field goes in one request, which the controllers apply
// whole or refuse whole.
func runUpdate(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(env.stdout, "usage: corral update JOBID KEY=VALUE...   (scontrol update JobId=JOBID KEY=VALUE...)")
		fmt.Fprintln(env.stdout, "       keys: "+strings.Join(jobUpdateKeys, ", ")+"; TimeLimit=+T or -T changes it by T")
		fmt.Fprintln(env.stdout, "       corral update PartitionName=NAME KEY=VALUE...   (scontrol update PartitionName=NAME State=DRAIN)")
		fmt.Fprintln(env.stdout, "       corral update NodeName=NAME Features=a,b        (scontrol update NodeName=NAME Features=a,b)")
		fmt.Fprintln(env.stdout, "       corral update ReservationName=NAME KEY=VALUE...   (scontrol update ReservationName=NAME Duration=120 Users+=bob)")
		return nil
	}
	for i, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.EqualFold(k, "PartitionName") {
			return updatePartition(ctx, env, v, append(append([]string{}, args[:i]...), args[i+1:]...))
		}
		if k, v, ok := strings.Cut(a, "="); ok && strings.EqualFold(k, "NodeName") {
			return updateNode(ctx, env, v, append(append([]string{}, args[:i]...), args[i+1:]...), false)
		}
		if k, _, ok := strings.Cut(a, "="); ok && (strings.EqualFold(k, "ReservationName") || strings.EqualFold(k, "Reservation")) {
			return resvUpdate(ctx, env, "update", args)
		}
	}
	idText, pairs, err := splitJobUpdate(args)
	if err != nil {
		return err
	}
	ids, err := parseJobIDs([]string{idText})
	if err != nil || len(ids) != 1 {
		return fmt.Errorf("update: %q is not one job id", idText)
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	req := api.UpdateJobRequest{ID: ids[0]}
	if len(pairs) == 1 && strings.EqualFold(pairs[0][0], "Dependency") {
		req.Dependency, err = parseDependencyValue(pairs[0][1])
	} else {
		req.Changes, req.Dependency, err = jobChanges(ctx, cl, ids[0], pairs)
	}
	if err != nil {
		return err
	}
	if err := cl.UpdateJob(ctx, req); err != nil {
		var apiErr *api.APIError
		if errors.As(err, &apiErr) {
			return err // the controllers' words name the job
		}
		return fmt.Errorf("update job %d: %w", ids[0], err)
	}
	return nil
}

// jobUpdateKeys are the job fields update takes, as scontrol names them.
var jobUpdateKeys = []string{"TimeLimit", "JobName", "Name", "Comment", "Nice", "Partition", "QOS", "NumCPUs", "NumTasks",
	"MinMemoryNode", "MinTmpDiskNode", "StartTime", "ArrayTaskThrottle", "Dependency"}

// splitJobUpdate splits update's arguments into the job id (JobId=ID or a
// bare first word) and the KEY=VALUE pairs, refusing unknown keys.
func splitJobUpdate(args []string) (string, [][2]string, error) {
	var idText string
	var pairs [][2]string
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok && idText == "":
			idText = a
		case !ok:
			return "", nil, fmt.Errorf("update: %q is not KEY=VALUE (keys: %s)", a, strings.Join(jobUpdateKeys, ", "))
		case strings.EqualFold(k, "JobId"):
			idText = v
		case !slices.ContainsFunc(jobUpdateKeys, func(key string) bool { return strings.EqualFold(key, k) }):
			return "", nil, fmt.Errorf("update: %s is not a job field update can change (keys: %s)", k, strings.Join(jobUpdateKeys, ", "))
		default:
			pairs = append(pairs, [2]string{k, v})
		}
	}
	if idText == "" || len(pairs) == 0 {
		return "", nil, fmt.Errorf("update: give a job id and KEY=VALUE pairs, e.g. corral update 12 TimeLimit=2:00:00 (keys: %s)", strings.Join(jobUpdateKeys, ", "))
	}
	return idText, pairs, nil
}

func parseDependencyValue(v string) (*api.Dependency, error) {
	if v == "" {
		return nil, nil
	}
	return submit.ParseDependency(v)
}

// jobChanges reads update's pairs into the changes of one request (and its
// dependency). TimeLimit=+T and -T are read against the job's limit now.
func jobChanges(ctx context.Context, cl *api.Client, id uint64, pairs [][2]string) (*api.JobChanges, *api.Dependency, error) {
	ch := &api.JobChanges{}
	var dep *api.Dependency
	integer := func(k, v string) (*int, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("update: %s=%s is not a whole number", k, v)
		}
		return &n, nil
	}
	var err error
	for _, p := range pairs {
		k, v := p[0], p[1]
		switch strings.ToLower(k) {
		case "timelimit":
			ch.TimeLimit, err = timeLimitChange(ctx, cl, id, v)
		case "jobname", "name":
			ch.Name = &v
		case "comment":
			ch.Comment = &v
		case "nice":
			ch.Nice, err = integer(k, v)
		case "partition":
			ch.Partition = &v
		case "qos":
			ch.QOS = &v
		case "numcpus":
			ch.NumCPUs, err = integer(k, v)
		case "numtasks":
			ch.NumTasks, err = integer(k, v)
		case "arraytaskthrottle":
			ch.ArrayTaskThrottle, err = integer(k, v)
		case "minmemorynode":
			var mb int64
			if mb, err = submit.ParseMemory(v); err == nil {
				ch.MinMemoryNode = &mb
			}
		case "mintmpdisknode":
			var mb int64
			if mb, err = submit.ParseMemory(v); err != nil {
				err = fmt.Errorf("update: MinTmpDiskNode=%s: %s", v, sizeProblem(err))
			}
			ch.MinTmpDiskNode = &mb
		case "starttime":
			var at time.Time
			if at, err = submit.ParseBegin(v, time.Now()); err == nil {
				ch.StartTime = &at
			}
		case "dependency":
			ch.SetDependency = true
			dep, err = parseDependencyValue(v)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return ch, dep, nil
}

// timeLimitChange reads TimeLimit's value: a time limit in sbatch --time's
// forms, or +T / -T to lengthen or shorten the job's limit by T.
func timeLimitChange(ctx context.Context, cl *api.Client, id uint64, v string) (*int64, error) {
	sign := int64(0)
	if strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-") {
		sign = 1
		if v[0] == '-' {
			sign = -1
		}
		v = v[1:]
	}
	secs, err := submit.ParseTimeLimit(v)
	if err != nil {
		return nil, fmt.Errorf("update: TimeLimit: %w", err)
	}
	if sign != 0 {
		j, err := cl.Job(ctx, id, true)
		if err != nil {
			return nil, fmt.Errorf("update job %d: %w", id, err)
		}
		if j.Spec.TimeLimit <= 0 {
			return nil, fmt.Errorf("update job %d: TimeLimit=%c%s: the job has no time limit of its own to change; give one", id, "-+"[(sign+1)/2], v)
		}
		secs = j.Spec.TimeLimit + sign*secs
		if secs <= 0 {
			return nil, fmt.Errorf("update job %d: the time limit would be %ds; it must stay above 0", id, secs)
		}
	}
	return &secs, nil
}

// sizeProblem is what is wrong with a size submit.ParseMemory refused,
// without the sbatch option its error names (--mem).
func sizeProblem(err error) string {
	var se *submit.Error
	if errors.As(err, &se) {
		return se.Message
	}
	return err.Error()
}
