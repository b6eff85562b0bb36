package ctld

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/pki"
	"corral/submit"
)

const (
	// defaultTokenLife and maxTokenLife bound a token's lifetime, at
	// creation and at each renewal.
	defaultTokenLife = 30 * 24 * time.Hour
	defaultJoinLife  = time.Hour
	maxTokenLife     = 366 * 24 * time.Hour
	maxDescription   = 256
)

// handleAuthView answers GET /v1/auth: who the caller is, the tokens it may
// see (its own; every one to an admin) and the role grants (every one to
// operators and admins, the caller's own to others).
func (c *Controller) handleAuthView(w http.ResponseWriter, r *http.Request) error {
	p := principalFrom(r)
	v := api.AuthView{Whoami: p.whoami(), Tokens: []api.Token{}, Roles: []api.RoleGrant{}}
	c.fsm.Read(func(s *state.State) {
		for _, id := range sortedKeys(s.Tokens) {
			if t := s.Tokens[id]; p.admin() || p.kind == kindUser && t.User == p.name {
				v.Tokens = append(v.Tokens, t.Token)
			}
		}
		for _, u := range sortedKeys(s.Roles) {
			if p.operator() || p.kind == kindUser && u == p.name {
				v.Roles = append(v.Roles, *s.Roles[u])
			}
		}
	})
	writeJSON(w, http.StatusOK, v)
	return nil
}

// handleToken answers POST /v1/tokens: create, renew or revoke a token.
func (c *Controller) handleToken(w http.ResponseWriter, r *http.Request) error {
	var req api.TokenRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p := principalFrom(r)
	now := c.clock.Now().UTC()
	noteTarget(r, "token %s", submit.Shown(req.Renew+req.Revoke))
	switch {
	case req.Renew != "" && req.Revoke != "":
		return badRequest("renew and revoke in one request: send one")
	case req.Revoke != "":
		if _, err := c.ownToken(p, "revoke", req.Revoke); err != nil {
			return err
		}
		if _, err := c.propose(state.CmdRevokeToken, &state.RevokeToken{Now: now, ID: req.Revoke, By: p.name}); err != nil {
			return badRequest("%v", err)
		}
		return c.answerToken(w, req.Revoke, "")
	case req.Renew != "":
		life, err := tokenLife(req.ExpiresIn)
		if err != nil {
			return err
		}
		t, err := c.ownToken(p, "renew", req.Renew)
		if err != nil {
			return err
		}
		rec := state.TokenRecord{Token: api.Token{ID: t.ID, User: t.User, Expires: now.Add(life)}}
		if err := c.proposeChecked(state.CmdPutToken, &state.PutToken{Now: now, Token: rec, Renew: true, By: p.name}); err != nil {
			return err
		}
		return c.answerToken(w, req.Renew, "")
	}
	rec, secret, err := c.newToken(p, &req, now)
	if err != nil {
		return err
	}
	noteTarget(r, "token %s for %s", rec.ID, rec.User)
	if err := c.proposeChecked(state.CmdPutToken, &state.PutToken{Now: now, Token: rec, By: p.name}); err != nil {
		return err
	}
	return c.answerToken(w, rec.ID, secret)
}

// newToken checks a creation request against what p may grant and makes
// the token: its id, its secret and the record that keeps its hash.
func (c *Controller) newToken(p principal, req *api.TokenRequest, now time.Time) (state.TokenRecord, string, error) {
	if req.Join {
		if !p.admin() {
			return state.TokenRecord{}, "", forbidden("%s may not create join tokens: they let a node into the cluster; an admin creates them", p)
		}
		if req.ExpiresIn == 0 {
			req.ExpiresIn = int64(defaultJoinLife / time.Second)
		}
		req.User, req.Role, req.Account, req.Ops = p.name, api.RoleUser, "", nil
	} else if req.Reusable {
		return state.TokenRecord{}, "", &fieldError{Field: "reusable", Msg: "only a join token (--join) is reusable by many nodes"}
	}
	life, err := tokenLife(req.ExpiresIn)
	if err != nil {
		return state.TokenRecord{}, "", err
	}
	if req.User == "" {
		req.User = p.name
	}
	if req.Role == "" {
		req.Role = api.RoleUser
	}
	if err := checkTokenFields(req); err != nil {
		return state.TokenRecord{}, "", err
	}
	var gerr error
	c.fsm.Read(func(s *state.State) { gerr = mayGrant(s, p, req) })
	if gerr != nil {
		return state.TokenRecord{}, "", gerr
	}
	id, secret := randomText(6), base64.RawURLEncoding.EncodeToString(randomBytes(32))
	rec := state.TokenRecord{Hash: state.HashSecret(secret), Token: api.Token{
		ID: id, User: req.User, Role: req.Role, Account: req.Account, Ops: req.Ops, Description: req.Description,
		CreatedBy: p.name, Created: now, Expires: now.Add(life), Join: req.Join, Reusable: req.Reusable}}
	return rec, tokenPrefix + id + "_" + secret, nil
}

// checkTokenFields checks a creation request's fields on their own.
func checkTokenFields(req *api.TokenRequest) error {
	if why := submit.NameProblem(req.User, submit.MaxNameBytes); why != "" {
		return &fieldError{Field: "user", Msg: fmt.Sprintf("user %q %s", submit.Shown(req.User), why)}
	}
	if !slices.Contains(api.Roles, req.Role) {
		return &fieldError{Field: "role", Msg: fmt.Sprintf("role %q: use one of %v", submit.Shown(string(req.Role)), api.Roles)}
	}
	if (req.Role == api.RoleCoordinator) != (req.Account != "") {
		return &fieldError{Field: "account", Msg: "a coordinator's token names the account it coordinates (--account), and only a coordinator's does"}
	}
	seen := map[api.Op]bool{}
	for _, op := range req.Ops {
		if !slices.Contains(api.Ops, op) || seen[op] {
			return &fieldError{Field: "ops", Msg: fmt.Sprintf("operation %q: name each of %v at most once", submit.Shown(string(op)), api.Ops)}
		}
		seen[op] = true
	}
	if why := submit.TextProblem(req.Description, maxDescription); why != "" {
		return &fieldError{Field: "description", Msg: "description " + why}
	}
	return nil
}

// mayGrant says why p may not create the token req asks for: a user makes
// tokens for itself, with no more than its role and its own credentials
// allow; an admin makes any.
func mayGrant(s *state.State, p principal, req *api.TokenRequest) error {
	if req.Role == api.RoleCoordinator && s.Accounts[req.Account] == nil {
		return &fieldError{Field: "account", Msg: fmt.Sprintf("account %q does not exist (corral account add %s)", submit.Shown(req.Account), req.Account)}
	}
	if p.admin() {
		return nil
	}
	switch {
	case req.User != p.name:
		return forbidden("%s may create tokens only for %s; an admin creates tokens for other users", p, p.name)
	case roleRank(req.Role) > roleRank(p.role):
		return forbidden("%s may not create a token of role %s, above its own (%s)", p, req.Role, p.role)
	case req.Role == api.RoleCoordinator && !p.coordinates(s, req.Account):
		return forbidden("%s does not coordinate account %s", p, req.Account)
	}
	if p.ops != nil {
		if len(req.Ops) == 0 {
			return forbidden("%s is limited to %v: name --ops within them for the new token", p, p.ops)
		}
		for _, op := range req.Ops {
			if !p.allows(op) {
				return forbidden("%s is limited to %v: it may not grant %s", p, p.ops, op)
			}
		}
	}
	return nil
}

// ownToken returns token id when p may renew or revoke it: its owner or an
// admin. Another's token is "unknown", as a wrong id is.
func (c *Controller) ownToken(p principal, what, id string) (api.Token, error) {
	var t *state.TokenRecord
	c.fsm.Read(func(s *state.State) { t = s.Tokens[id] })
	if t == nil || !p.admin() && (p.kind != kindUser || t.User != p.name) {
		return api.Token{}, &httpError{status: http.StatusNotFound, field: what, msg: fmt.Sprintf("token %s: no such token of yours (corral token list)", submit.Shown(id))}
	}
	return t.Token, nil
}

// proposeChecked commits cmd and turns the apply's refusal into a 400.
func (c *Controller) proposeChecked(t state.CommandType, cmd any) error {
	res, err := c.propose(t, cmd)
	if err != nil {
		return err
	}
	if e, ok := res.(error); ok {
		return badRequest("%v", e)
	}
	return nil
}

// answerToken writes token id as the state holds it now, with its secret
// when it was just made.
func (c *Controller) answerToken(w http.ResponseWriter, id, secret string) error {
	var t *state.TokenRecord
	c.fsm.Read(func(s *state.State) { t = s.Tokens[id] })
	if t == nil {
		return notFound("token %s: no such token", id)
	}
	writeJSON(w, http.StatusOK, api.TokenResponse{Token: t.Token, Secret: secret})
	return nil
}

// tokenLife is a request's lifetime in seconds as a duration.
func tokenLife(seconds int64) (time.Duration, error) {
	if seconds == 0 {
		return defaultTokenLife, nil
	}
	if seconds < 60 || seconds > int64(maxTokenLife/time.Second) {
		return 0, &fieldError{Field: "expires_in", Msg: fmt.Sprintf("expires_in %d s: give between a minute and %d days", seconds, int(maxTokenLife/(24*time.Hour)))}
	}
	return time.Duration(seconds) * time.Second, nil
}

// handleRole answers POST /v1/roles: an admin gives a user a role or takes
// it away.
func (c *Controller) handleRole(w http.ResponseWriter, r *http.Request) error {
	var req api.RoleRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if why := submit.NameProblem(req.Grant.User, submit.MaxNameBytes); why != "" {
		return &fieldError{Field: "user", Msg: fmt.Sprintf("user %q %s", submit.Shown(req.Grant.User), why)}
	}
	noteTarget(r, "user %s", req.Grant.User)
	cmd := &state.SetRole{Grant: req.Grant, Delete: req.Delete, By: principalFrom(r).name}
	if err := c.proposePolicy(state.CmdSetRole, cmd, func(s *state.State) error { return s.CheckSetRole(cmd) }); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct{}{})
	return nil
}

// randomText is n random bytes in hex.
func randomText(n int) string { return hex.EncodeToString(randomBytes(n)) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return b
}

// handleJoin answers POST /v1/nodes/join: a new node brings a join token,
// its name and a certificate request for its own key, and gets a node
// certificate of the cluster's authority (signed with --node-ca). The
// token is spent through Raft before the certificate is made, so a
// single-use token lets one node in however many ask at once.
func (c *Controller) handleJoin(w http.ResponseWriter, r *http.Request) error {
	var req api.JoinRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	noteTarget(r, "node %s", submit.Shown(req.Name))
	if c.cfg.NodeCA == "" {
		return &httpError{status: http.StatusNotImplemented, msg: "this cluster issues no node credentials: start the controllers with --node-ca DIR (the authority's ca.crt and ca.key), or issue the node's certificate by hand (corral ca issue --role node)"}
	}
	if err := checkJoin(&req); err != nil {
		return err
	}
	csr, err := x509.ParseCertificateRequest(req.CSR)
	if err == nil {
		err = csr.CheckSignature()
	}
	if err != nil {
		return &fieldError{Field: "csr", Msg: fmt.Sprintf("node %s: the certificate request does not parse or is not signed by its key: %v", req.Name, err)}
	}
	id, secret, _ := strings.Cut(strings.TrimPrefix(req.Token, tokenPrefix), "_")
	var jerr error
	c.fsm.Read(func(s *state.State) {
		if jerr = s.CheckJoin(id, secret, c.clock.Now()); jerr == nil {
			if n := s.Nodes[req.Name]; n != nil && n.Key != "" {
				jerr = fmt.Errorf("node %s is registered with another key: if it was reinstalled, an operator forgets that key first (corral node forget-key %s)", req.Name, req.Name)
			}
		}
	})
	if jerr != nil {
		return unauthorized("node %s: %v", req.Name, jerr)
	}
	if err := c.proposeChecked(state.CmdUseJoinToken, &state.UseJoinToken{Now: c.clock.Now().UTC(), ID: id, Node: req.Name}); err != nil {
		return unauthorized("node %s: %v", req.Name, err)
	}
	der, err := pki.Sign(c.cfg.NodeCA, csr.PublicKey, pki.Request{Role: pki.RoleNode, Name: req.Name, Hosts: req.Hosts})
	if err != nil {
		return fmt.Errorf("node %s: signing its certificate with --node-ca %s: %w", req.Name, c.cfg.NodeCA, err)
	}
	c.log.Info("node joined with a join token", "node", req.Name, "token", id)
	writeJSON(w, http.StatusOK, api.JoinResponse{Cert: der})
	return nil
}

// checkJoin checks a join request's fields on their own.
func checkJoin(req *api.JoinRequest) error {
	if why := submit.NameProblem(req.Name, maxNodeNameBytes); why != "" {
		return &fieldError{Field: "name", Msg: fmt.Sprintf("node %q %s", submit.Shown(req.Name), why)}
	}
	if !strings.HasPrefix(req.Token, tokenPrefix) || strings.Count(req.Token, "_") < 2 {
		return unauthorized("node %s: the join token is not a corral token (corral_ID_SECRET): ask an admin for one (corral token create --join)", req.Name)
	}
	if len(req.Hosts) > 16 {
		return &fieldError{Field: "hosts", Msg: fmt.Sprintf("node %s: %d host names; give at most 16", req.Name, len(req.Hosts))}
	}
	for _, h := range req.Hosts {
		if why := submit.NameProblem(h, 253); why != "" {
			return &fieldError{Field: "hosts", Msg: fmt.Sprintf("node %s: host %q %s", req.Name, submit.Shown(h), why)}
		}
	}
	return nil
}
