package state

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"corral/api"
)

// This file reads snapshots of formats 1 and 2, written before jobs had
// allocations: a job record held its one run (node, CPUs, memory, placement,
// start index, suspension), a node record listed job ids. The record types
// here are frozen copies of those layouts; they never change.

// legacyRecord is one line of a format-1 or format-2 snapshot.
type legacyRecord struct {
	Job        *legacyJob        `json:"job,omitempty"`
	Node       *legacyNode       `json:"node,omitempty"`
	Request    *requestRecord    `json:"request,omitempty"`
	RequestGen *requestGenRecord `json:"request_gen,omitempty"`
	Member     *legacyMember     `json:"member,omitempty"`
	Policy     *policyRecord     `json:"policy,omitempty"`
}

// legacyMember is a member record of formats 1 and 2 (the API's member
// type, of which only the id and HTTP address were ever set).
type legacyMember struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}

// legacyJob is a job record of formats 1 and 2.
type legacyJob struct {
	ID           uint64         `json:"id"`
	Spec         JobSpec        `json:"spec"`
	State        api.JobState   `json:"state"`
	Reason       api.Reason     `json:"reason,omitempty"`
	FinalState   api.JobState   `json:"final_state,omitempty"`
	SubmitTime   time.Time      `json:"submit_time"`
	StartTime    time.Time      `json:"start_time,omitempty"`
	EstStart     time.Time      `json:"est_start,omitempty"`
	EndTime      time.Time      `json:"end_time,omitempty"`
	SuspendedFor time.Duration  `json:"suspended_for,omitempty"`
	SuspendTime  time.Time      `json:"suspend_time,omitempty"`
	Node         string         `json:"node,omitempty"`
	CPUs         int            `json:"cpus"`
	MemMB        int64          `json:"mem_mb"`
	OverheadMB   int64          `json:"overhead_mb,omitempty"`
	ExitCode     int            `json:"exit_code"`
	Signal       int            `json:"signal,omitempty"`
	Message      string         `json:"message,omitempty"`
	Priority     int64          `json:"priority"`
	Restarts     int            `json:"restarts,omitempty"`
	StartIndex   uint64         `json:"start_index,omitempty"`
	ArrayJobID   uint64         `json:"array_job_id,omitempty"`
	ArrayTaskID  int            `json:"array_task_id,omitempty"`
	ArrayPending *api.IndexSet  `json:"array_pending,omitempty"`
	Placement    *api.Placement `json:"placement,omitempty"`
	CPUsLent     bool           `json:"cpus_lent,omitempty"`
	PreemptedBy  uint64         `json:"preempted_by,omitempty"`
	CPUSeconds   float64        `json:"cpu_s,omitempty"`
	PeakMemKB    int64          `json:"peak_mem_kb,omitempty"`
}

// legacyNode is a node record of formats 1 and 2: the registration's fields
// inline, then the controller's.
type legacyNode struct {
	Name       string          `json:"name"`
	CPUs       int             `json:"cpus"`
	MemMB      int64           `json:"mem_mb"`
	Partitions []string        `json:"partitions,omitempty"`
	Runner     string          `json:"runner"`
	BootID     string          `json:"boot_id"`
	Version    string          `json:"version,omitempty"`
	Running    []uint64        `json:"running,omitempty"`
	Reports    []api.JobReport `json:"reports,omitempty"`
	Images     []string        `json:"images,omitempty"`
	Inventory  *api.Inventory  `json:"inventory,omitempty"`
	Accel      string          `json:"accel,omitempty"`
	OverheadMB int64           `json:"overhead_mb,omitempty"`
	APIAddr    string          `json:"api_addr,omitempty"`
	Down       bool            `json:"down,omitempty"`
	Drain      bool            `json:"drain,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Registered time.Time       `json:"registered"`
	LastSeen   time.Time       `json:"last_seen"`
	AllocCPUs  int             `json:"alloc_cpus"`
	AllocMemMB int64           `json:"alloc_mem_mb"`
	AllocIndex uint64          `json:"alloc_index"`
	Jobs       []uint64        `json:"jobs,omitempty"`
}

// readLegacyRecords reads the records of a format-1 or format-2 snapshot.
// Each job that ran gets the allocation of its run (active when it still
// holds its node, else ended), numbered in job id order from 1; each node
// lists the active allocations of the jobs it listed.
func (s *State) readLegacyRecords(dec *json.Decoder, format int) error {
	var gen *requestGen
	var jobs []*legacyJob
	var nodes []*legacyNode
	for line := 2; ; line++ {
		var rec legacyRecord
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading snapshot record %d: %w", line, err)
		}
		switch {
		case rec.Job != nil:
			jobs = append(jobs, rec.Job)
			spec := rec.Job.Spec
			s.Jobs[rec.Job.ID] = &Job{ID: rec.Job.ID, Spec: &spec, SubmitTime: rec.Job.SubmitTime}
		case rec.Node != nil:
			nodes = append(nodes, rec.Node)
		case rec.RequestGen != nil:
			gen = s.Requests.newGen(rec.RequestGen.First, rec.RequestGen.Last)
		case rec.Request != nil && format == 1:
			gen = s.readLegacyRequest(gen, rec.Request)
		case rec.Request != nil:
			if gen == nil {
				return fmt.Errorf("reading snapshot: request id %q of user %q comes before any request generation", rec.Request.Key, rec.Request.User)
			}
			gen.put(rec.Request.User, rec.Request.Key, rec.Request.Job)
		case rec.Member != nil:
			s.Members[rec.Member.ID] = rec.Member.HTTPAddr
		case rec.Policy != nil:
			restorePolicy(s, rec.Policy)
		default:
			return fmt.Errorf("reading snapshot: record %d is of no kind this build knows (job, node, request, request_gen, member, policy)", line)
		}
	}
	// The job map was filled for readLegacyRequest; the records are made
	// now, in id order, so the allocation ids do not depend on the file's
	// order.
	clear(s.Jobs)
	slices.SortFunc(jobs, func(a, b *legacyJob) int { return cmp.Compare(a.ID, b.ID) })
	runs := map[uint64]uint64{} // job id → its active allocation
	arrays := map[uint64]bool{}
	for _, lj := range jobs {
		if lj.ArrayJobID == lj.ID {
			arrays[lj.ID] = true
		}
	}
	for _, lj := range jobs {
		lj.Spec.Dependency = ResolveTargets(lj.Spec.Dependency, func(id uint64) bool { return arrays[id] })
		j, a := s.upgradeJob(lj)
		if a != nil && a.Active() {
			runs[j.ID] = a.ID
		}
		// Formats 1 and 2 held scripts and environments inline.
		if err := s.resolveBlobs(j.Spec, nil); err != nil {
			return fmt.Errorf("reading snapshot: job %d: %w", j.ID, err)
		}
		s.internSpec(j.Spec)
		s.putJob(j)
	}
	for _, ln := range nodes {
		s.Nodes[ln.Name] = s.upgradeNode(ln, runs)
	}
	return nil
}

// upgradeJob turns a format-1/2 job record into a job and, when it ran, the
// allocation of that run.
func (s *State) upgradeJob(lj *legacyJob) (*Job, *Allocation) {
	spec := lj.Spec
	j := &Job{
		ID: lj.ID, Spec: &spec, State: lj.State, Reason: lj.Reason, SubmitTime: lj.SubmitTime,
		StartTime: lj.StartTime, EstStart: lj.EstStart, EndTime: lj.EndTime, ExitCode: lj.ExitCode,
		Signal: lj.Signal, Message: lj.Message, Priority: lj.Priority, Restarts: lj.Restarts,
		ArrayJobID: lj.ArrayJobID, ArrayTaskID: lj.ArrayTaskID, ArrayPending: lj.ArrayPending,
	}
	if lj.Node == "" || lj.StartIndex == 0 {
		return j, nil
	}
	a := &Allocation{
		ID: s.NextAllocID, Job: lj.ID, Node: s.intern(lj.Node), CPUs: lj.CPUs, MemMB: lj.MemMB,
		OverheadMB: lj.OverheadMB, Placement: lj.Placement, Desired: AllocRun, Status: AllocActive,
		StartIndex: lj.StartIndex, StartTime: lj.StartTime, SuspendedFor: lj.SuspendedFor,
		SuspendTime: lj.SuspendTime, CPUsLent: lj.CPUsLent, PreemptedBy: lj.PreemptedBy,
		CPUSeconds: lj.CPUSeconds, PeakMemKB: lj.PeakMemKB,
	}
	switch lj.State {
	case api.StateSuspended:
		a.Desired = AllocSuspend
	case api.StateCompleting:
		a.Desired, a.StopAs = AllocStop, lj.FinalState
	case api.StateRunning, api.StateMigrating:
	default:
		a.Status, a.EndState, a.EndTime = AllocEnded, lj.State, lj.EndTime
	}
	s.NextAllocID++
	s.Allocs[a.ID] = a
	j.Allocs = []uint64{a.ID}
	return j, a
}

// upgradeNode turns a format-1/2 node record into a node whose allocations
// are those of the jobs it listed.
func (s *State) upgradeNode(ln *legacyNode, runs map[uint64]uint64) *Node {
	n := &Node{
		Name: s.intern(ln.Name), CPUs: ln.CPUs, MemMB: ln.MemMB, Partitions: ln.Partitions, Runner: ln.Runner,
		BootID: ln.BootID, Version: ln.Version, Images: ln.Images, Inventory: ln.Inventory, Accel: ln.Accel,
		OverheadMB: ln.OverheadMB, APIAddr: ln.APIAddr, Down: ln.Down, Drain: ln.Drain, Reason: ln.Reason, Registered: ln.Registered,
		LastSeen: ln.LastSeen, AllocCPUs: ln.AllocCPUs, AllocMemMB: ln.AllocMemMB, AllocIndex: ln.AllocIndex,
	}
	for _, id := range ln.Jobs {
		if a, ok := runs[id]; ok && s.Allocs[a].Node == n.Name {
			n.Allocs = append(n.Allocs, a)
		}
	}
	return n
}

// readLegacyRequest puts a format-1 request record, which has neither user
// nor time, in the one generation that holds them all (gen, made by the
// first such record). The job the id created says both: its user, and its
// submit time, which is the leader-stamped time of the entry that made the
// id. The generation spans the oldest to the newest of those times, so no
// id is forgotten earlier than its own time allows. Format-1 snapshots never
// lost a job, so the job is there; if not, the id is kept for the user ""
// and the generation's times are those of the others.
func (s *State) readLegacyRequest(gen *requestGen, r *requestRecord) *requestGen {
	user, made := "", time.Time{}
	if j := s.Jobs[r.Job]; j != nil {
		user, made = j.Spec.User, j.SubmitTime
	}
	if gen == nil {
		gen = s.Requests.newGen(made, made)
	}
	if !made.IsZero() {
		if gen.first.IsZero() || made.Before(gen.first) {
			gen.first = made
		}
		if made.After(gen.last) {
			gen.last = made
		}
	}
	gen.put(user, r.Key, r.Job)
	return gen
}
