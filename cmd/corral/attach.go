package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"time"

	"corral/api"
	"corral/internal/getopt"
	"corral/submit"
)

// runAttach streams a job's output as it is produced, like sattach: its
// node streams the job's output file as it grows (no shared file system
// needed) until the job ends. Where the node serves no job API, or the job
// ended, it follows the file here instead (on a cluster, the shared file
// system the job writes to).
func runAttach(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "attach", getopt.Permute, args, flag(0, "error", "follow the error file instead of the output"))
	if err != nil {
		return err
	}
	steps, rest, err := splitStepRefs(o.args)
	if err != nil {
		return err
	}
	if len(steps)+len(rest) != 1 {
		return fmt.Errorf("attach: give one job id, or one step (JOB.STEP)")
	}
	if len(steps) == 1 {
		return attachStep(ctx, env, steps[0], o.has("error"))
	}
	ids, err := parseJobIDs(rest)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return fmt.Errorf("attach: give one job id")
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	j, err := waitStarted(ctx, env, cl, ids[0])
	if err != nil {
		return err
	}
	if !j.State.Terminal() {
		rd, err := cl.JobOutput(ctx, j.ID, o.has("error"))
		if err == nil {
			defer rd.Close()
			_, err = io.Copy(env.stdout, rd)
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var ae *api.APIError
		if !errors.As(err, &ae) || (ae.Status != http.StatusNotImplemented && ae.Status != http.StatusConflict) {
			return fmt.Errorf("attach: job %d: %w", j.ID, err)
		}
	}
	out, errPath := submit.OutputPaths(j, j.Node)
	path := out
	if o.has("error") {
		path = errPath
	}
	return follow(ctx, env.stdout, cl, j.ID, path)
}

// attachStep is sattach JOB.STEP: a step's tasks write into the output of
// the srun that launched it (in a batch job, the job's output file), so
// it streams the job's output from its node while the step runs, and
// stops when the step ends.
func attachStep(ctx context.Context, env *cliEnv, s stepRef, errFile bool) error {
	cl, err := env.client()
	if err != nil {
		return err
	}
	running := func() (bool, error) {
		list, err := cl.Steps(ctx, s.job)
		if err != nil {
			return false, err
		}
		for _, st := range list {
			if st.ID == s.step {
				return st.State == api.StateRunning, nil
			}
		}
		return false, fmt.Errorf("attach: step %d.%d: no such step", s.job, s.step)
	}
	if ok, err := running(); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("attach: step %d.%d has ended: its output is in the output of the srun that ran it", s.job, s.step)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for sctx.Err() == nil {
			time.Sleep(time.Second)
			if ok, err := running(); err != nil || !ok {
				cancel()
			}
		}
	}()
	rd, err := cl.JobOutput(sctx, s.job, errFile)
	if err != nil {
		return fmt.Errorf("attach: step %d.%d: %w", s.job, s.step, err)
	}
	defer rd.Close()
	_, err = io.Copy(env.stdout, rd)
	if sctx.Err() != nil {
		return nil
	}
	return err
}

// waitStarted returns the job once it has a node (it may have ended).
func waitStarted(ctx context.Context, env *cliEnv, cl *api.Client, id uint64) (*api.Job, error) {
	told := false
	for {
		j, err := cl.Job(ctx, id, true)
		if err != nil {
			return nil, err
		}
		if j.Node != "" || j.State.Terminal() {
			if j.Node == "" {
				return nil, fmt.Errorf("job %d ended (%s) without running", id, j.State)
			}
			return j, nil
		}
		if !told {
			fmt.Fprintf(env.stderr, "%s: job %d is %s (%s); waiting for it to start\n", env.prog, id, j.State, j.Reason)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// follow copies path to w as it grows until job id has ended and the file
// holds nothing more.
func follow(ctx context.Context, w io.Writer, cl *api.Client, id uint64, path string) error {
	var f *os.File
	deadline := time.Now().Add(10 * time.Second)
	for f == nil {
		var err error
		f, err = os.Open(path)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist) && time.Now().Before(deadline):
			time.Sleep(100 * time.Millisecond)
		default:
			return fmt.Errorf("job %d writes its output to %s, which cannot be read here (%v): attach from a host that sees that path", id, path, err)
		}
	}
	defer f.Close()
	lastCheck := time.Time{}
	for {
		n, err := io.Copy(w, f)
		if err != nil {
			return err
		}
		if n == 0 && time.Since(lastCheck) > 300*time.Millisecond {
			j, err := cl.Job(ctx, id, false)
			if err != nil {
				return err
			}
			lastCheck = time.Now()
			if j.State.Terminal() {
				_, err := io.Copy(w, f)
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}
