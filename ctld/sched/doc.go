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
// The entry point is Schedule.
package sched
