package state

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"corral/api"
	"corral/fairshare"
	"corral/qos"
)

// UserKey names an association: a user in an account.
type UserKey struct {
	Account string `json:"account"`
	User    string `json:"user"`
}

// Usage is an association's raw usage (billed TRES-seconds), decayed with
// the configured half-life up to At. Every replica decays with the
// leader-stamped times in the log, so all hold the same figures.
type Usage struct {
	Raw float64   `json:"raw"`
	At  time.Time `json:"at"`
}

// decayed returns u's raw usage as of now (fairshare.Decay, with the
// half-life in seconds).
func (u Usage) decayed(now time.Time, halfLife int64) float64 {
	if u.At.IsZero() {
		return u.Raw
	}
	return fairshare.Decay(u.Raw, now.Sub(u.At), time.Duration(halfLife)*time.Second)
}

func defaultQOS() map[string]*api.QOS {
	m := map[string]*api.QOS{}
	for _, q := range api.DefaultQOS() {
		m[q.Name] = &q
	}
	return m
}

// billing returns what a run costs per second: its CPUs, memory (GiB) and
// the job's GPUs weighted by the billing weights.
func billing(j *Job, a *Allocation, c api.SchedConfig) float64 {
	gpus := 0
	for _, g := range j.Spec.Gres {
		if g.Name == "gpu" {
			gpus += g.Count
		}
	}
	return float64(a.CPUs)*c.BillingCPU + float64(a.MemMB)/1024*c.BillingMem + float64(gpus)*c.BillingGPU
}

// chargeUsage adds a run's billed time to its job's association when the
// run stops holding resources.
func (s *State) chargeUsage(j *Job, a *Allocation, now time.Time) {
	secs := a.Elapsed(now).Seconds()
	if secs <= 0 {
		return
	}
	k := UserKey{Account: j.Spec.Account, User: j.Spec.User}
	u := s.Usage[k]
	s.Usage[k] = Usage{Raw: u.decayed(now, s.Config.DecayHalfLife) + secs*billing(j, a, s.Config), At: now}
}

func (s *State) applySetConfig(c *SetConfig) error {
	cfg := s.Config
	for _, kv := range c.Settings {
		if err := cfg.Set(kv[0], kv[1]); err != nil {
			return fmt.Errorf("%s: %w", kv[0], err)
		}
	}
	s.Config = cfg
	return nil
}

func (s *State) applyPutQOS(c *PutQOS) error {
	if err := s.CheckQOS(&c.QOS, c.Delete); err != nil {
		return err
	}
	// The map is replaced, not changed: a pass's snapshot may hold the
	// old one (see State.QOS).
	m := maps.Clone(s.QOS)
	if m == nil {
		m = map[string]*api.QOS{}
	}
	if c.Delete {
		delete(m, c.QOS.Name)
	} else {
		q := c.QOS
		m[q.Name] = &q
	}
	s.QOS = m
	return nil
}

// CheckQOS says why a QoS change cannot be applied, or nil: package qos's
// rules for the QoS itself, and, for a deletion, that no QoS may preempt it
// and no job uses it.
func (s *State) CheckQOS(q *api.QOS, del bool) error {
	if !del {
		return qos.Check(q, s.QOS)
	}
	switch {
	case q.Name == "":
		return errors.New("a QoS needs a name")
	case s.QOS[q.Name] == nil:
		return fmt.Errorf("qos %s: no such QoS (QoS: %s)", q.Name, strings.Join(s.QOSNames(), ", "))
	}
	if by := qos.PreemptedBy(q.Name, s.QOS); len(by) > 0 {
		return fmt.Errorf("qos %s: %s may preempt it; change %s's --preempt first", q.Name, by[0], by[0])
	}
	if n := s.activeInAnyQOS(q.Name); n > 0 {
		return fmt.Errorf("qos %s: %d pending or running jobs use it; cancel them or wait until they end", q.Name, n)
	}
	return nil
}

// QOSNames returns the QoS names, sorted.
func (s *State) QOSNames() []string { return qos.Names(s.QOS) }

func (s *State) applyPutAccount(c *PutAccount) error {
	a := c.Account
	if err := s.CheckAccount(&a, c.Delete); err != nil {
		return err
	}
	if c.Delete {
		delete(s.Accounts, a.Name)
		return nil
	}
	s.Accounts[a.Name] = &a
	return nil
}

func (s *State) CheckAccount(a *api.Account, del bool) error {
	switch {
	case a.Name == "" || a.Name == "root":
		return errors.New("an account needs a name other than root")
	case del && s.Accounts[a.Name] == nil:
		return fmt.Errorf("account %s: no such account", a.Name)
	case del:
		for _, name := range sortedKeys(s.Accounts) {
			o := s.Accounts[name]
			if o.Parent == a.Name {
				return fmt.Errorf("account %s: account %s is under it; delete or move that first", a.Name, o.Name)
			}
		}
		var members []string
		for k := range s.Users {
			if k.Account == a.Name {
				members = append(members, k.User)
			}
		}
		if len(members) > 0 {
			sort.Strings(members)
			who := "user " + members[0] + " is"
			if len(members) > 1 {
				who = "users " + strings.Join(members, ", ") + " are"
			}
			return fmt.Errorf("account %s: %s in it; delete that first (corral user delete %s --account %s)", a.Name, who, members[0], a.Name)
		}
		return nil
	case a.Parent == "":
		a.Parent = "root"
	}
	if a.Parent != "root" && s.Accounts[a.Parent] == nil {
		return fmt.Errorf("account %s: parent %s does not exist (add it first, or use --parent root)", a.Name, a.Parent)
	}
	if a.Shares < 0 {
		return fmt.Errorf("account %s: shares must be ≥ 0", a.Name)
	}
	// No cycles: walk up from the parent.
	for p, hops := a.Parent, 0; p != "root"; hops++ {
		if p == a.Name || hops > len(s.Accounts) {
			return fmt.Errorf("account %s: parent %s is under it", a.Name, a.Parent)
		}
		p = s.Accounts[p].Parent
	}
	return nil
}

func (s *State) applyPutUser(c *PutUser) error {
	u := c.User
	k := UserKey{Account: u.Account, User: u.Name}
	switch {
	case u.Name == "":
		return errors.New("a user needs a name")
	case s.Accounts[u.Account] == nil:
		return fmt.Errorf("user %s: account %q does not exist (corral account add %s)", u.Name, u.Account, u.Account)
	case c.Delete && s.Users[k] == nil:
		return fmt.Errorf("user %s is not in account %s", u.Name, u.Account)
	case c.Delete:
		delete(s.Users, k)
		return nil
	case u.Shares < 0:
		return fmt.Errorf("user %s: shares must be ≥ 0", u.Name)
	}
	s.Users[k] = &u
	return nil
}

// FairshareFactors returns the fair-share factor of each association as a
// lookup for the scheduling pass.
func (s *State) FairshareFactors(now time.Time) func(account, user string) float64 {
	factors := s.fairshare(now)
	if len(factors) == 0 {
		return noFairshare
	}
	return func(account, user string) float64 { return factors[UserKey{Account: account, User: user}] }
}

// noFairshare is the factor of everyone when no user has a share.
func noFairshare(account, user string) float64 { return 0 }

// DefaultAccount is the account a user's jobs are charged to when they
// name none: the first, by name, the user belongs to; "" when none.
func (s *State) DefaultAccount(user string) string {
	best := ""
	for k := range s.Users {
		if k.User == user && (best == "" || k.Account < best) {
			best = k.Account
		}
	}
	return best
}

// activeInAnyQOS counts the pending and running jobs of every user in a
// QoS.
func (s *State) activeInAnyQOS(q string) int {
	n := 0
	for k, c := range s.qosActive {
		if k.qos == q {
			n += c
		}
	}
	return n
}

// ActiveInQOS counts a user's pending and running jobs in a QoS (a job
// record each: an array's unstarted tasks count once).
func (s *State) ActiveInQOS(user, q string) int { return s.qosActive[qosUser{user, q}] }

// qosUser keys the count of a user's active jobs in a QoS.
type qosUser struct{ user, qos string }

// countActive keeps qosActive right as job old (nil for a new record) is
// replaced by j.
func (s *State) countActive(old, j *Job) {
	was := old != nil && !old.State.Terminal() && old.Spec.QOS != ""
	is := !j.State.Terminal() && j.Spec.QOS != ""
	switch {
	case was && !is:
		s.addActive(old.Spec.User, old.Spec.QOS, -1)
	case is && !was:
		s.addActive(j.Spec.User, j.Spec.QOS, 1)
	case was && is && (old.Spec.User != j.Spec.User || old.Spec.QOS != j.Spec.QOS):
		s.addActive(old.Spec.User, old.Spec.QOS, -1)
		s.addActive(j.Spec.User, j.Spec.QOS, 1)
	}
}

func (s *State) addActive(user, q string, delta int) {
	k := qosUser{user, q}
	if n := s.qosActive[k] + delta; n > 0 {
		s.qosActive[k] = n
	} else {
		delete(s.qosActive, k)
	}
}

// FairshareTree builds the association tree with usage decayed to now.
func (s *State) FairshareTree(now time.Time) *fairshare.Assoc {
	root := &fairshare.Assoc{Account: "root", Shares: 1}
	nodes := map[string]*fairshare.Assoc{"root": root}
	for _, name := range sortedKeys(s.Accounts) {
		a := s.Accounts[name]
		nodes[name] = &fairshare.Assoc{Account: name, Shares: a.Shares}
	}
	for _, name := range sortedKeys(s.Accounts) {
		parent := nodes[s.Accounts[name].Parent]
		if parent == nil {
			parent = root
		}
		parent.Children = append(parent.Children, nodes[name])
	}
	keys := make([]UserKey, 0, len(s.Users))
	for k := range s.Users {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].Account != keys[b].Account {
			return keys[a].Account < keys[b].Account
		}
		return keys[a].User < keys[b].User
	})
	// Running jobs count too: what they have billed so far, on top of the
	// decayed usage of the jobs that ended (charged when they end).
	running := map[UserKey]float64{}
	for _, name := range sortedKeys(s.Nodes) {
		for _, id := range s.Nodes[name].Allocs {
			a := s.Allocs[id]
			if j := s.Jobs[a.Job]; j != nil && a.Active() {
				running[UserKey{Account: j.Spec.Account, User: j.Spec.User}] += a.Elapsed(now).Seconds() * billing(j, a, s.Config)
			}
		}
	}
	for _, k := range keys {
		acct := nodes[k.Account]
		if acct == nil {
			continue
		}
		acct.Children = append(acct.Children, &fairshare.Assoc{
			Account: k.Account, User: k.User, Shares: s.Users[k].Shares,
			Usage: s.Usage[k].decayed(now, s.Config.DecayHalfLife) + running[k],
		})
	}
	return root
}

// fairshare computes every association's factor under the configured
// algorithm.
func (s *State) fairshare(now time.Time) map[UserKey]float64 {
	if len(s.Users) == 0 {
		return nil
	}
	_, factors := fairshare.Compute(s.FairshareTree(now), s.FairshareAlgorithm())
	out := make(map[UserKey]float64, len(factors))
	for k, f := range factors {
		out[UserKey{Account: k.Account, User: k.User}] = f
	}
	return out
}

// CheckUser says why a PutUser change cannot be applied, or nil, without
// changing anything.
func (s *State) CheckUser(u api.AccountUser, del bool) error {
	scratch := &State{Accounts: s.Accounts, Users: maps.Clone(s.Users)}
	return scratch.applyPutUser(&PutUser{User: u, Delete: del})
}

// PolicyView returns the configuration, QoS, accounts and users, sorted.
func (s *State) PolicyView() api.PolicyView {
	p := policyOf(s)
	return api.PolicyView{Config: p.Config, QOS: p.QOS, Accounts: p.Accounts, Users: p.Users}
}

// FairshareAlgorithm is the configured fair-share algorithm: the one place
// the setting is read (api.SchedConfig.Set admits only the known names;
// anything else reads as Fair Tree, Slurm's default).
func (s *State) FairshareAlgorithm() fairshare.Algorithm {
	alg, err := fairshare.ParseAlgorithm(s.Config.Fairshare)
	if err != nil {
		return fairshare.FairTree
	}
	return alg
}
