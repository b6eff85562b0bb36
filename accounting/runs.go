package accounting

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"go.etcd.io/bbolt"

	"corral/api"
	"corral/ctld/state"
)

// The run index serves the reports that spread usage over time (cluster
// utilization, the usage series, the wait-time distribution): one entry
// per record, in the records' key order (end|job|alloc), holding what
// those reports read of it, so that a window is one range scan that never
// decodes a record's JSON. A run that started before the window and ends
// after it is found because the scan reaches past the window's end by the
// longest span stored (meta "span": the longest time from a record's
// eligible time or start to its end).

var (
	bRun  = []byte("run")
	mSpan = []byte("span")
)

// Run is what the time-spreading reports know of one record, or of a run
// still going or a job still waiting (the controller adds those from its
// state, with End its now).
type Run struct {
	Job           uint64
	Account, User string
	// Eligible is when the job could first have started; Start is zero
	// for a job that ended without running.
	Eligible, Start, End time.Time
	// CPUs and GPUs are what the run held on its node, or, for a job
	// that never ran, what it asked for.
	CPUs, GPUs int
	// CPUSeconds, GPUSeconds and Billing are the run's totals
	// (suspensions left out).
	CPUSeconds, GPUSeconds, Billing float64
	// First is set on the job's first run (or its end without one): its
	// wait from Eligible counts as the cluster's reserved time and in the
	// wait-time distribution. A requeued run's wait does not.
	First bool
}

// Waited returns the run's wait: from eligible to its start (or to its
// end, for a job that never ran), and whether it has one.
func (r *Run) Waited() (from, to time.Time, ok bool) {
	if !r.First || r.Eligible.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	to = r.Start
	if to.IsZero() {
		to = r.End
	}
	return r.Eligible, to, to.After(r.Eligible)
}

// runFromRecord is the run index's view of r.
func runFromRecord(r *Record) Run {
	run := Run{Job: r.JobID, Account: r.Account, User: r.User, Eligible: r.Eligible, Start: r.Start, End: r.End,
		CPUs: r.AllocTRES.CPU, GPUs: r.AllocTRES.GPUCount(),
		CPUSeconds: r.CPUSeconds, GPUSeconds: r.GPUSeconds, Billing: r.Billing, First: r.Restarts == 0}
	if r.Start.IsZero() {
		run.CPUs, run.GPUs = r.ReqTRES.CPU, r.ReqTRES.GPUCount()
	}
	return run
}

// runValue lays a run out: start, eligible (time keys), CPU-seconds,
// GPU-seconds, billing (float64), CPUs, GPUs (uint32), flags (1: first),
// then account 0x00 user.
const runFixed = 8*5 + 4*2 + 1

func runValue(r *Run) []byte {
	b := make([]byte, runFixed, runFixed+len(r.Account)+1+len(r.User))
	binary.BigEndian.PutUint64(b, timeKey(r.Start))
	binary.BigEndian.PutUint64(b[8:], timeKey(r.Eligible))
	binary.BigEndian.PutUint64(b[16:], math.Float64bits(r.CPUSeconds))
	binary.BigEndian.PutUint64(b[24:], math.Float64bits(r.GPUSeconds))
	binary.BigEndian.PutUint64(b[32:], math.Float64bits(r.Billing))
	binary.BigEndian.PutUint32(b[40:], uint32(max(r.CPUs, 0)))
	binary.BigEndian.PutUint32(b[44:], uint32(max(r.GPUs, 0)))
	if r.First {
		b[48] = 1
	}
	b = append(b, r.Account...)
	b = append(b, 0)
	return append(b, r.User...)
}

// runFrom reads run entry k, v into r; names interns account and user
// names so that a scan of a million runs allocates a few hundred strings.
func runFrom(k, v []byte, r *Run, names map[string]string) error {
	if len(k) != 24 || len(v) < runFixed+1 {
		return fmt.Errorf("the run index holds a malformed entry %x; the store is damaged, rebuild it from a peer", k)
	}
	i := bytes.IndexByte(v[runFixed:], 0)
	if i < 0 {
		return fmt.Errorf("the run index holds a malformed entry %x; the store is damaged, rebuild it from a peer", k)
	}
	intern := func(b []byte) string {
		if s, ok := names[string(b)]; ok {
			return s
		}
		s := string(b)
		names[s] = s
		return s
	}
	f := func(n int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(v[n:])) }
	*r = Run{
		Job: binary.BigEndian.Uint64(k[8:]), End: keyTime(binary.BigEndian.Uint64(k)),
		Start: keyTime(binary.BigEndian.Uint64(v)), Eligible: keyTime(binary.BigEndian.Uint64(v[8:])),
		CPUSeconds: f(16), GPUSeconds: f(24), Billing: f(32),
		CPUs: int(binary.BigEndian.Uint32(v[40:])), GPUs: int(binary.BigEndian.Uint32(v[44:])), First: v[48]&1 != 0,
		Account: intern(v[runFixed : runFixed+i]), User: intern(v[runFixed+i+1:]),
	}
	return nil
}

// keyTime inverts timeKey (to the nanosecond; 0 is the zero time).
func keyTime(k uint64) time.Time {
	if k == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(k^1<<63)).UTC()
}

// span is how long before its end a record's run or wait began.
func span(r *Record) int64 {
	from := r.Start
	if !r.Eligible.IsZero() && (from.IsZero() || r.Eligible.Before(from)) {
		from = r.Eligible
	}
	if from.IsZero() {
		return 0
	}
	return int64(r.End.Sub(from))
}

// putRun indexes record r, stored at pk.
func (t *writeTx) putRun(pk []byte, r *Record) error {
	run := runFromRecord(r)
	if err := t.run.Put(pk, runValue(&run)); err != nil {
		return err
	}
	t.span = max(t.span, span(r))
	return nil
}

// EachRun calls f with every run whose time or wait overlaps [start, end)
// (zero start: from the first; zero end: to the last), in end order. The
// Run passed is reused between calls.
func (s *Store) EachRun(start, end time.Time, f func(*Run) error) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		var longest time.Duration
		if v := tx.Bucket(bMeta).Get(mSpan); len(v) == 8 {
			longest = time.Duration(binary.BigEndian.Uint64(v))
		}
		hi := uint64(math.MaxUint64)
		if !end.IsZero() {
			hi = timeKey(end.Add(longest))
		}
		names := map[string]string{}
		var r Run
		c := tx.Bucket(bRun).Cursor()
		for k, v := c.Seek(be64(timeKey(start))); k != nil && binary.BigEndian.Uint64(k) < hi; k, v = c.Next() {
			if err := runFrom(k, v, &r, names); err != nil {
				return err
			}
			if !end.IsZero() && !r.began().Before(end) {
				continue
			}
			if err := f(&r); err != nil {
				return err
			}
		}
		return nil
	})
}

// began is when the run's wait or run began.
func (r *Run) began() time.Time {
	if from, _, ok := r.Waited(); ok {
		return from
	}
	if !r.Start.IsZero() {
		return r.Start
	}
	return r.End
}

// buildRunIndex fills the run index from the records of a store written
// before it existed: once, when the store is opened.
func buildRunIndex(tx *bbolt.Tx) error {
	t := newWriteTx(tx)
	c := tx.Bucket(bRec).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var r Record
		if err := unmarshalRecord(k, v, &r); err != nil {
			return err
		}
		if err := t.putRun(bytes.Clone(k), &r); err != nil {
			return err
		}
	}
	return t.finish()
}

// LiveRuns calls f with what the state holds that the store has no record
// of yet, as runs that end at now: every active allocation (its time so
// far, suspensions left out), and every pending job that waits for
// resources or its turn (not one held, waiting for a dependency or for
// its begin time). The Run passed is reused between calls.
func LiveRuns(s *state.State, now time.Time, f func(*Run)) {
	var r Run
	for _, a := range s.Allocs {
		j := s.Jobs[a.Job]
		if !a.Active() || j == nil || a.StartTime.After(now) {
			continue
		}
		t := allocTRES(j, a)
		secs := max(0, a.Elapsed(now).Seconds())
		r = Run{Job: j.ID, Account: j.Spec.Account, User: j.Spec.User, Eligible: eligibleOf(j), Start: a.StartTime, End: now,
			CPUs: t.CPU, GPUs: t.GPUCount(), CPUSeconds: secs * float64(t.CPU), GPUSeconds: secs * float64(t.GPUCount()),
			First: j.Restarts == 0 && len(j.Allocs) > 0 && firstRunAlloc(s, j, a)}
		r.Billing = secs * (float64(t.CPU)*s.Config.BillingCPU + float64(t.MemMB)/1024*s.Config.BillingMem + float64(t.GPUCount())*s.Config.BillingGPU)
		f(&r)
	}
	for _, j := range s.Jobs {
		if j.State != api.StatePending || !waitsForTurn(j.Reason) {
			continue
		}
		t := reqTRES(s, j.Spec)
		r = Run{Job: j.ID, Account: j.Spec.Account, User: j.Spec.User, Eligible: eligibleOf(j), End: now,
			CPUs: t.CPU, GPUs: t.GPUCount(), First: j.Restarts == 0}
		if r.Eligible.Before(now) {
			f(&r)
		}
	}
}

// firstRunAlloc reports whether a is of job j's first run: allocations of
// one run start together.
func firstRunAlloc(s *state.State, j *state.Job, a *state.Allocation) bool {
	first := s.Allocs[j.Allocs[0]]
	return first != nil && first.StartTime.Equal(a.StartTime)
}

// eligibleOf is when job j could first start: its submission, or its
// --begin time when later.
func eligibleOf(j *state.Job) time.Time {
	if j.Spec.Begin.After(j.SubmitTime) {
		return j.Spec.Begin
	}
	return j.SubmitTime
}

// waitsForTurn reports whether a pending job with reason r could run were
// there room: it is not held, and waits for no dependency or begin time.
func waitsForTurn(r api.Reason) bool {
	switch r {
	case api.ReasonJobHeldUser, api.ReasonJobHeldAdmin, api.ReasonDependency, api.ReasonDependencyNeverSatisfied, api.ReasonBeginTime:
		return false
	}
	return true
}
