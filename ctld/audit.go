package ctld

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// The audit trail: every state-changing request the leader answers,
// accepted or refused, becomes a record. guard hands each to the audit
// queue without waiting; the leader's auditLoop chains a batch from the
// state's heads and commits it as one AuditRecords entry, as submissions
// are batched. A full queue drops records rather than delay requests, and
// says how many in the next record.

const (
	// auditQueue bounds the records waiting to be committed.
	auditQueue = 1 << 16
	// auditBatch is the most records one entry carries; auditEvery how
	// long the loop waits to gather more.
	auditBatch = 4096
	auditEvery = 100 * time.Millisecond
	// Defaults of Config.AuditKeep and Config.AuditRetention.
	defaultAuditKeep      = 200_000
	defaultAuditRetention = 30 * 24 * time.Hour
	maxAuditMessage       = 300
)

// auditTrail queues records for the leader's loop.
type auditTrail struct {
	queue   chan state.AuditRecord
	dropped atomic.Int64
}

func newAuditTrail() *auditTrail {
	return &auditTrail{queue: make(chan state.AuditRecord, auditQueue)}
}

// add queues r, or counts it dropped when the queue is full.
func (a *auditTrail) add(r state.AuditRecord) {
	select {
	case a.queue <- r:
	default:
		a.dropped.Add(1)
	}
}

// auditNote is what a handler adds to its request's record: the target.
type auditNote struct{ target string }

type auditKey struct{}

// noteTarget records what r's request acted on ("jobs 12,13"), for its
// audit record.
func noteTarget(r *http.Request, format string, args ...any) {
	if n, ok := r.Context().Value(auditKey{}).(*auditNote); ok {
		n.target = fmt.Sprintf(format, args...)
	}
}

// idsText lists ids as a record's target shows them, the first 20.
func idsText(ids []uint64) string {
	var b strings.Builder
	for i, id := range ids {
		if i == 20 {
			fmt.Fprintf(&b, ",… (%d in all)", len(ids))
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	return b.String()
}

// statusWriter remembers the status and the start of the error body a
// handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	body   []byte
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 300 && len(w.body) < maxAuditMessage {
		w.body = append(w.body, b[:min(len(b), maxAuditMessage-len(w.body))]...)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (exec's
// upgrade, flushes).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestID is the client's X-Request-ID when it is a short printable
// token, else a new one; the answer carries it back.
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-ID")
	if id == "" || len(id) > 64 || submit.NameProblem(id, 64) != "" {
		id = randomText(8)
	}
	w.Header().Set("X-Request-ID", id)
	return id
}

// audited runs h and queues the record of its request by p.
func (c *Controller) audited(w http.ResponseWriter, r *http.Request, p principal, h http.HandlerFunc) {
	note := &auditNote{}
	rid := requestID(w, r)
	sw := &statusWriter{ResponseWriter: w}
	h(sw, r.WithContext(context.WithValue(r.Context(), auditKey{}, note)))
	c.auditRecord(r, p, rid, sw.status, string(sw.body), note.target)
}

// auditRecord queues the record of a request p sent.
func (c *Controller) auditRecord(r *http.Request, p principal, rid string, status int, body, target string) {
	rec := state.AuditRecord{Time: c.clock.Now().UTC(), Principal: p.String(), User: p.name,
		Op: r.Method + " " + r.URL.Path, Target: target, Status: status, RequestID: rid}
	if status >= 300 {
		rec.Message = strings.TrimSpace(body)
	}
	if p.kind == kindUser && !p.admin() && !p.operator() {
		c.fsm.Read(func(s *state.State) {
			if ts := tenantsOf(s, p); len(ts) > 0 {
				rec.Tenant = slices.Min(ts)
			}
		})
	}
	c.audit.add(rec)
}

// auditLoop commits the queued records while this member leads.
func (c *Controller) auditLoop(ctx context.Context) {
	tick := time.NewTicker(auditEvery)
	defer tick.Stop()
	var batch []state.AuditRecord
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-c.audit.queue:
			batch = append(batch, r)
			if len(batch) < auditBatch {
				continue
			}
		case <-tick.C:
		}
		if n := c.audit.dropped.Swap(0); n > 0 {
			batch = append(batch, state.AuditRecord{Time: c.clock.Now().UTC(), Principal: "controller " + c.cfg.ID,
				Op: "audit", Status: http.StatusServiceUnavailable,
				Message: fmt.Sprintf("%d audit records were dropped: the audit queue was full", n)})
		}
		if len(batch) == 0 {
			continue
		}
		if err := c.commitAudit(batch); err != nil {
			c.log.Warn("audit records not committed; retrying with the next batch", "records", len(batch), "err", err)
			if len(batch) > auditQueue {
				batch = batch[len(batch)-auditQueue:]
			}
			continue
		}
		batch = batch[:0]
	}
}

// commitAudit chains batch from the state's heads and commits it.
func (c *Controller) commitAudit(batch []state.AuditRecord) error {
	var heads map[string]state.AuditHead
	c.fsm.Read(func(s *state.State) { heads = s.AuditHeads() })
	api.ChainAudit(heads, batch)
	cmd := &state.AuditRecords{Now: c.clock.Now().UTC(), Records: batch, Keep: c.cfg.AuditKeep, Retention: c.cfg.AuditRetention}
	res, err := c.propose(state.CmdAuditRecords, cmd)
	if err != nil {
		return err
	}
	if e, ok := res.(error); ok {
		return e
	}
	return nil
}

// handleAudit answers GET /v1/audit: the records the caller may read (all
// to admins and operators; a coordinator's tenants'; a user's own), of
// ?tenant= and ?user= when given, since ?since= (RFC 3339), the newest
// ?limit= (default 1000).
func (c *Controller) handleAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return &fieldError{Field: "since", Msg: fmt.Sprintf("since %q: give a time as 2026-12-01T10:00:00Z", submit.Shown(v))}
		}
		since = t
	}
	limit := 1000
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return &fieldError{Field: "limit", Msg: "limit: give a number of records from 1 to 1000000"}
		}
		limit = n
	}
	p := principalFrom(r)
	tenants, users := q["tenant"], q["user"]
	out := api.AuditView{Records: []api.AuditRecord{}, Heads: map[string]api.AuditHead{}}
	c.fsm.Read(func(s *state.State) {
		coordinated := coordinatedTenants(s, p)
		may := func(rec *state.AuditRecord) bool {
			return p.operator() || slices.Contains(coordinated, rec.Tenant) || p.kind == kindUser && rec.User == p.name && rec.Principal != ""
		}
		for i := len(s.Audit) - 1; i >= 0 && len(out.Records) < limit; i-- {
			rec := &s.Audit[i]
			if rec.Time.Before(since) {
				break
			}
			if may(rec) && (len(tenants) == 0 || slices.Contains(tenants, rec.Tenant)) && (len(users) == 0 || slices.Contains(users, rec.User)) {
				out.Records = append(out.Records, *rec)
			}
		}
		slices.Reverse(out.Records)
		for t, h := range s.AuditHeads() {
			if p.operator() || slices.Contains(coordinated, t) {
				out.Heads[t] = h
			}
		}
	})
	writeJSON(w, http.StatusOK, out)
	return nil
}

// coordinatedTenants lists the tenants of the accounts p coordinates.
func coordinatedTenants(s *state.State, p principal) []string {
	var out []string
	if p.kind != kindUser || p.role != api.RoleCoordinator {
		return nil
	}
	for _, a := range p.accounts {
		if t := s.Tenant(a); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
