// Package accounting keeps the usage record of every run of every job:
// sacct's data. It builds records purely from the replicated state
// (record.go), stores them in an embedded store on every controller
// (store.go, rollup.go, changes.go), selects them for `corral acct`
// (query.go) and `corral acct report` (query.go; utilization.go and
// series.go with the node facts of nodes.go and the run index of runs.go),
// and exports them (export.go, parquet.go; accounting/pgsink streams them
// into PostgreSQL).
//
// # Records
//
// One record per run (allocation) of a job, written when the run ends,
// keyed by (job, allocation): a requeued job has one per run, the last
// one Final and carrying the job's state and exit code; a job that ends
// without a run ending with it (cancelled while pending) has a record with
// allocation 0. A record holds what the state knows: ids (job, array job
// and task, allocation), name, user, tenant, account, partition, QoS,
// working directory, submit, eligible (the later of submit and --begin),
// start and end times, time limit (the job's, else its partition's
// default or maximum), elapsed time without suspensions, state, exit code
// and signal, reason and message, node, requested and allocated TRES
// (CPUs, memory, GPUs by type, nodes, hugepages by size, VFs), CPU-, GPU-
// and memory-seconds, the billing rate the scheduler's billing weights
// (BillingWeightCPU/Mem/GPU, the weights fair-share usage is charged
// with) give the run's TRES and billing = rate × elapsed, restarts and
// preemptions, and the node's measurements (CPU time, peak RSS). UID and
// GID are not in the state; the CLI resolves them on its host.
//
// A run on several nodes (one allocation per node, made by one start) is
// one record, keyed by its rank 0's allocation and written once the last
// of its allocations ended: its nodes as a host list, their TRES and CPU
// time summed, the largest peak RSS, the longest elapsed time, NODE_FAIL
// when any node was lost; BatchNode and BatchTRES name the node that ran
// the batch script and what it held. A run's record also holds its ended
// steps (srun) as the state keeps them, the newest 128: sacct's JOB.0,
// JOB.1 lines. The CSV and Parquet exports have a column per scalar and
// leave the steps out; NDJSON has them.
//
// # Written from the log, on every member
//
// The state reports what each apply ended (state.Ends: allocations that
// ended, jobs that finished, jobs a purge removed). The controller's FSM
// builds the records with FromEnds right after the apply and queues them
// for the store; every member applies the same log, so every member writes
// the same records. Writes are idempotent: a record equal to the stored
// one changes nothing, so a member that restarts and replays its log
// rewrites nothing. Two points wait until the queue is on disk: a
// PurgeJobs apply (which also writes the purged jobs' records where
// missing) and a snapshot (after which Raft may drop the log the records
// came from). A member restored from a snapshot writes the records of the
// finished jobs it holds, where missing. What it cannot write are the
// records of jobs purged before that snapshot; the store knows the Raft
// index up to which it holds every record (Applied), so a snapshot beyond
// it leaves a recorded Gap, and the controller copies its peers' stores
// page by page (Page), written where absent, until one peer was copied
// whole (sync.go; ctld/acctsync.go). Summary (a count and an order-free
// digest, GET /v1/accounting/summary) compares members.
//
// # The store, chosen by measurement
//
// The targets (issue #13): one user's month among 1,000,000 records in
// under 100 ms, an account report over 1,000,000 in under 500 ms, and a
// binary that stays the CLI of every login host. Measured on the
// development machine (2 shared cores; docs/performance.md has the
// commands), 1,000,000 synthetic records, one ending every 30 s over a
// year, 200 users, 20 accounts:
//
//	                     write 1M       a user's month     account report     file     in the binary
//	                                    (433 of 1M)        over 1M            for 1M
//	bbolt (chosen)       8-12k rec/s    8-28 ms; 30-50 ms  8-24 ms (day sums) 926 MB   nothing new (Raft's log
//	                                    from a fresh CLI   200-240 ms (index                  uses it), no cgo
//	                                                       scan, no sums)
//	SQLite, ncruces/     9.7k rec/s     0.5-8 ms           23-30 s (GROUP BY) 768 MB   SQLite as WebAssembly
//	go-sqlite3 v0.37                                                                   (a 12 MB program), no cgo
//	DuckDB, duckdb-go    1M rows made   3.3 ms (a user's   -                  -        72 MB, cgo
//	v2 (DEPENDENCIES.md) by SQL in 0.2 s time-window sum)
//
// DuckDB is the fastest analytical engine and writes Parquet natively, but
// it is a 72 MB cgo library in the binary every login host runs as its
// CLI. SQLite without cgo runs as WebAssembly: writing and point queries
// are as fast as bbolt, a full aggregate thirty times slower than the
// target. bbolt, already in the binary for Raft's log, meets both targets
// once the store keeps what the queries need in key order: records keyed
// by (end time, job, allocation) so a window is a range; user, account
// and array indexes whose keys carry the end time, so one user's month is
// a range of one index; the account index's values hold the record's
// usage, so a report never decodes a record; and per-day sums by account
// and user (rollup.go), so a report over a year reads a few thousand sums.
// Its cost was the file, about 1 KB per record with the wire's JSON as
// the values, and decoding that JSON (7 µs a record) when many records are
// read: an export of a year's records took a minute. The values are now a
// compact binary encoding of the record (codec.go: a version byte, then
// the fields in order; under a microsecond to decode, about 300 bytes a
// record on disk). A store written with JSON is converted when it is
// opened, a batch a transaction, its digest following each rewrite
// (upgrade.go); decodeRecord still reads either form. Every user's
// records of a month (86,000) took 14 s through the CLI; since the CLI
// asks for the compact listing (api.AcctRowsType, streamed as the store
// reads it) and Select sorts pointers rather than records, far less
// (docs/performance.md).
//
// # Cluster utilization and usage over time
//
// sreport's cluster Utilization needs the nodes' time as well as the
// jobs': every entry that registers, downs, drains, resumes or attests a
// node gives a node fact (nodes.go: the node's state, CPUs and GPUs from
// the entry's time on; a drain by a person is planned down, one by the
// controllers' health check or attestation and an unresponsive node are
// down), built from the state after the apply like the records and
// written with them, keyed by (node, time). A restored member writes each
// node's present state for the nodes it knows nothing of; a member that
// copies its peers' records takes their facts too. Facts are few (one per
// change of a node) and are not expired.
//
// The jobs' side is the run index (runs.go): one compact entry per record
// in the records' key order, holding its start, eligible time, TRES-
// seconds, billing, CPUs, GPUs, whether it is the job's first run, account
// and user, so that a window is one range scan that decodes no JSON.
// Utilization (utilization.go) spreads node time and each run's totals
// over a window (a run's share is the share of its run time inside it);
// Series (series.go) spreads them over bins by account and counts the
// waits; LiveRuns adds the runs still going and the jobs still waiting
// from the state. A report over a year of 1,000,000 records reads the
// whole index: 0.2 s of CPU (docs/performance.md).
//
// # Exports
//
// export.go writes NDJSON (the wire's JSON, a record a line) and CSV
// (ExportColumns); parquet.go writes Parquet with parquet-go, one row of
// ParquetRow per record: the documented schema. Exporters take records a
// chunk at a time, and Store.Each (each.go) gives a query's records in
// chunks, read and decoded on one goroutine while the caller encodes the
// chunk before on another: the controller streams an export of a million
// records in constant memory (GET /v1/accounting/jobs?format=parquet,
// which corral acct export asks for), where it held them all three times
// over before (the store's, the wire's and the CLI's copies). A test reads the Parquet
// back with Apache Arrow's implementation and compares every column of
// every row.
//
// # Retention
//
// Records are kept forever unless the replicated AccountingRetention is
// set: then each PurgeJobs entry also deletes the records that ended
// before its time less the retention (Written.ExpireBefore, at most
// ExpireMax at once), the same on every member.
//
// # The change feed and the PostgreSQL sink
//
// The store also lists its records by the Raft index of the entry that
// last changed them (changes.go): a change feed whose positions mean the
// same on every member, because every member writes the same records at
// the same indexes (the controller's writer batches several entries into
// one transaction, but each keeps its own index: WriteAll). A member that
// restored a snapshot writes the snapshot's records at the snapshot's
// index, later than their entries; copying its peers' stores (Copy) puts
// them where the peers have them. The optional PostgreSQL sink (package
// accounting/pgsink, ctld --accounting-postgres) reads the feed on the
// leader and keeps its cursor, a position in the feed, in the database,
// moved in the same transaction as the rows it wrote, so that it resumes
// after an outage, or on the next leader, without losing a record or
// writing one twice (rows are upserted by job and allocation, replaced
// only by a later change). pgsink's doc.go says why one writer, the
// leader, rather than every member.
package accounting
