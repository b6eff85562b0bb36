package ctld

import (
	"fmt"
	"slices"

	"corral/api"
	"corral/ctld/state"
)

// This file is the query layer's rule for jobs: every read and change of a
// job asks jobLevel what the request's principal may do with it.

// level is what a principal may do with a job.
type level int

const (
	// hidden: the job does not exist for the caller (another tenant's).
	hidden level = iota
	// listed: the caller sees the job without its script, environment,
	// working directory or output paths (a job of the same tenant; any
	// job, for an operator).
	listed
	// managed: listed, and the caller may cancel, hold, suspend, update
	// and signal it (its account's coordinator).
	managed
	// owned: everything, script and environment included (its owner, an
	// admin).
	owned
)

// viewer is a principal looking at one state: it answers what the
// principal may do with each job, remembering each account's tenant.
type viewer struct {
	s       *state.State
	p       principal
	tenants []string
	tenant  map[string]string
}

// viewerOf returns p's viewer of s; s must stay locked while it is used.
func viewerOf(s *state.State, p principal) *viewer {
	v := &viewer{s: s, p: p, tenant: map[string]string{}}
	if p.kind == kindUser && !p.admin() {
		v.tenants = tenantsOf(s, p)
	}
	return v
}

// tenantsOf lists the tenants p belongs to: those of the accounts it is a
// user of, and of the accounts it coordinates.
func tenantsOf(s *state.State, p principal) []string {
	var out []string
	for _, a := range append(s.UserAccounts(p.name), p.accounts...) {
		if t := s.Tenant(a); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// level is what the principal may do with j: the one place that decides.
func (v *viewer) level(j *state.Job) level {
	p := v.p
	switch {
	case p.admin():
		return owned
	case p.kind != kindUser:
		// Nodes read their jobs, scripts included, from their desired
		// state (checkNode), not through the job API.
		return hidden
	case j.Spec.User == p.name:
		return owned
	case p.coordinates(v.s, j.Spec.Account):
		return managed
	case p.role == api.RoleOperator || v.inTenant(j.Spec.Account) && !v.s.Config.Private("jobs"):
		return listed
	}
	return hidden
}

// inTenant reports whether account belongs to one of the principal's
// tenants. A job charged to no account belongs to no tenant: only its
// owner, admins and operators see it.
func (v *viewer) inTenant(account string) bool {
	t, ok := v.tenant[account]
	if !ok {
		t = v.s.Tenant(account)
		v.tenant[account] = t
	}
	return t != "" && slices.Contains(v.tenants, t)
}

// seesAccount reports whether the principal may see the records
// (accounts, users, usage) of account.
func (v *viewer) seesAccount(account string) bool {
	return v.p.operator() || v.p.kind == kindUser && v.inTenant(account)
}

// redact hides what a caller at level listed or managed may not see.
func redact(j *api.Job, l level) {
	if l >= owned {
		return
	}
	j.Spec.Script, j.Spec.Env, j.Spec.WorkDir, j.Spec.SubmitDir = "", nil, "", ""
	j.Spec.Output, j.Spec.Error, j.Spec.Args = "", "", nil
}

// deniedJob is the refusal of a change to job id by p: "no such job" when p
// may not even see it, so that ids do not tell what other tenants run.
func deniedJob(id uint64, l level, owner string) string {
	if l == hidden {
		return fmt.Sprintf("job %d: no such job", id)
	}
	return fmt.Sprintf("job %d: permission denied: it belongs to %s; only its owner, its account's coordinator or an admin may change it", id, owner)
}
