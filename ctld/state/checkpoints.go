package state

import (
	"fmt"
	"slices"
	"time"

	"corral/api"
)

// Checkpoints (corral checkpoint, corral restore; docs/migration.md): a
// running job's VM is saved to a file on its node (or a shared directory),
// its allocation released, and the job SUSPENDED with reason Checkpointed,
// holding nothing, counted against no running limit; a restore puts it
// back in the queue, and the pass starts it, on a node that can read the
// file, from the checkpoint instead of from its script.
//
//	running ─CheckpointJobs─► saving ─node: saved─► SUSPENDED (saved; its run ends, Leaving)
//	                            └─node: failed─► running on (the node continued it)
//	SUSPENDED (saved) ─RestoreJobs─► PENDING (restoring) ─pass─► a start, from the file ─node: restored─► RUNNING
//
// The file stays, listed on the node that wrote it (Node.Checkpoints, in
// its desired state), until the job ends or is requeued; then the node
// removes it.

// Phases of a checkpoint.
const (
	CheckpointSaving    = "saving"
	CheckpointSaved     = "saved"
	CheckpointRestoring = "restoring"
	CheckpointRestored  = "restored"
	CheckpointFailed    = "failed"
)

// Checkpoint is a job's checkpoint.
type Checkpoint struct {
	Phase string `json:"phase"`
	// Node holds the file, which saved allocation Alloc; Dir is the
	// shared checkpoint directory it lies in ("" when it is the node's
	// own), Accel and Placement what it was saved from (a restore
	// elsewhere needs the same accelerator and kind of guest memory).
	Node      string         `json:"node"`
	Alloc     uint64         `json:"alloc"`
	Dir       string         `json:"dir,omitempty"`
	Accel     string         `json:"accel,omitempty"`
	Placement *api.Placement `json:"placement,omitempty"`
	// The file, once saved, and how long the job had run then.
	Path   string  `json:"path,omitempty"`
	Size   int64   `json:"size,omitempty"`
	SHA256 string  `json:"sha256,omitempty"`
	RanS   float64 `json:"ran_s,omitempty"`
	// Want is the node a restore asked for ("" any that can).
	Want string `json:"want,omitempty"`
	// Preempted is set on a checkpoint a preemption asked for (QoS
	// preempt mode checkpoint): once saved, the job goes back to the
	// queue at once, to be restored where and when room appears.
	Preempted   bool      `json:"preempted,omitempty"`
	By          string    `json:"by,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
	SavedAt     time.Time `json:"saved_at,omitzero"`
	SaveMS      int64     `json:"save_ms,omitempty"`
	RestoredAt  time.Time `json:"restored_at,omitzero"`
	RestoreMS   int64     `json:"restore_ms,omitempty"`
	RestoredOn  string    `json:"restored_on,omitempty"`
	Error       string    `json:"error,omitempty"`
}

// CheckpointJobs asks for checkpoints of running jobs.
type CheckpointJobs struct {
	Now time.Time `json:"now"`
	IDs []uint64  `json:"ids"`
	By  string    `json:"by,omitempty"`
}

// CheckpointReports records what a node said of checkpoints.
type CheckpointReports struct {
	Now     time.Time              `json:"now"`
	Node    string                 `json:"node"`
	Reports []api.CheckpointReport `json:"reports"`
}

// RestoreJobs puts checkpointed jobs back in the queue, to start from
// their checkpoints (on node To when set).
type RestoreJobs struct {
	Now time.Time `json:"now"`
	IDs []uint64  `json:"ids"`
	To  string    `json:"to,omitempty"`
	By  string    `json:"by,omitempty"`
}

// Checkpointed reports whether job j is parked in a checkpoint.
func Checkpointed(j *Job) bool {
	return j.Checkpoint != nil && j.Checkpoint.Phase == CheckpointSaved && j.State == api.StateSuspended
}

// Restoring reports whether job j waits, or starts, to run from its
// checkpoint.
func Restoring(j *Job) bool { return j.Checkpoint != nil && j.Checkpoint.Phase == CheckpointRestoring }

func (s *State) applyCheckpoint(c *CheckpointJobs, index uint64) *IDsResult {
	return s.eachJob(c.IDs, func(j *Job) string { return s.beginCheckpoint(j, c.By, false, c.Now, index) })
}

// beginCheckpoint asks job j's node (j a private copy) to save it, for by
// (preempted: by a preemption), or says why it cannot.
func (s *State) beginCheckpoint(j *Job, by string, preempted bool, now time.Time, index uint64) string {
	if why := s.CheckMigrate(j, ""); why != "" {
		return "cannot be checkpointed: " + why
	}
	if j.Checkpoint != nil && j.Checkpoint.Phase == CheckpointSaving {
		return "is being checkpointed already"
	}
	s.dropCheckpoint(j, index) // an older checkpoint's file goes
	a := s.runningAllocs(j)[0]
	n := s.Nodes[a.Node]
	j.Checkpoint = &Checkpoint{Phase: CheckpointSaving, Node: a.Node, Alloc: a.ID, Dir: n.CheckpointDir, Accel: n.Accel,
		Placement: a.Placement, By: by, Preempted: preempted, RequestedAt: now}
	s.putNode(s.editNode(a.Node), index) // its desired state asks for the save
	return ""
}

func (s *State) applyCheckpointReports(c *CheckpointReports, index uint64) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, r := range c.Reports {
		j := s.editJob(r.Job)
		why := "no such job"
		if j != nil {
			why = s.checkpointReport(j, c.Node, r, c.Now, index)
		}
		if why != "" {
			res.Errors[r.Job] = why
			continue
		}
		s.putJob(j)
		res.Changed = append(res.Changed, r.Job)
	}
	return res
}

// checkpointReport applies one report to job j (a private copy), or says
// why it does not apply.
func (s *State) checkpointReport(j *Job, node string, r api.CheckpointReport, now time.Time, index uint64) string {
	ck := j.Checkpoint
	if ck == nil {
		return "stale report"
	}
	c := *ck
	switch {
	case r.Event == CheckpointSaved && c.Phase == CheckpointSaving && node == c.Node && r.Alloc == c.Alloc:
		a := s.Allocs[c.Alloc]
		if a == nil || !a.Active() {
			return "stale report"
		}
		c.Phase, c.Path, c.Size, c.SHA256, c.SavedAt, c.SaveMS = CheckpointSaved, r.Path, r.Size, r.SHA256, now, r.TookMS
		c.RanS = a.Elapsed(now).Seconds()
		s.changeAlloc(a, index, func(a *Allocation) {
			a.Leaving, a.Desired, a.StopAs = true, AllocStop, api.StateSuspended
		})
		n := s.editNode(c.Node)
		n.Checkpoints = append(slices.Clip(n.Checkpoints), j.ID)
		s.putNode(n, index)
		j.Checkpoint = &c
		j.State, j.Reason = api.StateSuspended, api.ReasonCheckpointed
		if c.Preempted {
			s.restoreJob(j, "") // parked by a preemption: it waits for room
		}
	case r.Event == CheckpointFailed && c.Phase == CheckpointSaving && node == c.Node && r.Alloc == c.Alloc:
		c.Phase, c.Error = CheckpointFailed, "the save failed: "+r.Message
		j.Checkpoint = &c
		s.putNode(s.editNode(node), index)
	case r.Event == CheckpointRestored && c.Phase == CheckpointRestoring && s.restoreAlloc(j, node, r.Alloc) != nil:
		c.Phase, c.RestoredAt, c.RestoreMS, c.RestoredOn = CheckpointRestored, now, r.TookMS, node
		j.Checkpoint = &c
	default:
		return "stale report"
	}
	return ""
}

// restoreAlloc returns job j's active allocation id on node (alloc, when
// not 0) that starts from its checkpoint: any but the one saved.
func (s *State) restoreAlloc(j *Job, node string, alloc uint64) *Allocation {
	for _, a := range s.runningAllocs(j) {
		if a.ID != j.Checkpoint.Alloc && a.Node == node && (alloc == 0 || a.ID == alloc) {
			return a
		}
	}
	return nil
}

func (s *State) applyRestore(c *RestoreJobs, index uint64) *IDsResult {
	return s.eachJob(c.IDs, func(j *Job) string { return s.restoreJob(j, c.To) })
}

// restoreJob puts checkpointed job j (a private copy) back in the queue to
// start from its checkpoint, on node to ("" any that can), or says why not.
func (s *State) restoreJob(j *Job, to string) string {
	if !Checkpointed(j) {
		return fmt.Sprintf("is %s, not checkpointed: only a checkpointed job is restored", j.State)
	}
	if to != "" {
		if why := s.CheckRestoreNode(j, to); why != "" {
			return why
		}
	}
	ck := *j.Checkpoint
	ck.Phase, ck.Want = CheckpointRestoring, s.intern(to)
	j.Checkpoint = &ck
	j.State, j.Reason = api.StatePending, api.ReasonNone
	return ""
}

// CheckRestoreNode says why node name cannot start job j from its
// checkpoint, or "": the file must be readable there (the node that wrote
// it, or one with the same shared checkpoint directory) and the guest must
// load there (the same accelerator).
func (s *State) CheckRestoreNode(j *Job, name string) string {
	ck, n := j.Checkpoint, s.Nodes[name]
	switch {
	case n == nil:
		return fmt.Sprintf("node %s: no such node", name)
	case n.Down || n.Drain || n.Probing:
		return fmt.Sprintf("node %s is %s", name, n.State())
	case name != ck.Node && (ck.Dir == "" || n.CheckpointDir != ck.Dir):
		if ck.Dir == "" {
			return fmt.Sprintf("its checkpoint is on node %s, which keeps it to itself (give nodes a shared --checkpoint-dir to restore elsewhere)", ck.Node)
		}
		return fmt.Sprintf("node %s does not share the checkpoint directory %s", name, ck.Dir)
	case n.Accel != ck.Accel:
		return fmt.Sprintf("node %s runs VMs with %s, the checkpoint was saved under %s", name, n.Accel, ck.Accel)
	}
	return ""
}

// checkpointRunEnded forgets the checkpoint of job j (a private copy)
// once a run's end ended the job or sent it back to the queue.
func (s *State) checkpointRunEnded(j *Job, index uint64) {
	if j.Checkpoint != nil && !j.State.Active() {
		s.dropCheckpoint(j, index)
		if j.State == api.StatePending {
			j.Checkpoint = nil // a requeued job starts afresh
		}
	}
}

// dropCheckpoint forgets job j's checkpoint file: it leaves its node's list
// (the node removes the file), as the job ends, is requeued or checkpointed
// anew.
func (s *State) dropCheckpoint(j *Job, index uint64) {
	ck := j.Checkpoint
	if ck == nil || ck.Path == "" {
		return
	}
	if n := s.Nodes[ck.Node]; n != nil && slices.Contains(n.Checkpoints, j.ID) {
		n = s.editNode(ck.Node)
		n.Checkpoints = slices.DeleteFunc(n.Checkpoints, func(id uint64) bool { return id == j.ID })
		s.putNode(n, index)
	}
	c := *ck
	c.Path = ""
	j.Checkpoint = &c
}

// allocCheckpoint is what node's desired state says of allocation a's
// checkpoint work; nil when it has none.
func allocCheckpointOf(s *State, j *Job, a *Allocation) *api.AllocCheckpoint {
	ck := j.Checkpoint
	switch {
	case ck == nil:
		return nil
	case ck.Phase == CheckpointSaving && a.ID == ck.Alloc:
		return &api.AllocCheckpoint{Save: true}
	case (ck.Phase == CheckpointRestoring || ck.Phase == CheckpointRestored) && a.ID != ck.Alloc && a.Active() && !a.Leaving:
		return &api.AllocCheckpoint{Restore: &api.CheckpointFile{Job: j.ID, Alloc: ck.Alloc, Path: ck.Path, Size: ck.Size, SHA256: ck.SHA256},
			RanS: ck.RanS}
	}
	return nil
}

// AllocCheckpoint is allocCheckpointOf for the controller's desired state.
func (s *State) AllocCheckpoint(j *Job, a *Allocation) *api.AllocCheckpoint {
	return allocCheckpointOf(s, j, a)
}

// NodeCheckpoints lists the checkpoint files node n keeps.
func (s *State) NodeCheckpoints(n *Node) []api.CheckpointFile {
	var out []api.CheckpointFile
	for _, id := range n.Checkpoints {
		if j := s.Jobs[id]; j != nil && j.Checkpoint != nil && j.Checkpoint.Path != "" {
			ck := j.Checkpoint
			out = append(out, api.CheckpointFile{Job: id, Alloc: ck.Alloc, Path: ck.Path, Size: ck.Size, SHA256: ck.SHA256})
		}
	}
	return out
}
