package noded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral/api"
)

// Files the daemon keeps in a run's state directory, beside the runner's.
const (
	recordFile = "job.json"    // jobRecord, written before the runner starts anything
	reportFile = "report.json" // the run's final report, until acknowledged
)

// makeJobDir creates a run's private state directory.
func makeJobDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the job's state directory: %w", err)
	}
	return nil
}

// removeJobDir removes an acknowledged run's directory. The rename to a
// dot-name is the durable "reported" mark: it is atomic, so a daemon that
// dies halfway through the removal finds a dot-directory, which it only
// deletes, and never sends the report twice.
func removeJobDir(root string, k jobKey) error {
	dir := filepath.Join(root, k.String())
	gone := filepath.Join(root, "."+k.String())
	if err := os.Rename(dir, gone); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(gone)
}

// recoverJobs rebuilds the job table from DataDir before the daemon
// registers: running jobs are re-adopted, ended ones queued for reporting.
func (d *Daemon) recoverJobs() error {
	if err := os.MkdirAll(d.root, 0o700); err != nil {
		return fmt.Errorf("noded: creating the state directory: %w", err)
	}
	entries, err := os.ReadDir(d.root)
	if err != nil {
		return fmt.Errorf("noded: reading the state directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(d.root, name)
		if strings.HasPrefix(name, ".") {
			// Reported already; its removal was cut short.
			os.RemoveAll(dir)
			continue
		}
		k, ok := parseJobKey(name)
		if !ok || !e.IsDir() {
			d.log.Warn("ignoring an unexpected entry in the jobs directory", "path", dir)
			continue
		}
		d.recoverJob(k, dir)
	}
	d.publishRunning()
	if n := d.liveCount(); n > 0 || len(d.jobs) > 0 {
		d.log.Info("recovered jobs from an earlier daemon", "running", n, "ended", len(d.jobs)-n)
	}
	return nil
}

func (d *Daemon) recoverJob(k jobKey, dir string) {
	var rec jobRecord
	if err := readJSONFile(filepath.Join(dir, recordFile), &rec); err != nil {
		// The record is written before the runner starts anything, so
		// nothing of this run ever ran.
		d.log.Warn("removing a job directory without a record", "dir", dir, "err", err)
		os.RemoveAll(dir)
		return
	}
	lj := &localJob{key: k, dir: dir, rec: rec}
	d.jobs[k] = lj
	var rep api.JobReport
	if err := readJSONFile(filepath.Join(dir, reportFile), &rep); err == nil {
		lj.report = &rep
		d.rep.add(k, rep)
		return
	}
	h, res, err := d.recoverRun(dir)
	if err == nil {
		lj.handle = h
		d.log.Info("re-adopted a running job", "job", k.ID, "start_index", k.StartIndex)
		go d.waitJob(k, h)
		d.armTimer(lj)
		if rec.Kill != nil {
			h.Kill(d.cfg.KillGrace)
		}
		return
	}
	if !errors.Is(err, ErrGone) {
		d.log.Error("cannot re-attach to a job; reporting it lost", "job", k.ID, "err", err)
	}
	if res != nil {
		d.finish(lj, reportFor(lj, *res))
		return
	}
	rep = reportFor(lj, Result{Message: "the node lost the job while its daemon was down (" + err.Error() + ")"})
	if rec.Kill == nil {
		rep.State = api.StateNodeFail
	}
	d.finish(lj, rep)
}

// recoverRun asks the runner to re-attach, trying again a few times when it
// fails for another reason than the run being gone (out of descriptors,
// say): giving up reports a run lost that may still be running.
func (d *Daemon) recoverRun(dir string) (Handle, *Result, error) {
	for try := 1; ; try++ {
		h, res, err := d.runner.Recover(dir)
		if err == nil || errors.Is(err, ErrGone) || try == 5 {
			return h, res, err
		}
		d.log.Warn("cannot re-attach to a job yet; trying again", "dir", dir, "err", err)
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
}
