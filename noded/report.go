package noded

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"corral/api"
)

// reporter sends job reports as soon as they exist: whatever accumulated
// while one send was in flight goes in the next, with no periodic tick on
// the way (a trivial job's end should reach the controller in milliseconds).
// A report is retried until the controller acknowledges it; then its run's
// directory is removed.
type reporter struct {
	d       *Daemon
	mu      sync.Mutex
	pending map[jobKey]api.JobReport
	notify  chan struct{}
}

func newReporter(d *Daemon) *reporter {
	return &reporter{d: d, pending: make(map[jobKey]api.JobReport), notify: make(chan struct{}, 1)}
}

// add queues a report; it never blocks.
func (r *reporter) add(k jobKey, rep api.JobReport) {
	r.mu.Lock()
	r.pending[k] = rep
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *reporter) snapshot() ([]jobKey, []api.JobReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]jobKey, 0, len(r.pending))
	for k := range r.pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, jobKey.compare)
	reps := make([]api.JobReport, len(keys))
	for i, k := range keys {
		reps[i] = r.pending[k]
	}
	return keys, reps
}

func (r *reporter) run(ctx context.Context) {
	// The first registration carries the reports pending at start (those
	// an earlier daemon left); sending them before it would only be
	// refused, or sent twice.
	if !r.d.reg.waitPast(ctx, 0) {
		return
	}
	b := newBackoff(50*time.Millisecond, 5*time.Second)
	for {
		r.mu.Lock()
		empty := len(r.pending) == 0
		r.mu.Unlock()
		if empty {
			select {
			case <-r.notify:
			case <-ctx.Done():
				return
			}
		}
		acked, err := r.sendPending(ctx)
		if len(acked) > 0 {
			select {
			case r.d.ackCh <- acked:
			case <-ctx.Done():
				return
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			b.reset()
		case isNotFound(err):
			r.d.log.Warn("the controller does not know this node; registering again before reporting")
			// The pause keeps a controller that keeps forgetting the node
			// (a lagging member, say) from turning this into a busy loop.
			if !r.d.reregister(ctx) || !sleepCtx(ctx, b.next()) {
				return
			}
		default:
			r.d.noteCall("report", err)
			if !sleepCtx(ctx, b.next()) {
				return
			}
		}
	}
}

// flush tries once to send what is pending; Run uses it on its way out.
func (r *reporter) flush(ctx context.Context) {
	r.mu.Lock()
	empty := len(r.pending) == 0
	r.mu.Unlock()
	if empty {
		return
	}
	if _, err := r.sendPending(ctx); err != nil {
		r.d.log.Warn("could not send the last job reports; the next daemon start sends them", "err", err)
	}
}

// sendPending sends every pending report and returns the acknowledged ones.
// A batch the controller refuses is split so that one report it will never
// take does not hold back the others; a refused single report is dropped.
func (r *reporter) sendPending(ctx context.Context) ([]jobKey, error) {
	keys, batch := r.snapshot()
	if len(batch) == 0 {
		return nil, nil
	}
	err := r.send(ctx, batch)
	if err == nil || (isRefusal(err) && len(batch) == 1) {
		r.logRefusal(batch, err)
		return r.acked(keys, batch), nil
	}
	if !isRefusal(err) {
		return nil, err
	}
	var done []jobKey
	for i := range batch {
		err := r.send(ctx, batch[i:i+1])
		if err != nil && !isRefusal(err) {
			return done, err
		}
		r.logRefusal(batch[i:i+1], err)
		done = append(done, r.acked(keys[i:i+1], batch[i:i+1])...)
	}
	return done, nil
}

func (r *reporter) send(ctx context.Context, batch []api.JobReport) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	sent := time.Now()
	err := r.d.cfg.Client.Report(cctx, api.NodeStatus{Name: r.d.cfg.Name, BootID: r.d.bootID, Reports: batch})
	if err == nil {
		r.d.noteCall("report", nil)
		// The leader that took the report heard from the node.
		r.d.renewLease(sent, api.NodeAck{})
	}
	return err
}

func (r *reporter) logRefusal(batch []api.JobReport, err error) {
	if err != nil {
		r.d.log.Error("the controller refused a job report; dropping it", "job", batch[0].JobID,
			"start_index", batch[0].StartIndex, "state", batch[0].State, "err", err)
	}
}

// acked removes the acknowledged reports from the queue (unless a newer one
// replaced them meanwhile) and their runs' directories from disk.
func (r *reporter) acked(keys []jobKey, batch []api.JobReport) []jobKey {
	for i, k := range keys {
		r.mu.Lock()
		cur, ok := r.pending[k]
		if ok && cur == batch[i] {
			delete(r.pending, k)
		}
		r.mu.Unlock()
		if err := r.d.dirs.retire(k); err != nil {
			r.d.log.Warn("cannot remove a reported job's directory", "job", k.ID, "err", err)
		}
	}
	return keys
}

// isRefusal reports whether err is a controller's definite "no" that no
// retry will change.
func isRefusal(err error) bool {
	var ae *api.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Status {
	case http.StatusNotFound, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return ae.Status >= 400 && ae.Status < 500
}

func isNotFound(err error) bool {
	var ae *api.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}
