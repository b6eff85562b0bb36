// Package noded is the node daemon: it registers a node with the
// controllers, heartbeats, watches the node's desired state (the versioned
// list of allocations the controllers planned for it) and converges on it:
// it starts the runs it should be running, kills the ones it should not,
// enforces time limits, and reports how every run ended.
//
// It owns everything that happens on one node: the job table, each run's
// state directory (DataDir/jobs/<jobid>-<startindex>/), the runners that
// execute jobs (the process runner here; the vm runner implements the same
// Runner interface) and the reports. It never decides placement or a job's
// fate beyond what it observes: it reports what is, not what it was told.
//
// The entry points are New and Daemon.Run; Runner, NewProcessRunner and
// JobEnv are usable on their own.
//
//	register (+ pending reports) ─► heartbeat every HeartbeatInterval (404 ⇒ register again)
//	   └─ every acknowledged message renews the lease ─► watchLease ─► loop (lost: kill all; keeper backs it up)
//	watch: Desired(index, WaitTimeout) ─► loop ─► reconcile ─► Runner.Start / Handle.Kill
//	Handle.Wait ─► loop ─► reporter ─► Report ─► ack ─► dir to a dot-name ─► reused or removed
//
// One goroutine (the loop) owns the job table; reconciles, job ends, time
// limits and acknowledgements are events it handles one at a time, so two
// reconciles never overlap. Everything else (registration and heartbeats,
// the watch, the reporter, one waiter per job) talks to it over channels.
//
// Decisions worth knowing:
//
//   - A run is identified by (job id, StartIndex), so a requeued job's new
//     run is never confused with its old one; the new run starts once the
//     old one is gone.
//   - Time limits count from the local start of the run, not from the
//     controller's StartTime: clocks of different hosts disagree, and a run
//     whose launch was delayed still gets its whole limit. A limit of 0
//     means none (the controllers resolve partition defaults). A limit the
//     controllers change while the run is going is followed.
//   - Suspend (scontrol suspend/resume) is the allocation's state: a run
//     whose allocation says SUSPENDED is paused through its handle
//     (Pausable), one that says RUNNING again is continued. The runner
//     acts first, then job.json records PausedAt (and, on continue, adds
//     the pause to PausedFor): the time limit does not run while a job is
//     paused, so its deadline is Started + limit + time suspended. A
//     daemon restarted while a job is paused reads that from job.json and
//     asks the handle (PauseReporter), which wins where the two disagree.
//     A paused run that is cancelled is killed as it is: the process
//     runner's Kill sends SIGCONT after SIGTERM, QMP quit works on a
//     stopped VM. A SUSPENDED allocation not running here is not started.
//   - The registration carries what the runner offers when it says so: the
//     guest images and accelerator (Images, Accel) and its own memory per
//     job (OverheadMB), which the controllers count against the node.
//   - A runner that must test the host first (Prober: the vm runner boots a
//     test guest) is probed after the first registration, not before: a
//     restarted daemon re-adopts its runs, registers with api.NodeInfo
//     Probing set (no Accel, no OverheadMB; the controllers place no new job
//     on it) and heartbeats, so its runs keep their lease however slow the
//     probe is; it starts no run until the probe is done, then registers
//     again. DataDir/probe.json records the probe with the kernel's boot id
//     and the runner's ProbeKey; a daemon on the same boot with the same key
//     restores it and probes not at all (probe.go). A failed probe ends Run
//     with its error, leaving the runs to the lease keeper.
//   - A run is killed when it leaves the desired list (reported CANCELLED)
//     or when its allocation says COMPLETING or terminal (reported with
//     its FinalState when that is terminal). Kill is SIGTERM, then SIGKILL
//     after KillGrace.
//   - The daemon writes job.json (the job and, once decided, why it is being
//     killed) before the runner starts anything; a run's directory gets its
//     name only with job.json complete. When the run ended the daemon writes
//     report.json, unless the runner implements ReusableState (the process
//     runner does) and a restarted daemon can derive the same report from
//     job.json and the runner's files, as it can for all but a launch
//     failure or a status the runner did not record. A report is sent at
//     once, batched with whatever accumulated while the previous send was in
//     flight, and retried until acknowledged; then the directory is renamed
//     to a dot-name, the durable "reported" mark. A restarted daemon
//     re-sends reports that were not acknowledged, never one that was, and
//     removes every dot-directory unread.
//   - With a runner that implements ReusableState, reported directories are
//     reused (runDirs): one is kept for a second, at most 2×CPUs of them,
//     and handed to the next run with its files emptied rather than
//     removed, and files are written in place rather than truncated first
//     or replaced by a rename. A trivial job then allocates no inode: on
//     ext4 without a journal, inode allocation skips every inode freed in
//     the last minute or more, so six files created and deleted per job made
//     hundreds of jobs a second cost milliseconds of kernel CPU each. A
//     spare not reused within the second is removed, and a clean stop
//     removes them all: the node leaves no file behind about a second after
//     its last report was acknowledged.
//   - On start, Run re-adopts every run it finds still running (reported in
//     NodeInfo.Running) and reports those that ended while no daemon
//     watched, with their true exit status; a run that left nothing behind
//     (the node rebooted) is reported NODE_FAIL. When Run's context ends,
//     jobs keep running unless Shutdown(true) was called; KillAll kills them
//     and waits.
//   - Every registration carries the reports not acknowledged yet
//     (NodeInfo.Reports, at most api.MaxRegisterReports; the jobs of the
//     rest go in Running), so the controllers learn how the runs that ended
//     while they could not hear of it ended before they decide what the
//     node lost. Its success acknowledges exactly those reports. The
//     reporter sends nothing before the first registration, which carries
//     what an earlier daemon left. The registration's answer carries its
//     Raft index; no run starts from a desired state older than that.
//   - The node holds a lease (see leaseTerms and docs/architecture.md):
//     every registration, heartbeat and report a leader acknowledges renews
//     it from the message's send time, for the lease the controllers tell
//     (half their node timeout T). When it runs out the daemon kills every
//     run (reported NODE_FAIL, with a grace of at most T/5), logs it at
//     Warn, and starts none until it is renewed. The lease is kept in
//     DataDir/lease, so a restarted daemon counts from the lease the
//     earlier one held, and a lease keeper (keeperScript, one /bin/sh
//     process per node in a session of its own) stops the runs' process
//     groups when the daemon cannot: frozen, dead or stuck. The runner's
//     handle names its process group (ProcessGroup), which the daemon writes
//     to the run's session file for the keeper. Until a controller tells a
//     lease the node has none and stops nothing.
//   - Metrics (Config.MetricsListen, metrics.go; noded --metrics-addr):
//     the daemon's own Prometheus registry at GET /metrics — runs live,
//     run start times, runs ended by state, heartbeats, failed controller
//     calls, the lease left (docs/metrics.md). A run's start time goes in
//     its report (start_s) once the controllers' answers say they take it.
//   - The job API (Config.APIListen, jobapi.go) lets the controllers reach
//     into a running job: exec over an upgraded connection, signals, files
//     and the output file, streamed as it grows. Its address goes in the
//     registration (api_addr). The loop publishes a copy of its running
//     runs (publishRuns) for it, so requests never touch the job table; a
//     request is checked again here (the job runs here and is not being
//     stopped or suspended, the caller owns it or is root, every field) and
//     acts as the run's user through the handle's JobAgent: the vm runner's
//     guest agent, or the process runner on the host (agentproc.go: the
//     command as the user in a session of its own, signals to the job's
//     session but its shim, files opened with the user's file-system
//     credentials).
//   - Reported runs are remembered (tombstones, at least five minutes and
//     until the desired state drops them) so that a desired state read
//     before the controllers applied the report cannot start the run again.
//     Tombstones live in memory only.
//
// The process runner runs a job as a session of its own under a small
// /bin/sh shim that records the script's exit status in the run's
// directory; see shimScript for why it works the way it does. Jobs run as
// their user (Config.RunJobsAs, identity.go): the daemon resolves the job's
// user in the node's passwd and group, refuses one it does not know, and
// hands every runner the resolved ident.User; HOME, USER and LOGNAME are
// set to that user's. Its limits: a process that calls setsid escapes Kill
// (there is no cgroup); a script's own `exit 129`..`exit 192` cannot be told
// from death by signal 1..64 and is reported as the signal; OOM is not
// detected (an OOM kill shows as signal 9); suspend is SIGSTOP to every
// process of the session, which a job can see (its children change state)
// and, with its own SIGCONT from outside the session, undo. The package
// needs Linux (/proc, pidfd with a /proc fallback).
package noded
