// Package pgsink streams a controller's accounting records into a
// PostgreSQL database (ctld --accounting-postgres DSN), for sites that
// want them in their warehouse. It reads the store's change feed
// (accounting/changes.go) and writes each record as one row of the
// corral_accounting table (schema.go: typed columns, the whole record as
// jsonb, indexes for one user's, account's or tenant's window of end
// times), keyed by (job_id, alloc_id). Operators' documentation:
// docs/accounting-postgres.md. Entry points: New, then Sink.Run.
//
// # Nothing lost, nothing twice
//
// The cursor (how far the database holds the feed) is kept in the
// database itself (corral_accounting_cursor) and moved in the same
// transaction as the rows of each batch: a batch is there with its cursor
// or not at all, whatever fails when. After a failure (the server stopped,
// the network cut, a constraint refused) the sink waits (1 s, doubling up
// to 30 s), connects again, reads the cursor and continues after it. Rows
// are upserted by (job_id, alloc_id): a record shipped twice is one row,
// and a record that changed (a requeued job's run rewritten) replaces its
// row; a row is only ever replaced by a later change (change_index), so a
// member that ships a moment after it lost leadership cannot undo its
// successor's rows, and the cursor only moves forward for the same reason.
//
// # One writer: the leader
//
// Every member holds the same store, and its change feed is ordered by the
// Raft index of the entry that last changed each record, which is the same
// on every member (a member that copied records from a peer takes the
// peer's places). So a position means the same on every member, and the
// cursor is one row shared by all: the leader ships, and a new leader
// continues where the old one stopped. The alternative, every member
// writing idempotently with a cursor of its own, writes the warehouse
// three or five times over for nothing, and makes a member that was a
// follower for months ship its whole history when it first leads; one
// writer costs nothing when leadership moves. A member whose store is
// being rebuilt from its peers (it lacks records, and the records it wrote
// from a snapshot are not yet at their places in the feed) waits until it
// is whole before it ships (a cluster's only member that lost its store
// has no peer: it declares the missing records lost and carries on); a cursor past everything the store applied (a
// database another cluster wrote, or a cluster started anew) stops the
// sink with an error rather than skipping records.
//
// The sink never deletes rows: the store's retention
// (AccountingRetention) bounds the controllers' disks, the warehouse
// keeps its own. A record that expires from the store before the sink
// shipped it (the database down longer than the retention) is not
// shipped.
//
// # Batching
//
// Up to Options.Batch (1,000) records per transaction, sent as one
// pipelined pgx batch of upserts; between batches the sink waits for the
// controller's writer to signal new records (Wake) or polls every second.
// docs/performance.md has the throughput.
package pgsink
