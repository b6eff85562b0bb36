package noded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"corral/api"

	"corral/internal/procref"
)

// Files the daemon keeps in a run's state directory, beside the runner's.
const (
	// recordFile holds the jobRecord. It is complete before the directory
	// has its name, and replaced atomically when the daemon decides to kill
	// the run or the run's time limit changes.
	recordFile = "job.json"
	// reportFile holds a report a restarted daemon could not derive from
	// the record and the runner's files (see Daemon.finish), until the
	// report is acknowledged.
	reportFile = "report.json"
)

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
			// Reported already (a spare, or a removal cut short), or
			// never named: nothing in it is read.
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
	err := procref.ReadJSON(filepath.Join(dir, recordFile), &rec)
	if err == nil && (jobKey{rec.Job.ID, rec.Job.StartIndex}) != k {
		err = fmt.Errorf("the record is for job %d-%d", rec.Job.ID, rec.Job.StartIndex)
	}
	if err != nil {
		// A directory gets its name only with its record complete, and
		// the record is written before the runner starts anything, so
		// nothing of this run ever ran.
		d.log.Warn("removing a job directory without a record", "dir", dir, "err", err)
		os.RemoveAll(dir)
		return
	}
	lj := &localJob{key: k, dir: dir, rec: rec, recSaved: true}
	d.jobs[k] = lj
	var rep api.JobReport
	if err := procref.ReadJSON(filepath.Join(dir, reportFile), &rep); err == nil {
		lj.report = &rep
		d.rep.add(k, rep)
		return
	}
	h, res, err := d.recoverRun(dir)
	if err == nil {
		lj.handle = h
		d.log.Info("re-adopted a running job", "job", k.ID, "start_index", k.StartIndex, "paused", rec.paused())
		go d.waitJob(k, h)
		d.serveGuestSteps(lj)
		d.recordSession(lj)
		if rec.Incoming == 0 {
			// A migration's destination is stopped because it waits.
			d.recoverPaused(lj)
		}
		d.armTimer(lj)
		d.recoverMigration(lj)
		if rec.Kill != nil {
			h.Kill(d.cfg.KillGrace)
		}
		return
	}
	if !errors.Is(err, ErrGone) {
		d.log.Error("cannot re-attach to a job; reporting it lost", "job", k.ID, "err", err)
	}
	if res != nil {
		d.finish(lj, d.endReport(lj, *res), d.reusable && res.Message == "")
		return
	}
	rep = reportFor(lj, Result{Message: "the node lost the job while its daemon was down (" + err.Error() + ")"})
	if rec.Kill == nil {
		rep.State = api.StateNodeFail
	}
	d.finish(lj, rep, false)
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

// recoverPaused corrects a re-adopted run's record with what its handle
// says about being paused, when it can say: the earlier daemon may have
// died between pausing or continuing the job and recording it. A
// suspension that ended unrecorded is taken to have lasted until now, so
// the run's time limit errs in its favour.
func (d *Daemon) recoverPaused(lj *localJob) {
	pr, ok := lj.handle.(PauseReporter)
	if !ok {
		return
	}
	paused, err := pr.Paused()
	if err != nil {
		d.log.Warn("cannot tell whether a re-adopted job is suspended; trusting its record", "job", lj.key.ID, "err", err)
		return
	}
	switch {
	case paused == lj.rec.paused():
		return
	case paused:
		lj.rec.PausedAt = time.Now()
	default:
		lj.rec.PausedFor += time.Since(lj.rec.PausedAt)
		lj.rec.PausedAt = time.Time{}
	}
	d.saveRecord(lj, "cannot record a job's suspension")
}
