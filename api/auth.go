package api

import (
	"context"
	"net/http"
	"time"
)

// Credentials gives the Authorization header a client sends with each
// request: a personal or service token ("Bearer corral_..."), or an
// identity the host's agent vouched for ("Corral-Agent ..."). A source
// may cache what it hands out and renew it before it expires; it is
// called once per request, from any goroutine.
type Credentials interface {
	Authorization(ctx context.Context) (string, error)
}

// BearerToken is a personal or service token (corral token create),
// sent as it is with every request.
type BearerToken string

// Authorization returns "Bearer TOKEN".
func (t BearerToken) Authorization(context.Context) (string, error) {
	return "Bearer " + string(t), nil
}

// authorize sets the caller's credentials and claimed user on req.
func (c *Client) authorize(ctx context.Context, req *http.Request) error {
	if c.User != "" {
		req.Header.Set(UserHeader, c.User)
	}
	if c.Auth == nil {
		return nil
	}
	v, err := c.Auth.Authorization(ctx)
	if err != nil {
		return err
	}
	if v != "" {
		req.Header.Set("Authorization", v)
	}
	return nil
}

// Role is what a principal may do (docs/security.md): an admin everything;
// an operator nodes, partitions, QoS and reads of everything except job
// scripts, environments and outputs; a coordinator the jobs and users of
// its accounts and their children; a user their own jobs.
type Role string

// Roles.
const (
	RoleAdmin       Role = "admin"
	RoleOperator    Role = "operator"
	RoleCoordinator Role = "coordinator"
	RoleUser        Role = "user"
)

// Roles lists the roles, most powerful first.
var Roles = []Role{RoleAdmin, RoleOperator, RoleCoordinator, RoleUser}

// Op is a class of operation a token may be narrowed to.
type Op string

// Operations. A token without Ops may do everything its role allows.
const (
	// OpRead: listings, job and node details, usage.
	OpRead Op = "read"
	// OpSubmit: submitting jobs.
	OpSubmit Op = "submit"
	// OpCancel: cancelling, holding, suspending and updating jobs.
	OpCancel Op = "cancel"
	// OpExec: running commands in jobs, signalling them, their files
	// and output.
	OpExec Op = "exec"
	// OpAdmin: everything else (nodes, partitions, policy, tokens, roles).
	OpAdmin Op = "admin"
)

// Ops lists the operations.
var Ops = []Op{OpRead, OpSubmit, OpCancel, OpExec, OpAdmin}

// Token is a personal or service token as the controllers keep it: never
// its secret, which only its creator saw once.
type Token struct {
	ID   string `json:"id"`
	User string `json:"user"`
	Role Role   `json:"role"`
	// Account is the account a coordinator's token coordinates.
	Account string `json:"account,omitempty"`
	// Ops narrows the token to those operations; empty allows all its
	// role does.
	Ops         []Op      `json:"ops,omitempty"`
	Description string    `json:"description,omitempty"`
	CreatedBy   string    `json:"created_by"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	// Revoked is when it was revoked; zero while it is not.
	Revoked time.Time `json:"revoked,omitzero"`
	// Join marks a join token: it lets a new node get its credential
	// (noded --join), once or, Reusable, until it expires; it is no
	// credential for the API.
	Join     bool `json:"join,omitempty"`
	Reusable bool `json:"reusable,omitempty"`
	// Uses counts the nodes that joined with it.
	Uses int `json:"uses,omitempty"`
}

// TokenRequest creates a token (Renew empty), renews one (Renew its id,
// ExpiresIn the new lifetime) or revokes one (Revoke its id).
type TokenRequest struct {
	User        string `json:"user,omitempty"`
	Role        Role   `json:"role,omitempty"`
	Account     string `json:"account,omitempty"`
	Ops         []Op   `json:"ops,omitempty"`
	Description string `json:"description,omitempty"`
	// ExpiresIn is the lifetime in seconds; 0 is the default (30 days).
	ExpiresIn int64  `json:"expires_in,omitempty"`
	Renew     string `json:"renew,omitempty"`
	Revoke    string `json:"revoke,omitempty"`
	// Join makes a join token (admins only), Reusable by many nodes.
	Join     bool `json:"join,omitempty"`
	Reusable bool `json:"reusable,omitempty"`
}

// JoinRequest is a new node asking for its credential: a join token, its
// name and a certificate request for its own key (PKCS #10, DER).
type JoinRequest struct {
	Token string   `json:"token"`
	Name  string   `json:"name"`
	CSR   []byte   `json:"csr"`
	Hosts []string `json:"hosts,omitempty"`
}

// JoinResponse is the node's certificate (DER) of the cluster's authority.
type JoinResponse struct {
	Cert []byte `json:"cert"`
}

// TokenResponse is the token made or changed; Secret is set only when it
// was created, and is the one time anyone sees it.
type TokenResponse struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret,omitempty"`
}

// RoleGrant gives a user a role beyond user: admin, operator, or
// coordinator of Accounts.
type RoleGrant struct {
	User     string   `json:"user"`
	Role     Role     `json:"role"`
	Accounts []string `json:"accounts,omitempty"`
}

// RoleRequest sets or removes (Delete) a user's grant.
type RoleRequest struct {
	Grant  RoleGrant `json:"grant"`
	Delete bool      `json:"delete,omitempty"`
}

// AuthView lists the tokens (without secrets) and role grants a caller may
// see, and who the caller is.
type AuthView struct {
	Whoami Whoami      `json:"whoami"`
	Tokens []Token     `json:"tokens"`
	Roles  []RoleGrant `json:"roles"`
}

// Whoami is the principal a controller decided a request comes from.
type Whoami struct {
	Kind     string   `json:"kind"` // anonymous, user, node, member
	Name     string   `json:"name,omitempty"`
	Role     Role     `json:"role,omitempty"`
	Accounts []string `json:"accounts,omitempty"`
	Ops      []Op     `json:"ops,omitempty"`
	Via      string   `json:"via"`
}

// AuthView returns who the caller is, the tokens it may see and the role
// grants (corral token list, corral whoami).
func (c *Client) AuthView(ctx context.Context) (*AuthView, error) {
	var v AuthView
	return &v, c.do(ctx, http.MethodGet, "/v1/auth", nil, &v)
}

// Token creates, renews or revokes a token.
func (c *Client) Token(ctx context.Context, req TokenRequest) (*TokenResponse, error) {
	var v TokenResponse
	return &v, c.do(ctx, http.MethodPost, "/v1/tokens", req, &v)
}

// SetRole gives a user a role or takes it away.
func (c *Client) SetRole(ctx context.Context, req RoleRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/roles", req, nil)
}

// Join asks for a new node's certificate with a join token (noded --join).
func (c *Client) Join(ctx context.Context, req JoinRequest) (*JoinResponse, error) {
	var v JoinResponse
	return &v, c.do(ctx, http.MethodPost, "/v1/nodes/join", req, &v)
}
