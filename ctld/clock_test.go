package ctld

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"corral/api"
)

// fakeClock is a Clock that moves only when a test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// fakeTimer is a timer or, with period set, a ticker of a fakeClock.
type fakeTimer struct {
	c      *fakeClock
	ch     chan time.Time
	at     time.Time
	period time.Duration
	active bool
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), at: c.now.Add(d), active: true}
	c.timers = append(c.timers, t)
	return t
}

func (c *fakeClock) NewTicker(d time.Duration) Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), at: c.now.Add(d), period: d, active: true}
	c.timers = append(c.timers, t)
	return fakeTicker{t}
}

// fakeTicker is a fakeTimer with a period, as a Ticker.
type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.ch }
func (k fakeTicker) Stop()               { k.t.Stop() }

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.at, t.active = t.c.now.Add(d), true
	return was
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

// Advance moves the clock by d and fires what came due, as the time
// package does: a timer once, a ticker once however many periods passed.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		if !t.active || t.at.After(c.now) {
			continue
		}
		select {
		case t.ch <- c.now:
		default:
		}
		if t.period > 0 {
			t.at = c.now.Add(t.period)
		} else {
			t.active = false
		}
	}
}

// TestLeaderLoopsFollowTheInjectedClock drives the leader's liveness and
// retention loops with a fake clock: a node that stops heartbeating is
// declared DOWN once the fake clock passes the node timeout (and not
// before), and a finished job is purged once it passes MinJobAge.
func TestLeaderLoopsFollowTheInjectedClock(t *testing.T) {
	clock := newFakeClock(t0)
	addr := freeAddr(t)
	c, err := New(Config{ID: "c1", RaftAddr: addr, HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "c1"),
		Peers: []Peer{{ID: "c1", Addr: addr}}, Logger: quietLog(), NodeTimeout: 10 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for !c.isLeading() {
		time.Sleep(10 * time.Millisecond)
	}
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 1, MemMB: 1024, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "60"}}}); err != nil {
		t.Fatal(err)
	}
	held := spec("held")
	held.Hold = true
	res, err := cl.Submit(ctx, []api.JobSpec{held})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{res[0].JobID}}}); err != nil {
		t.Fatal(err)
	}
	nodeState := func() api.NodeState {
		n, err := cl.Node(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		return n.State()
	}
	// Real time passes, the fake clock not: the node stays up.
	for range 3 {
		clock.Advance(3 * time.Second)
		time.Sleep(100 * time.Millisecond)
	}
	if st := nodeState(); st == api.NodeDown {
		t.Fatalf("n1 is DOWN at 9 s of fake time, within its 10 s timeout")
	}
	eventually(t, "n1 DOWN after the timeout", func() bool {
		clock.Advance(time.Second)
		return nodeState() == api.NodeDown
	})
	eventually(t, "the finished job purged after MinJobAge", func() bool {
		clock.Advance(10 * time.Second)
		_, err := cl.Job(ctx, res[0].JobID, true)
		return err != nil
	})
	if now := clock.Now(); now.Sub(t0) > 5*time.Minute {
		t.Errorf("the loops needed %s of fake time", now.Sub(t0))
	}
}

// eventually polls cond for 10 s of real time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
