package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"corral/api"
	"corral/internal/getopt"
)

// runCp copies a file into or out of a running job, as the job's user:
// `corral cp JOB:PATH LOCAL` or `corral cp LOCAL JOB:PATH` (PATH relative
// to the job's working directory). Copying in is sbcast's job: it reaches
// every VM of the job, which is one until multi-node jobs arrive.
func runCp(ctx context.Context, env *cliEnv, args []string) error {
	o, err := parseOpts(env, "cp", getopt.Permute, args)
	if err != nil {
		return err
	}
	if len(o.args) != 2 {
		return fmt.Errorf("cp: give a source and a destination: corral cp JOB:PATH LOCAL, or corral cp LOCAL JOB:PATH")
	}
	srcJob, srcPath, srcRemote := splitJobRef(o.args[0])
	dstJob, dstPath, dstRemote := splitJobRef(o.args[1])
	if srcRemote == dstRemote {
		return fmt.Errorf("cp: exactly one of the two must be in a job (JOB:PATH, e.g. 12:results/out.txt)")
	}
	cl, err := env.client()
	if err != nil {
		return err
	}
	if srcRemote {
		return copyOut(ctx, cl, srcJob, srcPath, dstPath)
	}
	return copyIn(ctx, cl, srcPath, dstJob, dstPath)
}

// splitJobRef reads "JOB:PATH"; anything else is a local path.
func splitJobRef(s string) (uint64, string, bool) {
	before, after, ok := strings.Cut(s, ":")
	if !ok {
		return 0, s, false
	}
	id, err := strconv.ParseUint(before, 10, 64)
	if err != nil || id == 0 {
		return 0, s, false
	}
	return id, after, true
}

func copyOut(ctx context.Context, cl *api.Client, id uint64, remote, local string) error {
	if err := api.CheckJobPath(remote); err != nil {
		return fmt.Errorf("cp: %d:%s: %w", id, remote, err)
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	rd, mode, err := cl.ReadJobFile(ctx, id, remote)
	if err != nil {
		return cpError(id, remote, err)
	}
	defer rd.Close()
	if mode == 0 {
		mode = 0o644
	}
	f, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fs.FileMode(mode))
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if _, err := io.Copy(f, rd); err != nil {
		f.Close()
		return fmt.Errorf("cp: %d:%s was cut off: %w", id, remote, err)
	}
	return f.Close()
}

func copyIn(ctx context.Context, cl *api.Client, local string, id uint64, remote string) error {
	f, err := os.Open(local)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("cp: %s is not a regular file (only files are copied)", local)
	}
	if remote == "" || strings.HasSuffix(remote, "/") {
		remote += filepath.Base(local)
	}
	if err := api.CheckJobPath(remote); err != nil {
		return fmt.Errorf("cp: %d:%s: %w", id, remote, err)
	}
	if err := cl.WriteJobFile(ctx, id, remote, uint32(st.Mode().Perm()), f); err != nil {
		return cpError(id, remote, err)
	}
	return nil
}

func cpError(id uint64, p string, err error) error {
	var ae *api.APIError
	if errors.As(err, &ae) && ae.Errno != "" {
		return fmt.Errorf("cp: %d:%s: %s (%s)", id, p, ae.Message, ae.Errno)
	}
	return fmt.Errorf("cp: %d:%s: %w", id, p, err)
}
