package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
)

// This file is the world around the pass: a state.State that the
// simulation changes only by applying Raft commands, as the controllers
// do, and acting for the node daemons (reporting the runs that end or
// that the state stops).

// simulation is the state of one Run.
type simulation struct {
	opts  Options
	epoch int64
	st    *state.State
	index uint64
	// jobs are in queue order (submit time, then job number); job i has
	// state id i+1. next is the first one not yet submitted. While the
	// trace is still being read (RunSWF), feed brings the rest of its jobs
	// (fed reports that all came).
	jobs jobList
	next int
	feed *feed
	fed  bool
	ends endHeap
	now  int64
	// wake is a time the last plan asked to be woken at, when hasWake.
	wake    int64
	hasWake bool
	done    int
	passes  int
	// idle counts the passes not run because none could start anything
	// (startsNothing); mayIdle says whether the simulation may skip them.
	idle    int
	mayIdle bool
	// finished counts the jobs ended since the last PurgeJobs; paused
	// the runs suspended by preemption, which a pass resumes.
	finished, paused int
	// nodes are the nodes' names, in order (simJob.node indexes them).
	nodes []string
	// accounts records the fair-share accounts and users created.
	accounts map[string]bool
	// lastReasons are the last plan's reasons, to explain jobs that never
	// start.
	lastReasons map[uint64]api.Reason
	// sched runs the passes, keeping their buffers from one to the next;
	// entry is the pass's ApplyPlan, and submit and reports the other
	// entries made every second (the state keeps none of an entry's
	// lists); due, reports and specs are endRuns', report's and
	// submitJobs' buffers.
	sched   sched.Pass
	entry   state.ApplyPlan
	submit  state.SubmitJobs
	ended   state.JobReports
	due     []int
	reports []api.JobReport
	specs   []state.JobSpec
}

// purgeEvery is how many ended jobs the state keeps before a PurgeJobs
// entry forgets them (MinJobAge is 1 s): the state holds the queue and
// the running jobs, not the trace. Below state's shrinkMin (4,096 jobs),
// so that a purge never copies the state's maps into small ones that the
// next thousand jobs grow again.
const purgeEvery = 1024

func newSimulation(jobs jobList, nodes []api.NodeInfo, epoch int64, policy sched.Policy, opts Options) (*simulation, error) {
	s := &simulation{opts: opts, epoch: epoch, st: state.New(), jobs: jobs, accounts: map[string]bool{}}
	s.mayIdle = !opts.runIdle && policy != sched.PolicyConservative && !preempts(opts.QOS)
	t0 := s.at(0)
	if _, err := s.apply(state.CmdSeedConfig, &state.SeedConfig{
		Partitions: []api.Partition{{Name: partition, Default: true}}, DefMemPerCPU: jobMemMB, Policy: string(policy),
	}); err != nil {
		return nil, err
	}
	settings := [][2]string{{"MinJobAge", "1"}}
	for _, w := range []string{"Age", "Fairshare", "QOS", "Partition", "JobSize", "Site"} {
		v := "0"
		// QoS and fair-share asked for weigh as much as the
		// controller's defaults make them.
		if w == "QOS" && len(opts.QOS) > 0 || w == "Fairshare" && opts.Fairshare {
			v = "10000"
		}
		settings = append(settings, [2]string{"PriorityWeight" + w, v})
	}
	if _, err := s.apply(state.CmdSetConfig, &state.SetConfig{Settings: append(settings, opts.Settings...)}); err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	// The QoS first without whom they preempt, then with: a QoS may name
	// one defined after it.
	for _, preempt := range []bool{false, true} {
		for _, q := range opts.QOS {
			if !preempt {
				q.Preempt = nil
			} else if len(q.Preempt) == 0 {
				continue
			}
			if _, err := s.apply(state.CmdPutQOS, &state.PutQOS{QOS: q}); err != nil {
				return nil, fmt.Errorf("QoS %s: %w", q.Name, err)
			}
		}
	}
	for _, n := range nodes {
		n.BootID, n.Runner = bootID, "sim"
		if _, err := s.apply(state.CmdRegisterNode, &state.RegisterNode{Now: t0, Info: n}); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	s.nodes = slices.Clone(s.st.NodeNames())
	return s, nil
}

// apply applies one command at the next index; a business error in its
// result is returned as the error.
func (s *simulation) apply(ct state.CommandType, cmd any) (any, error) {
	s.index++
	res := s.st.Apply(s.index, ct, cmd)
	// Nobody watches the nodes' allocations: forget which changed, as the
	// controller does once it woke their daemons.
	s.st.ForgetTouched()
	if err, ok := res.(error); ok {
		return nil, err
	}
	return res, nil
}

// at converts a trace second to the virtual wall time the scheduler sees.
func (s *simulation) at(sec int64) time.Time { return time.Unix(s.epoch+sec, 0).UTC() }

// run is the event loop: each turn moves the clock to the next second with
// an event, applies that second's ends, then its submits, then runs one
// pass (more when a pass's preemptions freed resources).
func (s *simulation) run() error {
	for {
		select {
		case <-s.opts.Stop:
			return fmt.Errorf("at second %d, %d of %d jobs done: %w", s.now, s.done, s.jobs.len(), ErrStopped)
		default:
		}
		now, ok := s.nextEvent()
		if s.fed && s.feed.failed() {
			// The trace ended in an error or must be read whole first:
			// RunSWF says which.
			return errFeed
		}
		if !ok {
			break
		}
		s.now = now
		ended, err := s.endRuns()
		if err != nil {
			return err
		}
		if err := s.submitJobs(); err != nil {
			return err
		}
		if err := s.pass(); err != nil {
			return err
		}
		if err := s.purge(); err != nil {
			return err
		}
		if ended && s.opts.Progress != nil {
			s.opts.Progress(s.done, s.jobs.len())
		}
	}
	if len(s.st.Pending) > 0 {
		id := slices.Min(slices.Collect(func(yield func(uint64) bool) {
			for id := range s.st.Pending {
				if !yield(id) {
					return
				}
			}
		}))
		j := s.st.Jobs[id]
		reason, ok := s.lastReasons[id]
		if !ok {
			// The passes since it was submitted were left out.
			reason = s.sched.Schedule(s.sched.Snapshot(s.st, s.at(s.now))).Reasons[id]
		}
		return fmt.Errorf("%d jobs never started although nothing else was left to happen: the first, job %d (%d CPUs), was left pending with reason %q",
			len(s.st.Pending), s.jobs.at(int(id-1)).out.ID, j.Spec.CPUs(), reason)
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
	if sj := s.upcoming(); sj != nil {
		consider(sj.out.Submit)
	}
	for len(s.ends) > 0 && s.stale(s.ends[0]) {
		s.ends.pop()
	}
	if len(s.ends) > 0 {
		consider(s.ends[0].at)
	}
	if s.hasWake && s.wake > s.now && len(s.st.Pending) > 0 {
		consider(s.wake)
	}
	return next, ok
}

// stale reports whether an end event no longer ends a run: the run was
// stopped, suspended, or ended otherwise since it was scheduled.
func (s *simulation) stale(e endEvent) bool {
	sj := s.jobs.at(e.job)
	return sj.alloc != e.alloc || sj.suspended || sj.endAt != e.at
}

// endRuns reports, as their node daemons would, every run due to end by
// now: one JobReports entry per node.
func (s *simulation) endRuns() (bool, error) {
	due := s.due[:0]
	for len(s.ends) > 0 && s.ends[0].at <= s.now {
		if e := s.ends.pop(); !s.stale(e) {
			due = append(due, e.job)
		}
	}
	s.due = due
	if len(due) == 0 {
		return false, nil
	}
	if err := s.report(due, func(sj *simJob) api.JobState {
		if sj.out.TimedOut {
			return api.StateTimeout
		}
		return api.StateCompleted
	}); err != nil {
		return false, err
	}
	return true, nil
}

// report applies the ends of the runs of jobs (queue positions), one
// JobReports per node in name order, each run ending as end says, then
// takes each job's outcome from the state.
func (s *simulation) report(jobs []int, end func(*simJob) api.JobState) error {
	// Node indexes follow the names' order.
	slices.SortStableFunc(jobs, func(a, b int) int { return cmp.Compare(s.jobs.at(a).node, s.jobs.at(b).node) })
	for from := 0; from < len(jobs); {
		node := s.nodes[s.jobs.at(jobs[from]).node]
		to := from + 1
		for to < len(jobs) && s.jobs.at(jobs[to]).node == s.jobs.at(jobs[from]).node {
			to++
		}
		// The state reads the reports and keeps none: the buffer is
		// reused.
		reports := s.reports[:0]
		for _, i := range jobs[from:to] {
			sj := s.jobs.at(i)
			reports = append(reports, api.JobReport{Alloc: sj.alloc, JobID: uint64(i + 1), StartIndex: sj.startIndex, State: end(sj)})
		}
		s.reports = reports
		s.ended = state.JobReports{Now: s.at(s.now), Node: node, BootID: bootID, Reports: reports}
		res, err := s.apply(state.CmdJobReports, &s.ended)
		if err != nil {
			return err
		}
		if r := res.(*state.IDsResult); len(r.Changed) != len(reports) {
			return fmt.Errorf("second %d: node %s reported %d runs ending; the state took %d (%v)", s.now, node, len(reports), len(r.Changed), r.Errors)
		}
		from = to
	}
	for _, i := range jobs {
		s.settle(i)
	}
	return nil
}

// settle takes the outcome of job i's run that just ended from the state:
// ended (completed, timed out, preempted) or back in the queue (requeued).
func (s *simulation) settle(i int) {
	sj := s.jobs.at(i)
	j := s.st.Jobs[uint64(i+1)]
	if sj.suspended {
		s.paused--
	}
	sj.alloc, sj.node, sj.suspended = 0, -1, false
	if j.State == api.StatePending {
		sj.out.Restarts++
		return
	}
	sj.out.End, sj.out.Preempted = s.now, j.State == api.StatePreempted
	s.done++
	s.finished++
}

// submitJobs applies the jobs submitted by now as one SubmitJobs entry.
func (s *simulation) submitJobs() error {
	first := s.next
	for sj := s.upcoming(); sj != nil && sj.out.Submit <= s.now; sj = s.upcoming() {
		s.next++
	}
	if first == s.next {
		return nil
	}
	// The state copies each spec into its job's record: the buffer is
	// reused from second to second.
	specs := s.specs[:0]
	for i := first; i < s.next; i++ {
		specs = append(specs, state.JobSpec{})
		if err := s.spec(&specs[len(specs)-1], s.jobs.at(i)); err != nil {
			return err
		}
	}
	s.specs = specs
	s.submit = state.SubmitJobs{Now: s.at(s.now), FirstID: uint64(first + 1), Jobs: specs}
	res, err := s.apply(state.CmdSubmitJobs, &s.submit)
	if err != nil {
		return err
	}
	for k, r := range res.(*state.SubmitResult).Results {
		if r.JobID != uint64(first+k+1) {
			return fmt.Errorf("second %d: job %d was not taken: %s", s.now, s.jobs.at(first+k).out.ID, r.Error)
		}
	}
	return nil
}

// spec writes job sj's request into sp (an empty spec), creating its
// fair-share account and user first when Options.Fairshare asks for them.
func (s *simulation) spec(sp *state.JobSpec, sj *simJob) error {
	sp.NTasks, sp.CPUsPerTask, sp.MemPerNode, sp.Partition, sp.TimeLimit = sj.out.Size, 1, jobMemMB, partition, sj.limit
	if s.opts.QOSByQueue != nil {
		sp.QOS = s.opts.QOSByQueue[sj.queue]
	}
	if sj.gpu {
		sp.Gres = []api.Gres{{Name: "gpu", Count: 1}}
	}
	if s.opts.Fairshare {
		sp.User, sp.Account = "u"+strconv.FormatInt(sj.user, 10), "g"+strconv.FormatInt(sj.group, 10)
		return s.ensureAccount(sp.Account, sp.User)
	}
	return nil
}

// ensureAccount creates an account and a user in it, one share each, the
// first time a job names them.
func (s *simulation) ensureAccount(account, user string) error {
	if !s.accounts[account] {
		if _, err := s.apply(state.CmdPutAccount, &state.PutAccount{Account: api.Account{Name: account, Shares: 1}}); err != nil {
			return fmt.Errorf("account %s: %w", account, err)
		}
		s.accounts[account] = true
	}
	if key := account + "/" + user; !s.accounts[key] {
		if _, err := s.apply(state.CmdPutUser, &state.PutUser{User: api.AccountUser{Name: user, Account: account, Shares: 1}}); err != nil {
			return fmt.Errorf("user %s in %s: %w", user, account, err)
		}
		s.accounts[key] = true
	}
	return nil
}

// maxRounds bounds the passes of one second: a pass whose preemptions
// stopped runs is followed by another, as the controller's FSM change
// wakes its scheduler again.
const maxRounds = 8

// pass runs the scheduler at the current second and applies its plan as
// one ApplyPlan entry, as the leader proposes it.
func (s *simulation) pass() error {
	if s.startsNothing() {
		s.idle++
		return nil
	}
	s.hasWake = false
	for round := 0; round < maxRounds && len(s.st.Pending)+s.paused > 0; round++ {
		now := s.at(s.now)
		snap := s.sched.Snapshot(s.st, now)
		plan := s.sched.Schedule(snap)
		s.passes++
		s.lastReasons = plan.Reasons
		if !plan.NextWake.IsZero() {
			wake := plan.NextWake.Unix() - s.epoch
			if plan.NextWake.Nanosecond() > 0 {
				wake++
			}
			s.wake, s.hasWake = wake, true
		}
		cmd := &s.entry
		plan.EntryInto(cmd, now, snap, s.st.NextJobID)
		if sched.EmptyEntry(cmd) {
			return nil
		}
		res, err := s.apply(state.CmdApplyPlan, cmd)
		if err != nil {
			return err
		}
		again, err := s.applied(res.(*state.PlanResult))
		if err != nil || !again {
			return err
		}
	}
	return nil
}

// startsNothing reports whether a pass now would start, resume, stop and
// cancel nothing, so that the simulation may leave it out (its reasons and
// expected starts would only be written by the next pass instead). That
// holds when every pending job asks for more CPUs than any usable node has
// free (a job needs at least one CPU, and the pass starts a job only on a
// node with its CPUs free now), no run is suspended (a resume needs free
// CPUs too), no QoS may preempt (a preemptor frees CPUs itself), and no
// advance reservation is defined (the simulation makes none). It is
// not used under conservative backfill, where a pass's reservations are
// kept by the next one, and so depend on when passes run; EASY and FCFS
// read no reservation back. The trace's jobs have no begin time and no
// dependency, so no pass would have set a wake-up either.
// TestIdlePassesLeftOut checks that leaving these passes out changes no
// job's start.
func (s *simulation) startsNothing() bool {
	if !s.mayIdle || s.paused > 0 || len(s.st.Pending) == 0 || len(s.st.Reservations) > 0 {
		return false
	}
	free := 0
	for _, name := range s.st.NodeNames() {
		if n := s.st.Nodes[name]; !n.Down && !n.Drain && !n.Probing {
			free = max(free, n.FreeCPUs())
		}
	}
	fits := false
	s.st.EachPending(func(j *state.Job) { fits = fits || j.Spec.CPUs() <= free })
	return !fits
}

// preempts reports whether any of qos may preempt another.
func preempts(qos []api.QOS) bool {
	for _, q := range qos {
		if len(q.Preempt) > 0 {
			return true
		}
	}
	return false
}

// applied follows a plan's result: runs started get their end scheduled,
// runs stopped are reported ended (their node stops them at once) or are
// paused, runs resumed are scheduled again. It reports whether runs were
// stopped, so that another pass may use what they freed.
func (s *simulation) applied(r *state.PlanResult) (bool, error) {
	if len(r.Rejected) > 0 {
		return false, fmt.Errorf("second %d: the state rejected the plan's start of job %d", s.now, s.jobs.at(int(r.Rejected[0]-1)).out.ID)
	}
	for _, id := range r.Started {
		s.started(int(id - 1))
	}
	var stopped []int
	for _, id := range r.Stopped {
		i := int(id - 1)
		sj := s.jobs.at(i)
		if j := s.st.Jobs[id]; j.State == api.StateSuspended {
			sj.suspended, sj.left = true, sj.endAt-s.now
			s.paused++
			continue
		}
		stopped = append(stopped, i)
	}
	for _, id := range r.Resumed {
		sj := s.jobs.at(int(id - 1))
		sj.suspended = false
		s.paused--
		s.schedule(int(id-1), s.now+sj.left)
	}
	if len(stopped) == 0 {
		return len(r.Stopped) > 0, nil
	}
	// The stopped runs' nodes stop them at once; the state gives each the
	// outcome of its preemption mode.
	return true, s.report(stopped, func(*simJob) api.JobState { return api.StateCancelled })
}

// started takes job i's new run from the state and schedules its end.
func (s *simulation) started(i int) {
	sj := s.jobs.at(i)
	j := s.st.Jobs[uint64(i+1)]
	a := s.st.LastAlloc(j)
	sj.alloc, sj.node, sj.startIndex, sj.suspended = a.ID, s.nodeIndex(a.Node), a.StartIndex, false
	sj.out.Start, sj.left = s.now, sj.run
	if p := a.Placement; p != nil {
		sj.out.Placed, sj.out.Score, sj.out.SingleNUMA = true, p.Score, len(p.NUMANodes) == 1
	}
	s.schedule(i, s.now+sj.left)
}

// nodeIndex returns the index of the node named name in s.nodes.
func (s *simulation) nodeIndex(name string) int32 {
	i, _ := slices.BinarySearch(s.nodes, name)
	return int32(i)
}

// schedule makes job i's current run end at second at.
func (s *simulation) schedule(i int, at int64) {
	sj := s.jobs.at(i)
	sj.endAt = at
	s.ends.push(endEvent{at: at, job: i, alloc: sj.alloc})
}

// purge forgets ended jobs, as the controllers do MinJobAge after they
// end, once purgeEvery of them piled up: the simulation keeps each job's
// outcome itself.
func (s *simulation) purge() error {
	if s.finished < purgeEvery {
		return nil
	}
	s.finished = 0
	_, err := s.apply(state.CmdPurgeJobs, &state.PurgeJobs{Now: s.at(s.now + 2)})
	return err
}

// endEvent is the end of job's run alloc at second at.
type endEvent struct {
	at    int64
	job   int
	alloc uint64
}

// endHeap is a binary min-heap of end events, by second, then queue
// position (less).
type endHeap []endEvent

func (h endHeap) less(a, b int) bool {
	if h[a].at != h[b].at {
		return h[a].at < h[b].at
	}
	return h[a].job < h[b].job
}

// push adds e.
func (h *endHeap) push(e endEvent) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// pop removes and returns the earliest event; the heap must not be empty.
func (h *endHeap) pop() endEvent {
	q := *h
	top, last := q[0], len(q)-1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q.less(l, least) {
			least = l
		}
		if r < len(q) && q.less(r, least) {
			least = r
		}
		if least == i {
			break
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
	*h = q
	return top
}
