package ctld

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"corral/accounting/pgsink"
	"corral/api"
	"corral/ctld/sched"
	"corral/ctld/state"
	"corral/internal/attest"
	"corral/internal/authd"
	"corral/internal/pki"
)

// Config describes one controller member.
type Config struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	DataDir  string
	// Peers lists every voter, this member included; an empty list makes a
	// single-voter cluster, unless Join is set.
	Peers []Peer
	// Join, for a member added to a running cluster, lists members' API
	// addresses to ask to add it (membership.go); a member with Join and no
	// Raft state bootstraps nothing.
	Join []string
	// Partitions seed a new cluster's partitions (the first is the
	// default when none is marked; empty means one partition, "batch").
	// Once a cluster is seeded its partitions are replicated state, changed
	// with corral partition: the flags of a member that leads later change
	// nothing.
	Partitions []api.Partition
	// NodeTimeout is how long a node may miss heartbeats before it is DOWN.
	NodeTimeout time.Duration
	// DefMemPerCPU and Policy seed a new cluster's memory per CPU for jobs
	// that ask for none (MiB) and its scheduling policy (zero: EASY
	// backfill); afterwards they are the replicated DefMemPerCPU and
	// SchedulerPolicy settings (corral config set).
	DefMemPerCPU int64
	Policy       sched.Policy
	Raft         RaftTuning
	Logger       *slog.Logger
	// HTTPListener, when set, is used instead of listening on HTTPAddr.
	HTTPListener net.Listener
	// HTTP bounds how long API clients may take (zero: the defaults).
	HTTP HTTPTimeouts
	// Clock is the time the controller stamps and its leader loops wait
	// on; nil is the system clock.
	Clock Clock
	// TLS, when any file is named, runs the API, Raft and the calls
	// between members and to the nodes over TLS with the cluster's
	// authority (see package pki): Raft and the internal endpoints take
	// members only, a node may act only as itself.
	TLS pki.Files
	// Auth makes every request prove who sends it (a token, a host
	// agent's identity, a node's or member's certificate) and holds each
	// caller to its role and tenant; it needs TLS. Off, a request is
	// whoever api.UserHeader names, with every right (a trusted network).
	Auth bool
	// AuditKeep and AuditRetention bound the audit records the state
	// keeps: the newest AuditKeep (200,000) of the last AuditRetention
	// (30 days); a negative value keeps every one.
	AuditKeep      int
	AuditRetention time.Duration
	// Admins are users the controllers take for admins when a host's
	// agent vouches for them, as they take root: the cluster's first
	// administrators (ctld --admin), before any role is granted.
	Admins []string
	// TPMPolicy, when set, makes every node prove with its TPM what it
	// booted (internal/attest) before it registers, and again every
	// AttestEvery (10 minutes): the endorsement keys allowed and the PCR
	// values expected. A node that fails is drained.
	TPMPolicy   *attest.Policy
	AttestEvery time.Duration
	// NodeCA, when set, is the directory of an authority (ca.crt and
	// ca.key) the controllers sign node certificates with for nodes that
	// join with a join token (POST /v1/nodes/join).
	NodeCA string
	// RateLimits bound how often one principal may write and list
	// (zero fields: the defaults; see RateLimits).
	RateLimits RateLimits
	// MetricsOpen lets anyone scrape GET /metrics on a cluster that
	// authenticates requests (ctld --metrics-open), as Prometheus scrapes
	// without a token; off, a cluster with Auth takes operators' and
	// admins' tokens only (docs/metrics.md).
	MetricsOpen bool
	// AccountingPostgres, when set, is a PostgreSQL connection string:
	// the leader streams the accounting records into that database
	// (package accounting/pgsink; docs/accounting-postgres.md).
	// SinkOptions tune it (zero: the defaults).
	AccountingPostgres string
	SinkOptions        pgsink.Options
}

// Controller is one running ctld member.
type Controller struct {
	cfg   Config
	clock Clock
	log   *slog.Logger
	fsm   *FSM
	node  *raftNode
	http  *http.Server
	ln    net.Listener
	proxy *forwarder
	// tls is nil when the cluster runs without TLS; nodes carries the
	// proxied job I/O to the nodes' job APIs.
	tls   *clusterTLS
	nodes *http.Transport
	// agents verifies the identity tokens hosts' agents mint; nil when
	// the cluster takes none (no TLS or no Auth).
	agents func(token string, now time.Time) (agentClaims, pki.Identity, error)
	// audit queues the audit records of the requests this member leads;
	// attest holds the attestations it began.
	audit  *auditTrail
	attest attestations
	// limits are the principals' token buckets; nil limits nothing.
	limits *limiter
	// metrics are the member's Prometheus figures (metrics.go).
	metrics *metrics
	// sink ships the accounting records to PostgreSQL while this member
	// leads; nil without --accounting-postgres (acctsink.go).
	sink *pgsink.Sink

	mu        sync.Mutex
	leading   bool
	nextJobID uint64
	submits   chan *submitCall
	seen      map[string]time.Time
	seenDirty bool
	// badNodes are the nodes the last pass left out (sched.CheckNode),
	// so each problem is logged once.
	badNodes map[string]string
}

// New starts Raft and the HTTP listener; Run serves until its context ends.
func New(cfg Config) (*Controller, error) {
	if cfg.ID == "" {
		return nil, errors.New("--id is required: a name for this controller member, e.g. c1")
	}
	if len(cfg.Join) > 0 && len(cfg.Peers) > 0 {
		return nil, errors.New("--join adds this member to a running cluster and --peers makes a new one: give one of them")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = 10 * time.Second
	}
	if cfg.DefMemPerCPU <= 0 {
		cfg.DefMemPerCPU = 512
	}
	if len(cfg.Partitions) == 0 {
		cfg.Partitions = []api.Partition{{Name: api.DefaultPartition, Default: true}}
	}
	markDefault(cfg.Partitions)
	log := cfg.Logger.With("ctld", cfg.ID)
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	switch {
	case cfg.AuditKeep == 0:
		cfg.AuditKeep = defaultAuditKeep
	case cfg.AuditKeep < 0:
		cfg.AuditKeep = 0
	}
	switch {
	case cfg.AuditRetention == 0:
		cfg.AuditRetention = defaultAuditRetention
	case cfg.AuditRetention < 0:
		cfg.AuditRetention = 0
	}
	c := &Controller{cfg: cfg, clock: cfg.Clock, log: log, fsm: NewFSM(log), submits: make(chan *submitCall, 4096), seen: map[string]time.Time{},
		audit: newAuditTrail()}
	c.limits = newLimiter(cfg.RateLimits, c.clock.Now())
	c.metrics = newMetrics(c)
	c.fsm.observe = c.metrics.observeApply
	c.attest.pending = map[string]*pendingAttest{}
	if c.cfg.AttestEvery <= 0 {
		c.cfg.AttestEvery = defaultAttestEvery
	}
	if cfg.TLS.Enabled() {
		t, err := newClusterTLS(cfg.TLS)
		if err != nil {
			return nil, err
		}
		c.tls = t
	}
	if cfg.Auth && c.tls == nil {
		return nil, fmt.Errorf("--auth needs TLS (--tls-cert, --tls-key, --tls-ca): nodes, members and hosts' agents prove who they are with the cluster's certificates")
	}
	if cfg.Auth {
		roots := c.tls.api.ClientCAs
		c.agents = func(token string, now time.Time) (agentClaims, pki.Identity, error) {
			cl, host, err := authd.Verify(token, roots, now)
			return agentClaims{user: cl.User, uid: cl.UID}, host, err
		}
	}
	c.nodes = newNodeTransport(c.tls)
	ln := cfg.HTTPListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("--http %s: %w", cfg.HTTPAddr, err)
		}
	}
	c.cfg.HTTPAddr = ln.Addr().String()
	if c.tls != nil {
		ln = tls.NewListener(ln, c.tls.api)
	}
	c.ln = ln
	acct, err := openAccounting(cfg.DataDir, c.fsm, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if err := c.openSink(); err != nil {
		ln.Close()
		acct.closeStore()
		return nil, err
	}
	node, err := startRaft(cfg.ID, cfg.RaftAddr, cfg.DataDir, cfg.Peers, len(cfg.Join) > 0, c.fsm, cfg.Raft, c.tls, log)
	if err != nil {
		ln.Close()
		acct.closeStore()
		return nil, err
	}
	c.node = node
	c.proxy = newForwarder(c)
	c.http = c.newHTTPServer(cfg.HTTP.withDefaults())
	return c, nil
}

// markDefault leaves exactly one default partition: the first one marked,
// or the first one listed.
func markDefault(parts []api.Partition) {
	found := false
	for i := range parts {
		if parts[i].Default && !found {
			found = true
			continue
		}
		parts[i].Default = false
	}
	if !found {
		parts[0].Default = true
	}
}

// HTTPAddr returns the address the API listens on.
func (c *Controller) HTTPAddr() string { return c.cfg.HTTPAddr }

// FSM exposes the state machine (read-only use: tests and the dev mode).
func (c *Controller) FSM() *FSM { return c.fsm }

// Raft exposes the Raft instance (tests and status).
func (c *Controller) Raft() *raft.Raft { return c.node.raft }

// Run serves the API and follows leadership until ctx ends, then shuts down.
func (c *Controller) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if err := c.http.Serve(c.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	c.log.Info("controller started", "raft", c.cfg.RaftAddr, "http", c.cfg.HTTPAddr, "data", c.cfg.DataDir, "peers", len(c.cfg.Peers))
	go c.followLeadership(ctx)
	go c.announceSelf(ctx)
	go c.accountingSync(ctx)
	go c.joinCluster(ctx)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.http.Shutdown(sctx)
	if serr := c.node.shutdown(); err == nil && serr != nil {
		err = serr
	}
	c.fsm.acct.closeStore()
	c.log.Info("controller stopped")
	return err
}

// propose applies one command through Raft and returns the FSM's result.
func (c *Controller) propose(t state.CommandType, payload any) (any, error) {
	data, err := state.Encode(t, payload)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	f := c.node.raft.Apply(data, 10*time.Second)
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("committing %s: %w", t, err)
	}
	c.metrics.proposeSecs.WithLabelValues(t.String()).Observe(time.Since(began).Seconds())
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// leaderHTTP returns the leader's HTTP address, whether this member leads,
// and false when no leader is known.
func (c *Controller) leaderHTTP() (addr string, self bool, ok bool) {
	_, id := c.node.raft.LeaderWithID()
	if id == "" {
		return "", false, false
	}
	if string(id) == c.cfg.ID {
		return c.cfg.HTTPAddr, true, true
	}
	c.fsm.Read(func(s *state.State) { addr = s.Members[string(id)] })
	return addr, false, addr != ""
}

// announceSelf makes sure the leader has recorded this member's HTTP
// address, so that other members can forward writes here when it leads.
func (c *Controller) announceSelf(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var known string
		c.fsm.Read(func(s *state.State) { known = s.Members[c.cfg.ID] })
		if known == c.cfg.HTTPAddr {
			continue
		}
		if c.node.raft.State() == raft.Leader {
			_, _ = c.propose(state.CmdSetMember, &state.SetMember{ID: c.cfg.ID, HTTPAddr: c.cfg.HTTPAddr})
			continue
		}
		c.proxy.announce(ctx, state.SetMember{ID: c.cfg.ID, HTTPAddr: c.cfg.HTTPAddr})
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
