package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"corral/api"
	"corral/ctld/sched"
)

// Options tune a simulation.
type Options struct {
	// Policy is given to every pass; "" is sched's default, EASY.
	Policy sched.Policy
	// Progress, when set, is called with the number of jobs that have
	// ended and the number simulated, after each simulated second in which
	// jobs ended. That can be tens of thousands of calls: throttle drawing.
	Progress func(done, total int)
	// Stop, when set, ends the simulation with ErrStopped once closed. It
	// is checked once per simulated second.
	Stop <-chan struct{}
	// Cluster, when set, replaces the trace's machine with heterogeneous
	// nodes (see Cluster): each job runs on one node, placed inside it.
	Cluster *Cluster
	// Settings are scheduler settings as `corral config set` takes them
	// (PriorityWeightAge=1000, PriorityMaxAge=7-0, ...), applied after the
	// simulation's own: every priority weight 0, so that the queue order
	// is the trace's (the reference model), except PriorityWeightQOS and
	// PriorityWeightFairshare (10,000, the controller's default) when QOS
	// or Fairshare is set; and MinJobAge=1.
	Settings [][2]string
	// QOS are QoS classes to create, and QOSByQueue the QoS the jobs of
	// each of the trace's queues (field 15) ask for; other jobs get none.
	QOS        []api.QOS
	QOSByQueue map[int64]string
	// Fairshare runs each job as its trace user (field 12, as user uN) in
	// its group's account (field 13, as account gN), every account and
	// user with one share, so that the fair-share factor orders the queue
	// by what each has used.
	Fairshare bool
	// NoOutcomes leaves Result.Outcomes nil: the figures only, as
	// `corral sim` prints them (the outcomes of LANL-CM5's 122,057 jobs
	// are 10 MB).
	NoOutcomes bool
	// runIdle runs every pass, also those that provably start nothing
	// (see simulation.startsNothing): for the test that leaving them out
	// changes no outcome.
	runIdle bool
}

// ErrStopped is returned when Options.Stop closed before the simulation
// ended.
var ErrStopped = errors.New("simulation stopped")

// Machine layout of the simulation (see the package doc).
const (
	nodeName  = "sim"
	partition = "batch"
	bootID    = "sim"
	// nodeMemMB is large enough that memory never constrains a job.
	nodeMemMB = 1 << 40
	// jobMemMB is what every job asks for, so no job falls back to a
	// default memory per CPU.
	jobMemMB = 1
)

// simJob is one trace job as the simulation runs it: what its state id
// (its position in the queue, plus one) does not tell.
type simJob struct {
	out Outcome
	// run is the effective run time in seconds of a whole run: the
	// trace's run time cut at the time limit; limit the time limit.
	run, limit int64
	// left is what the current run still has to run, endAt when it ends
	// (while it runs, not suspended).
	left, endAt int64
	// The trace's user, group and queue (fields 12, 13 and 15).
	user, group, queue int64
	// alloc and node name the current run (node indexes the
	// simulation's node names); startIndex is its plan's. No field
	// holds a pointer, so that the collector never scans the jobs.
	alloc, startIndex uint64
	node              int32
	// gpu beside suspended: 144 bytes a job rather than 168.
	gpu, suspended bool
}

// Run replays the trace through the controller's own code in virtual
// time: each second's ends, submits and pass are Raft entries applied to a
// state.State (JobReports, SubmitJobs, and the ApplyPlan that
// sched.Plan.Entry makes of the pass's plan), as the controllers apply
// them. It returns the schedule's metrics. It fails when the trace names
// no machine size, repeats a job number, or when the state refuses what a
// plan or the simulation asks (a start the apply rejects, a queue that
// never drains); each of those errors says which.
func Run(tr *Trace, opts Options) (Result, error) {
	began := time.Now()
	policy, err := sched.ParsePolicy(string(opts.Policy))
	if err != nil {
		return Result{}, err
	}
	m, err := newMachine(tr, opts)
	if err != nil {
		return Result{}, err
	}
	jobs, skipped, err := queueJobs(tr, m)
	if err != nil {
		return Result{}, err
	}
	// Nothing reads tr below: its jobs, as large as the simulation's, may
	// be collected while it runs.
	name, epoch := tr.Name, tr.UnixStartTime
	s, err := newSimulation(jobs, m.nodes, epoch, policy, opts)
	if err != nil {
		return Result{}, err
	}
	if err := s.run(); err != nil {
		return Result{}, err
	}
	res := summarize(&s.jobs, m.procs, !opts.NoOutcomes)
	res.Trace, res.Policy, res.Skipped, res.Passes, res.IdlePasses = name, policy, skipped, s.passes, s.idle
	res.Wall = time.Since(began)
	return res, nil
}

// machine is the simulated machine: its nodes, its processors, and the
// largest job it can hold (a GPU job: on a GPU node).
type machine struct {
	nodes                      []api.NodeInfo
	procs, largest, largestGPU int
	gpuEvery                   int
}

// newMachine lays out the machine of the trace's header, or the
// Options.Cluster's.
func newMachine(tr *Trace, opts Options) (machine, error) {
	procs := tr.MaxProcs
	if procs <= 0 {
		procs = tr.MaxNodes
	}
	// One node of P CPUs: the model of the package doc.
	m := machine{nodes: []api.NodeInfo{{Name: nodeName, CPUs: procs, MemMB: nodeMemMB, Partitions: []string{partition}}},
		procs: procs, largest: procs}
	if c := opts.Cluster; c != nil {
		m = machine{nodes: c.nodes(), gpuEvery: c.GPUJobEvery}
		for _, n := range m.nodes {
			m.procs += n.CPUs
			m.largest = max(m.largest, n.CPUs)
			if len(n.Inventory.GPUs) > 0 {
				m.largestGPU = max(m.largestGPU, n.CPUs)
			}
		}
	}
	if m.procs <= 0 {
		return machine{}, errors.New(`the trace gives no machine size: add a header line such as "; MaxProcs: 128"`)
	}
	return m, nil
}

// queueJobs turns the trace's jobs into the simulation's jobs in queue
// order and counts the ones it skips.
func queueJobs(tr *Trace, m machine) (jobList, Skipped, error) {
	q := queuer{machine: m, numbers: make([]jobLine, 0, len(tr.Jobs))}
	jobs := make([]simJob, 0, len(tr.Jobs))
	for i := range tr.Jobs {
		sj, ok, err := q.add(&tr.Jobs[i])
		if err != nil {
			return jobList{}, q.skipped, err
		}
		if ok {
			jobs = append(jobs, sj)
		}
	}
	if err := repeatedJob(q.numbers); err != nil {
		return jobList{}, q.skipped, err
	}
	slices.SortFunc(jobs, func(a, b simJob) int {
		if c := cmp.Compare(a.out.Submit, b.out.Submit); c != 0 {
			return c
		}
		return cmp.Compare(a.out.ID, b.out.ID)
	})
	var l jobList
	for len(jobs) > 0 {
		n := min(len(jobs), chunkLen)
		l.add(jobs[:n:n])
		jobs = jobs[n:]
	}
	return l, q.skipped, nil
}

// queuer turns trace jobs, one at a time in the file's order, into the
// simulation's jobs (see the package doc for the model).
type queuer struct {
	machine
	skipped Skipped
	// numbers are the queued jobs' numbers with their lines, to find the
	// first repeated one (by sorting: a map of 100,000 jobs cost more).
	numbers []jobLine
}

// add returns the simulation's job for sw, or false when it is skipped
// (and counted). A job number that is not positive is an error (after a
// repeat on an earlier line, which is named first).
func (q *queuer) add(sw *SWFJob) (simJob, bool, error) {
	size := sw.ReqProcs
	if size <= 0 {
		size = sw.AllocProcs
	}
	switch {
	case size <= 0:
		q.skipped.NoSize++
		return simJob{}, false, nil
	case sw.Run < 0:
		q.skipped.NoRunTime++
		return simJob{}, false, nil
	case size > int64(q.largest):
		q.skipped.TooLarge++
		return simJob{}, false, nil
	}
	if sw.Number <= 0 {
		if err := repeatedJob(q.numbers); err != nil {
			return simJob{}, false, err // a repeat on an earlier line
		}
		return simJob{}, false, fmt.Errorf("line %d: field 1 (job number): %d is not a positive job number", sw.Line, sw.Number)
	}
	q.numbers = append(q.numbers, jobLine{sw.Number, sw.Line})
	sj := newSimJob(sw, int(size))
	if q.gpuEvery > 0 && sj.out.ID%uint64(q.gpuEvery) == 0 {
		// Every Nth job asks for a GPU; one no GPU node can hold is
		// skipped as too large.
		if sj.out.Size > q.largestGPU {
			q.skipped.TooLarge++
			return simJob{}, false, nil
		}
		sj.gpu = true
	}
	return sj, true, nil
}

// chunkLen is the number of jobs in each of a jobList's chunks.
const chunkLen = 1 << chunkBits

const chunkBits = 12

// jobList holds the simulation's jobs in queue order, in chunks of
// chunkLen, so that it grows while the trace is read without copying the
// jobs already in it (a 20 MB list for LANL-CM5).
type jobList struct {
	chunks [][]simJob
	n      int
}

// at returns job i (its queue position).
func (l *jobList) at(i int) *simJob { return &l.chunks[i>>chunkBits][i&(chunkLen-1)] }

func (l *jobList) len() int { return l.n }

// add appends a chunk of at most chunkLen jobs; every chunk before it must
// be full.
func (l *jobList) add(c []simJob) {
	l.chunks = append(l.chunks, c)
	l.n += len(c)
}

// jobLine is a job number and the line it is on.
type jobLine struct {
	number int64
	line   int
}

// repeatedJob says which job number is repeated first in the file (the
// repeat on the earliest line, and where the number first was), or nil.
// It sorts numbers.
func repeatedJob(numbers []jobLine) error {
	slices.SortFunc(numbers, func(a, b jobLine) int {
		if c := cmp.Compare(a.number, b.number); c != 0 {
			return c
		}
		return cmp.Compare(a.line, b.line)
	})
	// In each run of one number, the first two lines are where it first
	// was and where it was first repeated.
	var first, again *jobLine
	for i := 1; i < len(numbers); i++ {
		if numbers[i].number == numbers[i-1].number && (i == 1 || numbers[i-2].number != numbers[i].number) &&
			(again == nil || numbers[i].line < again.line) {
			first, again = &numbers[i-1], &numbers[i]
		}
	}
	if again == nil {
		return nil
	}
	return fmt.Errorf("line %d: field 1 (job number): job %d is also on line %d (job numbers must be unique)", again.line, again.number, first.line)
}

// newSimJob builds one trace line's job (see the package doc for the
// model).
func newSimJob(sw *SWFJob, size int) simJob {
	limit := sw.ReqTime
	if limit <= 0 {
		limit = sw.Run
	}
	return simJob{
		out: Outcome{ID: uint64(sw.Number), Size: size, Submit: sw.Submit, TimedOut: sw.Run > limit},
		run: min(sw.Run, limit),
		// sched reads 0 as "no limit"; a 0 s job gets 1 s.
		limit: max(limit, 1),
		user:  sw.User, group: sw.Group, queue: sw.Queue, node: -1,
	}
}
