// Package ctld is corral's controller: Raft setup, the FSM and its commands,
// state snapshots, the HTTP API, node liveness, and the leader's scheduler
// loop with its plan applier.
//
// Data flow:
//
//	HTTP API ──writes──► leader batcher ──raft.Apply(cmd)──► FSM (every replica)
//	    ▲ reads: local state, or the leader's with ?consistent
//	    │                        leader only:
//	    │   FSM change ─► scheduler loop ─► sched.Schedule(snapshot) ─► Plan
//	    │                 plan applier re-checks ─► raft.Apply(ApplyPlan)
//
// The FSM is the only writer of cluster state. Commands are an append-only
// tagged enum (command.go): one type byte followed by a JSON payload; the
// leader stamps times and job ids into them before proposing, so Apply is
// deterministic and every replica reaches the same state. Jobs and nodes are
// copy-on-write values: Apply replaces a changed job's pointer instead of
// mutating it, so readers and the scheduler can hold pointers taken under a
// read lock without copying whole records.
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
// package ctld/sched. Its entry point is New (server.go), which returns a
// Controller that Run serves until its context ends.
package ctld
