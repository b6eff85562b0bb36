// Package ctld is corral's controller: Raft setup, the FSM that wraps the
// pure state machine of package ctld/state, the HTTP API, node liveness,
// and the leader's scheduler loop with its plan applier.
//
// Data flow:
//
//	HTTP API ──writes──► leader batcher ──raft.Apply(cmd)──► FSM (every replica)
//	    ▲ reads: local state, or the leader's with ?consistent
//	    │                        leader only:
//	    │   FSM change ─► scheduler loop ─► sched.NewSnapshot ─► sched.Schedule
//	    │                 ─► Plan.Entry ─► raft.Apply(ApplyPlan), one entry per pass
//	node daemons: register, heartbeat, watch their desired allocations
//	(GET /v1/nodes/{name}/desired, blocking), report allocations' ends
//
// Files: controller.go (New, Run, Config), raft.go and logcache.go (Raft
// and its log), fsm.go (the FSM), leader.go (the scheduler loop, liveness),
// purgeloop.go (retention), mailer.go (job notifications: the leader's
// claim, delivery to the mail program and webhook, and mark; the
// time-limit warnings' timer; docs/mail.md), intake.go (the submission batcher, which moves
// scripts and environments out of line), http*.go (the API), validate*.go
// and fit.go (admission), wire.go (api ⇄ state records), jobio.go (exec,
// attach and files, proxied to a job's node), why.go, update.go, queue.go,
// joblist.go, ratelimit.go (each principal's token buckets for writes and
// listings, charged in guard before the access check: 429 and Retry-After),
// principal.go (who a request comes from: a token, a host agent's identity,
// a node's or member's certificate), access.go (the route table, every
// endpoint with its access rule, and guard), jobaccess.go (the query
// layer's rule for jobs: hidden, listed, managed or owned), http_auth.go
// (tokens, roles, join tokens), http_jobs.go, audit.go (the audit trail,
// committed in batches), store.go (a member's store read offline, for
// corral audit verify --data), tls.go, metrics.go and metrics_state.go
// (GET /metrics: the member's own counters and histograms, and the
// cluster's gauges computed from the state at scrape time; docs/metrics.md),
// openapi.go (GET /v1/openapi.json, api/openapi.json), acctwriter.go and
// acctsync.go (each member's accounting store, written from the log;
// copying a peer's), acctsink.go (the leader's PostgreSQL sink,
// --accounting-postgres), membership.go (a member joining a running
// cluster, --join), http_accounting.go and http_usage.go (sacct's records,
// sreport's usage, cluster utilization and the usage series), ui.go (the
// read-only status page under /ui/, rendered by package statuspage; the
// only routes that take HTTP Basic credentials).
//
// With Config.Auth every request is checked in guard before its handler
// runs; a follower forwards writes to the leader first, so that the leader
// decides every write against the newest state and audits it.
//
// The FSM (fsm.go) is the only writer of cluster state: it decodes each
// committed entry with state.Decode (a failure stops the member), applies it
// with state.Apply under its write lock, contains a panic inside an apply
// as the entry's error result, and wakes the watchers of the nodes whose
// allocations changed and the leader's scheduler. The plan is checked once,
// by the apply; the leader does not check it first. What each command does,
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
// package ctld/sched, QoS rules from package qos, fair-share from package
// fairshare. Its entry point is New (controller.go), which returns
// a Controller that Run serves until its context ends.
package ctld
