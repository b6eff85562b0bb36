package state

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
	"corral/migrate"
)

// State is the replicated cluster state. Only Apply changes it; the
// controller calls it under its write lock. Records (jobs, allocations,
// nodes) are copy-on-write: a change stores a new pointer, so a pointer
// read under the lock stays a consistent value forever.
type State struct {
	Jobs map[uint64]*Job
	// Allocs holds every allocation of the jobs in Jobs, active or ended;
	// an allocation leaves with its job.
	Allocs    map[uint64]*Allocation
	Nodes     map[string]*Node
	NextJobID uint64
	// NextAllocID is the id the next allocation gets; the apply assigns
	// them, in plan order, so every replica assigns the same.
	NextAllocID uint64
	// Migrations holds every live migration of the jobs in Jobs, under
	// way or ended (migrations.go); one leaves with its job.
	// NextMigrationID is the id the next one gets (0 means 1).
	Migrations      map[uint64]*migrate.Migration
	NextMigrationID uint64
	// Requests remembers, per user, the job each client request id
	// created, for RequestIDRetention (requests.go).
	Requests *RequestIDs
	// Members maps controller ids to their HTTP addresses.
	Members map[string]string
	// Pending indexes the jobs in state PENDING.
	Pending map[uint64]struct{}
	// Tasks indexes the records of started array tasks by array id and
	// task index ("12_5").
	Tasks map[api.TaskRef]uint64
	// ArrayTasks lists each array's task records, in the order they
	// started.
	ArrayTasks map[uint64][]uint64
	// Config is the scheduler's runtime configuration.
	Config api.SchedConfig
	// Partitions are the configured partitions, by name (PartitionList
	// adds those that only node daemons name). Seeded is set once the
	// first leader seeded them, with Config's memory per CPU and policy,
	// from its flags (SeedConfig).
	Partitions map[string]*api.Partition
	Seeded     bool
	// QOS, Accounts and Users are the policy objects, by name (users by
	// account and name). The QOS map is replaced whole when a QoS
	// changes, never written into, so a pass's snapshot shares it.
	QOS      map[string]*api.QOS
	Accounts map[string]*api.Account
	Users    map[UserKey]*api.AccountUser
	// Usage is each association's recorded usage, decayed to At.
	Usage map[UserKey]Usage
	// Tokens are the personal and service tokens by id, Roles the users'
	// role grants by user (auth.go).
	Tokens map[string]*TokenRecord
	Roles  map[string]*api.RoleGrant
	// Audit holds the audit records kept, oldest first; auditHeads ends
	// each tenant's chain (audit.go).
	Audit      []AuditRecord
	auditHeads map[string]AuditHead
	// Attestations are the nodes' last TPM attestations, by node.
	Attestations map[string]*Attestation
	// Reservations are the advance reservations, by name
	// (reservations.go). A change stores a new record, never writes into
	// one.
	Reservations map[string]*api.Reservation
	// Index is the Raft index of the last applied entry.
	Index uint64
	// Notices is the outbox of job notifications not yet delivered, by
	// id; NextNoticeID is the last id given, NoticesDropped counts the
	// notices not recorded because the outbox was full (mail.go).
	Notices        map[uint64]*Notice
	NextNoticeID   uint64
	NoticesDropped uint64

	// blobs are the scripts, environments and environment chunks the
	// jobs name, by key (blob.go): replicated (snapshots write them), each
	// counting the records that use it.
	blobs    map[blobKey]*Blob
	interned map[string]string
	// internRefs counts the job records using each interned string, so
	// that a purge forgets those no job uses. finished indexes the jobs in a terminal state by end time, then id;
	// depRefs counts the unfinished jobs whose dependency names each job
	// or array. All are derived from Jobs (retention.go), and so is
	// jobsPeak, the most jobs held since the maps were last sized.
	internRefs map[*byte]int32
	finished   []finishedRef
	depRefs    map[uint64]int
	jobsPeak   int
	// qosActive counts each user's pending and running jobs per QoS
	// (derived from Jobs), for MaxSubmitPerUser.
	qosActive map[qosUser]int
	// pendingIDs and pendingJobs list the pending jobs by id, for the pass
	// (EachPending): a job that leaves the queue leaves a nil slot
	// (pendingGone counts them) until tidyPending compacts both after the
	// entry.
	pendingIDs  []uint64
	pendingJobs []*Job
	pendingGone int
	// nodeNames are the nodes' names, sorted (nodes are never removed);
	// partitionList is what PartitionList returns, built after the
	// entries that change it.
	nodeNames     []string
	partitionList []api.Partition
	// touched lists the nodes whose allocations changed during the entry
	// being applied; the controller wakes their watchers (TakeTouched).
	// It is scratch, never replicated, and so is planOps, the array
	// planByNode orders a plan's operations in.
	touched []string
	planOps []planOp
	// endTrack collects what the applies end, for accounting (ends.go).
	// It is scratch, never replicated.
	endTrack endTracker
	// timeMail indexes the running jobs that asked for time-limit
	// warnings (derived from Jobs). applying is set while an entry
	// applies, with now its leader-stamped time (zero when it has none),
	// and noticesAdded counts the notices recorded since the controller
	// last looked: scratch, never replicated (mail.go).
	timeMail     map[uint64]struct{}
	applying     bool
	now          time.Time
	noticesAdded int
}

// New returns an empty state whose first job and allocation ids are 1.
func New() *State {
	return &State{
		Jobs:         make(map[uint64]*Job),
		Allocs:       make(map[uint64]*Allocation),
		Migrations:   make(map[uint64]*migrate.Migration),
		Nodes:        make(map[string]*Node),
		NextJobID:    1,
		NextAllocID:  1,
		Requests:     &RequestIDs{},
		Members:      make(map[string]string),
		Pending:      make(map[uint64]struct{}),
		Tasks:        make(map[api.TaskRef]uint64),
		ArrayTasks:   make(map[uint64][]uint64),
		Config:       api.DefaultSchedConfig(),
		Partitions:   make(map[string]*api.Partition),
		QOS:          defaultQOS(),
		Accounts:     make(map[string]*api.Account),
		Users:        make(map[UserKey]*api.AccountUser),
		Usage:        make(map[UserKey]Usage),
		Tokens:       make(map[string]*TokenRecord),
		Roles:        make(map[string]*api.RoleGrant),
		auditHeads:   make(map[string]AuditHead),
		Attestations: make(map[string]*Attestation),
		Reservations: make(map[string]*api.Reservation),
		blobs:        make(map[blobKey]*Blob),
		interned:     make(map[string]string),
		internRefs:   make(map[*byte]int32),
		depRefs:      make(map[uint64]int),
		qosActive:    make(map[qosUser]int),
	}
}

// intern returns one shared copy of s. Thousands of jobs from one user share
// their user, directories and often their script; interning keeps a pending
// job's footprint small.
func (s *State) intern(v string) string {
	if v == "" {
		return ""
	}
	if c, ok := s.interned[v]; ok {
		return c
	}
	s.interned[v] = v
	return v
}

func (s *State) internSpec(sp *JobSpec) {
	sp.User = s.intern(sp.User)
	sp.Account = s.intern(sp.Account)
	sp.Partition = s.intern(sp.Partition)
	sp.QOS = s.intern(sp.QOS)
	sp.SubmitDir = s.intern(sp.SubmitDir)
	sp.WorkDir = s.intern(sp.WorkDir)
	sp.Output = s.intern(sp.Output)
	sp.Error = s.intern(sp.Error)
	sp.Name = s.intern(sp.Name)
}

// putJob stores a new version of a job and keeps the pending index, and
// the indexes the purge reads, right. A record without a spec gets an
// empty one (it asked for nothing), so that no reader meets a nil Spec.
func (s *State) putJob(j *Job) {
	if j.Spec == nil {
		j.Spec = &JobSpec{}
	}
	old := s.Jobs[j.ID]
	s.noteJobChange(old, j)
	s.trackRetention(old, j)
	s.countActive(old, j)
	s.trackTimeMail(j)
	s.Jobs[j.ID] = j
	_, was := s.Pending[j.ID]
	switch {
	case j.State == api.StatePending:
		s.Pending[j.ID] = struct{}{}
		s.putPending(j)
	case was:
		delete(s.Pending, j.ID)
		if i, ok := slices.BinarySearch(s.pendingIDs, j.ID); ok {
			s.pendingJobs[i] = nil
			s.pendingGone++
		}
	}
	if j.IsArrayTask() {
		ref := api.TaskRef{Array: j.ArrayJobID, Task: j.ArrayTaskID}
		if _, known := s.Tasks[ref]; !known {
			s.ArrayTasks[j.ArrayJobID] = append(s.ArrayTasks[j.ArrayJobID], j.ID)
		}
		s.Tasks[ref] = j.ID
	}
}

// ResolveTask returns the record holding task ref of an array and whether
// the task is still pending in it; nil when the array or task is unknown.
func (s *State) ResolveTask(ref api.TaskRef) (*Job, bool) {
	if id, ok := s.Tasks[ref]; ok {
		return s.Jobs[id], false
	}
	if j := s.Jobs[ref.Array]; j != nil && j.ArrayPending.Contains(ref.Task) {
		return j, true
	}
	return nil, false
}

// editJob returns a private copy of job id for modification, or nil.
func (s *State) editJob(id uint64) *Job {
	j, ok := s.Jobs[id]
	if !ok {
		return nil
	}
	c := *j
	return &c
}

// editSpec gives job j, a private copy (editJob), a private copy of its
// spec and returns it: the spec is shared with the job's earlier versions,
// which readers may still hold, so it is never changed in place.
func (j *Job) editSpec() *JobSpec {
	c := *j.Spec
	j.Spec = &c
	return &c
}

// editNode returns a private copy of node name for modification, or nil.
func (s *State) editNode(name string) *Node {
	n, ok := s.Nodes[name]
	if !ok {
		return nil
	}
	c := *n
	// Room for one more: most edits add an allocation.
	c.Allocs = append(make([]uint64, 0, len(n.Allocs)+1), n.Allocs...)
	return &c
}

// appendNode returns a private copy of node name, or nil, for an edit that
// only appends to its allocation list: the copy shares the list's array,
// and append writes past the end of the list of every version a reader
// may hold. That holds because every version made this way is a prefix of
// the next one and any other edit copies the list (editNode), so a start
// costs no copy of the node's whole list (append doubles the array when
// full). Nothing may change a node's list in place but append.
func (s *State) appendNode(name string) *Node {
	n, ok := s.Nodes[name]
	if !ok {
		return nil
	}
	c := *n
	return &c
}

// putNode stores a new version of a node whose allocations changed at
// index, so that its daemon's blocking query returns.
func (s *State) putNode(n *Node, index uint64) {
	n.AllocIndex = index
	s.Nodes[n.Name] = n
	s.touched = append(s.touched, n.Name)
}

// eachJob applies change to a private copy of every job in ids and stores
// it; change returns why a job cannot be changed, or "" after changing it.
func (s *State) eachJob(ids []uint64, change func(j *Job) string) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, id := range ids {
		j := s.editJob(id)
		if j == nil {
			res.Errors[id] = fmt.Sprintf("job %d: no such job", id)
			continue
		}
		if why := change(j); why != "" {
			res.Errors[id] = fmt.Sprintf("job %d: %s", id, why)
			continue
		}
		s.putJob(j)
		res.Changed = append(res.Changed, id)
	}
	return res
}

// putPending records pending job j in the ordered list: in place when
// it is there, appended when its id is the largest (a new job), inserted
// otherwise (a requeued one).
func (s *State) putPending(j *Job) {
	n := len(s.pendingIDs)
	if n == 0 || s.pendingIDs[n-1] < j.ID {
		s.pendingIDs, s.pendingJobs = append(s.pendingIDs, j.ID), append(s.pendingJobs, j)
		return
	}
	i, ok := slices.BinarySearch(s.pendingIDs, j.ID)
	if ok {
		if s.pendingJobs[i] == nil {
			s.pendingGone--
		}
		s.pendingJobs[i] = j
		return
	}
	s.pendingIDs, s.pendingJobs = slices.Insert(s.pendingIDs, i, j.ID), slices.Insert(s.pendingJobs, i, j)
}

// EachPending calls f with every pending job, by id: the order the pass
// reads them in, kept as jobs are put rather than sorted for each pass.
// It only reads the state, so it may run under a read lock.
func (s *State) EachPending(f func(j *Job)) {
	for _, j := range s.pendingJobs {
		if j != nil {
			f(j)
		}
	}
}

// tidyPending compacts the pending list after an entry that took jobs out
// of the queue.
func (s *State) tidyPending() {
	if s.pendingGone == 0 {
		return
	}
	ids, jobs := s.pendingIDs[:0], s.pendingJobs[:0]
	for i, j := range s.pendingJobs {
		if j != nil {
			ids, jobs = append(ids, s.pendingIDs[i]), append(jobs, j)
		}
	}
	clear(s.pendingJobs[len(jobs):])
	s.pendingIDs, s.pendingJobs, s.pendingGone = ids, jobs, 0
}

// NodeNames returns the nodes' names in order. The slice is the state's:
// callers must not change it.
func (s *State) NodeNames() []string {
	if len(s.nodeNames) != len(s.Nodes) {
		return sortedKeys(s.Nodes) // nodes put outside an entry (tests)
	}
	return s.nodeNames
}

// tidyNodeNames sorts the node names again after an entry that added a
// node.
func (s *State) tidyNodeNames() {
	if len(s.nodeNames) != len(s.Nodes) {
		s.nodeNames = sortedKeys(s.Nodes)
	}
}
