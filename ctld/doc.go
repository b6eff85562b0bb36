// Package ctld is corral's controller: Raft setup, the FSM that wraps the
// pure state machine of package ctld/state, the HTTP API, node liveness,
// and the leader's scheduler loop with its plan applier.
//
// Data flow:
//
//	HTTP API ──writes──► leader batcher ──raft.Apply(cmd)──► FSM (every replica)
//	    ▲ reads: local state, or the leader's with ?consistent
//	    │                        leader only:
//	    │   FSM change ─► scheduler loop ─► sched.Schedule(snapshot) ─► Plan
//	    │                 plan applier re-checks ─► raft.Apply(ApplyPlan)
//
// The FSM (fsm.go) is the only writer of cluster state: it decodes each
// committed entry with state.Decode (a failure stops the member), applies it
// with state.Apply under its write lock, contains a panic inside an apply
// as the entry's error result, and wakes the watchers of the nodes whose
// allocations changed and the leader's scheduler. What each command does,
// the command table, snapshots and the state hash are package state's; the
// leader stamps times and job ids into commands before proposing, so Apply
// is deterministic and every replica reaches the same state. Jobs and nodes
// are copy-on-write values, so readers and the scheduler can hold pointers
// taken under a read lock without copying whole records.
//
// The HTTP API is the trust boundary. Every request passes limitRequests
// (http_limits.go: timeouts, per-route body limits, JSON-only writes, a
// query parameter cap, 404 and 405 in JSON) before a handler or the
// forwarder sees it, and every request's content is validated before
// anything is proposed: jobs by submit.ValidateSpec, the code the CLI runs,
// then by the state (validate.go, and fit.go for jobs no node could ever
// hold); every other request by validate_requests.go. Nothing a client
// sends reaches the Raft log unchecked.
//
// ctld never makes policy decisions itself: placement and ordering come from
// package ctld/sched. Its entry point is New (controller.go), which returns
// a Controller that Run serves until its context ends.
package ctld
