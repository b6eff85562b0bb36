package noded

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	"corral/api"
)

// callTimeout bounds one short controller call (register, heartbeat,
// report), the client's own retries across members included.
const callTimeout = 10 * time.Second

// registration tracks the daemon's registrations with the controllers and
// whether they can be reached, so that an outage is logged once, not per try.
type registration struct {
	mu      sync.Mutex
	gen     uint64        // successful registrations so far
	at      uint64        // the Raft index of the last one (see api.NodeAck.Index)
	changed chan struct{} // closed at the next successful registration
	want    chan struct{} // a request to register again
	down    bool          // an outage is under way and was logged
}

func newRegistration() *registration {
	return &registration{changed: make(chan struct{}), want: make(chan struct{}, 1)}
}

func (r *registration) current() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// index returns the Raft index of the last successful registration, 0 when
// the controllers did not say.
func (r *registration) index() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

// answered records the Raft index of a registration the controllers
// applied, before anything acts on it: canLaunch compares desired states
// with it once the lease the registration renewed holds again.
func (r *registration) answered(index uint64) {
	r.mu.Lock()
	r.at = index
	r.mu.Unlock()
}

// registered counts a successful registration and wakes the waiters.
func (r *registration) registered() {
	r.mu.Lock()
	r.gen++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// waitPast blocks until more than gen registrations succeeded; it returns
// false when ctx ends first.
func (r *registration) waitPast(ctx context.Context, gen uint64) bool {
	for {
		r.mu.Lock()
		g, ch := r.gen, r.changed
		r.mu.Unlock()
		if g > gen {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// reregister asks for a new registration and waits for it: the controller
// lost this node.
func (d *Daemon) reregister(ctx context.Context) bool {
	g := d.reg.current()
	select {
	case d.reg.want <- struct{}{}:
	default:
	}
	return d.reg.waitPast(ctx, g)
}

// noteCall logs the start and the end of an outage. A controller that
// answered "not found" is reachable.
func (d *Daemon) noteCall(op string, err error) {
	if err != nil && !isNotFound(err) {
		d.metrics.callFailures.WithLabelValues(op).Inc()
	}
	r := d.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil || isNotFound(err):
		if r.down {
			r.down = false
			d.log.Info("controller reachable again", "op", op)
		}
	case !r.down:
		r.down = true
		d.log.Warn("controller call failed; retrying with backoff until it answers", "op", op, "err", err)
	}
}

// imageOffer is implemented by a runner that runs jobs in guest images (the
// vm runner): the node reports the images it knows and its accelerator.
type imageOffer interface {
	Images() []string
	Accel() string
}

// overheadOffer is implemented by a runner that uses memory of its own per
// job (the vm runner's QEMU), which the controllers count against the node.
type overheadOffer interface {
	OverheadMB() int64
}

// overlayOffer is implemented by a runner that can put a multi-node job's
// VMs on the job's private network: where the node's end of it listens
// (api.NodeInfo.Overlay), invalid when it offers none.
type overlayOffer interface {
	Overlay() netip.AddrPort
}

// nodeInfo builds a registration. It carries the runs that are alive
// (Running) and the reports not acknowledged yet (Reports, and the jobs of
// those beyond api.MaxRegisterReports in Running), so that the controllers
// learn how every run they placed here fares; keys and the reports are
// returned for acknowledging them. Running is read before the reports: a
// run's report is queued before it leaves the running list (see finish), so
// a run that ends meanwhile is in one of the two.
func (d *Daemon) nodeInfo() (api.NodeInfo, []jobKey) {
	info := api.NodeInfo{
		Name:       d.cfg.Name,
		CPUs:       d.cfg.CPUs,
		MemMB:      d.cfg.MemMB,
		TmpMB:      d.cfg.TmpMB,
		Partitions: d.cfg.Partitions,
		Features:   d.cfg.Features,
		Runner:     d.runner.Name(),
		BootID:     d.bootID,
		Running:    slices.Clone(*d.running.Load()),
		Inventory:  d.inv.Load(),
		APIAddr:    d.apiAddr(),
		Migrate:    d.canMigrate(),
		// A checkpoint is a migration to a file: the same runner does it.
		CheckpointDir: d.sharedCheckpointDir(),
	}
	keys, reports := d.rep.snapshot()
	if len(keys) > api.MaxRegisterReports {
		for _, k := range keys[api.MaxRegisterReports:] {
			info.Running = append(info.Running, k.ID)
		}
		slices.Sort(info.Running)
		info.Running = slices.Compact(info.Running)
		keys, reports = keys[:api.MaxRegisterReports], reports[:api.MaxRegisterReports]
	}
	info.Reports = reports
	// What the probe measures is not reported before it did.
	info.Probing = !d.ready()
	if o, ok := d.runner.(imageOffer); ok {
		info.Images = o.Images()
		if !info.Probing {
			info.Accel = o.Accel()
		}
	}
	if o, ok := d.runner.(overheadOffer); ok && !info.Probing {
		info.OverheadMB = o.OverheadMB()
	}
	if o, ok := d.runner.(overlayOffer); ok {
		if ep := o.Overlay(); ep.IsValid() {
			info.Overlay = ep.String()
		}
	}
	return info, keys
}

// maintain registers, then heartbeats every interval; it registers again
// whenever a heartbeat (or another goroutine) finds that the controller lost
// the node.
func (d *Daemon) maintain(ctx context.Context) {
	every := d.cfg.HeartbeatInterval
	t := time.NewTicker(every)
	defer t.Stop()
	var rediscover <-chan time.Time
	if d.cfg.Rediscover != nil {
		rt := time.NewTicker(d.cfg.RediscoverInterval)
		defer rt.Stop()
		rediscover = rt.C
	}
	// Four heartbeats per lease at least, from the first registration on.
	pace := func() {
		if terms, _ := d.lease.current(); terms.heartbeat(d.cfg.HeartbeatInterval) != every {
			every = terms.heartbeat(d.cfg.HeartbeatInterval)
			t.Reset(every)
		}
	}
	need := true
	for {
		if need {
			if !d.registerLoop(ctx) {
				return
			}
			need = false
			pace()
		}
		select {
		case <-ctx.Done():
			return
		case <-d.reg.want:
			need = true
			continue
		case <-rediscover:
			if inv := d.cfg.Rediscover(); !reflect.DeepEqual(inv, d.inv.Load()) {
				d.log.Info("inventory changed; registering again to report it")
				d.inv.Store(inv)
				need = true
			}
			continue
		case <-t.C:
		}
		terms, _ := d.lease.current()
		cctx, cancel := context.WithTimeout(ctx, terms.callTimeout())
		sent := time.Now()
		ack, err := d.cfg.Client.HeartbeatNode(cctx, d.cfg.Name, d.bootID)
		cancel()
		d.metrics.heartbeats.Inc()
		if ctx.Err() != nil {
			return
		}
		d.noteCall("heartbeat", err)
		if err == nil {
			d.renewLease(sent, ack)
		}
		if isNotFound(err) {
			d.log.Warn("the controller does not know this node; registering again")
			need = true
		}
		pace()
	}
}

// registerLoop registers until it succeeds; false means ctx ended.
func (d *Daemon) registerLoop(ctx context.Context) bool {
	b := newBackoff(100*time.Millisecond, 5*time.Second)
	for {
		info, keys := d.nodeInfo()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		sent := time.Now()
		ack, err := d.cfg.Client.RegisterNode(cctx, info)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		d.noteCall("register", err)
		if err == nil {
			d.reg.answered(ack.Index)
			d.renewLease(sent, ack)
			terms, _ := d.lease.current()
			d.log.Info("registered", "boot_id", d.bootID, "runner", info.Runner, "cpus", info.CPUs,
				"mem_mb", info.MemMB, "images", info.Images, "accel", info.Accel,
				"overhead_mb", info.OverheadMB, "probing", info.Probing, "running", info.Running, "reports", len(info.Reports),
				"index", ack.Index, "lease", terms.Lease, "node_timeout", terms.Timeout)
			// The registration acknowledges the reports it carried, and
			// only those.
			if acked := d.rep.acked(keys, info.Reports); len(acked) > 0 {
				select {
				case d.ackCh <- acked:
				case <-ctx.Done():
					return false
				}
			}
			d.reg.registered()
			return true
		}
		if !sleepCtx(ctx, b.next()) {
			return false
		}
	}
}

// watch follows the node's desired state with blocking queries and hands
// every new version to the loop.
func (d *Daemon) watch(ctx context.Context) {
	if !d.reg.waitPast(ctx, 0) {
		return
	}
	// The first answer must be no older than the registration: a member
	// that has not applied it yet waits until it has.
	index := max(d.reg.index(), 1) - 1
	fresh := true // the next answer is handed over even if its index did not move
	b := newBackoff(50*time.Millisecond, 5*time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, d.cfg.WaitTimeout+callTimeout)
		des, err := d.cfg.Client.Desired(cctx, d.cfg.Name, index, d.cfg.WaitTimeout)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil && !des.Known {
			err = &api.APIError{Status: 404, Message: "the controller does not know this node"}
		}
		switch {
		case isNotFound(err):
			d.log.Warn("the controller does not know this node; registering again")
			// The pause keeps a member that has not applied the
			// registration yet from causing a registration storm.
			if !d.reregister(ctx) || !sleepCtx(ctx, b.next()) {
				return
			}
			index, fresh = max(d.reg.index(), 1)-1, true
			continue
		case err != nil:
			d.noteCall("watch", err)
			if !sleepCtx(ctx, b.next()) {
				return
			}
			continue
		}
		d.noteCall("watch", nil)
		b.reset()
		if des.Index <= index && !(fresh && index == 0) {
			// Only a wait that ran out answers with an unchanged (or, from
			// a member that lags, an older) index; a short pause keeps a
			// controller that does not block from turning this into a
			// busy loop.
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		index, fresh = des.Index, false
		select {
		case d.desiredCh <- des:
		case <-ctx.Done():
			return
		}
	}
}

// backoff yields exponentially growing, jittered delays.
type backoff struct{ min, max, cur time.Duration }

func newBackoff(lo, hi time.Duration) *backoff { return &backoff{min: lo, max: hi} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	}
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleepCtx sleeps for d; false means ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
