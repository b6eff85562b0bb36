// Package sim replays a recorded workload through corral's own controller
// code in virtual time: `corral sim TRACE.swf` runs here.
//
// It owns three things: the Standard Workload Format reader (ReadSWF,
// which also reads gzip-compressed traces, recognised by their magic
// bytes, inflating them in a goroutine of its own a few chunks ahead of the
// line parser), a discrete-event driver (Run) around the pass
// (sched.Schedule) and the state machine (state.State), and RunSWF, which
// `corral sim` calls: it starts the simulation once the trace's header is
// read, while a goroutine parses the rest of the job lines straight into
// the simulation's jobs, handed over in chunks of 4,096 (the trace's
// []SWFJob is never built). A file that lists its jobs out of queue order,
// or changes the machine or the epoch in a header line after the first
// job, is read again whole first (it must seek), so the result or the
// error is always ReadSWF then Run's (TestRunSWFAsRun, TestRunSWFErrors).
// It never holds a policy or an apply step of its own: every change to the simulated cluster is a Raft command applied
// to a state.State, as the controllers apply it — the submits of a second
// as one SubmitJobs entry, each pass's plan as the one ApplyPlan entry
// sched.Plan.Entry makes of it (the leader's own conversion), the runs that
// end as JobReports — so preemption (cancel, requeue, suspend), QoS limits
// and priorities, fair-share usage and its decay, reservations and purges
// are simulated by the code the controller runs. It starts no Raft, no node
// daemons and no VMs, and it never reads the wall clock for simulated time
// (only to report how long a run took).
//
//	ReadSWF ─► Trace ─► Run (or RunSWF, reading beside it): setup entries (SeedConfig, SetConfig, PutQOS,
//	                      RegisterNode per node)
//	                    for each second that has events:
//	                      JobReports (the runs that end, as their node
//	                      would report them)
//	                      SubmitJobs (the jobs submitted that second)
//	                      NewSnapshot ─► Schedule ─► Plan.Entry ─► ApplyPlan
//	                      (again when the plan preempted: the stopped runs
//	                      are reported ended at once, as a node stops them;
//	                      left out when it provably starts nothing, below)
//	                      PurgeJobs once 1,024 jobs ended (MinJobAge 1 s)
//	                    ─► Result (waits, bounded slowdowns, utilization)
//
// The simulation acts for the node daemons only: it knows each job's run
// time from the trace and reports the run's end when it is due (suspended
// time does not count). Each job's outcome is kept apart from the state,
// which the purges keep down to the queue and the running jobs.
//
// # The model
//
// The machine is one node named "sim" with as many CPUs as the trace's
// MaxProcs header (MaxNodes when MaxProcs is absent) and memory too large to
// ever constrain a job; every job asks for 1 MiB. A single node of P CPUs
// schedules exactly as P one-CPU nodes would for jobs that need only
// processors: any k free processors serve a k-processor job, so the
// one-node form is used because it keeps each pass cheap.
//
// A job's size is its requested processors (field 8), or its allocated
// processors (field 5) when none were requested. Jobs with no size, a
// negative run time or more processors than the machine has are skipped and
// counted. A job's time limit is its requested time (field 9), or its run
// time when none was requested; a job that ran past its limit is killed at
// the limit and counted as a timeout. A job whose limit is 0 s gets a limit
// of 1 s, because sched reads a TimeLimit of 0 as "the partition's limit"
// (unlimited here), which would make backfill treat a zero-length job as
// one that never ends; it still ends the second it starts.
//
// The queue is ordered by submit time, then job number (a job's state id is
// its place in it); every priority weight is 0 unless Options.Settings set
// one (or QoS and fair-share are asked for, which weigh as the
// controller's defaults), so every job has the same priority and sched's
// order (priority, submit time, id) is the queue order. All events of one
// second are applied before the pass for that second runs: ends first, then
// submits. Starts happen at that second. A job that runs 0 s ends at the
// second it started; its end is an event of that same second, so the pass
// runs again for it before the clock moves.
//
// A pass that provably starts nothing is left out (Result.IdlePasses counts
// them): every pending job asks for more CPUs than any usable node has
// free, no run is suspended, no QoS may preempt and no advance reservation
// is defined. Under EASY and FCFS such a pass would only write reasons and
// expected starts, which no later pass reads back; the next pass writes
// them. Conservative backfill keeps each pass's reservations in the next
// pass, so there every pass runs. TestIdlePassesLeftOut replays traces
// both ways and requires every job's outcome to be the same. On LANL-CM5
// (EASY) 49,723 of 175,927 passes are left out.
//
// # Metrics
//
// Over the jobs simulated: wait = start − submit; bounded slowdown =
// max(1, (wait + run) / max(run, 10 s)) with run the effective run time;
// mean and median wait (the median of an even count is the mean of the two
// middle values), mean and 95th-percentile bounded slowdown (nearest rank);
// makespan = last end − first submit; utilization = Σ size × run /
// (processors × makespan).
//
// # Policies
//
// Options.QOS and QOSByQueue give the jobs of the trace's queues (field 15)
// QoS classes, with their priorities, limits and whom they preempt in which
// mode; Options.Fairshare runs each job as its trace user (uN, field 12) in
// its group's account (gN, field 13); Options.Settings are `corral config
// set` settings (priority weights, PriorityMaxAge, the decay half-life).
// Reservations follow the controller's: a job's expected start is written
// to the state when it moves earlier, or later by more than 30 s.
//
// The entry points are ReadSWF, ReadQOS, Run and RunSWF; WriteText and
// WriteJSON print a Result (Options.NoOutcomes leaves the per-job outcomes
// out of it when only the figures are wanted).
package sim
