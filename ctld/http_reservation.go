package ctld

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/reservation"
	"corral/submit"
)

// handleReservation creates, changes or deletes an advance reservation
// (scontrol create|update|delete reservation, corral reservation). The
// leader reads the request's settings onto the reservation as it stands
// (package reservation), chooses its nodes and their shares where the
// settings leave that to it, and proposes the whole reservation; the apply
// checks it again against the state it applies to.
func (c *Controller) handleReservation(w http.ResponseWriter, r *http.Request) error {
	var req api.ReservationRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := validateReservationRequest(&req); err != nil {
		return err
	}
	now := c.clock.Now().UTC()
	var cmd *state.PutReservation
	var err error
	c.fsm.Read(func(s *state.State) { cmd, err = buildReservation(s, &req, now) })
	if err != nil {
		return err
	}
	cmd.By = principalFrom(r).name
	noteTarget(r, "reservation %s", cmd.Reservation.Name)
	if err := c.proposePolicy(state.CmdPutReservation, cmd, func(s *state.State) error {
		q := cmd.Reservation
		return s.CheckReservation(&q, now, cmd.Create, cmd.Delete)
	}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ReservationResponse{Name: cmd.Reservation.Name})
	return nil
}

// buildReservation turns a request into the entry that carries it, read
// against state s at now.
func buildReservation(s *state.State, req *api.ReservationRequest, now time.Time) (*state.PutReservation, error) {
	name := req.Name
	for _, kv := range req.Settings {
		if k := strings.ToLower(kv[0]); k == "reservationname" || k == "reservation" {
			name = kv[1]
		}
	}
	cur := s.Reservations[name]
	switch {
	case req.Delete && cur == nil, !req.Create && !req.Delete && cur == nil:
		return nil, notFound("Reservation %s not found (reservations: %s)", name, orNoneText(s.ResvNames()))
	case req.Create && cur != nil:
		return nil, badRequest("Duplicate reservation name: %s exists already; change it with scontrol update ReservationName=%s", name, name)
	case req.Delete:
		return &state.PutReservation{Now: now, Reservation: api.Reservation{Name: name}, Delete: true}, nil
	}
	var rv api.Reservation
	if cur != nil {
		rv = *cur
		rv.Nodes, rv.Parts, rv.Flags = slices.Clone(cur.Nodes), slices.Clone(cur.Parts), slices.Clone(cur.Flags)
	}
	sel, err := reservation.Apply(&rv, req.Settings, now, req.Create)
	if err != nil {
		return nil, &fieldError{Field: "settings", Msg: fmt.Sprintf("reservation %s: %v", orText(name, "(new)"), err)}
	}
	if rv.Name == "" {
		rv.Name = newResvName(s, &rv)
	}
	if sel.Place {
		if err := chooseNodes(s, &rv, sel, now); err != nil {
			return nil, badRequest("reservation %s: %v", rv.Name, err)
		}
	}
	return &state.PutReservation{Now: now, Reservation: rv, Create: req.Create}, nil
}

// newResvName names a reservation as Slurm does: its first user or
// account, an underscore and the first number not taken.
func newResvName(s *state.State, r *api.Reservation) string {
	base := "resv"
	switch {
	case len(r.Users) > 0:
		base = r.Users[0]
	case len(r.Accounts) > 0:
		base = r.Accounts[0]
	}
	for n := 1; ; n++ {
		name := fmt.Sprintf("%s_%d", base, n)
		if s.Reservations[name] == nil {
			return name
		}
	}
}

// chooseNodes fills in the nodes the reservation holds, and a capacity
// reservation's shares of them, as sel asks: all nodes (of its partition),
// a count of whole nodes free for it, or as much of each node, in name
// order, as its TRES block needs. A partition not named is the default
// one.
func chooseNodes(s *state.State, r *api.Reservation, sel reservation.Selection, now time.Time) error {
	parts := s.PartitionList()
	part := r.Partition
	if part == "" && (sel.NodeCnt > 0 || r.Capacity() && len(r.Nodes) == 0 && !sel.AllNodes) {
		part = defaultPartitionName(parts)
	}
	var cands []string
	switch {
	case sel.AllNodes || sel.NodeCnt > 0 || r.Capacity() && len(r.Nodes) == 0:
		for _, p := range parts {
			if p.Name == part || part == "" {
				cands = append(cands, p.Nodes...)
			}
		}
		if part != "" && !slices.ContainsFunc(parts, func(p api.Partition) bool { return p.Name == part }) {
			return fmt.Errorf("Invalid partition name specified: %q (partitions: %s)", part, partitionNames(parts))
		}
		slices.Sort(cands)
		cands = slices.Compact(cands)
	default:
		cands = r.Nodes
	}
	r.Parts = nil
	switch {
	case r.Capacity():
		return chooseShares(s, r, cands, now)
	case sel.NodeCnt > 0:
		var chosen []string
		for _, n := range cands {
			if c, _, _ := s.ResvRoom(r, n, now); c > 0 && len(chosen) < sel.NodeCnt {
				if nd := s.Nodes[n]; nd != nil && c == nd.CPUs {
					chosen = append(chosen, n)
				}
			}
		}
		if len(chosen) < sel.NodeCnt {
			return fmt.Errorf("Requested nodes are busy: %d of the %d nodes asked for are free for it from %s (of %d in partition %s: the others are down, drained, in another reservation then, or running jobs past its start); give fewer, a later start, or IGNORE_JOBS",
				len(chosen), sel.NodeCnt, r.StartTime.Format(time.RFC3339), len(cands), part)
		}
		r.Nodes = chosen
	default:
		r.Nodes = cands
	}
	if len(r.Nodes) == 0 {
		return fmt.Errorf("no node to hold: partition %s has none", orText(part, "(all)"))
	}
	return nil
}

// chooseShares takes a capacity reservation's CPUs (with their share of
// memory) and GPUs from the candidate nodes in order, as much of each as
// is free for it.
func chooseShares(s *state.State, r *api.Reservation, cands []string, now time.Time) error {
	needC, needG := r.CPUs, r.GPUs
	r.Nodes = nil
	for _, name := range cands {
		if needC == 0 && needG == 0 {
			break
		}
		n := s.Nodes[name]
		roomC, roomM, roomG := s.ResvRoom(r, name, now)
		c, g := min(needC, roomC), min(needG, roomG)
		if c == 0 {
			continue // GPUs without CPUs are no use to a job
		}
		mem := min(roomM, n.MemMB*int64(c)/int64(max(n.CPUs, 1)))
		r.Nodes = append(r.Nodes, name)
		r.Parts = append(r.Parts, api.ResvPart{Node: name, CPUs: c, MemMB: mem, GPUs: g})
		needC, needG = needC-c, needG-g
	}
	if needC > 0 || needG > 0 {
		return fmt.Errorf("Requested nodes are busy: cpu=%d,gres/gpu=%d of TRES=cpu=%d,gres/gpu=%d are not free from %s on nodes %s; ask for less, name other nodes, or give a later start or IGNORE_JOBS",
			needC, needG, r.CPUs, r.GPUs, r.StartTime.Format(time.RFC3339), strings.Join(cands, ","))
	}
	return nil
}

func partitionNames(parts []api.Partition) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

func orNoneText(names []string) string { return orText(strings.Join(names, ", "), "none") }

// validateReservationRequest checks a reservation request's name and the
// number and size of its settings.
func validateReservationRequest(req *api.ReservationRequest) error {
	c := &reqCheck{}
	if req.Name != "" {
		c.name("name", req.Name, state.MaxResvNameBytes)
	}
	c.count("settings", len(req.Settings), 64)
	for _, kv := range req.Settings {
		c.text("settings", kv[0], 64)
		c.text("settings", kv[1], 64<<10)
	}
	if req.Create && req.Delete {
		c.fail("delete", "a request cannot both create and delete a reservation")
	}
	if !req.Create && req.Name == "" && !slices.ContainsFunc(req.Settings, func(kv [2]string) bool {
		return strings.EqualFold(kv[0], "ReservationName") || strings.EqualFold(kv[0], "Reservation")
	}) {
		c.fail("name", "name the reservation to change or delete: ReservationName=NAME")
	}
	return c.err
}

// handleReservations lists the reservations, each with its window in
// force or next and whether it is in force now (scontrol show
// reservation, sinfo -T). Every user may see them, as in Slurm.
func (c *Controller) handleReservations(w http.ResponseWriter, _ *http.Request) error {
	now := c.clock.Now().UTC()
	out := []api.ReservationInfo{}
	c.fsm.Read(func(s *state.State) {
		for _, name := range s.ResvNames() {
			out = append(out, resvInfo(s, s.Reservations[name], now))
		}
	})
	writeJSON(w, http.StatusOK, out)
	return nil
}

// resvInfo shows reservation r at now.
func resvInfo(s *state.State, r *api.Reservation, now time.Time) api.ReservationInfo {
	start, end := r.Window(now)
	cores := r.CPUs
	if !r.Capacity() {
		for _, name := range r.Nodes {
			if n := s.Nodes[name]; n != nil {
				cores += n.CPUs
			}
		}
	}
	return api.ReservationInfo{Reservation: *r, Start: start, End: end, Active: r.Active(now), CoreCnt: cores}
}

// markReserved notes on each node the whole-node reservations in force
// on it at now, and whether one is a maintenance: sinfo's maint and resv.
func markReserved(s *state.State, nodes []api.Node, now time.Time) {
	if len(s.Reservations) == 0 {
		return
	}
	for _, name := range s.ResvNames() {
		r := s.Reservations[name]
		if r.Capacity() || !r.Active(now) {
			continue
		}
		for i := range nodes {
			if slices.Contains(r.Nodes, nodes[i].Name) {
				nodes[i].Reservations = append(nodes[i].Reservations, r.Name)
				nodes[i].Maint = nodes[i].Maint || r.Has(api.ResvMaint)
			}
		}
	}
}

// checkJobReservation refuses a job that names a reservation that does
// not exist, is over, or does not admit the job's user and account, in
// Slurm's words; a job that names one and no partition goes to the
// reservation's.
func checkJobReservation(i int, sp *api.JobSpec, s *state.State, now time.Time, partGiven bool) error {
	if sp.Reservation == "" {
		return nil
	}
	if why := submit.NameProblem(sp.Reservation, state.MaxResvNameBytes); why != "" {
		return refuse(i, "reservation", "--reservation=%s %s", submit.Shown(sp.Reservation), why)
	}
	r := s.Reservations[sp.Reservation]
	switch {
	case r == nil:
		return refuse(i, "reservation", "Requested reservation is invalid: --reservation=%s does not exist (reservations: %s; scontrol show reservation lists them)",
			sp.Reservation, orNoneText(s.ResvNames()))
	case r.Over(now):
		return refuse(i, "reservation", "Requested reservation is invalid: reservation %s ended at %s", r.Name, r.EndTime.Format(time.RFC3339))
	case !r.Admits(sp.User, sp.Account):
		return refuse(i, "reservation", "Access denied to requested reservation: reservation %s is for %s; user %s in account %s is not one of them",
			r.Name, resvAudience(r), sp.User, orText(sp.Account, "(none)"))
	case !partGiven && r.Partition != "":
		sp.Partition = r.Partition
	}
	return nil
}

// resvAudience says whom a reservation admits, for a refusal.
func resvAudience(r *api.Reservation) string {
	var parts []string
	if len(r.Users) > 0 {
		parts = append(parts, "users "+strings.Join(r.Users, ","))
	}
	if len(r.Accounts) > 0 {
		parts = append(parts, "accounts "+strings.Join(r.Accounts, ","))
	}
	if len(r.NotUsers) > 0 {
		parts = append(parts, "users other than "+strings.Join(r.NotUsers, ","))
	}
	if len(r.NotAccounts) > 0 {
		parts = append(parts, "accounts other than "+strings.Join(r.NotAccounts, ","))
	}
	return strings.Join(parts, " and ")
}
