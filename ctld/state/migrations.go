package state

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"corral/api"
	"corral/migrate"
)

// This file applies live migrations (package migrate holds the state
// machine): the requests, the pass's placements (plan.go calls
// planMigration), the nodes' reports, the timeouts, the cancels, and what
// each phase change does to the job's two allocations:
//
//   - placed: the destination's allocation is made (Desired run, active):
//     its node starts the VM as the migration's destination;
//   - any phase change: both nodes' allocation indexes move, so that
//     their daemons read the new phase (the source streams once prepared,
//     the destination continues at switchover);
//   - switchover: the source's allocation is stopped and Leaving (its end,
//     reported MIGRATED, is not the job's);
//   - aborted: the destination's allocation is stopped and Leaving; the
//     source's daemon resumes the guest, the job is RUNNING again.
//
// A migrating job is MIGRATING (deriveState) from the request until the
// source is released.

// MigrateJobs asks for live migrations of running jobs (corral migrate).
// The leader stamps each request's Token, the stream's credential.
type MigrateJobs struct {
	Now      time.Time        `json:"now"`
	Requests []MigrateRequest `json:"requests"`
}

// MigrateRequest is one job to move: to node To, or any that fits.
type MigrateRequest struct {
	Job   uint64 `json:"job"`
	To    string `json:"to,omitempty"`
	By    string `json:"by,omitempty"`
	Token string `json:"token"`
}

// MigrationReports records what one node daemon said of the migrations it
// takes part in.
type MigrationReports struct {
	Now     time.Time             `json:"now"`
	Node    string                `json:"node"`
	Reports []api.MigrationReport `json:"reports"`
}

// ExpireMigrations aborts, at the leader's clock Now, every migration
// stuck in a phase before the switch for longer than its timeout; the
// apply decides which from the state alone.
type ExpireMigrations struct {
	Now time.Time `json:"now"`
}

// CancelMigrations aborts the migrations under way of jobs (corral migrate
// --cancel), those that have not switched over yet.
type CancelMigrations struct {
	Now  time.Time `json:"now"`
	Jobs []uint64  `json:"jobs"`
	By   string    `json:"by,omitempty"`
}

// LiveMigration returns job j's migration under way, nil when none.
func (s *State) LiveMigration(j *Job) *migrate.Migration {
	if n := len(j.Migrations); n > 0 {
		if m := s.Migrations[j.Migrations[n-1]]; m != nil && m.Phase.Live() {
			return m
		}
	}
	return nil
}

// LastMigration returns job j's newest migration, ended or not; nil when it
// never had one.
func (s *State) LastMigration(j *Job) *migrate.Migration {
	if n := len(j.Migrations); n > 0 {
		return s.Migrations[j.Migrations[n-1]]
	}
	return nil
}

// runningAllocs returns job j's active allocations that no migration is
// giving up: those its state derives from.
func (s *State) runningAllocs(j *Job) []*Allocation {
	var out []*Allocation
	for _, a := range s.activeAllocs(j) {
		if !a.Leaving {
			out = append(out, a)
		}
	}
	return out
}

// migrationParams are the bounds new migrations stream with, from the
// cluster's configuration.
func (s *State) migrationParams() migrate.Params {
	c := s.Config
	return migrate.Params{DowntimeMS: c.MigrationDowntimeMS, BandwidthMiB: c.MigrationBandwidthMiB, MaxTimeS: c.MigrationMaxTimeS}
}

// CheckMigrate says why job j cannot begin a live migration now, to node
// to ("" for any), or "" when it can. The controllers check what only they
// know besides (the partition's share) before they propose a request.
func (s *State) CheckMigrate(j *Job, to string) string {
	if m := s.LiveMigration(j); m != nil {
		return fmt.Sprintf("is migrating already (migration %d, %s): wait for it, or cancel it with corral migrate --cancel %d", m.ID, m.Phase, j.ID)
	}
	if j.State != api.StateRunning {
		return fmt.Sprintf("is %s; only a running job can migrate", j.State)
	}
	run := s.runningAllocs(j)
	if len(run) != 1 {
		return fmt.Sprintf("runs on %d nodes; only a job on one node can migrate", len(run))
	}
	a := run[0]
	switch {
	case j.Spec.NoMigrate:
		return "asked for --no-migrate: its files go over the virtiofs share, which QEMU cannot migrate"
	case a.Placement != nil && len(a.Placement.GPUs)+len(a.Placement.MIG)+len(a.Placement.VFs) > 0:
		return "holds devices passed through with vfio-pci, which QEMU cannot migrate"
	}
	if n := s.Nodes[a.Node]; n == nil || !n.Migrate {
		return fmt.Sprintf("runs on node %s, whose daemon cannot migrate jobs (a process runner, or no job API)", a.Node)
	}
	if to == "" {
		return ""
	}
	return s.checkDestination(a, to)
}

// checkDestination says why node to cannot take the run of allocation a
// by migration, whatever its free resources, or "".
func (s *State) checkDestination(a *Allocation, to string) string {
	n := s.Nodes[to]
	switch {
	case n == nil:
		return fmt.Sprintf("node %s: no such node", to)
	case to == a.Node:
		return fmt.Sprintf("runs on node %s already", to)
	case n.Down || n.Drain || n.Probing:
		return fmt.Sprintf("node %s is %s", to, n.State())
	case !n.Migrate || n.APIAddr == "":
		return fmt.Sprintf("node %s cannot take migrations (its daemon serves no job API, or its runner cannot)", to)
	case n.TmpMB < a.TmpMB:
		return fmt.Sprintf("node %s has %d MiB of scratch space; the job holds %d (--tmp)", to, n.TmpMB, a.TmpMB)
	}
	if src := s.Nodes[a.Node]; src != nil && src.Accel != n.Accel {
		return fmt.Sprintf("node %s runs VMs with %s and node %s with %s: a guest cannot move between the two", a.Node, src.Accel, to, n.Accel)
	}
	return ""
}

func (s *State) applyMigrate(c *MigrateJobs, index uint64) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, r := range c.Requests {
		j := s.editJob(r.Job)
		why := "no such job"
		if j != nil {
			why = s.CheckMigrate(j, r.To)
		}
		if why == "" && r.Token == "" {
			why = "the request carries no stream token"
		}
		if why != "" {
			res.Errors[r.Job] = fmt.Sprintf("job %d: %s", r.Job, why)
			continue
		}
		s.newMigration(j, s.runningAllocs(j)[0], r.To, migrate.ByRequest, r.By, r.Token, c.Now)
		s.putJob(j)
		res.Changed = append(res.Changed, r.Job)
	}
	return res
}

// newMigration records a requested migration of job j (a private copy)
// from allocation src, and makes j MIGRATING.
func (s *State) newMigration(j *Job, src *Allocation, to string, cause migrate.Cause, by, token string, now time.Time) *migrate.Migration {
	id := max(s.NextMigrationID, 1)
	s.NextMigrationID = id + 1
	m := migrate.New(id, j.ID, src.Node, src.ID, s.intern(to), cause, by, token, s.migrationParams(), now)
	m.From = s.intern(m.From)
	s.Migrations[id] = m
	j.Migrations = append(slices.Clip(j.Migrations), id)
	s.deriveState(j)
	return m
}

// planMigration applies one migration of a plan: it places a requested
// migration (or starts and places one the pass began: a drain's, a
// preemption's) on its destination, checked against the state as it is.
func (s *State) planMigration(pm PlanMigration, now time.Time, index uint64, res *PlanResult) {
	if why := s.checkPlanMigration(pm); why != "" {
		res.Skipped = append(res.Skipped, pm.JobID)
		return
	}
	j := s.editJob(pm.JobID)
	src := s.runningAllocs(j)[0]
	if len(s.Reservations) > 0 && s.resvRunProblem(j, pm.To, now, s.runEnd(j, src, now)) != "" {
		res.Skipped = append(res.Skipped, pm.JobID) // its rest would break a reservation there
		return
	}
	m := s.LiveMigration(j)
	if m == nil {
		m = s.newMigration(j, src, "", pm.Cause, pm.By, pm.Token, now)
	}
	st := PlanPart{Node: pm.To, CPUs: pm.CPUs, MemMB: pm.MemMB, OverheadMB: pm.OverheadMB, TmpMB: src.TmpMB, Placement: pm.Placement}
	dest := s.newAlloc(j, st, 0, now, index)
	mc := *m
	if err := mc.Place(dest.Node, dest.ID, now); err != nil {
		panic(err) // checkPlanMigration checked the phase and the nodes
	}
	s.moveMigration(m, &mc, index)
	s.deriveState(j)
	s.putJob(j)
	res.Migrated = append(res.Migrated, j.ID)
}

// checkPlanMigration says why a plan's migration no longer applies, or "".
func (s *State) checkPlanMigration(pm PlanMigration) string {
	j := s.Jobs[pm.JobID]
	if j == nil {
		return "no such job"
	}
	m := s.LiveMigration(j)
	switch {
	case pm.Migration != 0 && (m == nil || m.ID != pm.Migration || m.Phase != migrate.Requested):
		return "the migration is not requested any more"
	case pm.Migration == 0 && m != nil:
		return "the job migrates already"
	case pm.Migration == 0:
		if why := s.CheckMigrate(j, ""); why != "" {
			return why
		}
		if pm.Token == "" {
			return "no stream token"
		}
	}
	run := s.runningAllocs(j)
	if len(run) != 1 || run[0].Node != pm.From {
		return "the job does not run on the plan's source"
	}
	if m != nil && m.Want != "" && m.Want != pm.To {
		return "not the node asked for"
	}
	if why := s.checkDestination(run[0], pm.To); why != "" {
		return why
	}
	n := s.Nodes[pm.To]
	if pm.OverheadMB < n.OverheadMB {
		return fmt.Sprintf("node %s charges %d MiB per job, the plan %d", n.Name, n.OverheadMB, pm.OverheadMB)
	}
	if n.FreeCPUs() < pm.CPUs || n.FreeMemMB() < pm.MemMB+pm.OverheadMB || pm.CPUs < run[0].CPUs || pm.MemMB < run[0].MemMB {
		return fmt.Sprintf("node %s lacks resources", n.Name)
	}
	if n.TmpMB-n.AllocTmpMB < run[0].TmpMB {
		return fmt.Sprintf("node %s lacks %d MiB of scratch space (--tmp)", n.Name, run[0].TmpMB)
	}
	if pm.Placement != nil {
		return s.checkPlacement(n, pm.Placement)
	}
	return ""
}

// moveMigration stores mc, the changed copy of migration m, and does what
// its phase change asks of the job's allocations (see the file's comment).
// The caller derives the job's state.
func (s *State) moveMigration(m, mc *migrate.Migration, index uint64) {
	s.Migrations[mc.ID] = mc
	if mc.Phase == m.Phase {
		return
	}
	give := func(id uint64, as api.JobState) {
		switch a := s.Allocs[id]; {
		case a != nil && a.Active():
			s.changeAlloc(a, index, func(a *Allocation) {
				a.Leaving = true
				if a.Desired != AllocStop {
					a.Desired, a.StopAs = AllocStop, as
				}
			})
		case a != nil && !a.Leaving:
			// Ended already (its end aborted the migration): marked,
			// so that no one takes it for the job's run.
			c := *a
			c.Leaving = true
			s.Allocs[id] = &c
		}
	}
	switch mc.Phase {
	case migrate.SwitchOver:
		give(mc.Source, api.StateMigrated)
	case migrate.Aborted:
		give(mc.Dest, api.StateCancelled)
	}
	for _, name := range []string{mc.From, mc.To} {
		if n := s.editNode(name); n != nil {
			s.putNode(n, index)
		}
	}
}

// migrationAllocEnded tells job j's migration under way, if a takes part
// in it, that allocation a ended (reported or lost); why is how.
func (s *State) migrationAllocEnded(j *Job, a *Allocation, why string, now time.Time, index uint64) {
	m := s.LiveMigration(j)
	if m == nil {
		return
	}
	role := migrate.Source
	switch a.ID {
	case m.Source:
	case m.Dest:
		role = migrate.Destination
	default:
		return
	}
	mc := *m
	if mc.AllocEnded(role, why, now) {
		s.moveMigration(m, &mc, index)
	}
}

func (s *State) applyMigrationReports(c *MigrationReports, index uint64) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, r := range c.Reports {
		m := s.Migrations[r.Migration]
		var role migrate.Role
		switch {
		case m == nil:
			res.Errors[r.Migration] = fmt.Sprintf("migration %d: no such migration", r.Migration)
			continue
		case c.Node == m.From && r.Alloc == m.Source:
			role = migrate.Source
		case c.Node == m.To && r.Alloc == m.Dest && m.Dest != 0:
			role = migrate.Destination
		default:
			res.Errors[r.Migration] = fmt.Sprintf("migration %d: node %s's allocation %d takes no part in it", r.Migration, c.Node, r.Alloc)
			continue
		}
		mc := *m
		st := migrate.Stats{TotalMS: r.TotalMS, StopMS: r.StopMS, SwitchMS: r.SwitchMS, Bytes: r.Bytes}
		changed, err := mc.Report(role, migrate.Event(r.Event), st, r.Message, c.Now)
		if err != nil {
			res.Errors[r.Migration] = err.Error()
			continue
		}
		if !changed {
			res.Errors[r.Migration] = "stale report"
			continue
		}
		s.moveMigration(m, &mc, index)
		s.rederive(mc.Job)
		res.Changed = append(res.Changed, r.Migration)
	}
	return res
}

// rederive stores job id again with its state derived anew.
func (s *State) rederive(id uint64) {
	if j := s.editJob(id); j != nil {
		s.deriveState(j)
		s.putJob(j)
	}
}

func (s *State) applyExpireMigrations(c *ExpireMigrations, index uint64) *IDsResult {
	res := &IDsResult{}
	for _, id := range slices.Sorted(maps.Keys(s.Migrations)) {
		m := s.Migrations[id]
		mc := *m
		if !mc.Expire(c.Now) {
			continue
		}
		s.moveMigration(m, &mc, index)
		s.rederive(mc.Job)
		res.Changed = append(res.Changed, mc.Job)
	}
	return res
}

// NextMigrationDeadline returns the earliest time a migration under way
// times out, zero when none can: the leader proposes ExpireMigrations then.
func (s *State) NextMigrationDeadline() time.Time {
	var next time.Time
	for _, m := range s.Migrations {
		if d := m.Deadline(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	return next
}

func (s *State) applyCancelMigrations(c *CancelMigrations, index uint64) *IDsResult {
	res := &IDsResult{Errors: map[uint64]string{}}
	for _, id := range c.Jobs {
		j := s.Jobs[id]
		var m *migrate.Migration
		if j != nil {
			m = s.LiveMigration(j)
		}
		why := ""
		switch {
		case j == nil:
			why = "no such job"
		case m == nil:
			why = "is not migrating"
		case !m.Phase.BeforeSwitch():
			why = fmt.Sprintf("has switched over to node %s already: its migration completes", m.To)
		}
		if why != "" {
			res.Errors[id] = fmt.Sprintf("job %d: %s", id, why)
			continue
		}
		mc := *m
		msg := "cancelled"
		if c.By != "" {
			msg = "cancelled by " + c.By
		}
		mc.Abort(msg, c.Now)
		s.moveMigration(m, &mc, index)
		s.rederive(id)
		res.Changed = append(res.Changed, id)
	}
	return res
}

// abortForStop aborts job j's migration under way, when it has not
// switched over, because the job is being stopped (cancelled, preempted,
// requeued): its destination is given up with it.
func (s *State) abortForStop(j *Job, final api.JobState, now time.Time, index uint64) {
	m := s.LiveMigration(j)
	if m == nil {
		return
	}
	mc := *m
	if mc.Abort(fmt.Sprintf("the job is being stopped (%s)", final), now) {
		s.moveMigration(m, &mc, index)
	}
}
