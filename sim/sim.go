package sim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
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
}

// ErrStopped is returned when Options.Stop closed before the simulation
// ended.
var ErrStopped = errors.New("simulation stopped")

// Machine layout of the simulation (see the package doc).
const (
	nodeName  = "sim"
	partition = "batch"
	// nodeMemMB is large enough that memory never constrains a job.
	nodeMemMB = 1 << 40
	// jobMemMB is what every job asks for, so no job falls back to a
	// default memory per CPU.
	jobMemMB = 1
)

// simJob is one trace job as the simulation runs it.
type simJob struct {
	job state.Job
	// alloc is the job's allocation while it runs.
	alloc state.Allocation
	out   Outcome
	// run is the effective run time in seconds: the trace's run time cut
	// at the time limit.
	run int64
}

// simulation is the state of one Run.
type simulation struct {
	opts   Options
	epoch  int64
	nodes  []*state.Node
	byName map[string]*state.Node
	snap   sched.Snapshot
	// jobs are in queue order (submit time, then job number); next is the
	// index of the first one not yet submitted.
	jobs []simJob
	next int
	byID map[uint64]*simJob
	// pending is in queue order; running in start order.
	pending []*state.Job
	running []sched.Run
	ends    endHeap
	now     int64
	// wake is a time the last plan asked to be woken at, when hasWake.
	wake    int64
	hasWake bool
	done    int
	passes  int
	// lastReasons are the last plan's reasons, to explain jobs that never
	// start.
	lastReasons map[uint64]api.Reason
}

// Run replays the trace through sched.Schedule in virtual time and returns
// the schedule's metrics. It fails when the trace names no machine size,
// repeats a job number, or when a plan breaks the simulation's invariants
// (a start of a job that is not pending, an over-committed node, a queue
// that never drains); each of those errors says which.
func Run(tr *Trace, opts Options) (Result, error) {
	began := time.Now()
	policy, err := sched.ParsePolicy(string(opts.Policy))
	if err != nil {
		return Result{}, err
	}
	procs := tr.MaxProcs
	if procs <= 0 {
		procs = tr.MaxNodes
	}
	// One node of P CPUs: the model of the package doc.
	nodes := []*state.Node{{Name: nodeName, CPUs: procs, MemMB: nodeMemMB, Partitions: []string{partition}}}
	largest, largestGPU := procs, 0
	if opts.Cluster != nil {
		nodes = opts.Cluster.nodes()
		procs, largest = 0, 0
		for _, n := range nodes {
			procs += n.CPUs
			largest = max(largest, n.CPUs)
			if len(n.Inventory.GPUs) > 0 {
				largestGPU = max(largestGPU, n.CPUs)
			}
		}
	}
	if procs <= 0 {
		return Result{}, errors.New(`the trace gives no machine size: add a header line such as "; MaxProcs: 128"`)
	}
	jobs, skipped, err := queueJobs(tr, largest)
	if err != nil {
		return Result{}, err
	}
	if c := opts.Cluster; c != nil && c.GPUJobEvery > 0 {
		// Every Nth job asks for a GPU; one no GPU node can hold is
		// skipped as too large.
		kept := jobs[:0]
		for _, sj := range jobs {
			if sj.job.ID%uint64(c.GPUJobEvery) == 0 {
				if sj.out.Size > largestGPU {
					skipped.TooLarge++
					continue
				}
				sj.job.Spec.Gres = []api.Gres{{Name: "gpu", Count: 1}}
			}
			kept = append(kept, sj)
		}
		jobs = kept
	}
	s := newSimulation(jobs, nodes, tr.UnixStartTime, policy, opts)
	if err := s.run(); err != nil {
		return Result{}, err
	}
	res := summarize(s.jobs, procs)
	res.Trace, res.Policy, res.Skipped, res.Passes = tr.Name, policy, skipped, s.passes
	res.Wall = time.Since(began)
	return res, nil
}

// queueJobs turns the trace's jobs into pending api.Jobs in queue order and
// counts the ones it skips.
func queueJobs(tr *Trace, procs int) ([]simJob, Skipped, error) {
	var skipped Skipped
	jobs := make([]simJob, 0, len(tr.Jobs))
	lines := make(map[int64]int, len(tr.Jobs))
	for _, sw := range tr.Jobs {
		size := sw.ReqProcs
		if size <= 0 {
			size = sw.AllocProcs
		}
		switch {
		case size <= 0:
			skipped.NoSize++
			continue
		case sw.Run < 0:
			skipped.NoRunTime++
			continue
		case size > int64(procs):
			skipped.TooLarge++
			continue
		}
		if sw.Number <= 0 {
			return nil, skipped, fmt.Errorf("line %d: field 1 (job number): %d is not a positive job number", sw.Line, sw.Number)
		}
		if prev, dup := lines[sw.Number]; dup {
			return nil, skipped, fmt.Errorf("line %d: field 1 (job number): job %d is also on line %d (job numbers must be unique)", sw.Line, sw.Number, prev)
		}
		lines[sw.Number] = sw.Line
		jobs = append(jobs, newSimJob(sw, int(size)))
	}
	slices.SortFunc(jobs, func(a, b simJob) int {
		if c := cmp.Compare(a.out.Submit, b.out.Submit); c != 0 {
			return c
		}
		return cmp.Compare(a.out.ID, b.out.ID)
	})
	return jobs, skipped, nil
}

// newSimJob builds the pending job for one trace line (see the package doc
// for the model).
func newSimJob(sw SWFJob, size int) simJob {
	limit := sw.ReqTime
	if limit <= 0 {
		limit = sw.Run
	}
	return simJob{
		out: Outcome{ID: uint64(sw.Number), Size: size, Submit: sw.Submit, TimedOut: sw.Run > limit},
		run: min(sw.Run, limit),
		job: state.Job{
			ID:    uint64(sw.Number),
			State: api.StatePending,
			Spec: state.JobSpec{
				NTasks: size, CPUsPerTask: 1, MemPerNode: jobMemMB, Partition: partition,
				// sched reads 0 as "no limit"; a 0 s job gets 1 s.
				TimeLimit: max(limit, 1),
			},
		},
	}
}

func newSimulation(jobs []simJob, nodes []*state.Node, epoch int64, policy sched.Policy, opts Options) *simulation {
	s := &simulation{
		opts:   opts,
		epoch:  epoch,
		nodes:  nodes,
		byName: make(map[string]*state.Node, len(nodes)),
		jobs:   jobs,
		byID:   make(map[uint64]*simJob, len(jobs)),
	}
	for _, n := range nodes {
		s.byName[n.Name] = n
	}
	for i := range s.jobs {
		sj := &s.jobs[i]
		sj.job.SubmitTime = s.at(sj.out.Submit)
		s.byID[sj.job.ID] = sj
	}
	s.snap = sched.Snapshot{
		Nodes:      nodes,
		Partitions: []api.Partition{{Name: partition, Default: true}},
		Lookup: func(id uint64) *state.Job {
			if sj := s.byID[id]; sj != nil {
				return &sj.job
			}
			return nil
		},
		Policy: policy,
	}
	return s
}

// at converts a trace second to the virtual wall time the scheduler sees.
func (s *simulation) at(sec int64) time.Time { return time.Unix(s.epoch+sec, 0).UTC() }

// run is the event loop: each turn moves the clock to the next second with
// an event, applies that second's ends, then its submits, then runs one pass.
func (s *simulation) run() error {
	for {
		select {
		case <-s.opts.Stop:
			return fmt.Errorf("at second %d, %d of %d jobs done: %w", s.now, s.done, len(s.jobs), ErrStopped)
		default:
		}
		now, ok := s.nextEvent()
		if !ok {
			break
		}
		s.now = now
		ended := s.endJobs()
		s.submitJobs()
		if err := s.pass(); err != nil {
			return err
		}
		if ended && s.opts.Progress != nil {
			s.opts.Progress(s.done, len(s.jobs))
		}
	}
	if len(s.pending) > 0 {
		j := s.pending[0]
		return fmt.Errorf("%d jobs never started although nothing else was left to happen: the first, job %d (%d CPUs), was left pending with reason %q",
			len(s.pending), j.ID, j.Spec.CPUs(), s.lastReasons[j.ID])
	}
	return nil
}

// nextEvent returns the earliest second with a submit, an end or a wake-up
// the scheduler asked for; false when none is left.
func (s *simulation) nextEvent() (int64, bool) {
	next, ok := int64(0), false
	consider := func(t int64) {
		if !ok || t < next {
			next, ok = t, true
		}
	}
	if s.next < len(s.jobs) {
		consider(s.jobs[s.next].out.Submit)
	}
	if len(s.ends) > 0 {
		consider(s.ends[0].out.End)
	}
	if s.hasWake && s.wake > s.now && len(s.pending) > 0 {
		consider(s.wake)
	}
	return next, ok
}

// endJobs ends every running job due by now and releases its resources.
func (s *simulation) endJobs() bool {
	ended := false
	for len(s.ends) > 0 && s.ends[0].out.End <= s.now {
		sj := heap.Pop(&s.ends).(*simJob)
		n := s.byName[sj.alloc.Node]
		n.AllocCPUs -= sj.alloc.CPUs
		n.AllocMemMB -= sj.alloc.MemMB + sj.alloc.OverheadMB
		sj.alloc.Status = state.AllocEnded
		sj.job.State = api.StateCompleted
		if sj.out.TimedOut {
			sj.job.State = api.StateTimeout
		}
		sj.job.EndTime = s.at(sj.out.End)
		s.done++
		ended = true
	}
	if ended {
		s.running = slices.DeleteFunc(s.running, func(r sched.Run) bool { return r.Job.State != api.StateRunning })
	}
	return ended
}

// submitJobs appends the jobs submitted by now to the queue; jobs are in
// queue order, so the queue stays in it.
func (s *simulation) submitJobs() {
	for s.next < len(s.jobs) && s.jobs[s.next].out.Submit <= s.now {
		s.pending = append(s.pending, &s.jobs[s.next].job)
		s.next++
	}
}

// pass runs the scheduler once at the current second and applies its plan.
func (s *simulation) pass() error {
	s.hasWake = false
	if len(s.pending) == 0 {
		return nil
	}
	s.snap.Now = s.at(s.now)
	s.snap.Pending, s.snap.Running = s.pending, s.running
	plan := sched.Schedule(&s.snap)
	// Conservative backfill keeps each reservation until it can move
	// earlier: the next pass starts from this one's.
	s.snap.Reservations = plan.Reservations
	s.passes++
	s.lastReasons = plan.Reasons
	for _, st := range plan.Starts {
		if err := s.start(st); err != nil {
			return err
		}
	}
	if len(plan.Starts) > 0 {
		// One compaction per pass keeps the queue in order without
		// rebuilding it per start.
		s.pending = slices.DeleteFunc(s.pending, func(j *state.Job) bool { return j.State != api.StatePending })
	}
	if !plan.NextWake.IsZero() {
		wake := plan.NextWake.Unix() - s.epoch
		if plan.NextWake.Nanosecond() > 0 {
			wake++
		}
		s.wake, s.hasWake = wake, true
	}
	return nil
}

// start applies one start of a plan, after checking it against the
// simulation's state: a scheduler bug must stop the run, not skew it.
func (s *simulation) start(st sched.Start) error {
	sj := s.byID[st.JobID]
	n := s.byName[st.Node]
	switch {
	case sj == nil || sj.job.State != api.StatePending || sj.out.Submit > s.now:
		return fmt.Errorf("second %d: the plan starts job %d, which is not pending", s.now, st.JobID)
	case n == nil:
		return fmt.Errorf("second %d: the plan starts job %d on node %q, which is not in the machine", s.now, st.JobID, st.Node)
	case st.CPUs != sj.out.Size:
		return fmt.Errorf("second %d: the plan gives job %d %d CPUs; it asked for %d", s.now, st.JobID, st.CPUs, sj.out.Size)
	case n.AllocCPUs+st.CPUs > n.CPUs:
		return fmt.Errorf("second %d: the plan starts job %d on %d CPUs while only %d of %d are free on %s", s.now, st.JobID, st.CPUs, n.FreeCPUs(), n.CPUs, n.Name)
	}
	j := &sj.job
	j.State, j.StartTime = api.StateRunning, s.at(s.now)
	sj.alloc = state.Allocation{ID: j.ID, Job: j.ID, Node: st.Node, CPUs: st.CPUs, MemMB: st.MemMB, OverheadMB: st.OverheadMB,
		Placement: st.Placement, Desired: state.AllocRun, Status: state.AllocActive, StartTime: j.StartTime}
	n.AllocCPUs += st.CPUs
	n.AllocMemMB += st.MemMB + st.OverheadMB
	if p := st.Placement; p != nil {
		sj.out.Placed, sj.out.Score, sj.out.SingleNUMA = true, p.Score, len(p.NUMANodes) == 1
	}
	s.running = append(s.running, sched.Run{Alloc: &sj.alloc, Job: j})
	sj.out.Start, sj.out.End = s.now, s.now+sj.run
	heap.Push(&s.ends, sj)
	return nil
}

// endHeap orders running jobs by end second, then job number.
type endHeap []*simJob

func (h endHeap) Len() int { return len(h) }
func (h endHeap) Less(a, b int) bool {
	if h[a].out.End != h[b].out.End {
		return h[a].out.End < h[b].out.End
	}
	return h[a].out.ID < h[b].out.ID
}
func (h endHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *endHeap) Push(x any)   { *h = append(*h, x.(*simJob)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}
