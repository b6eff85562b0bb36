// Package sched is corral's scheduling pass: a pure function from a state
// snapshot to a plan, and the one Raft entry that commits the plan.
//
//	NewSnapshot(state, now)         inputs.go: pending jobs by id, nodes by
//	                                name, runs, partitions, QoS, fair-share
//	─► check (CheckJob, CheckNode)  check.go: what the pass cannot handle
//	                                is left out as InvalidJob
//	─► resume                       preempt.go: runs suspended by
//	                                preemption whose CPUs are free again
//	─► ready set                    deps.go: holds, begin times, dependencies
//	─► order                        priority.go: multifactor priority (age,
//	                                fair-share, QoS, partition tier, size,
//	                                nice); ties by submit time, then id
//	─► place or reserve             place.go, profile.go, numa.go: the
//	                                partition's nodes, a node's profile of
//	                                free CPUs and memory over time, and
//	                                inside a node with an inventory the
//	                                NUMA/GPU/hugepage/VF filters and scores
//	─► preempt                      preempt.go: for a job whose QoS may
//	                                preempt, the cheapest victims (qos's
//	                                order, ties by job id) and their mode;
//	                                a victim of mode migrate gets its
//	                                destination (migrate.go) or its QoS's
//	                                fallback mode
//	─► Plan{Starts, Preemptions, Resumes, Cancels, Reasons, Reservations,
//	        Migrations}
//	─► Plan.Entry                   entry.go: the ApplyPlan entry
//
// Schedule never does I/O, starts goroutines or reads the clock: the caller
// passes "now" in the snapshot, and every list of it is in a sorted order,
// so the controller's leader, `corral why` and the simulator (package sim)
// get identical plans from identical states. A job the pass does not start
// always gets exactly one reason (Priority, Resources, Dependency, ...).
// Rejections are outcomes, not errors.
//
// A Pass (pass.go) runs passes one after another with their buffers kept
// between them (the snapshot's lists, the placer's tables, the plan's maps),
// for the simulator's hundreds of thousands of short passes; it plans
// exactly as Schedule, which is a Pass used once.
//
// Placement follows the snapshot's Policy:
//
//   - fcfs: the first job that cannot start gets Resources and holds the
//     nodes of its partition, so later jobs of any partition that shares one
//     of those nodes get Priority, while partitions that share none keep
//     scheduling.
//   - easy (the default): that first job of each partition group instead
//     gets a reservation on the node where it can start soonest, judged from
//     the running jobs' time limits (Plan.Estimates); later jobs start now
//     wherever they fit without touching any reservation (a job ending
//     before it, or using what it leaves over), else get Priority.
//   - conservative: every job that cannot start gets a reservation, so a
//     later job starts now only if it delays none of them. A reservation
//     never moves later: the entry replicates it (the job's EstStart and
//     EstNode), so the next pass, on this leader or a new one, keeps it.
//
// Advance reservations (Snapshot.Advance, advance.go) are held in the
// profiles of their nodes before anything is placed, window by window, so
// a job that may not use one starts on its nodes only if it ends before
// the next window, and backfill plans around them; a job that names one
// starts only inside it, from the reservation's own room (reusable, or
// consumable with PURGE_COMP). With no reservation the pass does nothing
// more than check that a job names none.
//
// Each node's free CPUs and memory over time is a profile (profile.go): a
// step function from now, rising at each running job's expected end (start
// + time limit + time suspended; Horizon stands for "no limit") and lowered
// by this pass's starts and reservations. A job without a time limit takes
// its partition's default or maximum, else Horizon, so it never backfills in
// front of a reservation on the same node. A job no node of its partition
// could hold even when empty gets Resources and holds nothing (a down node
// still counts as one that could hold it, but gets no reservation). On a
// node that reported an inventory, a start also carries its placement: the
// exact CPUs, NUMA memory, hugepages, GPUs and VFs (docs/placement.md).
//
// Every job runs on one node: the pass does not place multi-node jobs yet
// (CheckJob holds one as InvalidJob; the controllers refuse them at
// submit). gang.go holds the search such placement will reserve with: the
// earliest time at which k nodes are free together over their profiles
// (gangStart, one sweep over each node's possible start spans).
//
// Dependencies (deps.go) are read from the typed targets the state parsed
// once, at submit (a job, a task of an array, a whole array), with the same
// resolution the state's cycle check uses: after, afterany, afterok,
// afternotok, aftercorr (judged task by task of the array), singleton (no
// job of the same user and name holds resources, and pending singletons of
// that name run one at a time in submission order). A dependency that can
// never be met is DependencyNeverSatisfied, and that propagates in the same
// pass down after/afterok chains and around cycles; afterany keeps waiting
// on a job that can never run, since cancelling it would end it. Jobs
// submitted with --kill-on-invalid-dep=yes are listed in Plan.Cancels.
// NextWake covers begin times and the ends of after:<id>+<minutes> delays.
//
// One pass is one entry: Plan.Entry turns the plan into a state.ApplyPlan
// with the cancels, the stops by preemption mode, the resumes, the starts,
// the migrations (requested, a drain's, a preemption's), and the reasons and reservations that changed from the snapshot's; the
// state applies it node by node (stops before resumes before starts) and
// checks each part once, there. The leader proposes it; the simulator
// applies it.
//
// The entry points are NewSnapshot, Schedule and Plan.Entry.
package sched
