// Package sched is corral's scheduling pass: a pure function from a state
// snapshot to a plan.
//
//	Snapshot ─► ready set (holds, begin time, dependencies)
//	         ─► order (priority; ties by submit time, then id)
//	         ─► place (first fit over CPUs and memory)
//	         ─► Plan{Starts, Reasons}
//
// Schedule never does I/O, starts goroutines or reads the clock: the caller
// passes "now" in the snapshot, so the controller's leader loop and the
// simulator get identical answers from identical inputs. A job the pass does
// not start always gets exactly one reason (Priority, Resources, Dependency,
// ...). Rejections are outcomes, not errors.
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
//     later job starts now only if it delays none of them.
//
// Each node's free CPUs and memory over time is a profile (profile.go): a
// step function from now, rising at each running job's expected end (start
// + time limit + time suspended; Horizon stands for "no limit") and lowered
// by this pass's starts and reservations. A job without a time limit takes
// its partition's default or maximum, else Horizon, so it never backfills in
// front of a reservation on the same node. A job no node of its partition
// could hold even when empty gets Resources and holds nothing (a down node
// still counts as one that could hold it, but gets no reservation).
//
// Dependencies: after, afterany, afterok, afternotok, singleton (no job of
// the same user and name holds resources, and pending singletons of that
// name run one at a time in submission order); aftercorr is treated as
// afterany until arrays are scheduled element by element. A dependency
// that can never be met is DependencyNeverSatisfied, and that propagates in
// the same pass down after/afterok chains and around cycles (each job of an
// afterok cycle waits for the other); afterany keeps waiting on a job that
// can never run, since cancelling it would end it. Jobs submitted with
// --kill-on-invalid-dep=yes are listed in Plan.Cancels. NextWake covers
// begin times and the ends of after:<id>+<minutes> delays.
//
// The entry point is Schedule.
package sched
