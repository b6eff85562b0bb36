package ctld

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/submit"
)

// Checkpoints on the controllers (docs/migration.md): the requests (POST
// /v1/jobs/checkpoint, corral checkpoint and corral restore), the nodes'
// reports (with their status), what each node's desired state says of
// them, and what `corral show job` shows. The records and applies are
// ctld/state's (checkpoints.go); a restore's node is the scheduling pass's
// (ctld/sched: a node that can read the file).

// handleCheckpoint answers POST /v1/jobs/checkpoint: checkpoints of the
// running jobs named, or with restore their restores. A job that cannot
// be saved is refused with the reason show job gives.
func (c *Controller) handleCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req api.CheckpointRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.IDs) == 0 {
		return badRequest("no job ids given")
	}
	if err := validateIDs("ids", req.IDs); err != nil {
		return err
	}
	if req.To != "" {
		if why := submit.NameProblem(req.To, maxNodeNameBytes); why != "" {
			return &fieldError{Field: "to", Msg: fmt.Sprintf("node %q %s", submit.Shown(req.To), why)}
		}
		if !req.Restore {
			return &fieldError{Field: "to", Msg: "a checkpoint is written on the job's node: --to goes with a restore"}
		}
	}
	p := principalFrom(r)
	ids, denied := c.managedJobs(p, req.IDs)
	noteTarget(r, "jobs %s", idsText(req.IDs))
	resp := api.HoldResponse{Errors: denied}
	now := c.clock.Now().UTC()
	var ct state.CommandType
	var cmd any
	if req.Restore {
		ct, cmd = state.CmdRestoreJobs, &state.RestoreJobs{Now: now, IDs: ids, To: req.To, By: p.name}
	} else {
		var ok []uint64
		for _, id := range ids {
			if why := c.blockerOf(id); why != "" {
				resp.Errors[id] = fmt.Sprintf("job %d: cannot be checkpointed: it %s", id, why)
				continue
			}
			ok = append(ok, id)
		}
		ids = ok
		ct, cmd = state.CmdCheckpointJobs, &state.CheckpointJobs{Now: now, IDs: ids, By: p.name}
	}
	if len(ids) > 0 {
		res, err := c.propose(ct, cmd)
		if err != nil {
			return err
		}
		ir := res.(*state.IDsResult)
		resp.Changed = ir.Changed
		for id, e := range ir.Errors {
			resp.Errors[id] = e
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// blockerOf says what keeps job id's VM from being saved (the
// MigrationBlocker show job gives: a checkpoint is a migration to a file),
// "" when nothing does or the job is unknown (the apply says so).
func (c *Controller) blockerOf(id uint64) string {
	var why string
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[id]
		if j == nil {
			return
		}
		aj := apiJob(s, j)
		var n *api.Node
		if sn := s.Nodes[aj.Node]; sn != nil {
			n = &api.Node{NodeInfo: api.NodeInfo{Name: sn.Name, Runner: sn.Runner}}
		}
		if mig, blocker := migrationOf(&aj, n, partitionNamed(s.PartitionList(), j.Spec.Partition)); mig == "no" {
			why = strings.ReplaceAll(blocker, "; ", "; it ")
		}
	})
	return why
}

// Events of checkpoint reports.
var checkpointEvents = []string{state.CheckpointSaved, state.CheckpointFailed, state.CheckpointRestored}

// checkCheckpointReports checks a node's checkpoint reports.
func checkCheckpointReports(c *reqCheck, reps []api.CheckpointReport) {
	c.count("checkpoints", len(reps), api.MaxMigrationReports)
	const day = int64(24 * time.Hour / time.Millisecond)
	for _, r := range reps {
		if r.Job == 0 || r.Alloc == 0 {
			c.fail("checkpoints", "a checkpoint report names job %d, allocation %d", r.Job, r.Alloc)
		}
		known := false
		for _, e := range checkpointEvents {
			known = known || r.Event == e
		}
		if !known {
			c.fail("checkpoints.event", "job %d: event %q is not saved, failed or restored", r.Job, submit.Shown(r.Event))
		}
		c.text("checkpoints.path", r.Path, 4096)
		if r.Event == state.CheckpointSaved && !strings.HasPrefix(r.Path, "/") {
			c.fail("checkpoints.path", "job %d: a saved checkpoint's path %q is not absolute", r.Job, submit.Shown(r.Path))
		}
		c.between("checkpoints.size", r.Size, 0, 1<<50)
		c.text("checkpoints.sha256", r.SHA256, 64)
		c.between("checkpoints.took_ms", r.TookMS, 0, day)
		c.text("checkpoints.message", strings.NewReplacer("\n", " ", "\t", " ").Replace(r.Message), maxMessageBytes)
		if c.err != nil {
			return
		}
	}
}

// takeCheckpointReports commits a node's checkpoint reports.
func (c *Controller) takeCheckpointReports(node string, reps []api.CheckpointReport) error {
	res, err := c.propose(state.CmdCheckpointReports, &state.CheckpointReports{Now: c.clock.Now().UTC(), Node: node, Reports: reps})
	if err != nil {
		return err
	}
	if ir, _ := res.(*state.IDsResult); ir != nil {
		for id, e := range ir.Errors {
			if e != "stale report" {
				c.log.Warn("a node's checkpoint report was refused", "node", node, "job", id, "err", e)
			}
		}
	}
	return nil
}

// apiCheckpoint is job j's checkpoint as show job shows it.
func apiCheckpoint(j *state.Job) *api.JobCheckpoint {
	ck := j.Checkpoint
	if ck == nil {
		return nil
	}
	return &api.JobCheckpoint{Phase: ck.Phase, Node: ck.Node, Path: ck.Path, Size: ck.Size, SavedAt: ck.SavedAt, SaveMS: ck.SaveMS,
		RestoredAt: ck.RestoredAt, RestoreMS: ck.RestoreMS, RestoredOn: ck.RestoredOn, Error: ck.Error, RequestedAt: ck.RequestedAt, By: ck.By}
}
