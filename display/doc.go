// Package display renders corral's status output exactly as Slurm's tools
// print it, so that people and scripts used to squeue, sinfo and scontrol
// read corral without surprises.
//
// It owns the text layouts: squeue's -o and -O format languages, field
// codes, headers, widths and truncation rules, and its -S sort keys;
// sinfo's -o and -O format engine, in which every built-in layout is a
// format, and how it puts nodes on lines; scontrol's Key=Value records
// (node lists written with package internal/hostlist); the JSON document of `corral queue --json`; and the
// `corral status` summary.
//
// It never does I/O beyond writing to the io.Writer it is handed, never
// reads the clock (the current time is always a parameter, and times are
// shown in that parameter's location), never talks to a controller and never
// changes the values it is given, except SortJobs, which reorders its slice.
//
// Entry points:
//
//	Queue, QueueRefs, QueueJSON, SortJobs,
//	SortJobRefs, ParseQueueFormat,
//	ParseQueueLongFormat, ParseQueueSort          squeue
//	Nodes, ParseNodeFormat, ParseNodeLongFormat,
//	ParseNodeStates, FilterNodes                  sinfo
//	ShowJob, ShowNode                             scontrol show job|node
//	Status                                        corral status
//
// # Choices where corral and Slurm differ
//
// Sorting. SortJobs orders as squeue does by default, "P,t,-p": partition,
// then compact state as text, then priority (highest first), then job id.
// ParseQueueSort reads any -S list. Queue itself renders in the order given.
//
// Time limits. api.JobSpec.TimeLimit 0 means "the partition's limit", which
// the job record does not carry, so %l, %L and scontrol's TimeLimit print
// UNLIMITED for it, as squeue does for a job without a limit.
//
// Field codes. Every squeue -o letter is accepted except %g, %G (corral
// records no group), %U (no numeric uid) and %s (no select plugin); those
// fail with an error naming the valid codes. Concepts corral lacks print
// what squeue prints for a job that never set them: %f %v %w %W %Y
// "(null)", %H %I %J "*", %z "*:*:*", %K %X "N/A", %x %n "" and %d "0".
// %x is squeue's EXC_NODES, not an exit code: squeue's -o has no exit-code
// letter, so the exit code is shown by ShowJob (ExitCode=code:signal) and
// QueueJSON. %o (COMMAND) is WorkDir/Name, the script's path when the job
// kept its default name, because api.JobSpec holds the script's text but not
// its file name. %R shows "(Reason)" for pending, requeued, timed-out,
// out-of-memory and failed jobs and the node otherwise, like squeue; a
// finished job without a recorded reason gets the one Slurm would record
// (NonZeroExitCode, TimeLimit, OutOfMemory, NodeDown). Widths count runes,
// not bytes, so truncation never splits a character.
//
// sinfo. Partitions are always "up" and run single-node jobs (JOB_SIZE 1,
// ROOT no, OVERSUBS NO, GROUPS all). State groups are ordered like sinfo's
// "-t" sort: draining, drained, mixed, allocated, idle, down. A node whose
// heartbeats stopped prints as "down" (Slurm would add "*" for not
// responding). -N -l fills S:C:T as 1:CPUS:1, WEIGHT 1 and
// AVAIL_FE (null); TMP_DISK is the scratch space the node daemon offers
// (noded --tmp-dir or --tmp). The date line of -l needs NodesOptions.Now.
//
// scontrol. StdOut and StdErr show the paths the node writes, expanded by
// package submit (%j, %x, %u, %N; relative to WorkDir; unset is Slurm's
// default WorkDir/slurm-<id>.out), as scontrol does. UserId has no "(uid)"
// and there is no GroupId, because jobs carry no numeric ids. Comment, Gres
// and Array always print, "(null)" when unset. Corral adds SecsSuspended
// (time spent suspended), Image (vm runner) and Message (the node's account
// of an abnormal end). A node's State is IDLE, MIXED, ALLOCATED or DOWN with
// "+DRAIN" when drained, as scontrol prints it; corral adds Runner, Images,
// Accel, LastSeen, HeartbeatAge (now minus LastSeen) and Jobs. A node's
// Partitions are the ones it lists; partitions that list the node are not
// known to ShowNode.
//
// JSON. QueueJSON writes {"jobs":[...]} with one JSONJob per line. JSONJob
// is a published, append-only schema separate from api.Job; it leaves out
// the script and the environment.
//
// Performance. Queue parses the format once and appends every row into one
// reused buffer with strconv.Append* and time.AppendFormat, writing in 64 KiB
// chunks; rendering a row allocates nothing. See BenchmarkQueue100000.
package display
