package ctld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/migrate"
	"corral/submit"
)

// Live migration on the controllers (docs/migration.md): the requests
// (POST /v1/jobs/migrate, corral migrate), the nodes' reports (with their
// status, POST /v1/nodes/status), the timeouts (the leader's
// migrationLoop), what each node's desired state says of a migration, and
// what `corral show job` shows of one. The state machine is package
// migrate; its records and applies are ctld/state's; the destination is
// placed by the scheduling pass (ctld/sched/migrate.go).

// handleMigrate answers POST /v1/jobs/migrate: live migrations of the
// running jobs named, or, with cancel, the abort of their migrations.
// Every job is checked here for what only the controllers know (its
// partition's share) and in the apply for the rest; a job that cannot move
// is refused with the reason `corral show job` gives.
func (c *Controller) handleMigrate(w http.ResponseWriter, r *http.Request) error {
	var req api.MigrateRequest
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
		if req.Cancel {
			return &fieldError{Field: "to", Msg: "a cancel names no destination"}
		}
	}
	p := principalFrom(r)
	ids, denied := c.managedJobs(p, req.IDs)
	noteTarget(r, "jobs %s", idsText(req.IDs))
	resp := api.HoldResponse{Errors: denied}
	now := c.clock.Now().UTC()
	var ct state.CommandType
	var cmd any
	if req.Cancel {
		ct, cmd = state.CmdCancelMigrations, &state.CancelMigrations{Now: now, Jobs: ids, By: p.name}
	} else {
		mj := &state.MigrateJobs{Now: now}
		for _, id := range ids {
			if why := c.migrationRefusal(id, req.To); why != "" {
				resp.Errors[id] = fmt.Sprintf("job %d: %s", id, why)
				continue
			}
			mj.Requests = append(mj.Requests, state.MigrateRequest{Job: id, To: req.To, By: p.name, Token: streamToken()})
		}
		ct, cmd = state.CmdMigrateJobs, mj
		ids = nil
		for _, rq := range mj.Requests {
			ids = append(ids, rq.Job)
		}
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

// migrationRefusal says why job id cannot be asked to move to node to
// ("" any) now, or "": what keeps QEMU from migrating its VM (the reason
// show job gives), or that no node has room for it now. The apply checks
// the rest against the state it applies to.
func (c *Controller) migrationRefusal(id uint64, to string) string {
	var why string
	c.fsm.Read(func(s *state.State) {
		j := s.Jobs[id]
		if j == nil {
			return // the apply says so
		}
		aj := apiJob(s, j)
		var n *api.Node
		if sn := s.Nodes[aj.Node]; sn != nil {
			n = &api.Node{NodeInfo: api.NodeInfo{Name: sn.Name, Runner: sn.Runner}}
		}
		if mig, blocker := migrationOf(&aj, n, partitionNamed(s.PartitionList(), j.Spec.Partition)); mig == "no" {
			why = "cannot migrate: it " + strings.ReplaceAll(blocker, "; ", "; it ")
			return
		}
		if why = s.CheckMigrate(j, to); why == "" {
			why = roomFor(s, j, to)
		}
	})
	return why
}

// roomFor says, when no node (or not node to) has the free CPUs and memory
// job j's run holds, that it has nowhere to go now; "" when one has. The
// pass decides where it goes.
func roomFor(s *state.State, j *state.Job, to string) string {
	run := s.ActiveAllocs(j)
	if len(run) == 0 {
		return ""
	}
	a := run[0]
	for _, name := range s.NodeNames() {
		n := s.Nodes[name]
		if (to == "" || name == to) && name != a.Node && n.Migrate && !n.Down && !n.Drain && !n.Probing &&
			n.FreeCPUs() >= a.CPUs && n.FreeMemMB() >= a.MemMB+n.OverheadMB {
			return ""
		}
	}
	if to != "" {
		return fmt.Sprintf("node %s has no room for it now (%d CPUs, %d MiB and its runner's overhead)", to, a.CPUs, a.MemMB)
	}
	return fmt.Sprintf("no other node that takes migrations has room for it now (%d CPUs, %d MiB and its runner's overhead)", a.CPUs, a.MemMB)
}

// streamToken makes a migration stream's credential.
func streamToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// stampTokens gives the migrations a pass begins itself (a drain's) their
// stream tokens: the leader's randomness, never the apply's.
func stampTokens(cmd *state.ApplyPlan) {
	for i := range cmd.Migrations {
		if cmd.Migrations[i].Migration == 0 && cmd.Migrations[i].Token == "" {
			cmd.Migrations[i].Token = streamToken()
		}
	}
}

// checkMigrationReports checks a node's migration reports: a known event,
// figures in range, a message of bounded size.
func checkMigrationReports(c *reqCheck, reps []api.MigrationReport) {
	c.count("migrations", len(reps), api.MaxMigrationReports)
	const day = int64(24 * time.Hour / time.Millisecond)
	for _, r := range reps {
		if r.Migration == 0 || r.Alloc == 0 {
			c.fail("migrations", "a migration report names migration %d, allocation %d", r.Migration, r.Alloc)
		}
		if !migrate.Event(r.Event).Valid() {
			c.fail("migrations.event", "migration %d: event %q is not prepared, streaming, sent, loaded, resumed or failed", r.Migration, submit.Shown(r.Event))
		}
		c.between("migrations.total_ms", r.TotalMS, 0, day)
		c.between("migrations.stop_ms", r.StopMS, 0, day)
		c.between("migrations.switch_ms", r.SwitchMS, 0, day)
		c.between("migrations.bytes", r.Bytes, 0, 1<<50)
		c.text("migrations.message", strings.NewReplacer("\n", " ", "\t", " ").Replace(r.Message), maxMessageBytes)
		if c.err != nil {
			return
		}
	}
}

// takeMigrationReports commits a node's migration reports.
func (c *Controller) takeMigrationReports(node string, reps []api.MigrationReport) error {
	res, err := c.propose(state.CmdMigrationReports, &state.MigrationReports{Now: c.clock.Now().UTC(), Node: node, Reports: reps})
	if err != nil {
		return err
	}
	if ir, _ := res.(*state.IDsResult); ir != nil {
		c.metrics.observeMigrations(c, reps, ir.Changed)
		for id, e := range ir.Errors {
			if e != "stale report" {
				c.log.Warn("a node's migration report was refused", "node", node, "migration", id, "err", e)
			}
		}
	}
	return nil
}

// migrationTick is how often the leader looks for migrations past their
// deadline; a look is a walk over the migration records, which are few.
const migrationTick = 500 * time.Millisecond

// migrationLoop aborts, on the leader, the migrations stuck in a phase
// before their switch for longer than its timeout (ExpireMigrations: the
// apply decides which, from the state and the entry's clock).
func (c *Controller) migrationLoop(ctx context.Context) {
	t := c.clock.NewTicker(migrationTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := c.clock.Now().UTC()
		var next time.Time
		c.fsm.Read(func(s *state.State) { next = s.NextMigrationDeadline() })
		if next.IsZero() || now.Before(next) {
			continue
		}
		res, err := c.propose(state.CmdExpireMigrations, &state.ExpireMigrations{Now: now})
		if err != nil {
			c.log.Warn("expiring stuck migrations failed", "err", err)
			continue
		}
		if ir, _ := res.(*state.IDsResult); ir != nil && len(ir.Changed) > 0 {
			c.log.Info("aborted migrations stuck past their timeout", "jobs", ir.Changed)
		}
	}
}

// allocMigration is what node's desired state says of allocation a's part
// in job j's migration; nil when it takes part in none (or in an aborted
// one, whose destination is stopped and whose source runs on).
func allocMigration(s *state.State, j *state.Job, a *state.Allocation) *api.AllocMigration {
	m := s.LastMigration(j)
	if m == nil || m.Phase == migrate.Aborted || m.Phase == migrate.Requested {
		return nil
	}
	out := &api.AllocMigration{ID: m.ID, Phase: string(m.Phase), Token: m.Token,
		DowntimeMS: m.Params.Downtime().Milliseconds(), BandwidthMiB: m.Params.BandwidthBytes() >> 20,
		MaxTimeS: int64(m.Params.MaxTime() / time.Second)}
	switch a.ID {
	case m.Source:
		if !m.Phase.Live() {
			return nil
		}
		out.Role, out.Peer = api.MigrationSource, m.To
		if n := s.Nodes[m.To]; n != nil {
			out.PeerAddr = n.APIAddr
		}
	case m.Dest:
		out.Role, out.Peer = api.MigrationDestination, m.From
		if !m.Phase.BeforeSwitch() {
			if src := s.Allocs[m.Source]; src != nil {
				out.RanS = src.Elapsed(m.SwitchAt).Seconds()
			}
		}
	default:
		return nil
	}
	return out
}

// apiMigrations are job j's migrations as show job shows them.
func apiMigrations(s *state.State, j *state.Job) []api.Migration {
	var out []api.Migration
	for _, id := range j.Migrations {
		m := s.Migrations[id]
		if m == nil {
			continue
		}
		out = append(out, api.Migration{ID: m.ID, From: m.From, To: m.To, Phase: string(m.Phase), Cause: string(m.Cause),
			By: m.By, RequestedAt: m.RequestedAt, EndAt: m.EndAt, TotalMS: m.Stats.TotalMS, DowntimeMS: m.Stats.DowntimeMS(),
			StopMS: m.Stats.StopMS, SwitchMS: m.Stats.SwitchMS, Bytes: m.Stats.Bytes, Error: m.Error})
	}
	return out
}
