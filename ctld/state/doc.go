// Package state is corral's replicated state machine: a pure package with
// no Raft, no HTTP, no clock and no goroutines. The controller (package
// ctld) wraps it in its Raft FSM; the simulator (package sim) drives it
// directly, with the same commands.
//
// The records: a Job is the request (JobSpec) and its lifecycle; it
// owns zero or more Allocations (alloc.go), each the exact resources of
// one run on one Node (CPUs, memory, and a Placement inside the node),
// with what the controllers want of it (Desired: run, suspend, stop)
// and what is known (Status: active, ended). A Node lists its active
// allocations. A job's state is derived from its active allocations
// (RUNNING, SUSPENDED, COMPLETING) and is its own otherwise (PENDING or
// how it ended): a pending job has none, a running one one, and the
// model has room for a multi-node job (one per node) and a migrating
// one (two). CheckInvariants checks that no CPU or device is held by
// two allocations and that job and allocation states agree.
//
//	Job ──Allocs──► Allocation ──Node──► Node ──Allocs──► (its active allocations)
//	 └─Spec.Script, Spec.Env ──► Blob (content-addressed, shared)
//
// It owns:
//
//   - State: the jobs, their allocations, the nodes, request ids, members,
//     the partitions, the scheduler's configuration and the policy objects
//     (QoS, accounts, users, usage), the scripts and environments (blobs),
//     with the indexes derived from them (pending jobs in id order, node
//     names, array tasks, the finished jobs by end time, the counts of
//     interned strings and blobs, the partition list).
//   - Advance reservations (reservations.go): PutReservation and
//     ExpireReservations, CheckReservation (Slurm's refusals: busy nodes,
//     overlap, no users), the windows of repeating reservations, and the
//     plan apply's refusal of a start that would break a reservation of
//     whole nodes; a consumable reservation counts what its jobs took.
//   - Scripts and environments out of line (blob.go): a job points at
//     content-addressed blobs shared by every job with the same content;
//     an environment is a blob listing chunks of lines, so environments
//     that differ in a variable share the rest. A SubmitJobs entry carries
//     only the blobs it introduces; snapshots write each blob once.
//   - The command table (table.go): one entry per command type, naming it
//     and giving its payload's decoder and its apply function. Adding a
//     command is adding one entry; TestCommandTable checks that every type
//     has an apply test, a snapshot round trip and a replay into three
//     states.
//   - Apply(index, type, payload): the only way state changes. It is
//     deterministic: every time and id it uses was stamped into the payload
//     by the leader, nothing depends on map order, and a business failure
//     (no such job, a limit) is the entry's result, never a panic.
//   - Encode and Decode: one type byte and a JSON payload. A decode failure
//     or an unknown type is an error the controller treats as fatal (a
//     replica that cannot apply the log stops rather than diverge).
//   - Snapshots: Snapshot captures an immutable view (records are
//     copy-on-write, so copying the maps of pointers is enough; a job's
//     spec is shared by the versions of its record and by the tasks split
//     off an array, and replaced, never changed, by editSpec); Write
//     streams a header with the format version and one record per line;
//     ReadSnapshot reads this format and the older ones, and refuses a
//     record of no known kind.
//   - Hash: a digest of everything replicated (it hashes the snapshot's
//     bytes, so what the hash misses a snapshot would lose;
//     TestHashCoversEveryField changes every field and checks).
//
// Records and payloads are the state's own types (Job, JobSpec, Dependency,
// Allocation, Node, the command payloads and the snapshot records); package
// api is the wire, and the controller converts between them at its edge.
// The small values that the wire and the records share — the job and node
// state names, reasons and preemption modes, index sets and array
// expressions, placements and inventories, GRES and hugepage requests, QoS,
// accounts and the scheduler configuration, and the node daemons' own
// messages (api.NodeInfo, api.JobReport) carried in RegisterNode and
// JobReports — are api's types held as they are: duplicating them would
// double what each field added to them costs, and the guard against an
// accidental change of their encoding is the same as for the state's own
// types: the golden log (testdata/golden.log, TestGoldenLog) pins the bytes
// of every command type and TestGoldenLogCoversEveryField fails while any
// field of any of them, at any depth, is zero in all its entries.
//
// Job notifications (mail.go): when an apply sees an event a job asked to
// be told of (its start, end, requeue, a dependency that can never be met,
// a time-limit warning the leader proposed), it records a Notice in the
// replicated outbox with Slurm's subject line; the controller's leader
// claims, delivers and marks them (ClaimNotices, NoticesDone).
//
// One scheduling pass is one ApplyPlan entry (plan.go): cancels, stops by
// preemption mode, resumes, starts, reasons and reservations (and room for
// migrations), applied node by node with stops first and checked, once,
// against the state they apply to.
//
// It never reads the clock, starts a goroutine, does I/O beyond the
// io.Reader and io.Writer it is given, or decides what to schedule (that is
// package ctld/sched, whose plans arrive here as ApplyPlan entries).
//
// The entry points are New, Decode, (*State).Apply, (*State).Snapshot,
// ReadSnapshot and (*State).Hash.
package state
