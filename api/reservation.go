package api

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// Reservation is an advance reservation (Slurm's scontrol create
// reservation): nodes, or a block of CPUs and GPUs on them, held over a
// time window for the users and accounts it names. Reservations are
// replicated state, created, changed and deleted by operators and admins
// (package reservation reads scontrol's KEY=VALUE form of them); the
// scheduling pass starts no job that would overlap one it may not use,
// and runs a job that names one (sbatch --reservation) only inside it.
type Reservation struct {
	Name string `json:"name"`
	// StartTime and EndTime bound the first window; a zero EndTime is no
	// end (Duration=UNLIMITED). A reservation with a repeat flag (HOURLY,
	// DAILY, WEEKLY) has a window of the same length every period after
	// the first.
	StartTime time.Time `json:"start_time"`
	EndTime   time.Time `json:"end_time,omitempty"`
	// Nodes are the nodes it holds, sorted: whole, or for a capacity
	// reservation (CPUs or GPUs set) the share of each that Parts give.
	Nodes []string `json:"nodes,omitempty"`
	// Partition is the partition the nodes were chosen from, when one was
	// named (PartitionName=).
	Partition string `json:"partition,omitempty"`
	// Users and Accounts may use it (a job whose user is in Users or
	// whose account is in Accounts); NotUsers and NotAccounts may not,
	// whatever the other lists say (Slurm's "Users=-alice"). A list and
	// its Not form are never both set.
	Users       []string `json:"users,omitempty"`
	NotUsers    []string `json:"not_users,omitempty"`
	Accounts    []string `json:"accounts,omitempty"`
	NotAccounts []string `json:"not_accounts,omitempty"`
	// Flags are Slurm's reservation flags it has, in ResvFlags order.
	Flags []ResvFlag `json:"flags,omitempty"`
	// CPUs and GPUs are a capacity reservation's TRES (TRES=cpu=N,
	// gres/gpu=M): that many CPUs and GPUs held on its nodes (Parts says
	// how many on each) rather than the whole nodes. Both zero: whole
	// nodes.
	CPUs int `json:"cpus,omitempty"`
	GPUs int `json:"gpus,omitempty"`
	// Parts are what a capacity reservation holds on each of its nodes,
	// in node order.
	Parts []ResvPart `json:"parts,omitempty"`
	// PurgeAfter is PURGE_COMP's idle time in seconds: a consumable
	// reservation is deleted once it has had no job pending or running in
	// it for that long after its first job started.
	PurgeAfter int64 `json:"purge_after_s,omitempty"`
	// Started counts the jobs that started in the reservation.
	Started int `json:"started,omitempty"`
}

// ResvPart is what a capacity reservation holds on one node: CPUs with
// their share of the node's memory, and GPUs. Used is what the jobs of a
// consumable (PURGE_COMP) reservation took from it when they started: it
// goes back to the cluster, not to the reservation, when they end.
type ResvPart struct {
	Node     string `json:"node"`
	CPUs     int    `json:"cpus,omitempty"`
	MemMB    int64  `json:"mem_mb,omitempty"`
	GPUs     int    `json:"gpus,omitempty"`
	UsedCPUs int    `json:"used_cpus,omitempty"`
	UsedGPUs int    `json:"used_gpus,omitempty"`
}

// ResvFlag is one of Slurm's reservation flags that corral honours.
type ResvFlag string

// Reservation flags. Append only: they are stored in Raft logs.
const (
	// ResvMaint marks a maintenance reservation: its nodes show as maint
	// in sinfo while it is active, jobs it keeps from starting wait with
	// "ReqNodeNotAvail, Reserved for maintenance", and it may overlap
	// other reservations, taking precedence over them.
	ResvMaint ResvFlag = "MAINT"
	// ResvIgnoreJobs lets the reservation take nodes that running jobs
	// are expected to hold past its start.
	ResvIgnoreJobs ResvFlag = "IGNORE_JOBS"
	// ResvHourly, ResvDaily and ResvWeekly repeat the window every hour,
	// day or week.
	ResvHourly ResvFlag = "HOURLY"
	ResvDaily  ResvFlag = "DAILY"
	ResvWeekly ResvFlag = "WEEKLY"
	// ResvFlex lets a job of the reservation that does not fit inside it
	// run outside it, as any other job would.
	ResvFlex ResvFlag = "FLEX"
	// ResvOverlap lets the reservation take resources another one holds,
	// taking precedence over it as a maintenance reservation does.
	ResvOverlap ResvFlag = "OVERLAP"
	// ResvPurgeComp makes a capacity reservation consumable: what a job
	// takes from it leaves it for good, and the reservation is deleted
	// once used up, or once idle for PurgeAfter after its first job.
	ResvPurgeComp ResvFlag = "PURGE_COMP"
	// ResvSpecNodes says the nodes were named (Nodes=) rather than chosen
	// by count; Slurm shows it, and so does corral.
	ResvSpecNodes ResvFlag = "SPEC_NODES"
)

// ResvFlags lists the flags in the order they are stored and shown.
var ResvFlags = []ResvFlag{ResvMaint, ResvFlex, ResvOverlap, ResvIgnoreJobs, ResvHourly, ResvDaily, ResvWeekly,
	ResvPurgeComp, ResvSpecNodes}

// DefaultPurgeAfter is PURGE_COMP's idle time when the flag gives none,
// as in Slurm: five minutes.
const DefaultPurgeAfter = 5 * 60

// Has reports whether the reservation has flag f.
func (r *Reservation) Has(f ResvFlag) bool { return slices.Contains(r.Flags, f) }

// Capacity reports whether the reservation holds CPUs and GPUs rather
// than whole nodes.
func (r *Reservation) Capacity() bool { return r.CPUs > 0 || r.GPUs > 0 }

// Consumable reports whether what a job takes from the reservation
// leaves it for good (PURGE_COMP on a capacity reservation); otherwise it
// comes back when the job ends (reusable).
func (r *Reservation) Consumable() bool { return r.Capacity() && r.Has(ResvPurgeComp) }

// Precedes reports whether the reservation takes precedence over those it
// overlaps: a MAINT or OVERLAP one does.
func (r *Reservation) Precedes() bool { return r.Has(ResvMaint) || r.Has(ResvOverlap) }

// Period returns how often the window repeats; 0 when it does not.
func (r *Reservation) Period() time.Duration {
	switch {
	case r.Has(ResvHourly):
		return time.Hour
	case r.Has(ResvDaily):
		return 24 * time.Hour
	case r.Has(ResvWeekly):
		return 7 * 24 * time.Hour
	}
	return 0
}

// Duration returns the length of each window; 0 for a reservation without
// an end.
func (r *Reservation) Duration() time.Duration {
	if r.EndTime.IsZero() {
		return 0
	}
	return r.EndTime.Sub(r.StartTime)
}

// Window returns the window in force at now, or the next one: for a
// reservation that does not repeat, its only window (which may have
// ended). end is zero for a reservation without an end.
func (r *Reservation) Window(now time.Time) (start, end time.Time) {
	start, end = r.StartTime, r.EndTime
	p := r.Period()
	if p == 0 || end.IsZero() || now.Before(end) {
		return start, end
	}
	k := now.Sub(end)/p + 1
	return start.Add(k * p), end.Add(k * p)
}

// Active reports whether a window of the reservation is in force at now.
func (r *Reservation) Active(now time.Time) bool {
	start, end := r.Window(now)
	return !now.Before(start) && (end.IsZero() || now.Before(end))
}

// Over reports whether the reservation has no window left after now.
func (r *Reservation) Over(now time.Time) bool {
	return r.Period() == 0 && !r.EndTime.IsZero() && !now.Before(r.EndTime)
}

// Admits reports whether a job of user in account may use the
// reservation: neither is denied, and the user is among Users or the
// account among Accounts (anyone not denied when both lists are empty).
func (r *Reservation) Admits(user, account string) bool {
	if slices.Contains(r.NotUsers, user) || account != "" && slices.Contains(r.NotAccounts, account) {
		return false
	}
	if len(r.Users) == 0 && len(r.Accounts) == 0 {
		return true
	}
	return slices.Contains(r.Users, user) || account != "" && slices.Contains(r.Accounts, account)
}

// ReservationInfo is a reservation as the controllers show it at a
// moment: with its current or next window and whether it is in force.
type ReservationInfo struct {
	Reservation
	// Start and End are the window in force, or the next one (a repeating
	// reservation's moves on); End is zero for one without an end.
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitempty"`
	// Active says a window is in force now (State=ACTIVE).
	Active bool `json:"active"`
	// CoreCnt is the CPUs it holds: a capacity reservation's, or all of
	// its nodes'.
	CoreCnt int `json:"core_cnt"`
}

// ReservationRequest creates, changes or deletes a reservation (scontrol
// create|update|delete reservation, corral reservation). Settings are
// scontrol's KEY=VALUE pairs, read by the controllers (package
// reservation); on a create without ReservationName the controllers name
// it after its first user or account, as Slurm does.
type ReservationRequest struct {
	Name     string      `json:"name,omitempty"`
	Create   bool        `json:"create,omitempty"`
	Delete   bool        `json:"delete,omitempty"`
	Settings [][2]string `json:"settings,omitempty"`
}

// ReservationResponse names the reservation a request created or changed.
type ReservationResponse struct {
	Name string `json:"name"`
}

// Reservations returns the cluster's reservations, by name.
func (c *Client) Reservations(ctx context.Context) ([]ReservationInfo, error) {
	var out []ReservationInfo
	return out, c.do(ctx, http.MethodGet, "/v1/reservations", nil, &out)
}

// PutReservation creates, changes or deletes a reservation and returns
// its name.
func (c *Client) PutReservation(ctx context.Context, req ReservationRequest) (string, error) {
	var out ReservationResponse
	err := c.do(ctx, http.MethodPost, "/v1/reservations", req, &out)
	return out.Name, err
}
