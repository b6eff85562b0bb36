package noded

import (
	"context"
	"sync"
	"time"

	"corral/api"
	"corral/migrate"
)

// The node's part in live migrations (docs/migration.md). The desired
// state says, per allocation, which migration it takes part in, on which
// side, and in which phase (api.AllocMigration); the daemon follows it as
// it follows everything else, from the loop:
//
//   - destination, before the switch: the run is started with the
//     runner's StartIncoming (a VM waiting, stopped, for the stream) and
//     reported prepared; the source's daemon connects to the job API
//     (migration_stream.go) and the stream is fed to the VM, which is
//     reported loaded once its state is in;
//   - source, prepared or streaming: the stream is sent (MigrateOut) through
//     a connection to the destination's daemon, reported streaming, then
//     sent (with QEMU's figures) or failed;
//   - destination, at the switch: the VM is continued (never before: the
//     controllers switch over only once the source's guest stopped for
//     good) and reported resumed; the job's time limit counts on from
//     what the job had run;
//   - source, at the switch: its allocation leaves the desired state and
//     the run is killed as any other (its QEMU waits, stopped, after the
//     stream);
//   - aborted: the destination's allocation leaves the desired state (its
//     VM, which never ran the guest, is killed) and the source's stays
//     without a migration: the daemon cancels a stream under way and
//     continues a guest that had stopped for it.
//
// The desired state's index only grows, across restarts too (see watch),
// so a source told "no migration" after it was told to stream was told
// so by an abort: the controllers never hand it back once the switch was
// decided.

// runMigration is what the daemon knows of a migration one of its runs
// takes part in. It lives in memory; a restarted daemon asks the runner
// (recoverMigration).
type runMigration struct {
	id   uint64
	role string
	// The source's: cancel ends the stream under way, done is closed
	// when its goroutine returned; sent and stats once it completed,
	// failed once it did not.
	cancel context.CancelFunc
	done   chan struct{}
	sent   bool
	stats  MigrationStats
	failed string
	// The destination's: the stream's credential and source node (for
	// the job API), whether a stream arrived, and when its state was in.
	token, peer string
	claimed     *sync.Once
	loaded      bool
	loadedAt    time.Time
}

// migStreamed is the end of a source's stream.
type migStreamed struct {
	key   jobKey
	id    uint64
	stats MigrationStats
	err   error
}

// migReceived is the end of a destination's stream.
type migReceived struct {
	key jobKey
	id  uint64
	err error
}

// canMigrate reports whether this daemon can take part in live migrations
// (api.NodeInfo.Migrate): its runner can, and its job API, which streams
// come in through, listens.
func (d *Daemon) canMigrate() bool {
	_, ok := d.runner.(LiveMigrator)
	return ok && d.apiAddr() != ""
}

// desiredMigrations returns the migration part of each desired run.
func desiredMigrations(des *api.Desired) map[jobKey]*api.AllocMigration {
	out := map[jobKey]*api.AllocMigration{}
	for i := range des.Allocations {
		a := &des.Allocations[i]
		if a.Migration != nil {
			out[jobKey{a.Job.ID, a.Job.StartIndex}] = a.Migration
		}
	}
	return out
}

// isDestination reports whether m makes a run a migration's destination.
func isDestination(m *api.AllocMigration) bool {
	return m != nil && m.Role == api.MigrationDestination
}

// beforeSwitch reports whether m's phase may still be aborted.
func beforeSwitch(m *api.AllocMigration) bool { return migrate.Phase(m.Phase).BeforeSwitch() }

// followMigration does what a run's migration (m, nil for none) asks now.
func (d *Daemon) followMigration(lj *localJob, m *api.AllocMigration) {
	if lj.handle == nil || lj.rec.Kill != nil {
		return
	}
	switch {
	case m == nil:
		if lj.mig != nil && lj.mig.role == api.MigrationSource {
			d.abortSource(lj, "the migration was aborted")
		}
		if lj.rec.Incoming != 0 {
			// The migration released (its record gone with a purge):
			// what the destination had to wait for is over.
			d.continueDestination(lj, 0)
		}
	case m.Role == api.MigrationSource:
		d.followSource(lj, m)
	case m.Role == api.MigrationDestination && !beforeSwitch(m):
		d.continueDestination(lj, m.RanS)
	}
}

// followSource streams a run whose migration is prepared (or, after a
// restart, reports what became of a stream an earlier daemon ran).
func (d *Daemon) followSource(lj *localJob, m *api.AllocMigration) {
	if lj.mig != nil && lj.mig.id != 0 && lj.mig.id != m.ID {
		d.abortSource(lj, "a newer migration replaces it")
	}
	if m.Phase != string(migrate.Prepared) && m.Phase != string(migrate.Streaming) {
		return
	}
	switch {
	case lj.mig == nil:
		d.startStream(lj, m)
	case lj.mig.id == 0:
		// An earlier daemon's stream: its connection died with it.
		lj.mig.id = m.ID
		if lj.mig.sent {
			d.migReport(lj, migrate.EvSent, lj.mig.stats, "")
		} else {
			d.migReport(lj, migrate.EvFailed, MigrationStats{}, lj.mig.failed)
		}
	}
}

// startStream sends the run's state to its migration's destination.
func (d *Daemon) startStream(lj *localJob, m *api.AllocMigration) {
	src, ok := lj.handle.(MigrationSource)
	if !ok || lj.rec.paused() {
		lj.mig = &runMigration{id: m.ID, role: api.MigrationSource, failed: "the run cannot be streamed (suspended, or its runner cannot migrate)"}
		d.migReport(lj, migrate.EvFailed, MigrationStats{}, lj.mig.failed)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	mig := &runMigration{id: m.ID, role: api.MigrationSource, cancel: cancel, done: make(chan struct{})}
	lj.mig = mig
	p := MigrationParams{Downtime: time.Duration(m.DowntimeMS) * time.Millisecond, MaxBandwidth: m.BandwidthMiB << 20,
		MaxTime: time.Duration(m.MaxTimeS) * time.Second, AutoConverge: true}
	d.log.Info("streaming a job to another node", "job", lj.key.ID, "migration", m.ID, "to", m.Peer)
	k, alloc, target := lj.key, lj.rec.Alloc, *m
	go func() {
		defer close(mig.done)
		defer cancel()
		stats, err := d.streamOut(ctx, alloc, src, target, p)
		select {
		case d.migCh <- migStreamed{key: k, id: target.ID, stats: stats, err: err}:
		case <-d.loopDone:
		}
	}()
}

// onStreamed takes a source's stream's end.
func (d *Daemon) onStreamed(ev migStreamed) {
	lj := d.jobs[ev.key]
	if lj == nil || lj.mig == nil || lj.mig.id != ev.id || lj.mig.role != api.MigrationSource {
		return // aborted meanwhile: abortSource resumes the guest
	}
	if ev.err != nil {
		lj.mig.failed = ev.err.Error()
		d.log.Warn("the job's migration stream failed; it runs on here", "job", lj.key.ID, "migration", ev.id, "err", ev.err)
		d.migReport(lj, migrate.EvFailed, MigrationStats{}, lj.mig.failed)
		return
	}
	lj.mig.sent, lj.mig.stats = true, ev.stats
	d.log.Info("the job's state is sent; it waits here, stopped, for the controllers' word", "job", lj.key.ID, "migration", ev.id,
		"total", ev.stats.Total, "downtime", ev.stats.Downtime, "bytes", ev.stats.RAMBytes)
	d.migReport(lj, migrate.EvSent, ev.stats, "")
}

// abortSource cancels the run's stream, if one is under way, and then
// continues its guest where the stream had stopped it.
func (d *Daemon) abortSource(lj *localJob, why string) {
	mig := lj.mig
	lj.mig = nil
	if mig.cancel != nil {
		mig.cancel()
	}
	src, ok := lj.handle.(MigrationSource)
	if !ok {
		return
	}
	d.log.Info("the job's migration is over without it; it runs on here", "job", lj.key.ID, "migration", mig.id, "why", why)
	go func() {
		if mig.done != nil {
			<-mig.done // the stream's own cancel first
		}
		if err := src.ResumeAfterMigration(); err != nil {
			d.log.Error("cannot continue the job after its aborted migration", "job", lj.key.ID, "err", err)
		}
	}()
}

// onReceived takes a destination's stream's end.
func (d *Daemon) onReceived(ev migReceived) {
	lj := d.jobs[ev.key]
	if lj == nil || lj.mig == nil || lj.mig.id != ev.id || lj.rec.Incoming != ev.id {
		return
	}
	if ev.err != nil {
		d.log.Warn("the job's migration stream could not be loaded here", "job", lj.key.ID, "migration", ev.id, "err", ev.err)
		d.migReport(lj, migrate.EvFailed, MigrationStats{}, ev.err.Error())
		return
	}
	lj.mig.loaded, lj.mig.loadedAt = true, time.Now()
	d.log.Info("the job's state is loaded; it waits, stopped, for the controllers' word", "job", lj.key.ID, "migration", ev.id)
	d.migReport(lj, migrate.EvLoaded, MigrationStats{}, "")
}

// continueDestination starts a loaded destination's guest: the
// controllers switched over. ranS is how long the job had run before, so
// its time limit counts on.
func (d *Daemon) continueDestination(lj *localJob, ranS float64) {
	if lj.rec.Incoming == 0 {
		return
	}
	mig := lj.mig
	if mig == nil {
		mig = &runMigration{id: lj.rec.Incoming, role: api.MigrationDestination}
		lj.mig = mig
	}
	if !mig.loaded {
		dst, ok := lj.handle.(MigrationDestination)
		if loaded, err := dst.Loaded(); !ok || !loaded {
			// The controllers switch over only on this node's word that
			// the state was in: a VM without it cannot run the job.
			d.log.Error("told to continue a migration's destination whose state is not loaded", "job", lj.key.ID, "err", err)
			d.kill(lj, api.StateFailed, "the migration's destination had no state to continue")
			return
		}
		mig.loaded, mig.loadedAt = true, time.Now()
	}
	p, ok := lj.handle.(Pausable)
	if !ok {
		return
	}
	if err := p.Continue(); err != nil {
		d.log.Warn("cannot continue the migrated job; trying again at the next reconcile", "job", lj.key.ID, "err", err)
		return
	}
	waited := time.Since(mig.loadedAt)
	lj.rec.Incoming = 0
	lj.rec.Started = time.Now().Add(-time.Duration(ranS * float64(time.Second)))
	d.saveRecord(lj, "cannot record a migrated job's start")
	d.armTimer(lj)
	d.publishRuns()
	d.log.Info("the migrated job continues here", "job", lj.key.ID, "migration", mig.id, "waited", waited)
	d.migRep.add(api.MigrationReport{Migration: mig.id, Alloc: lj.rec.Alloc, Event: string(migrate.EvResumed), SwitchMS: waited.Milliseconds()})
	lj.mig = nil
}

// migReport queues a report of the run's migration event.
func (d *Daemon) migReport(lj *localJob, ev migrate.Event, st MigrationStats, msg string) {
	r := api.MigrationReport{Migration: lj.mig.id, Alloc: lj.rec.Alloc, Event: string(ev), Message: clipMessage(msg)}
	if ev == migrate.EvSent {
		r.TotalMS, r.StopMS, r.Bytes = st.Total.Milliseconds(), st.Downtime.Milliseconds(), st.RAMBytes
	}
	d.migRep.add(r)
}

// recoverMigration finds what an earlier daemon's migration left of a run
// it re-adopted: a destination whose state is in waits for the word (one
// whose stream never arrived cannot get it any more: its stream died with
// that daemon, and it is killed); a source whose stream completed waits,
// stopped, for the controllers' decision.
func (d *Daemon) recoverMigration(lj *localJob) {
	if lj.rec.Incoming != 0 {
		mig := &runMigration{id: lj.rec.Incoming, role: api.MigrationDestination}
		lj.mig = mig
		if dst, ok := lj.handle.(MigrationDestination); ok {
			if loaded, err := dst.Loaded(); err == nil && loaded {
				mig.loaded, mig.loadedAt = true, time.Now()
				d.log.Info("re-adopted a migration's destination, loaded and waiting", "job", lj.key.ID, "migration", mig.id)
				return
			}
		}
		d.kill(lj, api.StateFailed, "the migration's stream ended with the node daemon that received it")
		return
	}
	src, ok := lj.handle.(MigrationSource)
	if !ok {
		return
	}
	state, stats, err := src.MigrationState()
	switch {
	case err != nil:
		d.log.Warn("cannot tell whether a re-adopted job was migrating", "job", lj.key.ID, "err", err)
	case state == "completed":
		lj.mig = &runMigration{role: api.MigrationSource, sent: true, stats: stats}
		d.log.Info("re-adopted a job whose migration stream had completed; it waits, stopped, for the controllers' word", "job", lj.key.ID)
	case state == "active":
		// Its stream went through the daemon that died: QEMU's
		// migration cannot complete.
		lj.mig = &runMigration{role: api.MigrationSource, failed: "the source's node daemon restarted during the stream"}
		go func() {
			if err := src.ResumeAfterMigration(); err != nil {
				d.log.Error("cannot continue a re-adopted job whose stream died", "job", lj.key.ID, "err", err)
			}
		}()
	}
}
