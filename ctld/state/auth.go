package state

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"corral/api"
)

// TokenRecord is a personal or service token: what the API shows of it and
// the SHA-256 of its secret, never the secret itself.
type TokenRecord struct {
	api.Token
	Hash string `json:"hash"`
}

// PutToken creates a token or, with Renew, gives an existing one the
// record's Expires. The leader made the id and the secret; the entry
// carries only the secret's hash.
type PutToken struct {
	Now   time.Time   `json:"now"`
	Token TokenRecord `json:"token"`
	Renew bool        `json:"renew,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// RevokeToken revokes a token at once and for good.
type RevokeToken struct {
	Now time.Time `json:"now"`
	ID  string    `json:"id"`
	By  string    `json:"by"`
}

// UseJoinToken spends a join token on node Node, which gets its
// credential: a single-use token once, a reusable one until it expires.
type UseJoinToken struct {
	Now  time.Time `json:"now"`
	ID   string    `json:"id"`
	Node string    `json:"node"`
}

// SetRole gives a user a role, or removes the grant (Delete).
type SetRole struct {
	Grant  api.RoleGrant `json:"grant"`
	Delete bool          `json:"delete,omitempty"`
	// By is who asked (the request's principal), as the leader stamps it.
	By string `json:"by,omitempty"`
}

// tokenKeep is how long an expired or revoked token stays listed before a
// later token change forgets it.
const tokenKeep = 30 * 24 * time.Hour

// HashSecret is the hash a token's secret is kept as.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// TokenFor returns the live token id whose secret this is at now, or why
// it is refused.
func (s *State) TokenFor(id, secret string, now time.Time) (*TokenRecord, error) {
	t := s.Tokens[id]
	if t == nil || subtle.ConstantTimeCompare([]byte(t.Hash), []byte(HashSecret(secret))) != 1 {
		return nil, fmt.Errorf("token %s is unknown or its secret is wrong: ask an admin for a token (corral token create)", id)
	}
	if !t.Revoked.IsZero() {
		return nil, fmt.Errorf("token %s was revoked at %s by its owner or an admin: create a new one (corral token create)", id, t.Revoked.UTC().Format(time.RFC3339))
	}
	if !now.Before(t.Expires) {
		return nil, fmt.Errorf("token %s expired at %s: create a new one (corral token create), and renew tokens before they expire (corral token renew)", id, t.Expires.UTC().Format(time.RFC3339))
	}
	return t, nil
}

func (s *State) applyPutToken(c *PutToken) error {
	t := c.Token
	old := s.Tokens[t.ID]
	switch {
	case t.ID == "" || t.User == "":
		return errors.New("a token needs an id and a user")
	case c.Renew && old == nil:
		return fmt.Errorf("token %s: no such token", t.ID)
	case c.Renew && !old.Revoked.IsZero():
		return fmt.Errorf("token %s was revoked; it cannot be renewed", t.ID)
	case c.Renew && !c.Now.Before(old.Expires):
		return fmt.Errorf("token %s expired at %s; renew tokens before they expire, or create a new one", t.ID, old.Expires.UTC().Format(time.RFC3339))
	case c.Renew:
		renewed := *old
		renewed.Expires = t.Expires
		s.Tokens[t.ID] = &renewed
	case old != nil:
		return fmt.Errorf("token %s exists already", t.ID)
	default:
		t.Uses = 0
		s.Tokens[t.ID] = &t
	}
	s.forgetOldTokens(c.Now)
	return nil
}

// CheckJoin says why join token id with secret cannot let a node join at
// now; nil when it can.
func (s *State) CheckJoin(id, secret string, now time.Time) error {
	t, err := s.TokenFor(id, secret, now)
	switch {
	case err != nil:
		return err
	case !t.Join:
		return fmt.Errorf("token %s is not a join token: create one (corral token create --join)", id)
	case !t.Reusable && t.Uses > 0:
		return fmt.Errorf("join token %s was used already (it lets one node join): create another, or a reusable one (corral token create --join --reusable)", id)
	}
	return nil
}

func (s *State) applyUseJoin(c *UseJoinToken) error {
	t := s.Tokens[c.ID]
	switch {
	case t == nil || !t.Join:
		return fmt.Errorf("token %s is not a join token", c.ID)
	case !t.Revoked.IsZero() || !c.Now.Before(t.Expires):
		return fmt.Errorf("join token %s was revoked or expired", c.ID)
	case !t.Reusable && t.Uses > 0:
		return fmt.Errorf("join token %s was used already (it lets one node join)", c.ID)
	}
	used := *t
	used.Uses++
	s.Tokens[c.ID] = &used
	return nil
}

func (s *State) applyRevokeToken(c *RevokeToken) error {
	old := s.Tokens[c.ID]
	switch {
	case old == nil:
		return fmt.Errorf("token %s: no such token", c.ID)
	case !old.Revoked.IsZero():
		return nil // revoking twice is revoking
	}
	t := *old
	t.Revoked = c.Now
	s.Tokens[c.ID] = &t
	s.forgetOldTokens(c.Now)
	return nil
}

// forgetOldTokens drops the tokens that ended (expired or revoked) more
// than tokenKeep before now.
func (s *State) forgetOldTokens(now time.Time) {
	for id, t := range s.Tokens {
		end := t.Expires
		if !t.Revoked.IsZero() && t.Revoked.Before(end) {
			end = t.Revoked
		}
		if now.Sub(end) > tokenKeep {
			delete(s.Tokens, id)
		}
	}
}

func (s *State) applySetRole(c *SetRole) error {
	if err := s.CheckSetRole(c); err != nil {
		return err
	}
	if c.Delete {
		delete(s.Roles, c.Grant.User)
		return nil
	}
	g := c.Grant
	g.Accounts = slices.Clone(g.Accounts)
	slices.Sort(g.Accounts)
	s.Roles[g.User] = &g
	return nil
}

// CheckSetRole says why the apply would refuse c; nil when it would take it.
func (s *State) CheckSetRole(c *SetRole) error {
	g := c.Grant
	switch {
	case g.User == "":
		return errors.New("a role grant needs a user")
	case c.Delete && s.Roles[g.User] == nil:
		return fmt.Errorf("user %s has no role grant", g.User)
	case c.Delete:
		return nil
	case !slices.Contains(api.Roles, g.Role) || g.Role == api.RoleUser:
		return fmt.Errorf("user %s: role %q: grant admin, operator or coordinator (every user is a user)", g.User, g.Role)
	case g.Role == api.RoleCoordinator && len(g.Accounts) == 0:
		return fmt.Errorf("user %s: a coordinator coordinates accounts: name them", g.User)
	case g.Role != api.RoleCoordinator && len(g.Accounts) > 0:
		return fmt.Errorf("user %s: only a coordinator's grant names accounts", g.User)
	}
	for _, a := range g.Accounts {
		if s.Accounts[a] == nil {
			return fmt.Errorf("user %s: account %q does not exist (corral account add %s)", g.User, a, a)
		}
	}
	return nil
}

// Tenant is the top-level account (a child of root) that account belongs
// to; "" when the account is unknown.
func (s *State) Tenant(account string) string {
	for hops := 0; hops <= len(s.Accounts); hops++ {
		a := s.Accounts[account]
		if a == nil {
			return ""
		}
		if a.Parent == "" || a.Parent == "root" {
			return a.Name
		}
		account = a.Parent
	}
	return ""
}

// Under reports whether account is top or one of its descendants.
func (s *State) Under(account, top string) bool {
	for hops := 0; hops <= len(s.Accounts); hops++ {
		if account == top {
			return true
		}
		a := s.Accounts[account]
		if a == nil || a.Parent == "" || a.Parent == "root" {
			return false
		}
		account = a.Parent
	}
	return false
}

// UserAccounts lists the accounts user is associated with, sorted.
func (s *State) UserAccounts(user string) []string {
	var out []string
	for k := range s.Users {
		if k.User == user {
			out = append(out, k.Account)
		}
	}
	slices.Sort(out)
	return out
}
