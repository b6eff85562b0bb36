package noded

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"corral/api"
	"corral/internal/ident"
	"corral/submit"

	"corral/internal/procref"
)

// tombstoneTTL is the least time a reported run is remembered, so that a
// desired state read before the controller applied the report cannot start
// the run again.
const tombstoneTTL = 5 * time.Minute

// jobKey names one run of a job on this node: a requeued job comes back with
// a new StartIndex.
type jobKey struct{ ID, StartIndex uint64 }

func (k jobKey) String() string {
	return strconv.FormatUint(k.ID, 10) + "-" + strconv.FormatUint(k.StartIndex, 10)
}

func (k jobKey) compare(o jobKey) int {
	if k.ID != o.ID {
		return cmp.Compare(k.ID, o.ID)
	}
	return cmp.Compare(k.StartIndex, o.StartIndex)
}

// parseJobKey parses a state directory's name, "<jobid>-<startindex>".
func parseJobKey(name string) (jobKey, bool) {
	a, b, ok := strings.Cut(name, "-")
	if !ok {
		return jobKey{}, false
	}
	id, err1 := strconv.ParseUint(a, 10, 64)
	si, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return jobKey{}, false
	}
	return jobKey{id, si}, true
}

// jobRecord is the daemon's own record of a run (job.json in its state
// directory): enough to report it after a restart.
type jobRecord struct {
	Job api.Job `json:"job"`
	// Alloc is the run's allocation (0 in a record of a daemon that
	// predates allocation ids); its reports name it.
	Alloc uint64 `json:"alloc,omitempty"`
	// Started is when this node launched the run; its time limit counts
	// from here (see doc.go).
	Started time.Time `json:"started"`
	// Kill is set once the daemon decided to kill the run, and says what
	// to report when it is gone.
	Kill *killRecord `json:"kill,omitempty"`
	// PausedAt is set while the run is suspended: when it was paused.
	// PausedFor is how long its earlier suspensions lasted. Neither counts
	// against the time limit.
	PausedAt  time.Time     `json:"paused_at,omitzero"`
	PausedFor time.Duration `json:"paused_for,omitempty"`
	// Incoming is set while the run is a live migration's destination
	// that has not been continued: the migration's id. Such a run is
	// stopped and waits for the controllers' word (migration.go).
	Incoming uint64 `json:"incoming,omitempty"`
}

func (r jobRecord) paused() bool { return !r.PausedAt.IsZero() }

type killRecord struct {
	State   api.JobState `json:"state"`
	Message string       `json:"message,omitempty"`
}

// localJob is one run in the job table.
type localJob struct {
	key      jobKey
	dir      string
	rec      jobRecord
	starting bool   // the runner's Start is in flight
	handle   Handle // set while the job runs
	timer    *time.Timer
	// warnTimer sends the time-limit warning (Spec.Signal) once; warned
	// says it went.
	warnTimer *time.Timer
	warned    bool
	deadline  time.Time
	// recSaved says the record on disk is rec: the last write of it
	// succeeded.
	recSaved bool
	// report is set once the run ended; the entry stays until the report
	// is acknowledged.
	report *api.JobReport
	// startTook is how long the runner took to start the run (0 for a run
	// an earlier daemon started); its report carries it.
	startTook time.Duration
	// mig is the migration the run takes part in, nil when none; ck the
	// checkpoint it is saved to, nil when none; restore says it started
	// from a checkpoint.
	mig     *runMigration
	ck      *runCheckpoint
	restore bool
}

func (lj *localJob) alive() bool { return lj.starting || lj.handle != nil }

type startedEvent struct {
	key    jobKey
	handle Handle
	err    error
	// took is how long the runner's Start took.
	took time.Duration
}

type exitedEvent struct {
	key    jobKey
	handle Handle
	res    Result
}

// reconcile converges the node on des: runs that are no longer wanted are
// killed, wanted runs that are neither running nor finished here are
// started. It is idempotent.
func (d *Daemon) reconcile(des *api.Desired) {
	d.lastDesired = des
	d.deferred = false
	want := make(map[jobKey]*api.Job, len(des.Allocations))
	ending := make(map[jobKey]*api.Job)
	migs, cks := desiredMigrations(des), desiredCheckpoints(des)
	for i := range des.Allocations {
		j := &des.Allocations[i].Job
		k := jobKey{j.ID, j.StartIndex}
		if j.State == api.StateCompleting || j.State.Terminal() {
			ending[k] = j
		} else {
			want[k] = j
		}
	}
	for _, lj := range d.sortedJobs() {
		if !lj.alive() || lj.rec.Kill != nil {
			continue
		}
		if j, ok := want[lj.key]; ok {
			d.updateTimeLimit(lj, j)
			d.followSuspend(lj, j.State == api.StateSuspended)
			d.followMigration(lj, migs[lj.key])
			d.followCheckpoint(lj, cks[lj.key])
			d.followJobNet(lj, j)
			continue
		}
		state, msg := api.StateCancelled, ""
		if j, ok := ending[lj.key]; ok && j.FinalState.Terminal() {
			state = j.FinalState
		}
		d.kill(lj, state, msg)
	}
	now := time.Now()
	for k, t := range d.done {
		if _, ok := want[k]; !ok && now.Sub(t) > tombstoneTTL {
			delete(d.done, k)
		}
	}
	if des.Known {
		d.sweepCheckpoints(des.Checkpoints)
	}
	if d.canLaunch(des) {
		d.launchWanted(want, migs, cks)
	}
	d.publishRunning()
}

func (d *Daemon) launchWanted(want map[jobKey]*api.Job, migs map[jobKey]*api.AllocMigration, cks map[jobKey]*api.AllocCheckpoint) {
	keys := make([]jobKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, jobKey.compare)
	for _, k := range keys {
		if _, ok := d.jobs[k]; ok {
			continue
		}
		if _, ok := d.done[k]; ok {
			continue
		}
		if want[k].State == api.StateSuspended {
			// Not running here and meant to be paused: it starts when
			// it is resumed.
			continue
		}
		if m := migs[k]; isDestination(m) && !beforeSwitch(m) {
			// A migration's destination is only ever started waiting
			// for its stream: past the switch, a run of it that is not
			// here was lost, and starting the job afresh would run it
			// twice.
			continue
		}
		if d.otherRunAlive(k) {
			// A requeued job's new run waits for its old one to be gone.
			d.deferred = true
			continue
		}
		d.launch(k, want[k], migs[k], cks[k])
	}
}

func (d *Daemon) otherRunAlive(k jobKey) bool {
	for _, lj := range d.jobs {
		if lj.key.ID == k.ID && lj.key != k && lj.alive() {
			return true
		}
	}
	return false
}

// launch creates the run's state directory and starts it in the background;
// onStarted takes the outcome.
//
// A live migration's destination (m) starts as its runner's incoming VM,
// stopped, waiting for the stream (migration.go); a run restored from a
// checkpoint (ck) from its file (checkpoint.go).
func (d *Daemon) launch(k jobKey, j *api.Job, m *api.AllocMigration, ck *api.AllocCheckpoint) {
	lj := &localJob{key: k, dir: filepath.Join(d.root, k.String()), rec: jobRecord{Job: *j, Alloc: d.desiredAlloc(k), Started: time.Now()}}
	d.jobs[k] = lj
	start, serr := d.starter(lj, m, ck)
	spec, err := d.prepare(lj)
	if err == nil {
		err = serr
	}
	if err != nil {
		d.log.Error("cannot launch job", "job", k.ID, "start_index", k.StartIndex, "err", err)
		if lj.mig != nil {
			d.migReport(lj, "failed", MigrationStats{}, err.Error())
		}
		d.finish(lj, reportFor(lj, Result{ExitCode: 1, Message: err.Error()}), false)
		return
	}
	lj.starting = true
	d.starting++
	d.armTimer(lj)
	// Start gets a context of its own: a launch under way when the daemon
	// stops completes, and the next daemon re-adopts the job.
	js := j.Spec
	go func() {
		if d.runner.Name() == "vm" {
			spec = vmSpec(spec, d.partition(context.Background(), js.Partition), js)
		}
		began := time.Now()
		h, err := start(context.Background(), spec)
		d.startedCh <- startedEvent{key: k, handle: h, err: err, took: time.Since(began)}
	}()
}

// vmSpec completes a VM run's spec with what the job and its partition
// p ask of its VM: the partition's shared paths mounted too, the share
// (api.Partition.ShareFor), the partition's root and network, and whether
// the VM may start warm (api.Partition.WarmFor).
func vmSpec(spec LaunchSpec, p api.Partition, js api.JobSpec) LaunchSpec {
	if len(p.SharedPaths) > 0 {
		spec.Shares = jobShares(spec.WorkDir, js.SubmitDir, spec.User, p.SharedPaths)
	}
	spec.Share = p.ShareFor(js.NoMigrate)
	spec.Root, spec.Network = p.Root, p.Network
	spec.NoWarm = !p.WarmFor(js.NoWarm)
	return spec
}

// prepare creates the run's state directory with its record and builds its
// launch spec.
func (d *Daemon) prepare(lj *localJob) (LaunchSpec, error) {
	j := &lj.rec.Job
	b, err := json.Marshal(lj.rec)
	if err != nil {
		return LaunchSpec{}, fmt.Errorf("encoding the job's record: %w", err)
	}
	dir, err := d.dirs.create(lj.key, append(b, '\n'))
	if err != nil {
		return LaunchSpec{}, err
	}
	lj.dir, lj.recSaved = dir, true
	jc, err := d.jobContext(j)
	if err != nil {
		return LaunchSpec{}, err
	}
	env := jc.env
	if j.Spec.GetUserEnv {
		env = withLoginEnv(env, jc.user, d.log)
	}
	stdin := submit.InputPath(j, d.cfg.Name)
	if stdin != "" && !filepath.IsAbs(stdin) {
		stdin = filepath.Join(jc.workDir, stdin)
	}
	spec := LaunchSpec{
		Job:          j,
		Dir:          lj.dir,
		Env:          env,
		Stdout:       jc.stdout,
		Stderr:       jc.stderr,
		AppendOutput: j.Spec.OpenMode == api.OpenModeAppend,
		Stdin:        stdin,
		Rlimits:      j.Spec.Rlimits,
		Script:       j.Spec.Script,
		Args:         j.Spec.Args,
		WorkDir:      jc.workDir,
		User:         jc.user,
		Shares:       jobShares(jc.workDir, j.Spec.SubmitDir, jc.user, nil),
	}
	if j.NodeRank > 0 {
		// Another node of a multi-node job: the batch script runs on
		// the first; this one holds the job's place for its steps, and
		// writes nothing into the job's output files and reads no input.
		spec.Script, spec.Args, spec.Stdout, spec.Stderr, spec.Stdin = holdScript, nil, os.DevNull, os.DevNull, ""
	}
	return spec, nil
}

// holdScript is what the other nodes of a multi-node job run: nothing,
// until the job ends and its node stops it.
const holdScript = "#!/bin/sh\n# corral: a node of a multi-node job, waiting for its steps\nwhile :; do sleep 3600; done\n"

// jobCtx is what a run is started with, and what the job API acts with:
// the run's user, environment, working directory and output files.
type jobCtx struct {
	user           ident.User
	env            []string
	workDir        string
	stdout, stderr string
}

// jobContext resolves a job's user and paths on this node.
func (d *Daemon) jobContext(j *api.Job) (jobCtx, error) {
	u, err := d.jobUser(j)
	if err != nil {
		return jobCtx{}, err
	}
	workDir := j.Spec.WorkDir
	if workDir == "" {
		workDir = j.Spec.SubmitDir
	}
	if workDir == "" {
		workDir = "/tmp"
	}
	out, errPath := submit.OutputPaths(j, d.cfg.Name)
	if out != "" && !filepath.IsAbs(out) {
		out = filepath.Join(workDir, out)
	}
	if errPath != "" && !filepath.IsAbs(errPath) {
		errPath = filepath.Join(workDir, errPath)
	}
	env := JobEnv(j, d.cfg.Name)
	if step := d.stepEnv(jobKey{ID: j.ID, StartIndex: j.StartIndex}); step != nil {
		env = mergeEnv(env, step)
	}
	return jobCtx{user: u, env: userEnv(env, u), workDir: workDir, stdout: out, stderr: errPath}, nil
}

func (d *Daemon) onStarted(ev startedEvent) {
	d.starting--
	lj := d.jobs[ev.key]
	lj.starting = false
	if ev.err != nil {
		d.metrics.startFailures.Inc()
		d.log.Warn("job failed to start", "job", ev.key.ID, "start_index", ev.key.StartIndex, "err", ev.err)
		if lj.mig != nil {
			d.migReport(lj, "failed", MigrationStats{}, ev.err.Error())
		}
		d.finish(lj, reportFor(lj, Result{ExitCode: 1, Message: ev.err.Error()}), false)
		d.relaunchDeferred()
		return
	}
	lj.handle = ev.handle
	lj.startTook = ev.took
	d.metrics.startSeconds.WithLabelValues(d.runner.Name()).Observe(ev.took.Seconds())
	d.publishRuns()
	d.log.Info("job started", "job", ev.key.ID, "start_index", ev.key.StartIndex, "dir", lj.dir)
	go d.waitJob(ev.key, ev.handle)
	d.serveGuestSteps(lj)
	d.recordSession(lj)
	d.ensureKeeper()
	if lj.rec.Kill != nil {
		ev.handle.Kill(d.cfg.KillGrace)
		return
	}
	if d.leaseLost || !d.lease.held(time.Now()) {
		// The lease ran out while the run was being launched.
		t, _ := d.lease.current()
		d.killWithin(lj, api.StateNodeFail, d.fenceMessage(), t.killGrace(d.cfg.KillGrace))
		return
	}
	if lj.rec.Incoming != 0 {
		d.log.Info("a migration's destination waits for its stream", "job", ev.key.ID, "migration", lj.rec.Incoming)
		d.migReport(lj, "prepared", MigrationStats{}, "")
		return
	}
	if lj.restore {
		d.log.Info("the job runs on from its checkpoint", "job", ev.key.ID, "took", ev.took)
		d.ckRep(api.CheckpointReport{Job: ev.key.ID, Alloc: lj.rec.Alloc, Event: "restored", TookMS: ev.took.Milliseconds()})
	}
	// The job may have been suspended while it was being launched.
	if j := d.desiredJob(ev.key); j != nil {
		d.followSuspend(lj, j.State == api.StateSuspended)
	}
}

// desiredAlloc returns the id of run k's allocation in the last desired
// state, or 0.
func (d *Daemon) desiredAlloc(k jobKey) uint64 {
	if d.lastDesired == nil {
		return 0
	}
	for _, a := range d.lastDesired.Allocations {
		if a.Job.ID == k.ID && a.Job.StartIndex == k.StartIndex {
			return a.ID
		}
	}
	return 0
}

// desiredJob returns run k's allocation in the last desired state, or nil.
func (d *Daemon) desiredJob(k jobKey) *api.Job {
	if d.lastDesired == nil {
		return nil
	}
	for i := range d.lastDesired.Allocations {
		j := &d.lastDesired.Allocations[i].Job
		if j.ID == k.ID && j.StartIndex == k.StartIndex {
			return j
		}
	}
	return nil
}

// followSuspend pauses a running job whose allocation is SUSPENDED and
// continues a paused one whose allocation runs again. The runner acts
// first and the record follows: a daemon that crashes in between learns
// the truth from a handle that implements PauseReporter (see recoverJob),
// and otherwise the next reconcile repeats the idempotent act. A failure is
// logged and tried again at the next reconcile.
func (d *Daemon) followSuspend(lj *localJob, suspend bool) {
	if lj.handle == nil || lj.rec.Kill != nil || suspend == lj.rec.paused() || lj.rec.Incoming != 0 {
		return
	}
	p, ok := lj.handle.(Pausable)
	if !ok {
		if suspend {
			d.log.Warn("the runner cannot suspend jobs; the job keeps running", "job", lj.key.ID, "runner", d.runner.Name())
		}
		return
	}
	if suspend {
		if err := p.Pause(); err != nil {
			d.log.Warn("cannot suspend a job", "job", lj.key.ID, "start_index", lj.key.StartIndex, "err", err)
			return
		}
		lj.rec.PausedAt = time.Now()
		d.log.Info("job suspended", "job", lj.key.ID, "start_index", lj.key.StartIndex)
	} else {
		if err := p.Continue(); err != nil {
			d.log.Warn("cannot resume a job", "job", lj.key.ID, "start_index", lj.key.StartIndex, "err", err)
			return
		}
		lj.rec.PausedFor += time.Since(lj.rec.PausedAt)
		lj.rec.PausedAt = time.Time{}
		d.log.Info("job resumed", "job", lj.key.ID, "start_index", lj.key.StartIndex, "suspended_for", lj.rec.PausedFor)
	}
	d.saveRecord(lj, "cannot record a job's suspension")
	d.armTimer(lj)
	d.publishRuns()
}

// waitJob hands a job's end to the loop.
func (d *Daemon) waitJob(k jobKey, h Handle) {
	res := h.Wait()
	select {
	case d.exitedCh <- exitedEvent{key: k, handle: h, res: res}:
	case <-d.loopDone:
	}
}

func (d *Daemon) onExited(ev exitedEvent) {
	lj := d.jobs[ev.key]
	if lj == nil || lj.handle == nil || lj.handle != ev.handle {
		return
	}
	lj.handle = nil
	rep := d.endReport(lj, ev.res)
	if u, ok := ev.handle.(UsageReporter); ok {
		if cpu, peak, ok := u.Usage(); ok {
			rep.CPUSeconds, rep.PeakMemKB = cpu.Seconds(), peak/1024
		}
	}
	if w, ok := ev.handle.(WarmReporter); ok {
		rep.VMStart = api.VMStartCold
		if w.StartedWarm() {
			rep.VMStart = api.VMStartWarm
		}
	}
	d.finish(lj, rep, d.reusable && ev.res.Message == "" && lj.recSaved)
	d.relaunchDeferred()
}

// relaunchDeferred re-runs the last reconcile when a run waited for an old
// run of the same job to end.
func (d *Daemon) relaunchDeferred() {
	if d.deferred && d.lastDesired != nil && !d.stopping {
		d.reconcile(d.lastDesired)
	}
}

func (d *Daemon) onTimeout(k jobKey) {
	lj := d.jobs[k]
	if lj == nil || !lj.alive() || lj.rec.Kill != nil || lj.deadline.IsZero() || time.Now().Before(lj.deadline) {
		return // ended, already being killed, or a stale timer
	}
	limit := time.Duration(lj.rec.Job.Spec.TimeLimit) * time.Second
	d.kill(lj, api.StateTimeout, fmt.Sprintf("cancelled at its time limit of %s", limit))
}

// armTimer (re)arms the run's time limit, counted from its local start with
// the time it spent suspended left out. A suspended run's clock does not
// run: it gets no timer until it is continued.
func (d *Daemon) armTimer(lj *localJob) {
	if lj.timer != nil {
		lj.timer.Stop()
		lj.timer = nil
	}
	stopWarn(lj)
	limit := time.Duration(lj.rec.Job.Spec.TimeLimit) * time.Second
	if limit <= 0 || lj.rec.paused() || lj.rec.Incoming != 0 {
		// A migration's destination has not begun: its limit counts
		// on from the source's once it continues.
		lj.deadline = time.Time{}
		return
	}
	lj.deadline = lj.rec.Started.Add(lj.rec.PausedFor + limit)
	k := lj.key
	lj.timer = time.AfterFunc(time.Until(lj.deadline), func() {
		select {
		case d.timeoutCh <- k:
		case <-d.loopDone:
		}
	})
	d.armWarning(lj)
}

// updateTimeLimit follows a time limit changed on the controller.
// followJobNet hands a running job's handle the job's private network
// when the controllers changed it (a member's node moved its endpoint),
// and records it. A failure is logged and tried again at the next
// reconcile.
func (d *Daemon) followJobNet(lj *localJob, j *api.Job) {
	if j.Net == nil || lj.handle == nil || reflect.DeepEqual(j.Net, lj.rec.Job.Net) {
		return
	}
	f, ok := lj.handle.(JobNetFollower)
	if !ok {
		return
	}
	if err := f.SetJobNet(j.Net); err != nil {
		d.log.Warn("cannot follow a change of the job's network", "job", lj.key.ID, "start_index", lj.key.StartIndex, "err", err)
		return
	}
	lj.rec.Job.Net = j.Net
	d.saveRecord(lj, "cannot record a job's network")
}

func (d *Daemon) updateTimeLimit(lj *localJob, j *api.Job) {
	if j.Spec.TimeLimit == lj.rec.Job.Spec.TimeLimit {
		return
	}
	lj.rec.Job.Spec.TimeLimit = j.Spec.TimeLimit
	d.saveRecord(lj, "cannot record a job's new time limit")
	d.armTimer(lj)
}

// kill stops a run and records what its report will say. The record is
// written first, so a daemon restarted while the job dies still reports it
// as killed.
func (d *Daemon) kill(lj *localJob, state api.JobState, msg string) {
	d.killWithin(lj, state, msg, d.cfg.KillGrace)
}

// killWithin is kill with another grace between SIGTERM and SIGKILL.
func (d *Daemon) killWithin(lj *localJob, state api.JobState, msg string, grace time.Duration) {
	if lj.rec.Kill != nil {
		return
	}
	lj.rec.Kill = &killRecord{State: state, Message: msg}
	d.saveRecord(lj, "cannot record a job's kill")
	d.publishRuns()
	d.log.Info("killing job", "job", lj.key.ID, "start_index", lj.key.StartIndex, "state", state)
	if lj.handle != nil {
		lj.handle.Kill(grace)
	}
}

// saveRecord replaces the run's record with lj.rec. A failure is logged with
// msg; the report then says what the record could not (see finish).
func (d *Daemon) saveRecord(lj *localJob, msg string) {
	err := replaceJSONFile(filepath.Join(lj.dir, recordFile), lj.rec)
	lj.recSaved = err == nil
	if err != nil {
		d.log.Warn(msg, "job", lj.key.ID, "err", err)
	}
}

// endReport is reportFor for a run that ended by itself or was killed: a
// run the lease keeper stopped (see keeperScript) is reported as stopped for
// the lease, which the keeper's mark in its directory proves after a restart
// too.
func (d *Daemon) endReport(lj *localJob, res Result) api.JobReport {
	if lj.rec.Kill == nil && fencedByKeeper(lj.dir) {
		lj.rec.Kill = &killRecord{State: api.StateNodeFail, Message: d.fenceMessage()}
	}
	return reportFor(lj, res)
}

// reportFor turns how a run ended into its report.
func reportFor(lj *localJob, res Result) api.JobReport {
	r := api.JobReport{
		Alloc:      lj.rec.Alloc,
		JobID:      lj.key.ID,
		StartIndex: lj.key.StartIndex,
		ExitCode:   res.ExitCode,
		Signal:     res.Signal,
		Message:    res.Message,
	}
	switch {
	case lj.rec.Kill != nil:
		r.State = lj.rec.Kill.State
		r.Message = joinMessages(lj.rec.Kill.Message, res.Message)
	case res.OOM:
		r.State = api.StateOutOfMemory
	case res.ExitCode == 0 && res.Signal == 0 && res.Message == "":
		r.State = api.StateCompleted
	default:
		r.State = api.StateFailed
	}
	return r
}

// clipMessage shortens a report's message to api.MaxReportMessage bytes of
// valid UTF-8, so that the controllers take it whatever a runner said.
func clipMessage(m string) string {
	m = strings.ToValidUTF8(m, "?")
	if len(m) <= api.MaxReportMessage {
		return m
	}
	const more = " [...]"
	cut := api.MaxReportMessage - len(more)
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + more
}

func joinMessages(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// finish queues a run's report for sending. A report that is proven (the
// runner's files hold the Result it came from, as ReusableState promises,
// and the record on disk holds the kill decision, if any) is not written: a
// restarted daemon derives the same one from those files. Any other report
// (a launch failure, a status the runner did not record) is written to
// reportFile first.
func (d *Daemon) finish(lj *localJob, rep api.JobReport, proven bool) {
	if lj.timer != nil {
		lj.timer.Stop()
		lj.timer = nil
	}
	stopWarn(lj)
	rep.Message = clipMessage(rep.Message)
	if d.startTimes.Load() {
		// Milliseconds are what the controllers' histogram needs.
		rep.StartSeconds = lj.startTook.Round(time.Millisecond).Seconds()
	}
	lj.report = &rep
	if !proven {
		if err := procref.WriteJSON(filepath.Join(lj.dir, reportFile), rep); err != nil {
			d.log.Warn("cannot record a job's report; it is kept in memory only", "job", rep.JobID, "err", err)
		}
	}
	d.log.Info("job ended", "job", rep.JobID, "start_index", rep.StartIndex, "state", rep.State,
		"exit_code", rep.ExitCode, "signal", rep.Signal, "message", rep.Message)
	d.metrics.ended.WithLabelValues(string(rep.State)).Inc()
	d.rep.add(lj.key, rep)
	d.publishRunning()
	d.checkKillWaiters()
}

// onAcked forgets runs whose reports the controller acknowledged (the
// reporter already removed their directories), keeping a tombstone.
func (d *Daemon) onAcked(keys []jobKey) {
	now := time.Now()
	for _, k := range keys {
		if lj := d.jobs[k]; lj != nil && lj.report != nil {
			delete(d.jobs, k)
			d.done[k] = now
		}
	}
}

func (d *Daemon) sortedJobs() []*localJob {
	out := make([]*localJob, 0, len(d.jobs))
	for _, lj := range d.jobs {
		out = append(out, lj)
	}
	slices.SortFunc(out, func(a, b *localJob) int { return a.key.compare(b.key) })
	return out
}

func (d *Daemon) liveCount() int {
	n := 0
	for _, lj := range d.jobs {
		if lj.alive() {
			n++
		}
	}
	return n
}

// publishRunning refreshes the list of live job ids that registration sends.
func (d *Daemon) publishRunning() {
	ids := make([]uint64, 0, len(d.jobs))
	for _, lj := range d.sortedJobs() {
		if lj.alive() && (len(ids) == 0 || ids[len(ids)-1] != lj.key.ID) {
			ids = append(ids, lj.key.ID)
		}
	}
	d.running.Store(&ids)
	d.publishRuns()
}

func (d *Daemon) checkKillWaiters() {
	if len(d.killWaiters) == 0 || d.liveCount() > 0 {
		return
	}
	for _, w := range d.killWaiters {
		close(w)
	}
	d.killWaiters = nil
}
