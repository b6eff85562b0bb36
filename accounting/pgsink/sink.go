package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/accounting"
)

// Options tune a sink; zero fields take the defaults.
type Options struct {
	// Batch is the most records one transaction writes (1,000).
	Batch int
	// RetryMin and RetryMax bound the wait after a failure, which doubles
	// from RetryMin up to RetryMax (1 s, 30 s).
	RetryMin, RetryMax time.Duration
	// Poll is how long the sink waits for new records before it looks
	// again without being woken (1 s).
	Poll time.Duration
	// LogIndex, when set, returns the Raft index the member applied: a
	// cursor up to it is this cluster's, and the store, which writes a
	// moment after the apply, is waited for; a cursor beyond it is another
	// cluster's. Unset, the store's applied index is the bound.
	LogIndex func() uint64
}

func (o *Options) defaults() {
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.RetryMin <= 0 {
		o.RetryMin = time.Second
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(30*time.Second, o.RetryMin)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
}

// Sink streams a store's change feed into PostgreSQL.
type Sink struct {
	cfg   *pgx.ConnConfig
	store *accounting.Store
	log   *slog.Logger
	opt   Options
	wake  chan struct{}

	mu     sync.Mutex
	status Status
}

// Status is what a sink did so far (the controller's metrics).
type Status struct {
	// Running is set while Run runs (on the member that ships).
	Running bool
	// Connected is set while the sink holds a connection that worked.
	Connected bool
	// Waiting is set while the store is being rebuilt from its peers.
	Waiting bool
	// Cursor is the position shipped so far, as PostgreSQL last
	// confirmed it (valid once Connected was set).
	Cursor accounting.ChangePos
	// Rows counts the records written (inserted or replaced, or found
	// there already); Errors the failures (each followed by a retry).
	Rows, Errors uint64
	// LastShipped is when a transaction last committed.
	LastShipped time.Time
	// LastError is the latest failure's text ("" when none).
	LastError string
}

// New makes a sink of store's records to the database dsn names (a
// PostgreSQL connection string or URL, as libpq takes it); it connects
// when Run runs. The DSN is checked here, so that a bad one stops the
// controller at its start.
func New(dsn string, store *accounting.Store, log *slog.Logger, opt Options) (*Sink, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--accounting-postgres: %w (give a PostgreSQL connection string, e.g. \"host=db.example.org dbname=corral user=corral\" or postgres://corral@db.example.org/corral)", err)
	}
	opt.defaults()
	return &Sink{cfg: cfg, store: store, log: log, opt: opt, wake: make(chan struct{}, 1)}, nil
}

// Wake tells the sink that new records were written; it never blocks.
func (s *Sink) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Pending counts the store's records after the cursor: what the database
// lacks.
func (s *Sink) Pending() (int, error) {
	return s.store.ChangesAfter(s.Status().Cursor)
}

// Status returns what the sink did so far.
func (s *Sink) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *Sink) update(f func(*Status)) {
	s.mu.Lock()
	f(&s.status)
	s.mu.Unlock()
}

// Run ships records until ctx ends: it connects, makes the tables where
// absent, reads the cursor and writes the records after it, batch by
// batch, each batch and the cursor's move in one transaction. After a
// failure it waits (doubling up to RetryMax), connects again and resumes
// from the cursor PostgreSQL holds, so that nothing is lost or written
// twice. Run returns ctx's error.
func (s *Sink) Run(ctx context.Context) error {
	s.update(func(st *Status) { st.Running = true })
	defer s.update(func(st *Status) { st.Running, st.Connected = false, false })
	s.log.Info("shipping accounting records to PostgreSQL", "host", s.cfg.Host, "database", s.cfg.Database, "user", s.cfg.User)
	wait := s.opt.RetryMin
	for {
		shipped, err := s.session(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if shipped {
			wait = s.opt.RetryMin
		}
		s.update(func(st *Status) { st.Errors++; st.LastError = err.Error(); st.Connected = false })
		s.log.Warn("shipping accounting records to PostgreSQL failed; retrying", "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, s.opt.RetryMax)
	}
}

// session connects and ships until a failure or ctx's end; it reports
// whether it shipped anything (the next failure then waits only
// RetryMin).
func (s *Sink) session(ctx context.Context) (shipped bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := prepare(ctx, conn); err != nil {
		return false, err
	}
	pos, err := readCursor(ctx, conn)
	if err != nil {
		return false, err
	}
	s.update(func(st *Status) { st.Connected, st.Cursor, st.LastError = true, pos, "" })
	s.log.Info("connected to PostgreSQL; resuming the accounting records after the cursor", "cursor_index", pos.Index, "cursor_job", pos.Job, "cursor_alloc", pos.Alloc)
	progress := time.Now()
	for {
		wait, err := s.shippable(pos)
		if err != nil {
			return shipped, err
		}
		var batch []accounting.Change
		if !wait {
			if batch, err = s.store.Changes(pos, s.opt.Batch); err != nil {
				return shipped, err
			}
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return shipped, ctx.Err()
			case <-s.wake:
			case <-time.After(s.opt.Poll):
			}
			continue
		}
		if err := ship(ctx, conn, batch); err != nil {
			return shipped, err
		}
		shipped = true
		pos = batch[len(batch)-1].Pos
		s.update(func(st *Status) { st.Cursor, st.Rows, st.LastShipped = pos, st.Rows+uint64(len(batch)), time.Now() })
		if time.Since(progress) > 10*time.Second {
			progress = time.Now()
			left, _ := s.store.ChangesAfter(pos)
			s.log.Info("shipping accounting records to PostgreSQL", "cursor_index", pos.Index, "left", left)
		}
	}
}

// shippable reports whether the sink must wait: while the store lacks
// records (gap: it is being rebuilt from its peers, and the records it
// wrote from a snapshot are not yet at their place in the change feed),
// and while the store has not yet written up to the cursor (a new leader's
// store a moment behind its log). A cursor past everything the member's
// log holds is refused: the database holds another cluster's records.
func (s *Sink) shippable(pos accounting.ChangePos) (wait bool, err error) {
	g, err := s.store.Gap()
	if err != nil {
		return false, err
	}
	if g > 0 && !s.Status().Waiting {
		s.log.Info("the accounting store is being rebuilt from its peers; shipping to PostgreSQL waits until it is whole", "gap_index", g)
	}
	s.update(func(st *Status) { st.Waiting = g > 0 })
	if g > 0 {
		return true, nil
	}
	applied, err := s.store.Applied()
	if err != nil {
		return false, err
	}
	bound := applied
	if s.opt.LogIndex != nil {
		bound = max(bound, s.opt.LogIndex())
	}
	if pos.Index > bound {
		return false, fmt.Errorf("the cursor in %s is at Raft index %d, past this cluster's %d: the database holds another cluster's records (give each cluster its own schema: search_path in the DSN) or this cluster's log was started anew (then delete the cursor's row)", cursorTable, pos.Index, bound)
	}
	return pos.Index > applied, nil
}

// prepare makes the tables where absent, and the session's staging table.
func prepare(ctx context.Context, conn *pgx.Conn) error {
	for _, q := range append(ddl(), stagingSQL) {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("creating the accounting tables: %w", err)
		}
	}
	var v int
	err := conn.QueryRow(ctx, "SELECT schema_version FROM "+cursorTable+" WHERE id = 1").Scan(&v)
	if err == nil && v > schemaVersion {
		return fmt.Errorf("the accounting tables are of schema version %d, newer than this corral's %d: upgrade the controllers", v, schemaVersion)
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("reading the accounting tables' version: %w", err)
	}
	return nil
}

// readCursor returns the position shipped so far (zero when none).
func readCursor(ctx context.Context, conn *pgx.Conn) (accounting.ChangePos, error) {
	var idx, job, alloc int64
	err := conn.QueryRow(ctx, "SELECT change_index, job_id, alloc_id FROM "+cursorTable+" WHERE id = 1").Scan(&idx, &job, &alloc)
	if errors.Is(err, pgx.ErrNoRows) {
		return accounting.ChangePos{}, nil
	}
	if err != nil {
		return accounting.ChangePos{}, fmt.Errorf("reading the cursor: %w", err)
	}
	return accounting.ChangePos{Index: uint64(idx), Job: uint64(job), Alloc: uint64(alloc)}, nil
}

// ship writes a batch and moves the cursor to its last record, in one
// transaction: the batch is copied into the staging table and merged from
// there.
func ship(ctx context.Context, conn *pgx.Conn, batch []accounting.Change) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(batch) {
			return nil, nil
		}
		i++
		return args(&batch[i-1]), nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{stagingTable}, columnNames(), src); err != nil {
		return fmt.Errorf("copying %d records (from job %d allocation %d): %w", len(batch), batch[0].Pos.Job, batch[0].Pos.Alloc, err)
	}
	if _, err := tx.Exec(ctx, mergeSQL()); err != nil {
		return fmt.Errorf("merging %d records (from job %d allocation %d): %w", len(batch), batch[0].Pos.Job, batch[0].Pos.Alloc, err)
	}
	last := batch[len(batch)-1].Pos
	if _, err := tx.Exec(ctx, cursorSQL, int64(last.Index), int64(last.Job), int64(last.Alloc), schemaVersion); err != nil {
		return fmt.Errorf("moving the cursor: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing %d records: %w", len(batch), err)
	}
	return nil
}
