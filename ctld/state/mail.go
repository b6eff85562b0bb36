package state

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"corral/api"
)

// This file holds job notifications (sbatch --mail-type): the apply records
// a Notice in the replicated outbox when it sees an event a job asked to be
// told of, and the leader delivers the outbox (package ctld, mailer.go):
// it claims notices (ClaimNotices) before it hands them to the mail
// program or webhook, and marks each delivered (NoticesDone), which takes
// it out. A new leader delivers whatever is left. docs/mail.md says what
// that guarantees across a failover.

// Notice sinks: where a notice goes, set from the configuration when it is
// recorded.
const (
	SinkMailProg uint8 = 1 << iota
	SinkWebhook
)

// MaxNotices bounds the outbox: past it a new notice is dropped (and
// counted in NoticesDropped), so a sink that fails for days cannot grow
// the state without bound.
const MaxNotices = 100_000

// Notice is one notification waiting to be delivered.
type Notice struct {
	ID uint64 `json:"id"`
	// Time is when the event happened (the entry's leader-stamped time).
	Time time.Time `json:"time"`
	// Job is the record the event happened to; ArrayJob its array (0 for
	// a plain job); Ref how users name it ("12", "12_5", or "12_*" for
	// an array's summary).
	Job      uint64 `json:"job"`
	ArrayJob uint64 `json:"array_job,omitempty"`
	Ref      string `json:"ref"`
	Name     string `json:"name"`
	User     string `json:"user"`
	// To is the recipient: --mail-user, else the user (with MailDomain).
	To string `json:"to"`
	// Event is the mail type (api.MailBegin, ...) and Subject Slurm's
	// subject line for it.
	Event   string `json:"event"`
	Subject string `json:"subject"`
	// State, ExitCode, QueuedS and RunS are what the subject says, for the
	// mail program's environment and the webhook's body.
	State    api.JobState `json:"state,omitempty"`
	ExitCode int          `json:"exit_code,omitempty"`
	QueuedS  int64        `json:"queued_s,omitempty"`
	RunS     int64        `json:"run_s,omitempty"`
	// Sinks are where it goes (SinkMailProg, SinkWebhook) and Done where
	// it went: it leaves the outbox once Done covers Sinks.
	Sinks uint8 `json:"sinks"`
	Done  uint8 `json:"done,omitempty"`
	// Attempts counts the claims made on it: a delivery with Attempts > 1
	// may repeat an earlier one (a leader that claimed it may have
	// delivered it before it failed); ClaimedBy is the last claimant.
	Attempts  int    `json:"attempts,omitempty"`
	ClaimedBy string `json:"claimed_by,omitempty"`
}

// Key is the notice's idempotency key: the same for every delivery of
// this notice, by any leader, and different for every other notice.
func (n *Notice) Key() string {
	return "corral-" + strconv.FormatInt(n.Time.Unix(), 10) + "-" + strconv.FormatUint(n.ID, 10)
}

// MailTimeEvents records that running jobs reached 50, 80 or 90 % of
// their time limit (TIME_LIMIT_50/80/90): the leader's timer proposes it,
// and the apply checks each job against Now itself, so an entry that
// arrives early, twice or for a job that stopped records nothing.
type MailTimeEvents struct {
	Now  time.Time `json:"now"`
	Jobs []uint64  `json:"jobs"`
}

// ClaimNotices says the leader By is about to deliver notices: each one's
// Attempts grows.
type ClaimNotices struct {
	Now time.Time `json:"now"`
	IDs []uint64  `json:"ids"`
	By  string    `json:"by"`
}

// NoticesDone records deliveries: each mark's Sinks were delivered to (or,
// Failed, given up on); a notice whose sinks are all done leaves.
type NoticesDone struct {
	Now   time.Time    `json:"now"`
	Marks []NoticeMark `json:"marks"`
}

// NoticeMark is one notice's delivered (or abandoned) sinks.
type NoticeMark struct {
	ID     uint64 `json:"id"`
	Sinks  uint8  `json:"sinks"`
	Failed bool   `json:"failed,omitempty"`
}

// Job.Mailed bits: events sent at most once per run.
const (
	mailedTime50 uint8 = 1 << iota
	mailedTime80
	mailedTime90
	mailedInvalidDep
	mailedTimeBits = mailedTime50 | mailedTime80 | mailedTime90
)

// timeWarnings are the time-limit warnings, their share of the limit in
// percent, and their bit in Job.Mailed.
var timeWarnings = []struct {
	event string
	pct   int64
	bit   uint8
}{
	{api.MailTimeLimit50, 50, mailedTime50},
	{api.MailTimeLimit80, 80, mailedTime80},
	{api.MailTimeLimit90, 90, mailedTime90},
}

// wantsMail reports whether request sp asked for notices of event.
func wantsMail(sp *JobSpec, event string) bool { return slices.Contains(sp.MailType, event) }

// wantsTimeWarning reports whether sp asked for any time-limit warning.
func wantsTimeWarning(sp *JobSpec) bool {
	if sp.TimeLimit <= 0 || len(sp.MailType) == 0 {
		return false
	}
	for _, w := range timeWarnings {
		if wantsMail(sp, w.event) {
			return true
		}
	}
	return false
}

// stampedAt is implemented by the payloads that carry the leader's time,
// which the apply gives the notices it records.
type stampedAt interface{ stamp() time.Time }

func (c *SubmitJobs) stamp() time.Time     { return c.Now }
func (c *CancelJobs) stamp() time.Time     { return c.Now }
func (c *HoldRelease) stamp() time.Time    { return c.Now }
func (c *RequeueJobs) stamp() time.Time    { return c.Now }
func (c *ApplyPlan) stamp() time.Time      { return c.Now }
func (c *RegisterNode) stamp() time.Time   { return c.Now }
func (c *JobReports) stamp() time.Time     { return c.Now }
func (c *NodeDown) stamp() time.Time       { return c.Now }
func (c *SuspendJobs) stamp() time.Time    { return c.Now }
func (c *UpdateJob) stamp() time.Time      { return c.Now }
func (c *MailTimeEvents) stamp() time.Time { return c.Now }

// noteJobChange records the notices that job j's change from old (nil for
// a new record) calls for: BEGIN when it starts, REQUEUE when it goes back
// to the queue, and when it ends TIME_LIMIT (a timeout) and END or FAIL
// (an array without ARRAY_TASKS says BEGIN once and END or FAIL once its
// last task ended). It runs inside applies only, never while a snapshot is
// read.
func (s *State) noteJobChange(old, j *Job) {
	sp := j.Spec
	if len(sp.MailType) == 0 || !s.applying {
		return
	}
	tasks := wantsMail(sp, api.MailArrayTasks)
	inArray := j.ArrayJobID != 0
	began := j.State.Active() && (old == nil || !old.State.Active())
	if began && wantsMail(sp, api.MailBegin) {
		switch {
		case !inArray || tasks:
			s.addNotice(j, api.MailBegin, 0, j.Ref())
		case j.Restarts == 0 && len(s.ArrayTasks[j.ArrayJobID]) == 0:
			// The array's first task to start.
			s.addNotice(j, api.MailBegin, 0, arrayRef(j.ArrayJobID))
		}
	}
	if old != nil && j.Restarts > old.Restarts && wantsMail(sp, api.MailRequeue) {
		s.addNotice(j, api.MailRequeue, s.runSeconds(j, old), j.Ref())
	}
	if j.State.Terminal() && (old == nil || !old.State.Terminal()) {
		s.noteEnd(j, tasks && inArray || !inArray)
	}
}

// noteEnd records the notices of job j's end: its own (each) or, for an
// array without ARRAY_TASKS, the array's summary once its last record ended.
func (s *State) noteEnd(j *Job, each bool) {
	sp := j.Spec
	if j.State == api.StateTimeout && wantsMail(sp, api.MailTimeLimit) {
		s.addNotice(j, api.MailTimeLimit, s.runSeconds(j, nil), j.Ref())
	}
	if each {
		if event := endEvent(sp, j.State); event != "" {
			s.addNotice(j, event, s.runSeconds(j, nil), j.Ref())
		}
		return
	}
	recs, done := s.arrayRecords(j)
	if !done || len(recs) == 0 {
		return
	}
	final := api.StateCompleted
	for _, r := range recs {
		if !endedWell(r.State) {
			final = api.StateFailed
		}
	}
	if event := endEvent(sp, final); event != "" {
		s.addSummary(j, recs, event)
	}
}

// endEvent is the notice a job that ended as st gets, as Slurm's
// job_completion_logger picks it: END for COMPLETED and CANCELLED, else
// FAIL when asked for and END otherwise; "" when it asked for neither.
func endEvent(sp *JobSpec, st api.JobState) string {
	switch {
	case endedWell(st) && wantsMail(sp, api.MailEnd):
		return api.MailEnd
	case endedWell(st):
		return ""
	case wantsMail(sp, api.MailFail):
		return api.MailFail
	case wantsMail(sp, api.MailEnd):
		return api.MailEnd
	}
	return ""
}

func endedWell(st api.JobState) bool { return st == api.StateCompleted || st == api.StateCancelled }

// arrayRecords returns the records of job j's array, j as it is being
// stored, and whether the array is finished: no task pending, every record
// ended.
func (s *State) arrayRecords(j *Job) ([]*Job, bool) {
	ids := append([]uint64{j.ArrayJobID}, s.ArrayTasks[j.ArrayJobID]...)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var recs []*Job
	for _, id := range ids {
		r := s.Jobs[id]
		if id == j.ID {
			r = j
		}
		if r == nil {
			continue
		}
		if r.ArrayPending != nil || !r.State.Terminal() {
			return nil, false
		}
		recs = append(recs, r)
	}
	return recs, true
}

func arrayRef(id uint64) string { return strconv.FormatUint(id, 10) + "_*" }

// noteInvalidDep records INVALID_DEPEND for job j (a private copy) once:
// its dependency can never be met.
func (s *State) noteInvalidDep(j *Job) {
	if !s.applying || j.Mailed&mailedInvalidDep != 0 || !wantsMail(j.Spec, api.MailInvalidDepend) {
		return
	}
	j.Mailed |= mailedInvalidDep
	s.addNotice(j, api.MailInvalidDepend, 0, j.Ref())
}

// runSeconds is how long job j's last run ran, suspended time excluded:
// to its end, or to the entry's time while it runs. before, when set, is
// the record before a requeue reset its times.
func (s *State) runSeconds(j, before *Job) int64 {
	a := s.LastAlloc(j)
	if a == nil {
		return 0
	}
	end := a.EndTime
	if end.IsZero() {
		end = s.now
	}
	if before != nil && !before.EndTime.IsZero() {
		end = before.EndTime
	}
	d := end.Sub(a.StartTime) - a.SuspendedFor
	if !a.SuspendTime.IsZero() && end.After(a.SuspendTime) {
		d -= end.Sub(a.SuspendTime)
	}
	return max(int64(d/time.Second), 0)
}

// addNotice records one notice of event for job j, named ref.
func (s *State) addNotice(j *Job, event string, runS int64, ref string) {
	n := s.newNotice(j, event, ref)
	if n == nil {
		return
	}
	n.RunS = runS
	if event == api.MailBegin && !j.StartTime.IsZero() {
		n.QueuedS = max(int64(j.StartTime.Sub(j.SubmitTime)/time.Second), 0)
	}
	n.ExitCode = j.ExitCode
	n.Subject = subject(n, j)
	s.putNotice(n)
}

// addSummary records the summary notice of a finished array.
func (s *State) addSummary(j *Job, recs []*Job, event string) {
	n := s.newNotice(j, event, arrayRef(j.ArrayJobID))
	if n == nil {
		return
	}
	lo, hi := recs[0].ExitCode, recs[0].ExitCode
	for _, r := range recs {
		lo, hi = min(lo, r.ExitCode), max(hi, r.ExitCode)
	}
	n.Job, n.ExitCode = j.ArrayJobID, hi
	state := string(j.State)
	if lo == 0 && hi > 0 {
		state = "Mixed"
	}
	n.Subject = fmt.Sprintf("Slurm Array Summary Job_id=%d_* (%d) Name=%s %s, %s, ExitCode [%d-%d]",
		j.ArrayJobID, j.ArrayJobID, j.Spec.Name, MailTypeText(event), state, lo, hi)
	s.putNotice(n)
}

// newNotice starts a notice of event for job j, or returns nil when no
// sink is configured or the outbox is full.
func (s *State) newNotice(j *Job, event, ref string) *Notice {
	var sinks uint8
	if s.Config.MailProg != api.MailProgNone {
		sinks |= SinkMailProg
	}
	if s.Config.MailWebhook != "" {
		sinks |= SinkWebhook
	}
	if sinks == 0 {
		return nil
	}
	if len(s.Notices) >= MaxNotices {
		s.NoticesDropped++
		return nil
	}
	s.NextNoticeID++
	when := s.now
	if when.IsZero() {
		when = j.SubmitTime
	}
	return &Notice{
		ID: s.NextNoticeID, Time: when, Job: j.ID, ArrayJob: j.ArrayJobID, Ref: ref, Name: j.Spec.Name,
		User: j.Spec.User, To: api.MailRecipient(j.Spec.MailUser, j.Spec.User, s.Config.MailDomain),
		Event: event, State: j.State, Sinks: sinks,
	}
}

func (s *State) putNotice(n *Notice) {
	if s.Notices == nil {
		s.Notices = make(map[uint64]*Notice)
	}
	s.Notices[n.ID] = n
	s.noticesAdded++
}

// subject is Slurm's subject line for notice n of job j: "Slurm
// Job_id=12 Name=x Began, Queued time 00:00:01", "Slurm Array Task
// Job_id=12_3 (15) Name=x Ended, Run time 00:05:01, COMPLETED, ExitCode 0".
func subject(n *Notice, j *Job) string {
	what := MailTypeText(n.Event)
	if strings.HasSuffix(n.Ref, "_*") {
		// An array's notice for all its tasks (its first start).
		return fmt.Sprintf("Slurm Array Summary Job_id=%d_* (%d) Name=%s %s", j.ArrayJobID, j.ArrayJobID, j.Spec.Name, what)
	}
	var when string
	switch n.Event {
	case api.MailBegin:
		if !j.StartTime.IsZero() {
			when = ", Queued time " + SlurmDuration(n.QueuedS)
		}
	case api.MailEnd, api.MailFail:
		if !j.StartTime.IsZero() {
			when = ", Run time " + SlurmDuration(n.RunS)
		}
	case api.MailRequeue, api.MailTimeLimit, api.MailTimeLimit50, api.MailTimeLimit80, api.MailTimeLimit90:
		when = ", Run time " + SlurmDuration(n.RunS)
	}
	var term string
	if n.Event == api.MailEnd || n.Event == api.MailFail {
		term = ", " + string(j.State)
		if j.Signal == 0 {
			term += ", ExitCode " + strconv.Itoa(j.ExitCode)
		}
	}
	if j.IsArrayTask() {
		return fmt.Sprintf("Slurm Array Task Job_id=%d_%d (%d) Name=%s %s%s%s", j.ArrayJobID, j.ArrayTaskID, j.ID, j.Spec.Name, what, when, term)
	}
	return fmt.Sprintf("Slurm Job_id=%d Name=%s %s%s%s", j.ID, j.Spec.Name, what, when, term)
}

// MailTypeText is how Slurm's subject lines (and SLURM_JOB_MAIL_TYPE)
// name an event.
func MailTypeText(event string) string {
	switch event {
	case api.MailBegin:
		return "Began"
	case api.MailEnd:
		return "Ended"
	case api.MailFail:
		return "Failed"
	case api.MailRequeue:
		return "Requeued"
	case api.MailInvalidDepend:
		return "Invalid dependency"
	case api.MailStageOut:
		return "StageOut/Teardown"
	case api.MailTimeLimit:
		return "Reached time limit"
	case api.MailTimeLimit90:
		return "Reached 90% of time limit"
	case api.MailTimeLimit80:
		return "Reached 80% of time limit"
	case api.MailTimeLimit50:
		return "Reached 50% of time limit"
	}
	return "unknown"
}

// SlurmDuration writes seconds as Slurm's secs2time_str does:
// [D-]HH:MM:SS, and INVALID below zero.
func SlurmDuration(secs int64) string {
	if secs < 0 {
		return "INVALID"
	}
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	if d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, s)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
}

// TimeWarningsDue returns, for the leader's timer, the running jobs that
// asked for a time-limit warning they have not had and whose run reached
// its share of the limit at now; and when the next one falls due (zero
// when none will).
func (s *State) TimeWarningsDue(now time.Time) (due []uint64, next time.Time) {
	for _, id := range slices.Sorted(maps.Keys(s.timeMail)) {
		j := s.Jobs[id]
		if j == nil || j.State != api.StateRunning {
			continue
		}
		a := s.LastAlloc(j)
		if a == nil || !a.Active() {
			continue
		}
		ran := now.Sub(a.StartTime) - a.SuspendedFor
		limit := time.Duration(j.Spec.TimeLimit) * time.Second
		for _, w := range timeWarnings {
			if j.Mailed&w.bit != 0 || !wantsMail(j.Spec, w.event) {
				continue
			}
			at := limit * time.Duration(w.pct) / 100
			if ran >= at {
				due = append(due, id)
				break
			}
			if when := now.Add(at - ran); next.IsZero() || when.Before(next) {
				next = when
			}
			break
		}
	}
	return due, next
}

func (s *State) applyMailTimeEvents(c *MailTimeEvents) int {
	made := 0
	for _, id := range c.Jobs {
		j := s.Jobs[id]
		if j == nil || j.State != api.StateRunning {
			continue
		}
		a := s.LastAlloc(j)
		if a == nil || !a.Active() {
			continue
		}
		ran := c.Now.Sub(a.StartTime) - a.SuspendedFor
		limit := time.Duration(j.Spec.TimeLimit) * time.Second
		var c2 *Job
		for _, w := range timeWarnings {
			if j.Mailed&w.bit != 0 || !wantsMail(j.Spec, w.event) || ran < limit*time.Duration(w.pct)/100 {
				continue
			}
			if c2 == nil {
				c2 = s.editJob(id)
			}
			c2.Mailed |= w.bit
			s.addNotice(c2, w.event, max(int64(ran/time.Second), 0), c2.Ref())
			made++
		}
		if c2 != nil {
			s.putJob(c2)
		}
	}
	return made
}

func (s *State) applyClaimNotices(c *ClaimNotices) []uint64 {
	var claimed []uint64
	for _, id := range c.IDs {
		n := s.Notices[id]
		if n == nil {
			continue
		}
		cp := *n
		cp.Attempts++
		cp.ClaimedBy = c.By
		s.Notices[id] = &cp
		claimed = append(claimed, id)
	}
	return claimed
}

func (s *State) applyNoticesDone(c *NoticesDone) int {
	gone := 0
	for _, m := range c.Marks {
		n := s.Notices[m.ID]
		if n == nil {
			continue
		}
		cp := *n
		cp.Done |= m.Sinks & cp.Sinks
		if cp.Done == cp.Sinks {
			delete(s.Notices, m.ID)
			gone++
			continue
		}
		s.Notices[m.ID] = &cp
	}
	return gone
}

// EachNotice calls f with every notice in the outbox, oldest first. It
// only reads the state.
func (s *State) EachNotice(f func(n *Notice) bool) {
	for _, id := range slices.Sorted(maps.Keys(s.Notices)) {
		if !f(s.Notices[id]) {
			return
		}
	}
}

// TakeNoticesAdded returns how many notices the applies since the last
// call recorded, and forgets it: the controller wakes its mailer.
func (s *State) TakeNoticesAdded() int {
	n := s.noticesAdded
	s.noticesAdded = 0
	return n
}

// trackTimeMail keeps the index of running jobs that asked for time-limit
// warnings (the leader's timer reads it).
func (s *State) trackTimeMail(j *Job) {
	if j.State.Active() && wantsTimeWarning(j.Spec) {
		if s.timeMail == nil {
			s.timeMail = make(map[uint64]struct{})
		}
		s.timeMail[j.ID] = struct{}{}
		return
	}
	delete(s.timeMail, j.ID)
}
