package state

import (
	"maps"
	"math"
	"slices"
	"time"
	"unsafe"

	"corral/api"
)

// This file keeps the replicated state bounded: finished jobs leave it
// MinJobAge after they end (Slurm's purge of old job records) and request
// ids after RequestIDRetention. The leader proposes a PurgeJobs entry that
// carries only its clock; the apply decides what goes, from the state alone,
// so every replica removes the same jobs.

// PurgeJobs removes finished jobs whose end is older than MinJobAge at Now,
// at most Max of them (the rest go with the next entry), and forgets the
// request ids older than RequestIDRetention.
type PurgeJobs struct {
	Now time.Time `json:"now"`
	Max int       `json:"max,omitempty"`
}

// PurgeResult says what one PurgeJobs entry removed.
type PurgeResult struct {
	// Jobs and Requests count the job records and request ids removed.
	Jobs     int
	Requests int
	// Held counts the finished jobs past MinJobAge that were kept: a job
	// that has not finished depends on them, or they head an array whose
	// other records remain.
	Held int
	// More is set when Max stopped the purge before every due job went.
	More bool
	// Shrunk is set when the state lost most of its jobs (its maps were
	// resized) or forgot a large generation of request ids: then the
	// freed memory is worth returning to the operating system at once.
	Shrunk bool
}

// DefaultPurgeMax bounds the jobs one entry removes, so that applying it
// holds the state's lock for a few milliseconds only.
const DefaultPurgeMax = 5000

// finishedRef is a finished job in the index ordered by end time.
type finishedRef struct {
	end int64 // endKey of the job's EndTime
	id  uint64
}

func (a finishedRef) compare(b finishedRef) int {
	switch {
	case a.end < b.end:
		return -1
	case a.end > b.end:
		return 1
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// Unix seconds of 1750-01-01 and 2150-01-01 UTC: inside endKey's bounds
// by decades, so a time between them needs no calendar.
const (
	unix1750 = -6_942_499_200
	unix2150 = 5_680_281_600
)

// endKey orders end times; a finished job without one (which the apply
// never makes) sorts first, as ended long ago.
func endKey(t time.Time) int64 {
	if sec := t.Unix(); sec > unix1750 && sec < unix2150 {
		return t.UnixNano() // the usual case, far from both bounds in any zone
	}
	if t.IsZero() || t.Year() < 1700 {
		return math.MinInt64
	}
	if t.Year() > 2200 {
		return math.MaxInt64
	}
	return t.UnixNano()
}

// trackRetention keeps the finished-job index, the dependency counts and
// the counts of interned strings right as job old (nil for a new record) is
// replaced by j.
func (s *State) trackRetention(old, j *Job) {
	switch {
	case old == nil:
		s.retainStrings(j.Spec)
	case old.Spec != j.Spec && !sameSpecStrings(old.Spec, j.Spec):
		s.retainStrings(j.Spec)
		s.releaseStrings(old.Spec)
	}
	done := j.State.Terminal()
	if done && (old == nil || !old.State.Terminal() || !old.EndTime.Equal(j.EndTime)) {
		s.addFinished(finishedRef{end: endKey(j.EndTime), id: j.ID})
		s.noteJobEnd(j.ID)
	}
	var before, after *Dependency
	if old != nil && !old.State.Terminal() {
		before = old.Spec.Dependency
	}
	if !done {
		after = j.Spec.Dependency
	}
	if before != after {
		s.countDeps(before, -1)
		s.countDeps(after, 1)
	}
}

// addFinished puts ref in the index, which stays sorted: jobs end in log
// order, so the usual case is an append.
func (s *State) addFinished(ref finishedRef) {
	n := len(s.finished)
	if n == 0 || s.finished[n-1].compare(ref) < 0 {
		s.finished = append(s.finished, ref)
		return
	}
	i, found := slices.BinarySearchFunc(s.finished, ref, finishedRef.compare)
	if !found {
		s.finished = slices.Insert(s.finished, i, ref)
	}
}

// countDeps adds delta to the count of unfinished jobs that name each job
// or array in d. A job named as 12_5 counts for all of array 12.
func (s *State) countDeps(d *Dependency, delta int) {
	if d == nil {
		return
	}
	for _, cl := range d.Clauses {
		for _, t := range cl.Targets {
			if n := s.depRefs[t.Job] + delta; n > 0 {
				s.depRefs[t.Job] = n
			} else {
				delete(s.depRefs, t.Job)
			}
		}
	}
}

// holdsBack says why finished job j must stay although it is due, or "".
// A job that an unfinished job depends on stays until that one finishes:
// its outcome decides whether the dependant may run (Slurm lifts such a
// dependency when the record goes, so afterok on a FAILED job would run).
// An array's first record stays while any other record of the array
// remains, so `corral queue -j 12` and dependencies on array 12 keep
// finding the array.
func (s *State) holdsBack(j *Job) string {
	switch {
	case s.depRefs[j.ID] > 0 || j.ArrayJobID != 0 && s.depRefs[j.ArrayJobID] > 0:
		return "an unfinished job depends on it"
	case j.ID == j.ArrayJobID && slices.ContainsFunc(s.ArrayTasks[j.ID], func(id uint64) bool { return id != j.ID }):
		return "other records of its array remain"
	}
	if len(s.activeAllocs(j)) > 0 {
		return "its node still holds it"
	}
	return ""
}

func (s *State) applyPurge(c *PurgeJobs) *PurgeResult {
	res := &PurgeResult{Requests: s.Requests.expire(c.Now, s.Config.RequestIDRetention)}
	res.Shrunk = res.Requests >= shrinkRequests
	if s.Config.MinJobAge <= 0 || len(s.finished) == 0 {
		return res
	}
	limit := c.Max
	if limit <= 0 {
		limit = DefaultPurgeMax
	}
	// Jobs leave only here, so their count now is the most since the
	// last purge.
	s.jobsPeak = max(s.jobsPeak, len(s.Jobs))
	s.purgeFinished(endKey(c.Now.Add(-retentionDuration(s.Config.MinJobAge))), limit, res)
	res.Shrunk = s.shrinkMaps() || res.Shrunk
	return res
}

// purgeFinished removes up to limit finished jobs that ended before cutoff,
// oldest first, except those holdsBack keeps.
func (s *State) purgeFinished(cutoff int64, limit int, res *PurgeResult) {
	p := purge{arrays: map[uint64]map[uint64]bool{}}
	// Refs that stay are compacted to the front of the index in place.
	kept, i := 0, 0
	for ; i < len(s.finished) && s.finished[i].end < cutoff; i++ {
		if res.Jobs == limit {
			res.More = true
			break
		}
		ref := s.finished[i]
		j := s.Jobs[ref.id]
		if j == nil || !j.State.Terminal() || endKey(j.EndTime) != ref.end {
			continue // the job went or changed since: the ref is stale
		}
		if s.holdsBack(j) != "" {
			s.finished[kept] = ref
			kept++
			continue
		}
		s.removeJob(j, &p)
		res.Jobs++
	}
	s.dropArrayRecords(&p)
	res.Held = kept
	// An array's first record waited for records removed after it.
	for k := 0; k < kept && res.Jobs < limit; k++ {
		if j := s.Jobs[s.finished[k].id]; j != nil && j.ID == j.ArrayJobID && s.holdsBack(j) == "" {
			s.removeJob(j, &p)
			res.Jobs++
			res.Held--
			s.finished[k].id = 0 // removed below
		}
	}
	s.dropArrayRecords(&p)
	n := copy(s.finished[kept:], s.finished[i:])
	s.finished = slices.DeleteFunc(s.finished[:kept+n], func(r finishedRef) bool { return r.id == 0 })
	if c := cap(s.finished); c > 1024 && len(s.finished) < c/4 {
		s.finished = slices.Clone(s.finished)
	}
}

// shrinkMin is the fewest jobs at the peak for which shrinkMaps copies
// the maps at all; shrinkRequests the fewest request ids forgotten at once
// that make a purge worth returning memory for.
const (
	shrinkMin      = 4096
	shrinkRequests = 50_000
)

// shrinkMaps copies the maps that grow with the jobs into maps of their
// current size once fewer than a quarter of the jobs held at the peak
// remain: a Go map keeps its buckets after its entries are deleted, so
// without this the memory of 200,000 purged jobs' map entries would stay.
// Copying only after three quarters went costs a constant per purged job.
// It reports whether it copied.
func (s *State) shrinkMaps() bool {
	if s.jobsPeak < shrinkMin || len(s.Jobs) >= s.jobsPeak/4 {
		return false
	}
	s.Jobs = resized(s.Jobs)
	s.Allocs = resized(s.Allocs)
	s.Pending = resized(s.Pending)
	s.Tasks = resized(s.Tasks)
	s.ArrayTasks = resized(s.ArrayTasks)
	s.depRefs = resized(s.depRefs)
	s.interned = resized(s.interned)
	s.internRefs = resized(s.internRefs)
	s.blobs = resized(s.blobs)
	s.jobsPeak = len(s.Jobs)
	return true
}

// resized returns a copy of m sized for its entries.
func resized[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// purge collects, while one entry applies, the array task records removed
// by array, so that each array's list is rewritten once.
type purge struct {
	arrays map[uint64]map[uint64]bool
}

// removeJob deletes a finished job and every index that names it.
func (s *State) removeJob(j *Job, p *purge) {
	s.notePurge(j)
	delete(s.Jobs, j.ID)
	delete(s.Pending, j.ID)
	for _, id := range j.Allocs {
		delete(s.Allocs, id)
	}
	for _, id := range j.Migrations {
		delete(s.Migrations, id)
	}
	s.releaseStrings(j.Spec)
	if j.ArrayJobID == 0 {
		return
	}
	if j.IsArrayTask() {
		ref := api.TaskRef{Array: j.ArrayJobID, Task: j.ArrayTaskID}
		if s.Tasks[ref] == j.ID {
			delete(s.Tasks, ref)
		}
	}
	ids := p.arrays[j.ArrayJobID]
	if ids == nil {
		ids = map[uint64]bool{}
		p.arrays[j.ArrayJobID] = ids
	}
	ids[j.ID] = true
}

// dropArrayRecords takes the removed records out of their arrays' lists.
func (s *State) dropArrayRecords(p *purge) {
	for _, arr := range slices.Sorted(maps.Keys(p.arrays)) {
		gone := p.arrays[arr]
		rest := slices.DeleteFunc(s.ArrayTasks[arr], func(id uint64) bool { return gone[id] })
		if len(rest) == 0 {
			delete(s.ArrayTasks, arr)
		} else {
			s.ArrayTasks[arr] = slices.Clip(rest)
		}
		delete(p.arrays, arr)
	}
}

// Due is what the leader reads to decide whether a PurgeJobs entry is
// worth proposing: how many finished jobs are past MinJobAge (some may be
// held back) and whether request ids are due.
type Due struct {
	Jobs     int
	Requests bool
}

// PurgeDue says what a PurgeJobs entry at now would find due.
func (s *State) PurgeDue(now time.Time) Due {
	d := Due{Requests: s.Requests.due(now, s.Config.RequestIDRetention)}
	if s.Config.MinJobAge > 0 {
		cutoff := endKey(now.Add(-retentionDuration(s.Config.MinJobAge)))
		d.Jobs, _ = slices.BinarySearchFunc(s.finished, finishedRef{end: cutoff}, finishedRef.compare)
	}
	return d
}

// specStrings lists the strings of a job's request that the state interns
// and counts.
func specStrings(sp *JobSpec) [9]string {
	return [...]string{sp.User, sp.Account, sp.Partition, sp.QOS, sp.SubmitDir, sp.WorkDir, sp.Output, sp.Error, sp.Name}
}

// sameSpecStrings reports whether two versions of a job hold the very same
// interned strings and environment (the usual case: versions are copies).
// It runs on every change of a job, so it compares the fields one by one.
func sameSpecStrings(a, b *JobSpec) bool {
	return same(a.User, b.User) && same(a.Account, b.Account) && same(a.Partition, b.Partition) &&
		same(a.QOS, b.QOS) && a.Script == b.Script && same(a.SubmitDir, b.SubmitDir) &&
		same(a.WorkDir, b.WorkDir) && same(a.Output, b.Output) && same(a.Error, b.Error) &&
		same(a.Name, b.Name) && a.Env == b.Env
}

// same reports whether a and b are the same bytes in memory.
func same(a, b string) bool { return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b) }

// retainStrings counts one more job record using the interned strings,
// script and environment of sp. The counts are keyed by the strings' bytes,
// which interning makes shared: counting costs a pointer hash per field,
// whatever a string's length.
func (s *State) retainStrings(sp *JobSpec) {
	for _, v := range specStrings(sp) {
		if v != "" {
			s.internRefs[unsafe.StringData(v)]++
		}
	}
	s.retainBlob(sp.Script)
	s.retainBlob(sp.Env)
}

// releaseStrings counts one job record less using the strings, script and
// environment of sp and forgets those no record uses any more, so the
// tables hold only what the jobs in the state share.
func (s *State) releaseStrings(sp *JobSpec) {
	for _, v := range specStrings(sp) {
		if v == "" {
			continue
		}
		p := unsafe.StringData(v)
		if n := s.internRefs[p] - 1; n > 0 {
			s.internRefs[p] = n
			continue
		}
		delete(s.internRefs, p)
		if c, ok := s.interned[v]; ok && unsafe.StringData(c) == p {
			delete(s.interned, v)
		}
	}
	s.releaseBlob(sp.Script)
	s.releaseBlob(sp.Env)
}

// FinishedIndexed returns how many entries the index of finished jobs
// holds (stale ones included): none once every job was purged.
func (s *State) FinishedIndexed() int { return len(s.finished) }
