package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"corral/api"
)

// PutReservation creates, replaces or deletes an advance reservation. The
// leader builds the whole reservation (the current one with the request's
// settings applied, its nodes and their shares chosen) and stamps Now; the
// apply checks it again against the state it applies to (CheckReservation),
// so a reservation that no longer fits is refused on every replica alike.
type PutReservation struct {
	Now         time.Time       `json:"now"`
	Reservation api.Reservation `json:"reservation"`
	// Create refuses a name that exists; neither Create nor Delete
	// replaces an existing reservation.
	Create bool `json:"create,omitempty"`
	Delete bool `json:"delete,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// ExpireReservations deletes the reservations the leader found over at
// Now: the last window ended, or a consumable one is used up or idle
// (PURGE_COMP). The apply deletes each that is still over and that no job
// runs in, and leaves the others.
type ExpireReservations struct {
	Now   time.Time `json:"now"`
	Names []string  `json:"names"`
}

// Reservation command types (their numbers are this range's: 35–39).
const (
	CmdPutReservation     CommandType = 35
	CmdExpireReservations CommandType = 36
)

// Errors in Slurm's words (its ESLURM_ messages), with what to do.
const (
	errResvInvalid = "Requested reservation is invalid"
	errNodesBusy   = "Requested nodes are busy"
	errResvOverlap = "Requested reservation overlaps with another reservation"
	errResvInUse   = "Reservation is in use"
)

// MaxResvNameBytes bounds a reservation's name.
const MaxResvNameBytes = 64

// resvLookahead is how far ahead the overlap check compares two
// reservations' windows: the repeat periods divide a week, so the pattern
// of two repeating reservations' windows repeats within one week after
// both started.
const resvLookahead = 7 * 24 * time.Hour

func (s *State) applyPutReservation(c *PutReservation) error {
	r := c.Reservation
	r.Flags = slices.Clone(r.Flags) // the check sorts them: not the entry's own
	if err := s.CheckReservation(&r, c.Now, c.Create, c.Delete); err != nil {
		return err
	}
	if c.Delete {
		delete(s.Reservations, r.Name)
		return nil
	}
	if cur := s.Reservations[r.Name]; cur != nil && !c.Create {
		// What jobs took and how many started are the state's own: a
		// change keeps them.
		r.Started = cur.Started
		keepUsed(&r, cur)
	}
	s.Reservations[r.Name] = &r
	return nil
}

// keepUsed carries what the jobs of cur used into r, node by node.
func keepUsed(r, cur *api.Reservation) {
	for i := range r.Parts {
		p := &r.Parts[i]
		for _, q := range cur.Parts {
			if q.Node == p.Node {
				p.UsedCPUs, p.UsedGPUs = min(q.UsedCPUs, p.CPUs), min(q.UsedGPUs, p.GPUs)
			}
		}
	}
}

func (s *State) applyExpireReservations(c *ExpireReservations) []string {
	var gone []string
	for _, name := range c.Names {
		r := s.Reservations[name]
		if r == nil || !s.ResvExpired(r, c.Now, true) {
			continue
		}
		delete(s.Reservations, name)
		gone = append(gone, name)
	}
	return gone
}

// ResvExpired reports whether reservation r is over at now: its last
// window ended, or, consumable, it is used up or (idle) no job is pending
// or running in it after one started. The leader asks with idle false
// when it has judged the idle time itself; the apply asks with idle true
// and checks that no job is in it. A reservation a job still runs in is
// never over.
func (s *State) ResvExpired(r *api.Reservation, now time.Time, checkIdle bool) bool {
	over := r.Over(now) || r.Has(api.ResvPurgeComp) && r.Started > 0 &&
		(r.Consumable() && ResvUsedUp(r) || !checkIdle || s.resvPending(r.Name) == 0)
	return over && s.resvRunning(r.Name) == 0
}

// ResvUsedUp reports whether the jobs of a consumable reservation took
// all it held.
func ResvUsedUp(r *api.Reservation) bool {
	for _, p := range r.Parts {
		if p.UsedCPUs < p.CPUs || p.UsedGPUs < p.GPUs {
			return false
		}
	}
	return true
}

// resvRunning returns the id of a job that runs (or is suspended or being
// stopped) in the reservation named, or 0.
func (s *State) resvRunning(name string) uint64 {
	first := uint64(0)
	for id, j := range s.Jobs {
		if j.Spec.Reservation == name && !j.State.Terminal() && j.State != api.StatePending && (first == 0 || id < first) {
			first = id
		}
	}
	return first
}

// resvPending counts the pending jobs that name the reservation.
func (s *State) resvPending(name string) int {
	n := 0
	s.EachPending(func(j *Job) {
		if j.Spec.Reservation == name {
			n++
		}
	})
	return n
}

// CheckReservation says why a reservation change cannot be applied at
// now, or nil: the name, times, repeat, nodes and their shares, users and
// accounts, flags; that it overlaps no other reservation it may not
// overlap; and, without IGNORE_JOBS, that no running job is expected to
// hold its nodes past its start. A delete is refused while a job runs in
// it. It sorts the reservation's flags into their order.
func (s *State) CheckReservation(r *api.Reservation, now time.Time, create, del bool) error {
	if err := checkResvName(r.Name); err != nil {
		return err
	}
	cur := s.Reservations[r.Name]
	switch {
	case del && cur == nil:
		return fmt.Errorf("Reservation %s not found (reservations: %s)", r.Name, orNone(sortedKeys(s.Reservations)))
	case del:
		if id := s.resvRunning(r.Name); id != 0 {
			return fmt.Errorf("%s: job %d runs in reservation %s; cancel it or wait until it ends", errResvInUse, id, r.Name)
		}
		return nil
	case create && cur != nil:
		return fmt.Errorf("Duplicate reservation name: %s exists already; change it with scontrol update ReservationName=%s", r.Name, r.Name)
	case !create && cur == nil:
		return fmt.Errorf("Reservation %s not found; create it with scontrol create reservation", r.Name)
	}
	if err := checkResvShape(r); err != nil {
		return fmt.Errorf("%s: reservation %s: %w", errResvInvalid, r.Name, err)
	}
	if err := s.checkResvRefs(r); err != nil {
		return fmt.Errorf("%s: reservation %s: %w", errResvInvalid, r.Name, err)
	}
	if err := s.checkResvOverlap(r, now); err != nil {
		return err
	}
	if !r.Has(api.ResvIgnoreJobs) {
		return s.checkResvBusy(r, now)
	}
	return nil
}

func checkResvName(name string) error {
	if name == "" || len(name) > MaxResvNameBytes || strings.IndexFunc(name, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.')
	}) >= 0 {
		return fmt.Errorf("%s: reservation name %q: use 1 to %d letters, digits, '_', '-' and '.'", errResvInvalid, name, MaxResvNameBytes)
	}
	return nil
}

// checkResvShape checks what a reservation says on its own: times, repeat,
// lists, flags and the capacity's parts.
func checkResvShape(r *api.Reservation) error {
	switch {
	case r.StartTime.IsZero():
		return fmt.Errorf("it has no StartTime")
	case !r.EndTime.IsZero() && !r.EndTime.After(r.StartTime):
		return fmt.Errorf("EndTime %s is not after StartTime %s", r.EndTime.Format(time.RFC3339), r.StartTime.Format(time.RFC3339))
	case len(r.Users) > 0 && len(r.NotUsers) > 0, len(r.Accounts) > 0 && len(r.NotAccounts) > 0:
		return fmt.Errorf("a list of users or accounts either allows (Users=a,b) or denies (Users=-a,-b), not both")
	case len(r.Users)+len(r.NotUsers)+len(r.Accounts)+len(r.NotAccounts) == 0:
		return fmt.Errorf("Reservation request lacks users or accounts: give Users= or Accounts=")
	case len(r.Nodes) == 0:
		return fmt.Errorf("it holds no nodes: give Nodes=, NodeCnt= or TRES=")
	case r.CPUs < 0 || r.GPUs < 0 || r.PurgeAfter < 0 || r.Started < 0:
		return fmt.Errorf("a count is negative")
	case r.PurgeAfter > 0 && !r.Has(api.ResvPurgeComp):
		return fmt.Errorf("a purge time without the PURGE_COMP flag")
	}
	if err := checkResvFlags(r); err != nil {
		return err
	}
	if p := r.Period(); p > 0 && (r.EndTime.IsZero() || r.Duration() > p) {
		return fmt.Errorf("a window of %s does not fit in its repeat period of %s: give a Duration of at most %s", durationText(r.Duration()), p, p)
	}
	if !slices.IsSorted(r.Nodes) || len(slices.Compact(slices.Clone(r.Nodes))) != len(r.Nodes) {
		return fmt.Errorf("its nodes are not sorted and distinct")
	}
	if !r.Capacity() {
		if len(r.Parts) > 0 {
			return fmt.Errorf("it holds whole nodes but has shares of nodes")
		}
		return nil
	}
	if len(r.Parts) != len(r.Nodes) {
		return fmt.Errorf("it holds %d nodes but has shares of %d", len(r.Nodes), len(r.Parts))
	}
	cpus, gpus := 0, 0
	for i, p := range r.Parts {
		if p.Node != r.Nodes[i] || p.CPUs < 0 || p.GPUs < 0 || p.MemMB < 0 || p.UsedCPUs < 0 || p.UsedGPUs < 0 ||
			p.UsedCPUs > p.CPUs || p.UsedGPUs > p.GPUs || p.CPUs+p.GPUs == 0 {
			return fmt.Errorf("its share of node %s is not consistent", p.Node)
		}
		cpus, gpus = cpus+p.CPUs, gpus+p.GPUs
	}
	if cpus != r.CPUs || gpus != r.GPUs {
		return fmt.Errorf("its shares hold cpu=%d,gres/gpu=%d, not the cpu=%d,gres/gpu=%d it reserves", cpus, gpus, r.CPUs, r.GPUs)
	}
	return nil
}

// checkResvFlags checks the flags are known, once each, with one repeat at
// most, and sorts them into api.ResvFlags order.
func checkResvFlags(r *api.Reservation) error {
	repeats := 0
	for i, f := range r.Flags {
		if !slices.Contains(api.ResvFlags, f) {
			return fmt.Errorf("unknown flag %q", f)
		}
		if slices.Contains(r.Flags[:i], f) {
			return fmt.Errorf("flag %s given twice", f)
		}
		if f == api.ResvHourly || f == api.ResvDaily || f == api.ResvWeekly {
			repeats++
		}
	}
	if repeats > 1 {
		return fmt.Errorf("give one repeat flag of HOURLY, DAILY and WEEKLY")
	}
	slices.SortFunc(r.Flags, func(a, b api.ResvFlag) int {
		return slices.Index(api.ResvFlags, a) - slices.Index(api.ResvFlags, b)
	})
	return nil
}

// checkResvRefs checks what the reservation names exists: its nodes, its
// partition (which holds its nodes), its accounts; and that each share
// fits its node.
func (s *State) checkResvRefs(r *api.Reservation) error {
	var part *api.Partition
	if r.Partition != "" {
		for _, p := range s.PartitionList() {
			if p.Name == r.Partition {
				part = &p
			}
		}
		if part == nil {
			return fmt.Errorf("Invalid partition name specified: %q", r.Partition)
		}
	}
	for i, name := range r.Nodes {
		n := s.Nodes[name]
		if n == nil {
			return fmt.Errorf("Invalid node name specified: %s", name)
		}
		if part != nil && !part.HasNode(name) {
			return fmt.Errorf("node %s is not in partition %s", name, part.Name)
		}
		if r.Capacity() {
			p := r.Parts[i]
			if p.CPUs > n.CPUs || p.MemMB > n.MemMB || p.GPUs > NodeGPUs(n) {
				return fmt.Errorf("its share of node %s (cpu=%d, %d MiB, gres/gpu=%d) is more than the node has (cpu=%d, %d MiB, gres/gpu=%d)",
					name, p.CPUs, p.MemMB, p.GPUs, n.CPUs, n.MemMB, NodeGPUs(n))
			}
		}
	}
	if len(s.Accounts) > 0 {
		for _, a := range slices.Concat(r.Accounts, r.NotAccounts) {
			if s.Accounts[a] == nil {
				return fmt.Errorf("Invalid account %q (accounts: %s)", a, strings.Join(sortedKeys(s.Accounts), ", "))
			}
		}
	}
	return nil
}

// NodeGPUs returns the whole GPUs node n reported (a GPU split into MIG
// instances is not one).
func NodeGPUs(n *Node) int {
	if n.Inventory == nil {
		return 0
	}
	c := 0
	for _, g := range n.Inventory.GPUs {
		if !g.MIGEnabled {
			c++
		}
	}
	return c
}

// checkResvOverlap refuses a reservation whose windows meet another's on
// a node they share, unless one of the two takes precedence (MAINT,
// OVERLAP) or both hold shares that fit the node together.
func (s *State) checkResvOverlap(r *api.Reservation, now time.Time) error {
	for _, name := range sortedKeys(s.Reservations) {
		o := s.Reservations[name]
		if name == r.Name || r.Precedes() || o.Precedes() {
			continue
		}
		for _, node := range r.Nodes {
			if !slices.Contains(o.Nodes, node) || sharesFit(r, o, s.Nodes[node]) {
				continue
			}
			if at, ok := WindowsMeet(r, o, now); ok {
				return fmt.Errorf("%s: %s holds node %s at %s too; use other nodes or times, or the OVERLAP flag",
					errResvOverlap, o.Name, node, at.Format(time.RFC3339))
			}
		}
	}
	return nil
}

// sharesFit reports whether two capacity reservations' shares of node n
// fit on it together.
func sharesFit(a, b *api.Reservation, n *Node) bool {
	if !a.Capacity() || !b.Capacity() || n == nil {
		return false
	}
	pa, pb := partOf(a, n.Name), partOf(b, n.Name)
	return pa.CPUs+pb.CPUs <= n.CPUs && pa.MemMB+pb.MemMB <= n.MemMB && pa.GPUs+pb.GPUs <= NodeGPUs(n)
}

// partOf returns a capacity reservation's share of node name.
func partOf(r *api.Reservation, name string) api.ResvPart {
	for _, p := range r.Parts {
		if p.Node == name {
			return p
		}
	}
	return api.ResvPart{}
}

// WindowsMeet reports whether a window of a and one of b overlap after
// now, and where the first such overlap begins.
func WindowsMeet(a, b *api.Reservation, now time.Time) (time.Time, bool) {
	until := now.Add(resvLookahead + max(a.Duration(), b.Duration()))
	aw, bw := ResvWindows(a, now, until, nil), ResvWindows(b, now, until, nil)
	for _, x := range aw {
		for _, y := range bw {
			if x[0].Before(y[1]) && y[0].Before(x[1]) {
				return later(x[0], y[0]), true
			}
		}
	}
	return time.Time{}, false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Forever stands for the end of a window without one.
var Forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// ResvWindows appends to buf the windows of r that end after from and
// begin before until, in order; a window without an end ends Forever.
func ResvWindows(r *api.Reservation, from, until time.Time, buf [][2]time.Time) [][2]time.Time {
	start, end := r.Window(from)
	p := r.Period()
	for start.Before(until) {
		if end.IsZero() {
			return append(buf, [2]time.Time{start, Forever})
		}
		if end.After(from) {
			buf = append(buf, [2]time.Time{start, end})
		}
		if p == 0 {
			break
		}
		start, end = start.Add(p), end.Add(p)
	}
	return buf
}

// checkResvBusy refuses nodes that running jobs outside the reservation
// are expected to hold past its start: a whole node any such job runs on,
// a share of one that such jobs leave too few CPUs, memory or GPUs for.
func (s *State) checkResvBusy(r *api.Reservation, now time.Time) error {
	start, _ := r.Window(now)
	for _, name := range r.Nodes {
		n := s.Nodes[name]
		if !r.Capacity() {
			if id := s.firstHeldPast(r, n, now); id != 0 {
				return fmt.Errorf("%s: job %d on node %s is expected to run past the reservation's start at %s; give other nodes or a later start, or the IGNORE_JOBS flag",
					errNodesBusy, id, name, start.Format(time.RFC3339))
			}
			continue
		}
		cpus, mem, gpus := s.heldPast(r, n, now)
		if p := partOf(r, name); cpus+p.CPUs > n.CPUs || mem+p.MemMB > n.MemMB || gpus+p.GPUs > NodeGPUs(n) {
			return fmt.Errorf("%s: the jobs running on node %s are expected to hold cpu=%d, %d MiB and gres/gpu=%d past the reservation's start at %s, which leaves too little for its share; give other nodes or a later start, or the IGNORE_JOBS flag",
				errNodesBusy, name, cpus, mem, gpus, start.Format(time.RFC3339))
		}
	}
	return nil
}

// firstHeldPast returns the first job outside r running on node n that
// is expected to run past r's start, or 0.
func (s *State) firstHeldPast(r *api.Reservation, n *Node, now time.Time) uint64 {
	start, _ := r.Window(now)
	for _, id := range n.Allocs {
		a := s.Allocs[id]
		if a == nil || !a.Active() {
			continue
		}
		if j := s.Jobs[a.Job]; j != nil && j.Spec.Reservation != r.Name {
			if limit := s.PlannedLimit(j); limit == 0 || now.Add(limit-a.Elapsed(now)).After(start) {
				return j.ID
			}
		}
	}
	return 0
}

// PlannedLimit returns how long a job is planned to run: its time limit,
// else its partition's default, else the partition's maximum; 0 when none
// bounds it.
func (s *State) PlannedLimit(j *Job) time.Duration {
	if j.Spec.TimeLimit > 0 {
		return time.Duration(j.Spec.TimeLimit) * time.Second
	}
	part := j.Spec.Partition
	if part == "" {
		part = api.DefaultPartition
	}
	if p := s.Partitions[part]; p != nil {
		if p.DefaultTime > 0 {
			return time.Duration(p.DefaultTime) * time.Second
		}
		return time.Duration(p.MaxTime) * time.Second
	}
	return 0
}

// resvStartProblem says why a start of job j on node at now breaks a
// reservation, or "": a job of a reservation starts only on its nodes
// within a window it ends in (unless FLEX), and no other job starts on a
// node a reservation holds whole if its run would meet a window of it.
// Shares of nodes are the pass's to respect: the apply only counts what
// the node has.
func (s *State) resvStartProblem(j *Job, node string, now time.Time) string {
	limit := s.PlannedLimit(j)
	end := Forever
	if limit > 0 {
		end = now.Add(limit)
	}
	return s.resvRunProblem(j, node, now, end)
}

// resvRunProblem is resvStartProblem for a run of job j on node from now
// to end (Forever for none).
func (s *State) resvRunProblem(j *Job, node string, now, end time.Time) string {
	own := s.Reservations[j.Spec.Reservation]
	if j.Spec.Reservation != "" && own == nil {
		return fmt.Sprintf("reservation %s does not exist", j.Spec.Reservation)
	}
	if own != nil && !own.Has(api.ResvFlex) {
		ws, we := own.Window(now)
		if we.IsZero() {
			we = Forever
		}
		if !slices.Contains(own.Nodes, node) || now.Before(ws) || end.After(we) {
			return fmt.Sprintf("job %d would run outside reservation %s", j.ID, own.Name)
		}
	}
	var buf [][2]time.Time
	for _, name := range sortedKeys(s.Reservations) {
		r := s.Reservations[name]
		if r == own || r.Capacity() || !slices.Contains(r.Nodes, node) {
			continue
		}
		if own != nil && own.Precedes() && !r.Precedes() {
			continue // its own window takes precedence over this one
		}
		buf = ResvWindows(r, now, end, buf[:0])
		for _, w := range buf {
			if w[0].Before(end) && now.Before(w[1]) {
				return fmt.Sprintf("node %s is reserved by %s from %s", node, r.Name, w[0].Format(time.RFC3339))
			}
		}
	}
	return ""
}

// runEnd returns when run a of job j is planned to end, from now:
// Forever when no limit bounds it.
func (s *State) runEnd(j *Job, a *Allocation, now time.Time) time.Time {
	limit := s.PlannedLimit(j)
	if limit == 0 {
		return Forever
	}
	return now.Add(max(limit-a.Elapsed(now), 0))
}

// noteResvStart records a start of job j on node in its reservation: one
// more job started, and for a consumable reservation what the job took of
// its share of the node.
func (s *State) noteResvStart(j *Job, st PlanStart) {
	cur := s.Reservations[j.Spec.Reservation]
	if cur == nil {
		return
	}
	r := *cur
	r.Started++
	if r.Consumable() {
		r.Parts = slices.Clone(r.Parts)
		for i := range r.Parts {
			if p := &r.Parts[i]; p.Node == st.Node {
				gpus := 0
				if st.Placement != nil {
					gpus = len(st.Placement.GPUs)
				}
				p.UsedCPUs, p.UsedGPUs = min(p.CPUs, p.UsedCPUs+st.CPUs), min(p.GPUs, p.UsedGPUs+gpus)
			}
		}
	}
	s.Reservations[r.Name] = &r
}

// ResvNames returns the reservations' names in order.
func (s *State) ResvNames() []string { return sortedKeys(s.Reservations) }

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// durationText writes a window's length; 0 is UNLIMITED.
func durationText(d time.Duration) string {
	if d == 0 {
		return "UNLIMITED"
	}
	return d.String()
}

// ResvRoom returns what reservation r could hold of node name at now:
// the node less what other reservations whose windows meet r's hold of it
// (unless r, or they, take precedence) and, without IGNORE_JOBS, less what
// running jobs outside r are expected to hold past its start. A node
// another reservation holds whole, or a whole node a running job holds,
// has no room; so has one that is down, drained or unknown.
func (s *State) ResvRoom(r *api.Reservation, name string, now time.Time) (cpus int, mem int64, gpus int) {
	n := s.Nodes[name]
	if n == nil || n.Down || n.Drain || n.Probing {
		return 0, 0, 0
	}
	cpus, mem, gpus = n.CPUs, n.MemMB, NodeGPUs(n)
	for _, o := range s.Reservations {
		if o.Name == r.Name || r.Precedes() || o.Precedes() || !slices.Contains(o.Nodes, name) {
			continue
		}
		if _, meet := WindowsMeet(r, o, now); !meet {
			continue
		}
		if !o.Capacity() {
			return 0, 0, 0
		}
		p := partOf(o, name)
		cpus, mem, gpus = cpus-p.CPUs, mem-p.MemMB, gpus-p.GPUs
	}
	if !r.Has(api.ResvIgnoreJobs) {
		if !r.Capacity() && s.firstHeldPast(r, n, now) != 0 {
			return 0, 0, 0
		}
		c, m, g := s.heldPast(r, n, now)
		cpus, mem, gpus = cpus-c, mem-m, gpus-g
	}
	return max(cpus, 0), max(mem, 0), max(gpus, 0)
}

// heldPast returns what the running jobs outside r on node n are expected
// to hold past r's start.
func (s *State) heldPast(r *api.Reservation, n *Node, now time.Time) (cpus int, mem int64, gpus int) {
	start, _ := r.Window(now)
	for _, id := range n.Allocs {
		a := s.Allocs[id]
		if a == nil || !a.Active() {
			continue
		}
		j := s.Jobs[a.Job]
		if j == nil || j.Spec.Reservation == r.Name {
			continue
		}
		if limit := s.PlannedLimit(j); limit > 0 && !now.Add(limit-a.Elapsed(now)).After(start) {
			continue
		}
		cpus, mem = cpus+a.CPUs, mem+a.MemMB+a.OverheadMB
		if a.Placement != nil {
			gpus += len(a.Placement.GPUs)
		}
	}
	return cpus, mem, gpus
}
