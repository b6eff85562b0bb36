package migrate

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// step is one thing that happens to a migration in a table test.
type step struct {
	role Role
	ev   Event
	// ended, when set, is an allocation's end (role's) instead of an
	// event; expire is a timeout check instead.
	ended, expire bool
	at            int
}

func placed() *Migration {
	m := New(1, 7, "n1", 10, "", ByRequest, "alice", "tok", Params{}, t0)
	if err := m.Place("n2", 11, at(1)); err != nil {
		panic(err)
	}
	return m
}

func TestPhases(t *testing.T) {
	tests := map[string]struct {
		steps []step
		want  Phase
		err   string // in the record's Error when aborted
	}{
		"a whole migration": {steps: []step{{role: Destination, ev: EvPrepared, at: 2}, {role: Source, ev: EvStreaming, at: 3},
			{role: Source, ev: EvSent, at: 5}, {role: Destination, ev: EvLoaded, at: 5}, {role: Destination, ev: EvResumed, at: 6},
			{role: Source, ended: true, at: 6}}, want: Released},
		"loaded before sent, and before streaming was heard": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Destination, ev: EvLoaded, at: 4}, {role: Source, ev: EvStreaming, at: 4}, {role: Source, ev: EvSent, at: 5}}, want: SwitchOver},
		"sent alone does not switch": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvStreaming, at: 3}, {role: Source, ev: EvSent, at: 4}}, want: Streaming},
		"loaded alone does not switch": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvStreaming, at: 3}, {role: Destination, ev: EvLoaded, at: 4}}, want: Streaming},
		"a failed stream aborts": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvStreaming, at: 3}, {role: Source, ev: EvFailed, at: 4}}, want: Aborted, err: "the source failed"},
		"a failure after the switch changes nothing": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvSent, at: 3}, {role: Destination, ev: EvLoaded, at: 4}, {role: Destination, ev: EvFailed, at: 5}}, want: SwitchOver},
		"the destination's run ends before the switch": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Destination, ended: true, at: 3}}, want: Aborted, err: "the destination's run ended"},
		"the source's run ends before the switch": {steps: []step{{role: Source, ended: true, at: 3}}, want: Aborted, err: "the source's run ended"},
		"the destination's end after the switch does not release": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvSent, at: 3}, {role: Destination, ev: EvLoaded, at: 4}, {role: Destination, ended: true, at: 5}}, want: SwitchOver},
		"a destination that never prepares times out": {steps: []step{{expire: true, at: 60}, {expire: true, at: 62}}, want: Aborted, err: "placed for longer than 1m0s"},
		"not yet": {steps: []step{{expire: true, at: 59}}, want: Placed},
		"a stream that never ends times out": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvStreaming, at: 3}, {expire: true, at: 3 + 150}}, want: Aborted, err: "streaming for longer than 2m30s"},
		"nothing times out after the switch": {steps: []step{{role: Destination, ev: EvPrepared, at: 2},
			{role: Source, ev: EvSent, at: 3}, {role: Destination, ev: EvLoaded, at: 4}, {expire: true, at: 10000}}, want: SwitchOver},
		"repeats change nothing": {steps: []step{{role: Destination, ev: EvPrepared, at: 2}, {role: Destination, ev: EvPrepared, at: 3},
			{role: Source, ev: EvStreaming, at: 4}, {role: Source, ev: EvStreaming, at: 5}}, want: Streaming},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := placed()
			for _, s := range tc.steps {
				switch {
				case s.expire:
					m.Expire(at(s.at))
				case s.ended:
					m.AllocEnded(s.role, "it exited", at(s.at))
				default:
					if _, err := m.Report(s.role, s.ev, Stats{TotalMS: 100, StopMS: 5}, "boom", at(s.at)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if m.Phase != tc.want {
				t.Fatalf("phase %s, want %s (%+v)", m.Phase, tc.want, m)
			}
			if tc.err != "" && !strings.Contains(m.Error, tc.err) {
				t.Errorf("error %q, want it to say %q", m.Error, tc.err)
			}
			if m.Phase.Live() != m.EndAt.IsZero() {
				t.Errorf("phase %s with end time %v", m.Phase, m.EndAt)
			}
		})
	}
}

func TestReportFromTheWrongSideIsRefused(t *testing.T) {
	m := placed()
	if _, err := m.Report(Source, EvPrepared, Stats{}, "", at(2)); err == nil || m.Phase != Placed {
		t.Fatalf("the source reported the destination's event: %v, phase %s", err, m.Phase)
	}
	if _, err := m.Report(Destination, EvSent, Stats{}, "", at(2)); err == nil {
		t.Fatal("the destination reported the source's event")
	}
	if _, err := m.Report(Source, "teleported", Stats{}, "", at(2)); err == nil {
		t.Fatal("an unknown event was taken")
	}
}

func TestPlace(t *testing.T) {
	m := New(1, 7, "n1", 10, "", ByDrain, "n1", "tok", Params{}, t0)
	if err := m.Place("n1", 11, at(1)); err == nil {
		t.Error("a migration was placed on its own source")
	}
	if err := m.Place("n2", 11, at(1)); err != nil || m.Phase != Placed || m.To != "n2" || m.Dest != 11 {
		t.Fatalf("Place: %v, %+v", err, m)
	}
	if err := m.Place("n3", 12, at(2)); err == nil {
		t.Error("a placed migration was placed again")
	}
	if !m.Abort("cancelled", at(3)) || m.Abort("again", at(4)) || m.Error != "cancelled" {
		t.Errorf("abort: %+v", m)
	}
}

// TestNeverBothSwitchedAndAborted drives migrations with random sequences
// of every event, end and timeout: a migration that reached switchover
// never aborts afterwards, it reached it only with both halves reported,
// and once ended nothing changes it.
func TestNeverBothSwitchedAndAborted(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	events := []Event{EvPrepared, EvStreaming, EvSent, EvLoaded, EvResumed, EvFailed}
	for i := 0; i < 20000; i++ {
		m := placed()
		switched := false
		var ended Phase
		for s := 0; s < 12; s++ {
			now := at(2 + s*r.IntN(40))
			switch k := r.IntN(10); {
			case k < 7:
				ev := events[r.IntN(len(events))]
				role := roleOf(ev)
				if role == "" {
					role = []Role{Source, Destination}[r.IntN(2)]
				}
				m.Report(role, ev, Stats{}, "x", now)
			case k < 9:
				m.AllocEnded([]Role{Source, Destination}[r.IntN(2)], "x", now)
			default:
				m.Expire(now)
			}
			if m.Phase == SwitchOver || m.Phase == Released {
				if m.SentAt.IsZero() || m.LoadedAt.IsZero() {
					t.Fatalf("switched over without both halves: %+v", m)
				}
				switched = true
			}
			if switched && m.Phase == Aborted {
				t.Fatalf("aborted after switching over: %+v", m)
			}
			if ended != "" && m.Phase != ended {
				t.Fatalf("an ended migration (%s) changed to %s", ended, m.Phase)
			}
			if !m.Phase.Live() {
				ended = m.Phase
			}
		}
	}
}
