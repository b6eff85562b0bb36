// Package migrate is the live migration state machine: what phase a
// migration of a running job is in, which node reports move it on, when
// it has been stuck too long, and what a migration record says once it
// ended. It is pure: no clock, no I/O, no goroutines; the replicated state
// (ctld/state) keeps the records and applies this package's answers
// inside its Raft applies, so every controller agrees.
//
// The phases, and who moves a migration from one to the next:
//
//	requested ──(the scheduling pass places it: a destination allocation)──► placed
//	placed ──(the destination's daemon: QEMU waits with -incoming)──► prepared
//	prepared ──(the source's daemon: the stream began)──► streaming
//	streaming ──(both: the source sent all, its guest stopped; the destination loaded all)──► switchover
//	switchover ──(the source's run ended: its QEMU quit)──► released
//	any phase before switchover ──(a failure, a timeout, the job ended, an allocation lost)──► aborted
//
// The guest never runs on two nodes at once: its vCPUs stop at the source
// for the stream's last pass, and the destination, started with -S,
// continues only once its desired state says switchover, which this
// package reaches only when the source reported its stream complete and
// the destination its load complete. Abort and switchover are the two
// exits of the same phases, decided by the order of the Raft log, so a
// node can never be told both: after switchover nothing aborts (a node
// that fails then fails as any node does), before it the source resumes
// its guest on abort and the destination is stopped without ever having
// run it.
//
// Entry points: New makes a requested migration, Migration.Place,
// Migration.Report (a node's event), Migration.AllocEnded and
// Migration.Expire move it; Params are the bounds a migration streams
// with (from the cluster's configuration).
package migrate
