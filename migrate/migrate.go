package migrate

import (
	"fmt"
	"time"
)

// Phase is where a migration stands.
type Phase string

// The phases, in order; Released and Aborted are the ends.
const (
	Requested  Phase = "requested"
	Placed     Phase = "placed"
	Prepared   Phase = "prepared"
	Streaming  Phase = "streaming"
	SwitchOver Phase = "switchover"
	Released   Phase = "released"
	Aborted    Phase = "aborted"
)

// Live reports whether the migration has not ended.
func (p Phase) Live() bool { return p != Released && p != Aborted }

// BeforeSwitch reports whether the migration may still be aborted: the
// destination has not been told to continue.
func (p Phase) BeforeSwitch() bool {
	switch p {
	case Requested, Placed, Prepared, Streaming:
		return true
	}
	return false
}

// Event is what a node daemon reports of a migration.
type Event string

// Events. Each comes from one side: the destination reports Prepared,
// Loaded and Resumed, the source Streaming and Sent; either reports Failed.
const (
	// EvPrepared: the destination's VM waits for the stream.
	EvPrepared Event = "prepared"
	// EvStreaming: the source began streaming.
	EvStreaming Event = "streaming"
	// EvSent: the source's stream completed; its guest is stopped there.
	EvSent Event = "sent"
	// EvLoaded: the destination loaded the whole state; its guest waits.
	EvLoaded Event = "loaded"
	// EvResumed: the destination continued the guest.
	EvResumed Event = "resumed"
	// EvFailed: the migration cannot go on (the text says why).
	EvFailed Event = "failed"
)

// Role is a side of a migration.
type Role string

// The two sides.
const (
	Source      Role = "source"
	Destination Role = "destination"
)

// roleOf is the side that reports ev; "" for Failed (either).
func roleOf(ev Event) Role {
	switch ev {
	case EvPrepared, EvLoaded, EvResumed:
		return Destination
	case EvStreaming, EvSent:
		return Source
	}
	return ""
}

// Valid reports whether ev is an event this package knows.
func (ev Event) Valid() bool { return ev == EvFailed || roleOf(ev) != "" }

// Cause is why a migration was asked for.
type Cause string

// Causes.
const (
	// ByRequest: a user or operator asked (corral migrate).
	ByRequest Cause = "request"
	// ByDrain: its node is drained with --migrate.
	ByDrain Cause = "drain"
	// ByPreemption: a job of a QoS that preempts by migration needs the
	// room.
	ByPreemption Cause = "preempt"
)

// Migration is one live migration of a running job, as the replicated
// state records it. Times are the leader's, stamped into the entries that
// moved the migration; figures are what the nodes measured.
type Migration struct {
	ID  uint64 `json:"id"`
	Job uint64 `json:"job"`
	// From is the source node, To the destination (empty until placed);
	// Want is the node asked for (corral migrate --to), empty for any.
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	Want string `json:"want,omitempty"`
	// Source and Dest are the job's allocations on From and To (Dest 0
	// until placed).
	Source uint64 `json:"source"`
	Dest   uint64 `json:"dest,omitempty"`
	Phase  Phase  `json:"phase"`
	Cause  Cause  `json:"cause"`
	// By is who asked (a user, or the node being drained).
	By string `json:"by,omitempty"`
	// Token is the stream's credential: the destination's daemon takes
	// the stream only from a daemon that shows it (it is in the desired
	// states of the two nodes and nowhere else users see).
	Token  string `json:"token"`
	Params Params `json:"params"`
	// When each phase was reached (zero: not reached); Sent and Loaded
	// are the two halves of the switch.
	RequestedAt time.Time `json:"requested_at"`
	PlacedAt    time.Time `json:"placed_at,omitzero"`
	PreparedAt  time.Time `json:"prepared_at,omitzero"`
	StreamingAt time.Time `json:"streaming_at,omitzero"`
	SentAt      time.Time `json:"sent_at,omitzero"`
	LoadedAt    time.Time `json:"loaded_at,omitzero"`
	SwitchAt    time.Time `json:"switch_at,omitzero"`
	ResumedAt   time.Time `json:"resumed_at,omitzero"`
	EndAt       time.Time `json:"end_at,omitzero"`
	// Stats are the nodes' figures: the source's (total, its downtime,
	// bytes) with Sent, the destination's wait for the word to continue
	// with Resumed.
	Stats Stats `json:"stats,omitzero"`
	// Error says why an aborted migration was aborted.
	Error string `json:"error,omitempty"`
}

// Stats are a migration's figures, in milliseconds and bytes.
type Stats struct {
	// TotalMS is the stream's time at the source, start to completion.
	TotalMS int64 `json:"total_ms,omitempty"`
	// StopMS is the time the source's vCPUs stood still at the stream's
	// end (QEMU's downtime).
	StopMS int64 `json:"stop_ms,omitempty"`
	// SwitchMS is how long the destination, its state loaded, waited for
	// the word to continue (the round trip through the controllers).
	SwitchMS int64 `json:"switch_ms,omitempty"`
	// Bytes is the guest memory sent.
	Bytes int64 `json:"bytes,omitempty"`
}

// DowntimeMS is how long the guest stood still: its vCPUs stopped at the
// source until the destination continued it.
func (s Stats) DowntimeMS() int64 { return s.StopMS + s.SwitchMS }

// New returns a requested migration of job's run on node from (allocation
// source), to node want ("" for any).
func New(id, job uint64, from string, source uint64, want string, cause Cause, by, token string, p Params, now time.Time) *Migration {
	return &Migration{ID: id, Job: job, From: from, Source: source, Want: want, Phase: Requested, Cause: cause,
		By: by, Token: token, Params: p, RequestedAt: now}
}

// Place records the destination the scheduling pass chose: node to,
// allocation dest. It fails unless the migration is requested.
func (m *Migration) Place(to string, dest uint64, now time.Time) error {
	if m.Phase != Requested {
		return fmt.Errorf("migration %d of job %d is %s, not requested", m.ID, m.Job, m.Phase)
	}
	if to == m.From {
		return fmt.Errorf("migration %d of job %d: the destination %s is its source", m.ID, m.Job, to)
	}
	m.To, m.Dest, m.Phase, m.PlacedAt = to, dest, Placed, now
	return nil
}

// Report applies a node's event, reported by the node of side role, and
// says whether it changed the migration. An event that arrives late (a
// phase the migration is past, a repeat, an event of an ended migration)
// changes nothing; one from the wrong side is refused.
func (m *Migration) Report(role Role, ev Event, stats Stats, msg string, now time.Time) (bool, error) {
	if want := roleOf(ev); want != "" && want != role {
		return false, fmt.Errorf("migration %d: the %s reported %s, which is the %s's to report", m.ID, role, ev, want)
	}
	if !m.Phase.Live() || m.Phase == Requested {
		return false, nil
	}
	switch ev {
	case EvPrepared:
		if m.Phase != Placed {
			return false, nil
		}
		m.Phase, m.PreparedAt = Prepared, now
	case EvStreaming:
		if m.Phase != Prepared {
			return false, nil
		}
		m.Phase, m.StreamingAt = Streaming, now
	case EvSent:
		if !m.SentAt.IsZero() || !m.Phase.BeforeSwitch() || m.Phase == Placed {
			return false, nil
		}
		m.SentAt = now
		m.Stats.TotalMS, m.Stats.StopMS, m.Stats.Bytes = stats.TotalMS, stats.StopMS, stats.Bytes
		m.switchWhenBoth(now)
	case EvLoaded:
		if !m.LoadedAt.IsZero() || !m.Phase.BeforeSwitch() || m.Phase == Placed {
			return false, nil
		}
		m.LoadedAt = now
		m.switchWhenBoth(now)
	case EvResumed:
		if !m.ResumedAt.IsZero() || m.Phase.BeforeSwitch() {
			return false, nil
		}
		m.ResumedAt, m.Stats.SwitchMS = now, stats.SwitchMS
	case EvFailed:
		if !m.Phase.BeforeSwitch() {
			return false, nil // the move is done: a node that fails now fails as any node does
		}
		m.abort(fmt.Sprintf("the %s failed: %s", role, msg), now)
	default:
		return false, fmt.Errorf("migration %d: unknown event %q", m.ID, ev)
	}
	return true, nil
}

// switchWhenBoth switches over once the source sent all and the
// destination loaded all.
func (m *Migration) switchWhenBoth(now time.Time) {
	if m.SentAt.IsZero() || m.LoadedAt.IsZero() {
		if m.Phase == Prepared {
			// A report of the other side may overtake the source's
			// Streaming: the stream began all the same.
			m.Phase, m.StreamingAt = Streaming, now
		}
		return
	}
	m.Phase, m.SwitchAt = SwitchOver, now
	if m.StreamingAt.IsZero() {
		m.StreamingAt = now
	}
}

// AllocEnded applies the end of one of the migration's allocations (its
// run reported ended, or lost with its node) and says whether it changed
// the migration. Before the switch any end aborts it (the source's run
// ended: nothing is left to move; the destination's: nothing to move to);
// after it the source's end releases it.
func (m *Migration) AllocEnded(role Role, why string, now time.Time) bool {
	switch {
	case m.Phase.BeforeSwitch():
		m.abort(fmt.Sprintf("the %s's run ended: %s", role, why), now)
		return true
	case m.Phase == SwitchOver && role == Source:
		m.Phase, m.EndAt = Released, now
		return true
	}
	return false
}

// Abort ends a migration that has not switched over, saying why; it does
// nothing to one past that and says so.
func (m *Migration) Abort(why string, now time.Time) bool {
	if !m.Phase.BeforeSwitch() {
		return false
	}
	m.abort(why, now)
	return true
}

func (m *Migration) abort(why string, now time.Time) {
	m.Phase, m.EndAt, m.Error = Aborted, now, why
}

// Deadline returns when the migration, in its current phase, has been
// stuck too long (t.IsZero: never, past the switch or ended).
func (m *Migration) Deadline() time.Time {
	switch m.Phase {
	case Requested:
		return m.RequestedAt.Add(PlaceTimeout)
	case Placed:
		return m.PlacedAt.Add(PrepareTimeout)
	case Prepared:
		return m.PreparedAt.Add(StartTimeout)
	case Streaming:
		// The source cancels the stream at its bound; the slack covers
		// its report of that.
		return m.StreamingAt.Add(m.Params.maxTime() + StreamSlack)
	}
	return time.Time{}
}

// Expire aborts the migration when now is past its deadline and says
// whether it did.
func (m *Migration) Expire(now time.Time) bool {
	d := m.Deadline()
	if d.IsZero() || now.Before(d) {
		return false
	}
	why := fmt.Sprintf("it was %s for longer than %s", m.Phase, m.timeoutOf())
	if m.Phase == Requested {
		why = fmt.Sprintf("no node could take the job within %s", PlaceTimeout)
		if m.Want != "" {
			why = fmt.Sprintf("node %s could not take the job within %s", m.Want, PlaceTimeout)
		}
	}
	m.abort(why, now)
	return true
}

func (m *Migration) timeoutOf() time.Duration {
	switch m.Phase {
	case Requested:
		return PlaceTimeout
	case Placed:
		return PrepareTimeout
	case Prepared:
		return StartTimeout
	}
	return m.Params.maxTime() + StreamSlack
}

// Timeouts of the phases before the switch.
const (
	// PlaceTimeout bounds a requested migration no pass could place (no
	// node fits it).
	PlaceTimeout = time.Minute
	// PrepareTimeout bounds the destination's start (its VM, network and
	// file server).
	PrepareTimeout = time.Minute
	// StartTimeout bounds the wait for the source to begin streaming.
	StartTimeout = 30 * time.Second
	// StreamSlack is added to the stream's own bound (Params.MaxTimeS).
	StreamSlack = 30 * time.Second
)
