package ctld

import "time"

// Clock is where the controller reads the time it stamps into commands and
// the time its leader loops (scheduling, liveness, retention) wait on. A
// test gives the controller a fake one and moves it by hand, so the loops
// are tested without waiting; Raft and the HTTP server's network deadlines
// keep the real clock.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer behind Clock.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// Ticker is a time.Ticker behind Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// realClock is the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
func (t realTimer) Stop() bool                 { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }
