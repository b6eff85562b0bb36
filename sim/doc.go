// Package sim replays a recorded workload through corral's scheduling pass
// in virtual time: `corral sim TRACE.swf` runs here.
//
// It owns two things: the Standard Workload Format reader (ReadSWF, which
// also reads gzip-compressed traces, recognised by their magic bytes) and a
// discrete-event driver around sched.Schedule (Run). It never holds a policy
// of its own: every start decision is the one the live controller's leader
// would take, because both call the same pure function. It starts no Raft,
// no node daemons and no VMs, and it never reads the wall clock for
// simulated time (only to report how long a run took).
//
//	ReadSWF ─► Trace ─► Run: for each second that has events
//	                      ends (release CPUs) ─► submits (append to queue)
//	                      ─► sched.Schedule(snapshot at that second) once
//	                      ─► apply the plan's starts, schedule their ends
//	                    ─► Result (waits, bounded slowdowns, utilization)
//
// # The model
//
// The machine is one api.Node named "sim" with as many CPUs as the trace's
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
// The queue is ordered by submit time, then job number; every job has the
// same priority, so sched's order (priority, submit time, id) is the queue
// order. All events of one second are applied before the pass for that
// second runs: ends first, then submits. Starts happen at that second. A
// job that runs 0 s ends at the second it started; its end is an event of
// that same second, so the pass runs again for it before the clock moves.
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
// The entry points are ReadSWF and Run; WriteText and WriteJSON print a
// Result.
package sim
