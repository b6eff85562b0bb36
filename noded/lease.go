package noded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"corral/api"
)

// leaseFile (in DataDir) holds the node's lease for the lease keeper and for
// the next daemon: one line of six numbers, "FENCE TERM KILL PERIOD LEASE
// TIMEOUT": when the lease runs out, when the keeper sends SIGTERM and
// SIGKILL to the jobs (the three in hundredths of a second of CLOCK_BOOTTIME,
// the clock of /proc/uptime), how often the keeper looks (seconds), and the
// lease and node timeout in milliseconds.
const leaseFile = "lease"

// leaseTerms are what the controllers said about the node's lease (see
// api.NodeAck): the lease L and their node timeout T. Everything else the
// node does about it is a fraction of T, so that a stopped job is gone by
// 0.7 T, well before the controllers declare the node DOWN after T:
//
//	0            last message acknowledged by a leader (its send time)
//	L = T/2      the daemon stops every job: SIGTERM, SIGKILL after its kill grace, at most T/5
//	L + T/10     the keeper (when the daemon could not) sends SIGTERM to every job's process group
//	L + T/5      the keeper sends SIGKILL; every job is gone
//	T            the controllers declare the node DOWN and requeue its jobs
type leaseTerms struct {
	Lease, Timeout time.Duration
}

// termsFrom reads the controllers' answer; ok is false when it says nothing
// about the lease. A lease that does not leave room for the kill grace
// before the timeout is taken as half the timeout.
func termsFrom(ack api.NodeAck) (leaseTerms, bool) {
	l := time.Duration(ack.LeaseMS) * time.Millisecond
	t := time.Duration(ack.NodeTimeoutMS) * time.Millisecond
	switch {
	case l <= 0 && t <= 0:
		return leaseTerms{}, false
	case t <= 0:
		t = 2 * l
	case l <= 0 || l > t/2:
		l = t / 2
	}
	return leaseTerms{Lease: l, Timeout: t}, true
}

func (t leaseTerms) known() bool { return t.Lease > 0 }

// killGrace is the grace between SIGTERM and SIGKILL when the lease runs
// out: the daemon's own, but at most T/5.
func (t leaseTerms) killGrace(own time.Duration) time.Duration { return min(own, t.Timeout/5) }

// heartbeat is the interval between heartbeats: the daemon's own, but at
// least four per lease.
func (t leaseTerms) heartbeat(own time.Duration) time.Duration {
	if !t.known() {
		return own
	}
	return min(own, t.Lease/4)
}

// callTimeout bounds one heartbeat: an answer that comes later than half a
// lease after its question renews little.
func (t leaseTerms) callTimeout() time.Duration {
	if !t.known() {
		return callTimeout
	}
	return min(callTimeout, max(t.Lease/2, 500*time.Millisecond))
}

// keeperPeriod is how often the keeper reads the lease: T/20, between a
// tenth of a second and a second.
func (t leaseTerms) keeperPeriod() time.Duration {
	return min(max(t.Timeout/20, 100*time.Millisecond), time.Second)
}

// lease is the node's lease as the daemon holds it. It is renewed by every
// registration, heartbeat and report a leader acknowledged, from the time
// the message was sent: the leader heard from the node no earlier, so it
// cannot declare the node DOWN before that time plus T. Until the
// controllers tell a lease (or an earlier daemon left one in DataDir) the
// node has none and stops nothing.
type lease struct {
	path string

	mu       sync.Mutex
	terms    leaseTerms
	deadline time.Time // monotonic; zero while unknown
	// lapsed says the deadline passed before a renewal came: the
	// watcher reports the loss even if it slept through it (a frozen
	// daemon).
	lapsed  bool
	written time.Time // the deadline last written to the file
	changed chan struct{}
}

func newLease(dataDir string) *lease {
	return &lease{path: filepath.Join(dataDir, leaseFile), changed: make(chan struct{}, 1)}
}

// current returns the terms and the deadline.
func (l *lease) current() (leaseTerms, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.terms, l.deadline
}

// held reports whether the node may run jobs at now: it has no lease, or
// its lease has not run out, and did not lapse since the loop last heard
// (the loop kills every run when it hears of a lapse, so none may start
// before).
func (l *lease) held(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.terms.known() || (now.Before(l.deadline) && !l.lapsed)
}

// renew extends the lease to sent + L (never shortens it) and writes it for
// the keeper. ack may carry new terms; a report's answer carries none.
func (l *lease) renew(sent time.Time, ack api.NodeAck) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := termsFrom(ack); ok {
		l.terms = t
	}
	if !l.terms.known() {
		return nil
	}
	if !l.deadline.IsZero() && !sent.Before(l.deadline) {
		l.lapsed = true
	}
	if d := sent.Add(l.terms.Lease); d.After(l.deadline) {
		l.deadline = d
	}
	select {
	case l.changed <- struct{}{}:
	default:
	}
	// Reports can renew hundreds of times a second. The file may lag the
	// lease by up to one keeper period: the keeper acts only two periods
	// (a tenth of the node timeout) after the deadline it reads, so a
	// lagging file never fences a node that holds its lease.
	if l.deadline.Sub(l.written) < l.terms.keeperPeriod() {
		return nil
	}
	l.written = l.deadline
	return l.write()
}

// write records the lease in its file; l.mu is held.
func (l *lease) write() error {
	now, boot := time.Now(), bootClock()
	at := func(d time.Duration) int64 { return (boot + l.deadline.Sub(now) + d).Milliseconds() / 10 }
	t := l.terms
	line := fmt.Sprintf("%d %d %d %.2f %d %d\n", at(0), at(t.Timeout/10), at(t.Timeout/5),
		t.keeperPeriod().Seconds(), t.Lease.Milliseconds(), t.Timeout.Milliseconds())
	// Replaced whole (a new file, then a rename), at most a few times a
	// second: the keeper must never read half of one deadline and half of
	// the next.
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}

// load takes the lease an earlier daemon left: its deadline holds until a
// controller renews it, since the controllers count from the earlier
// daemon's last message.
func (l *lease) load() error {
	b, err := os.ReadFile(l.path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	f := strings.Fields(string(b))
	if len(f) != 6 || !strings.HasSuffix(string(b), "\n") {
		return fmt.Errorf("%s: %q is not a lease (it is replaced at the next renewal)", l.path, b)
	}
	var n [6]int64
	for i, s := range f {
		if i == 3 {
			continue
		}
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("%s: %q is not a lease (it is replaced at the next renewal)", l.path, b)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terms = leaseTerms{Lease: time.Duration(n[4]) * time.Millisecond, Timeout: time.Duration(n[5]) * time.Millisecond}
	l.deadline = time.Now().Add(time.Duration(n[0])*10*time.Millisecond - bootClock())
	l.written = l.deadline
	return nil
}

// bootClock reads CLOCK_BOOTTIME, the clock /proc/uptime shows.
func bootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// renewLease renews the lease after a message sent at sent was
// acknowledged; a failure to record it is logged (the keeper then acts on
// the old deadline, which errs on the side of stopping jobs).
func (d *Daemon) renewLease(sent time.Time, ack api.NodeAck) {
	if ack.LeaseMS > 0 { // a registration's or heartbeat's answer
		d.startTimes.Store(ack.StartTimes)
	}
	if err := d.lease.renew(sent, ack); err != nil {
		d.log.Warn("cannot record the node's lease for its keeper", "err", err)
	}
}

// watchLease tells the loop when the lease runs out and when it is renewed
// after that.
func (d *Daemon) watchLease(ctx context.Context) {
	held := true
	for {
		l := d.lease
		l.mu.Lock()
		lapsed, terms, deadline := l.lapsed, l.terms, l.deadline
		l.mu.Unlock()
		now := time.Now()
		if lapsed && held && !d.sendLease(ctx, false) {
			return
		}
		if lapsed {
			// Only once the loop has heard: until then held is false.
			l.mu.Lock()
			l.lapsed = false
			l.mu.Unlock()
			held = false
		}
		if h := !terms.known() || now.Before(deadline); h != held {
			if !d.sendLease(ctx, h) {
				return
			}
			held = h
		}
		var expiry <-chan time.Time
		var timer *time.Timer
		if held && terms.known() {
			timer = time.NewTimer(deadline.Sub(now))
			expiry = timer.C
		}
		select {
		case <-ctx.Done():
		case <-l.changed:
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (d *Daemon) sendLease(ctx context.Context, held bool) bool {
	select {
	case d.leaseCh <- held:
		return true
	case <-ctx.Done():
		return false
	}
}

// fenceMessage is what a run stopped because the lease ran out reports.
func (d *Daemon) fenceMessage() string {
	t, _ := d.lease.current()
	return fmt.Sprintf("node %s heard from no controller for longer than its lease of %s and stopped the job, so that it cannot run twice when the controllers requeue it",
		d.cfg.Name, t.Lease)
}

// onLeaseLost stops every job: the controllers may declare the node DOWN
// and requeue them elsewhere. No job starts until the lease is renewed.
func (d *Daemon) onLeaseLost() {
	if d.leaseLost {
		return
	}
	d.leaseLost = true
	t, _ := d.lease.current()
	grace := t.killGrace(d.cfg.KillGrace)
	msg := d.fenceMessage()
	var stop []*localJob
	for _, lj := range d.sortedJobs() {
		if lj.alive() && lj.rec.Kill == nil {
			stop = append(stop, lj)
		}
	}
	d.log.Warn("lease expired: no controller acknowledged this node for longer than its lease; stopping its jobs so that none runs twice",
		"lease", t.Lease, "jobs", len(stop), "kill_grace", grace, "node_timeout", t.Timeout)
	for _, lj := range stop {
		d.killWithin(lj, api.StateNodeFail, msg, grace)
	}
}

// onLeaseRenewed lets jobs start again, from a desired state read since
// (see canLaunch).
func (d *Daemon) onLeaseRenewed() {
	if !d.leaseLost {
		return
	}
	d.leaseLost = false
	d.log.Info("lease renewed: a controller acknowledged this node again")
	if d.lastDesired != nil && !d.stopping {
		d.reconcile(d.lastDesired)
	}
}

// canLaunch says whether runs of des may start: the runner is ready (its
// probe is done), the lease holds, and des is no older than the daemon's
// last registration (a restarted daemon has no tombstones, and a node the
// controllers declared DOWN lost its runs at that registration).
func (d *Daemon) canLaunch(des *api.Desired) bool {
	return !d.stopping && d.ready() && !d.leaseLost && d.lease.held(time.Now()) && des.Index >= d.reg.index()
}
