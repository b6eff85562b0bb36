package ctld

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/pki"
	"corral/submit"
)

// principalKind is what sort of caller a request comes from.
type principalKind string

const (
	kindAnonymous principalKind = "anonymous"
	kindUser      principalKind = "user"
	kindNode      principalKind = "node"
	kindMember    principalKind = "member"
)

// principal is who a request comes from, as principalOf decides it: the one
// place that reads credentials. Handlers take it from the request's context
// (principalFrom) and ask it what it may do.
type principal struct {
	kind principalKind
	// name is the user, node or member.
	name string
	// role is a user's role; accounts the accounts a coordinator
	// coordinates; ops what its token was narrowed to (nil: every
	// operation its role allows).
	role     api.Role
	accounts []string
	ops      []api.Op
	// via says how it was proved, for logs, errors and whoami.
	via string
	// open is set when the cluster does not authenticate users
	// (Config.Auth off): the caller is whoever api.UserHeader names and
	// passes every check a user's role decides.
	open bool
}

// tokenPrefix starts every token's text: corral_ID_SECRET.
const tokenPrefix = "corral_"

// principalOf decides who sent r. A request with an Authorization header
// is who its credentials prove, or refused (401); one without is the node
// or member its certificate names, or anonymous — or, on a cluster that
// does not authenticate users, whoever it says it is.
func (c *Controller) principalOf(r *http.Request) (principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		switch scheme {
		case "Bearer":
			return c.tokenPrincipal(strings.TrimSpace(cred))
		case "Corral-Agent":
			return c.agentPrincipal(strings.TrimSpace(cred))
		case "Basic":
			// The status page's browsers (ui.go); nowhere else.
			if !isUI(r) {
				return principal{}, unauthorized("Basic credentials are taken by the status page (%s) only: send Bearer TOKEN", uiPrefix)
			}
			token, err := basicToken(cred)
			if err != nil {
				return principal{}, err
			}
			return c.tokenPrincipal(token)
		}
		return principal{}, unauthorized("the Authorization header's scheme %q is not one corral takes: send Bearer TOKEN (corral token create) or let the CLI use the host's agent (corral authd)", submit.Shown(scheme))
	}
	if id, ok := c.caller(r); ok {
		switch id.Role {
		case pki.RoleNode:
			return principal{kind: kindNode, name: id.Name, via: "node certificate", open: !c.cfg.Auth}, nil
		case pki.RoleMember:
			return principal{kind: kindMember, name: id.Name, via: "member certificate", open: !c.cfg.Auth}, nil
		}
	}
	if !c.cfg.Auth {
		return principal{kind: kindUser, name: r.Header.Get(api.UserHeader), role: api.RoleAdmin, via: "authentication off (the caller's word)", open: true}, nil
	}
	return principal{kind: kindAnonymous, via: "no credentials"}, nil
}

// tokenPrincipal is the user a personal or service token stands for.
func (c *Controller) tokenPrincipal(text string) (principal, error) {
	id, secret, ok := strings.Cut(strings.TrimPrefix(text, tokenPrefix), "_")
	if !strings.HasPrefix(text, tokenPrefix) || !ok || id == "" || secret == "" {
		return principal{}, unauthorized("the bearer token is not a corral token (corral_ID_SECRET): check CORRAL_TOKEN or the token file, or create one (corral token create)")
	}
	var tok *state.TokenRecord
	var err error
	known := false
	c.fsm.Read(func(s *state.State) {
		tok, err = s.TokenFor(id, secret, c.clock.Now())
		known = s.Tokens[id] != nil
	})
	if err != nil && !known {
		return principal{}, &unknownToken{unauthorized("%v", err)}
	}
	if err != nil {
		return principal{}, unauthorized("%v", err)
	}
	if tok.Join {
		return principal{}, unauthorized("token %s is a join token: it lets a new node get its credential (noded --join), and is no credential for the API", tok.ID)
	}
	p := principal{kind: kindUser, name: tok.User, role: tok.Role, ops: tok.Ops, via: "token " + tok.ID}
	if tok.Account != "" {
		p.accounts = []string{tok.Account}
	}
	return p, nil
}

// agentPrincipal is the user a host's agent vouched for.
func (c *Controller) agentPrincipal(text string) (principal, error) {
	if c.agents == nil {
		return principal{}, unauthorized("this cluster takes no identities from hosts' agents: it runs without TLS or without --auth; use a token (corral token create)")
	}
	claims, host, err := c.agents(text, c.clock.Now())
	if err != nil {
		return principal{}, unauthorized("identity token: %v", err)
	}
	p := principal{kind: kindUser, name: claims.user, role: api.RoleUser, via: fmt.Sprintf("agent on %s %s (uid %d)", host.Role, host.Name, claims.uid)}
	if claims.uid == 0 || slices.Contains(c.cfg.Admins, claims.user) {
		p.role = api.RoleAdmin // root, or a named admin, on a host allowed to vouch for users
	}
	c.fsm.Read(func(s *state.State) {
		if g := s.Roles[p.name]; g != nil && p.role != api.RoleAdmin {
			p.role, p.accounts = g.Role, g.Accounts
		}
	})
	return p, nil
}

// agentClaims is what a host's agent vouched for.
type agentClaims struct {
	user string
	uid  uint32
}

// roleRank orders roles for "at least": admin > operator > coordinator >
// user.
func roleRank(r api.Role) int {
	if i := slices.Index(api.Roles, r); i >= 0 {
		return len(api.Roles) - i
	}
	return 0
}

// allows reports whether p's credentials cover operation op.
func (p principal) allows(op api.Op) bool { return p.ops == nil || slices.Contains(p.ops, op) }

// user reports whether p is an authenticated user (or anyone, open).
func (p principal) user() bool { return p.open || p.kind == kindUser }

// admin reports whether p may do anything a user may.
func (p principal) admin() bool { return p.open || p.kind == kindUser && p.role == api.RoleAdmin }

// operator reports whether p has at least the operator's rights.
func (p principal) operator() bool {
	return p.admin() || p.kind == kindUser && p.role == api.RoleOperator
}

// coordinates reports whether p coordinates account (or one above it).
func (p principal) coordinates(s *state.State, account string) bool {
	if p.kind != kindUser || p.role != api.RoleCoordinator {
		return false
	}
	for _, a := range p.accounts {
		if s.Under(account, a) {
			return true
		}
	}
	return false
}

// whoami is p as the API shows it.
func (p principal) whoami() api.Whoami {
	return api.Whoami{Kind: string(p.kind), Name: p.name, Role: p.role, Accounts: p.accounts, Ops: p.ops, Via: p.via}
}

// String names p in messages: "user alice (token t1)".
func (p principal) String() string {
	if p.kind == kindAnonymous {
		return "an anonymous caller"
	}
	return fmt.Sprintf("%s %s (%s)", p.kind, p.name, p.via)
}

type principalKey struct{}

// withPrincipal returns r carrying p.
func withPrincipal(r *http.Request, p principal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
}

// principalFrom returns the principal the route's access check put in r's
// context; anonymous when none did (which no route allows).
func principalFrom(r *http.Request) principal {
	if p, ok := r.Context().Value(principalKey{}).(principal); ok {
		return p
	}
	return principal{kind: kindAnonymous, via: "no access check"}
}

// unknownToken is the refusal of a token this member does not hold: one
// made a moment ago may not have reached it yet, so a follower lets the
// leader answer.
type unknownToken struct{ error }

func (e *unknownToken) Unwrap() error { return e.error }

func unauthorized(format string, args ...any) error {
	return &httpError{status: http.StatusUnauthorized, msg: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) error {
	return &httpError{status: http.StatusForbidden, msg: fmt.Sprintf(format, args...)}
}
