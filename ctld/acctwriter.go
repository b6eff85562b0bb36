package ctld

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"corral/accounting"
	"corral/ctld/state"
)

// This file connects the FSM to the member's accounting store. Every
// member writes the records of what each entry ended into its own store
// (package accounting builds them from the state, so every member writes
// the same). The writes are batched in the background so that an apply
// never waits for the disk, except where a record must be durable before
// the state moves on:
//
//   - a PurgeJobs entry removes finished jobs: its apply hands the removed
//     jobs' records (written where absent) and waits until everything
//     queued is written, so no job leaves the state before its record is
//     on disk;
//   - a snapshot lets Raft drop the log behind it, the only other source
//     of the records of the entries it covers: taking one waits too.
//
// A member that restores a snapshot writes the records of every finished
// job the snapshot holds (where absent). The records of jobs purged before
// that snapshot exist only on the members that applied those entries: when
// the store had not applied up to the snapshot (Store.Applied, raised with
// every write and at every snapshot), it records the gap and the member
// copies its peers' records (acctsync.go). The store's summary (count and
// digest, GET /v1/accounting/summary) compares members.

// acctWriter writes accounting records to a store in the background.
type acctWriter struct {
	store *accounting.Store
	log   *slog.Logger

	// gap is signalled when a restored snapshot left the store missing
	// records (acctsync.go copies them from a peer).
	gap chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []accounting.Written
	queued  uint64 // batches queued so far
	written uint64 // batches written so far
	closed  bool
	done    chan struct{}
	// urgent wakes the writer from its gathering pause: a flush waits.
	urgent chan struct{}
	// wrote, when set, is called after each write (it wakes the
	// PostgreSQL sink); set before the first record is queued.
	wrote func()
}

// acctRetry is how long the writer waits after a failed write;
// acctGather how long it lets records gather before it writes them
// (unless a flush waits), so that a busy cluster commits the store a few
// times a second, not once per entry: each commit is an fsync on the disk
// the Raft log fsyncs on too.
const (
	acctRetry  = time.Second
	acctGather = 100 * time.Millisecond
)

func newAcctWriter(store *accounting.Store, log *slog.Logger) *acctWriter {
	w := &acctWriter{store: store, log: log, done: make(chan struct{}), urgent: make(chan struct{}, 1), gap: make(chan struct{}, 1)}
	w.cond = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// enqueue queues records to write.
func (w *acctWriter) enqueue(rec accounting.Written) {
	if rec.Empty() {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, rec)
	w.queued++
	w.cond.Broadcast()
	w.mu.Unlock()
}

// flush waits until every batch queued before it is written.
func (w *acctWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	target := w.queued
	if w.written < target {
		select {
		case w.urgent <- struct{}{}:
		default:
		}
	}
	for w.written < target && !w.closed {
		w.cond.Wait()
	}
}

// close writes what is queued and stops the writer.
func (w *acctWriter) close() {
	w.flush()
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.done
}

// run writes the queued batches, all that gathered in acctGather (or
// until a flush asked) in one transaction, and retries a failed write until it succeeds (records are never
// dropped; a flush waits for them).
func (w *acctWriter) run() {
	defer close(w.done)
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		if !w.closed {
			w.mu.Unlock()
			select {
			case <-time.After(acctGather):
			case <-w.urgent:
			}
			w.mu.Lock()
		}
		batch, n := w.queue, w.queued
		w.queue = nil
		w.mu.Unlock()
		records := 0
		for _, b := range batch {
			records += len(b.Replace) + len(b.IfAbsent)
		}
		for {
			err := w.store.WriteAll(batch)
			if err == nil {
				break
			}
			w.log.Error("writing accounting records failed; retrying", "records", records, "store", w.store.Path(), "err", err)
			time.Sleep(acctRetry)
		}
		if w.wrote != nil {
			w.wrote()
		}
		w.mu.Lock()
		w.written = n
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// SetAccounting makes the FSM hand what each entry ends to w; called once,
// before Raft starts.
func (f *FSM) SetAccounting(w *acctWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acct = w
	f.state.TrackEnds(w != nil)
}

// accountEnds queues the records of what the entry just applied ended;
// the caller holds f.mu. A purge waits for them (see the file comment).
func (f *FSM) accountEnds(t state.CommandType, cmd any, index uint64) {
	if f.acct == nil {
		return
	}
	var w accounting.Written
	if e := f.state.TakeEnds(); !e.Empty() {
		w = accounting.FromEnds(f.state, e)
	}
	// A purge also expires the records past AccountingRetention at the
	// entry's time, the same on every member.
	if p, ok := cmd.(*state.PurgeJobs); ok && f.state.Config.AccountingRetention > 0 {
		w.ExpireBefore = p.Now.Add(-time.Duration(f.state.Config.AccountingRetention) * time.Second)
	}
	if !w.Empty() {
		w.Index = index
		f.acct.enqueue(w)
	}
	if t == state.CmdPurgeJobs {
		f.acct.flush()
	}
}

// accountRestored queues the records of every job of a restored state
// (written where absent) and waits for them; the caller holds f.mu. When
// the store had not applied the entries up to the snapshot, the records
// of the jobs purged before it are missing: the store remembers the gap
// and the controller copies them from a peer (acctsync.go).
func (f *FSM) accountRestored() {
	if f.acct == nil {
		return
	}
	f.state.TrackEnds(true)
	f.acct.flush()
	if applied, err := f.acct.store.Applied(); err != nil || applied < f.state.Index {
		f.log.Warn("the accounting store lacks the records of jobs purged before the snapshot it restored; copying them from a peer",
			"store_applied", applied, "snapshot_index", f.state.Index, "err", err)
		if err := f.acct.store.MarkGap(f.state.Index); err != nil {
			f.log.Error("recording the accounting store's gap", "err", err)
		}
		select {
		case f.acct.gap <- struct{}{}:
		default:
		}
	}
	f.acct.enqueue(accounting.Written{IfAbsent: accounting.FromState(f.state), NodesIfNone: accounting.RestoredNodeFacts(f.state), Index: f.state.Index})
	f.acct.flush()
}

// flushAccounting waits until every record queued is written.
func (f *FSM) flushAccounting() {
	if f.acct != nil {
		f.acct.flush()
	}
}

// accountSnapshot records that the store holds every record up to the
// snapshot about to be taken at index, and waits until that is on disk.
func (f *FSM) accountSnapshot(index uint64) {
	if f.acct != nil {
		f.acct.enqueue(accounting.Written{Index: index})
		f.acct.flush()
	}
}

// acctFile is the accounting store's file in a member's data directory.
const acctFile = "accounting.db"

// openAccounting opens the member's accounting store in dataDir and
// connects it to f; no data directory, no store.
func openAccounting(dataDir string, f *FSM, log *slog.Logger) (*acctWriter, error) {
	if dataDir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data %s: %w", dataDir, err)
	}
	// A store written before the run index existed builds it when
	// opened: a minute or two per million records (14 s for 100,000 at load 20),
	// said before and after.
	path := filepath.Join(dataDir, acctFile)
	log.Info("opening the accounting store (a store from before the run index or the compact encoding is converted first: a minute or two per million records)", "store", path)
	start := time.Now()
	store, err := accounting.OpenLogged(path, log)
	if err != nil {
		return nil, err
	}
	if took := time.Since(start); took > time.Second {
		log.Info("opened the accounting store", "store", path, "took", took.Round(time.Millisecond))
	}
	w := newAcctWriter(store, log)
	f.SetAccounting(w)
	return w, nil
}

// closeStore writes what is queued and closes the store.
func (w *acctWriter) closeStore() {
	if w == nil {
		return
	}
	w.close()
	if err := w.store.Close(); err != nil {
		w.log.Warn("closing the accounting store", "err", err)
	}
}
