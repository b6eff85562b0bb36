package noded

import (
	"context"
	"syscall"
	"time"
)

// The time-limit warning (sbatch --signal=[B:]SIG[@TIME]): SIG goes to the
// run's processes TIME seconds before its deadline, through the same
// delivery as corral cancel --signal (JobAgent.Signal). It is sent once per
// run; a daemon restarted after it went sends it again if the deadline is
// still ahead (the mark is kept in memory only). A suspended run's clock
// does not run, so neither does its warning's.

// armWarning (re)arms the run's warning at its deadline minus TIME; armTimer
// calls it with the deadline set.
func (d *Daemon) armWarning(lj *localJob) {
	stopWarn(lj)
	w := lj.rec.Job.Spec.Signal
	if w == nil || lj.warned || lj.deadline.IsZero() {
		return
	}
	at := lj.deadline.Add(-time.Duration(w.BeforeS) * time.Second)
	k := lj.key
	lj.warnTimer = time.AfterFunc(time.Until(at), func() {
		select {
		case d.warnCh <- k:
		case <-d.loopDone:
		}
	})
}

func stopWarn(lj *localJob) {
	if lj.warnTimer != nil {
		lj.warnTimer.Stop()
		lj.warnTimer = nil
	}
}

// onWarn sends a run's warning, unless it ended, is being killed or is
// paused meanwhile.
func (d *Daemon) onWarn(k jobKey) {
	lj := d.jobs[k]
	if lj == nil || lj.handle == nil || lj.rec.Kill != nil || lj.rec.paused() || lj.warned {
		return
	}
	w := lj.rec.Job.Spec.Signal
	ja, ok := lj.handle.(JobAgent)
	if w == nil || !ok {
		return
	}
	lj.warned = true
	scope := SignalAll
	if w.Batch {
		scope = SignalBatch
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ja.Signal(ctx, syscall.Signal(w.Signal), scope); err != nil {
			d.log.Warn("cannot send a job its time-limit warning", "job", k.ID, "signal", w.Signal, "err", err)
			return
		}
		d.log.Info("sent a job its time-limit warning", "job", k.ID, "signal", w.Signal, "before_s", w.BeforeS)
	}()
}
