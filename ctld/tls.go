package ctld

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"corral/ctld/state"
	"corral/internal/pki"
)

// clusterTLS is a member's TLS when the cluster runs over it (Config.TLS):
// the API listener, which verifies a client certificate when one is shown
// (members, nodes; the CLI may show none); the Raft listener, which takes
// members only; and the member as a client of other members (Raft, writes
// forwarded to the leader) and of the nodes' job APIs.
type clusterTLS struct {
	api, raft, dial *tls.Config
}

func newClusterTLS(f pki.Files) (*clusterTLS, error) {
	api, err := f.Server(tls.VerifyClientCertIfGiven)
	if err != nil {
		return nil, err
	}
	// Raft: the same certificate and authority, a member's certificate
	// required of every peer.
	rf := api.Clone()
	rf.ClientAuth = tls.RequireAndVerifyClientCert
	rf.VerifyConnection = pki.RequireRole(pki.RoleMember)
	dial := &tls.Config{RootCAs: api.ClientCAs, Certificates: api.Certificates, MinVersion: tls.VersionTLS13}
	return &clusterTLS{api: api, raft: rf, dial: dial}, nil
}

// to returns the member's client configuration for a peer that must show
// a certificate of role: a member (Raft, forwarded writes) or a node (its
// job API).
func (t *clusterTLS) to(role pki.Role) *tls.Config {
	cfg := t.dial.Clone()
	cfg.VerifyConnection = pki.RequireRole(role)
	return cfg
}

// scheme is the URL scheme of members' and nodes' APIs.
func (c *Controller) scheme() string {
	if c.tls != nil {
		return "https"
	}
	return "http"
}

// raftStream carries Raft over TLS between members: both ends show a
// member's certificate of the cluster's authority, or the handshake fails.
type raftStream struct {
	net.Listener
	advertise net.Addr
	tls       *clusterTLS
}

func newRaftStream(bind string, advertise net.Addr, t *clusterTLS) (*raftStream, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &raftStream{Listener: tls.NewListener(ln, t.raft), advertise: advertise, tls: t}, nil
}

// Dial connects to the member at addr, which must show a member's
// certificate for that address.
func (s *raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(addr))
	if err != nil {
		return nil, err
	}
	cfg := s.tls.to(pki.RoleMember)
	cfg.ServerName = host
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	return d.Dial("tcp", string(addr))
}

// Addr is the address other members reach this one at.
func (s *raftStream) Addr() net.Addr { return s.advertise }

// peerHeader carries, on a request a member forwards to the leader, the
// identity its own TLS peer proved ("node/n1"). The leader believes it only
// from a member; a member drops whatever a client sent in it.
const peerHeader = "X-Corral-Peer"

// peerKeyHeader carries, beside peerHeader, the fingerprint of the key
// that peer's certificate holds.
const peerKeyHeader = "X-Corral-Peer-Key"

// caller returns who sent r as its certificate proves it: the TLS peer, or,
// for a request a member forwarded, the peer that member verified. False
// without TLS or without a certificate.
func (c *Controller) caller(r *http.Request) (pki.Identity, bool) {
	if c.tls == nil {
		return pki.Identity{}, false
	}
	id, ok := pki.PeerIdentity(r.TLS)
	if !ok {
		return pki.Identity{}, false
	}
	if id.Role != pki.RoleMember || r.Header.Get("X-Corral-Forwarded") == "" {
		return id, true
	}
	role, name, found := strings.Cut(r.Header.Get(peerHeader), "/")
	if !found {
		return pki.Identity{}, false // forwarded for a client that showed none
	}
	fwd, err := pki.ParseRole(role)
	if err != nil || name == "" {
		return pki.Identity{}, false
	}
	return pki.Identity{Role: fwd, Name: name}, true
}

// callerKey is the fingerprint of the key of the certificate caller
// verified: the TLS peer's, or the one a member forwarded for.
func (c *Controller) callerKey(r *http.Request) string {
	if c.tls == nil {
		return ""
	}
	if id, ok := pki.PeerIdentity(r.TLS); ok && id.Role == pki.RoleMember && r.Header.Get("X-Corral-Forwarded") != "" {
		return r.Header.Get(peerKeyHeader)
	}
	return pki.PeerKey(r.TLS)
}

// checkNode says why r may not act as node name: over TLS only that node's
// daemon, showing its own certificate, may register, heartbeat, report or
// read the node's desired state. Nil without TLS.
func (c *Controller) checkNode(r *http.Request, name string) error {
	if c.tls == nil {
		return nil
	}
	id, ok := c.caller(r)
	if ok && id.Role == pki.RoleNode && id.Name == name {
		var err error
		c.fsm.Read(func(s *state.State) { err = s.CheckNodeKey(name, c.callerKey(r)) })
		if err != nil {
			return &httpError{status: http.StatusForbidden, field: "name", msg: err.Error()}
		}
		return nil
	}
	shown := "no node certificate"
	if ok {
		shown = fmt.Sprintf("a certificate of %s %s", id.Role, id.Name)
	}
	return &httpError{status: http.StatusForbidden, field: "name", msg: fmt.Sprintf(
		"node %s: the request showed %s; only node %s's daemon, with its certificate (corral ca issue --role node --name %s), may act for it",
		name, shown, name, name)}
}
