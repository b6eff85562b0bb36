package ctld

import (
	"errors"
	"net/http"
	"strings"

	"corral/api"
)

// access is who may call a route, checked before its handler runs; what a
// caller may see or change of each job, account or token the handler
// decides through the same principal (jobaccess.go).
type access struct {
	// name is how the route table's test and docs name the rule.
	name string
	// op is the operation a narrowed token must include.
	op    api.Op
	allow func(c *Controller, p principal) bool
}

var (
	// anyone: no credentials needed (the cluster's status).
	anyone = access{name: "anyone", allow: func(*Controller, principal) bool { return true }}
	// users: any authenticated user whose credentials allow the
	// operation; the handler narrows what they see or change to what
	// their role allows. usersAdmin is users managing their own
	// credentials, or admins and coordinators managing others' (the
	// handler decides which).
	usersRead, usersSubmit, usersCancel = users(api.OpRead), users(api.OpSubmit), users(api.OpCancel)
	usersExec, usersAdmin               = users(api.OpExec), users(api.OpAdmin)
	// operators: operators and admins (nodes, partitions, QoS).
	operators = access{name: "operators", op: api.OpAdmin, allow: func(_ *Controller, p principal) bool { return p.operator() }}
	// admins: admins only (settings, accounts, roles).
	admins = access{name: "admins", op: api.OpAdmin, allow: func(_ *Controller, p principal) bool { return p.admin() }}
	// nodes: a node daemon, which the handler holds to its own name
	// (checkNode); anyone on a cluster without TLS, which cannot tell.
	nodes = access{name: "nodes", allow: func(c *Controller, p principal) bool { return c.tls == nil || p.kind == kindNode }}
	// members: controller members (internal endpoints); anyone on a
	// cluster without TLS.
	members = access{name: "members", allow: func(c *Controller, p principal) bool { return c.tls == nil || p.kind == kindMember }}
	// scrapers: Prometheus and whoever reads the member's figures:
	// operators and admins on a cluster that authenticates (a scraper
	// sends an operator's token, narrowed to read), anyone with
	// Config.MetricsOpen or without Auth (docs/metrics.md).
	scrapers = access{name: "scrapers", op: api.OpRead, allow: func(c *Controller, p principal) bool { return c.cfg.MetricsOpen || p.operator() }}
)

// users is the rule that takes any authenticated user for operation op.
func users(op api.Op) access {
	return access{name: "users", op: op, allow: func(_ *Controller, p principal) bool { return p.user() }}
}

// route is one endpoint of the API: its pattern, who may call it and its
// handler.
type route struct {
	pattern string
	access  access
	handler http.HandlerFunc
}

// writes reports whether rt changes state: a follower forwards it to the
// leader before anything is checked, so that the leader decides every
// write against the newest state and audits it.
func (rt route) writes() bool {
	return strings.HasPrefix(rt.pattern, "POST ") || strings.HasPrefix(rt.pattern, "PUT ")
}

// audited reports whether rt's requests become audit records: every write
// but the node daemons' heartbeats and reports and the members' own
// announcements (a node's registration is recorded).
func (rt route) audited() bool {
	switch rt.pattern {
	case "POST /v1/nodes/heartbeat", "POST /v1/nodes/status", "POST /v1/internal/members":
		return false
	}
	return rt.writes()
}

// routeTable lists every endpoint the controllers serve. Adding one means
// adding it here with its access rule, and to the test's matrix
// (TestEveryEndpointHasAnAccessEntry fails otherwise).
func (c *Controller) routeTable() []route {
	return []route{
		{"POST /v1/jobs", usersSubmit, c.write(c.handleSubmit)},
		{"GET /v1/jobs", usersRead, c.read(c.handleListJobs)},
		{"GET /v1/queue", usersRead, c.read(c.handleQueue)},
		{"GET /v1/jobs/{id}", usersRead, c.read(c.handleGetJob)},
		{"GET /v1/jobs/{id}/why", usersRead, c.read(c.handleWhy)},
		{"POST /v1/jobs/cancel", usersCancel, c.write(c.handleCancel)},
		{"POST /v1/jobs/hold", usersCancel, c.write(c.handleHold)},
		{"POST /v1/jobs/suspend", usersCancel, c.write(c.handleSuspend)},
		{"POST /v1/jobs/requeue", usersCancel, c.write(c.handleRequeue)},
		{"POST /v1/jobs/top", usersCancel, c.write(c.handleTop)},
		{"POST /v1/jobs/update", usersCancel, c.write(c.handleUpdateJob)},
		{"POST /v1/jobs/migrate", usersCancel, c.write(c.handleMigrate)},
		{"POST /v1/jobs/checkpoint", usersCancel, c.write(c.handleCheckpoint)},
		{"POST /v1/jobs/{id}/steps", usersExec, c.write(c.handleBeginStep)},
		{"POST /v1/jobs/{id}/steps/{step}/end", usersExec, c.write(c.handleEndStep)},
		{"POST /v1/jobs/{id}/steps/{step}/cancel", usersCancel, c.write(c.handleCancelStep)},
		{"GET /v1/steps", usersRead, c.read(c.handleListSteps)},
		{"GET /v1/nodes", usersRead, c.read(c.handleListNodes)},
		{"GET /v1/nodes/{name}", usersRead, c.read(c.handleGetNode)},
		{"GET /v1/nodes/{name}/desired", nodes, c.handleDesired},
		{"POST /v1/nodes/register", nodes, c.write(c.handleRegister)},
		{"POST /v1/nodes/heartbeat", nodes, c.write(c.handleHeartbeat)},
		{"POST /v1/nodes/status", nodes, c.write(c.handleNodeStatus)},
		{"POST /v1/nodes/drain", operators, c.write(c.handleDrain)},
		{"POST /v1/nodes/forget-key", operators, c.write(c.handleForgetKey)},
		{"POST /v1/nodes/features", operators, c.write(c.handleNodeFeatures)},
		{"POST /v1/nodes/join", anyone, c.write(c.handleJoin)},
		{"POST /v1/nodes/attest/begin", nodes, c.write(c.handleAttestBegin)},
		{"POST /v1/nodes/attest/finish", nodes, c.write(c.handleAttestFinish)},
		{"GET /v1/partitions", usersRead, c.read(c.handlePartitions)},
		{"GET /v1/licenses", usersRead, c.read(c.handleLicenses)},
		{"POST /v1/partitions", operators, c.write(c.handlePartition)},
		{"GET /v1/reservations", usersRead, c.read(c.handleReservations)},
		{"POST /v1/reservations", operators, c.write(c.handleReservation)},
		{"GET /v1/status", anyone, c.handleStatus},
		{"POST /v1/internal/members", members, c.write(c.handleSetMember)},
		{"POST /v1/internal/members/join", members, c.write(c.handleMemberJoin)},
		{"GET /v1/policy", usersRead, c.read(c.handlePolicy)},
		{"POST /v1/config", admins, c.write(c.handleConfig)},
		{"POST /v1/qos", operators, c.write(c.handleQOS)},
		{"POST /v1/accounts", admins, c.write(c.handleAccount)},
		{"POST /v1/users", usersAdmin, c.write(c.handleUser)},
		{"GET /v1/priority", usersRead, c.read(c.handlePriority)},
		{"GET /v1/share", usersRead, c.read(c.handleShare)},
		{"GET /v1/auth", usersRead, c.read(c.handleAuthView)},
		{"POST /v1/tokens", usersAdmin, c.write(c.handleToken)},
		{"POST /v1/roles", admins, c.write(c.handleRole)},
		{"GET /v1/audit", usersRead, c.read(c.handleAudit)},
		{"GET /metrics", scrapers, c.handleMetrics},
		{"GET /v1/openapi.json", anyone, handleOpenAPI},
		{"GET /v1/accounting/jobs", usersRead, c.read(c.handleAccountingJobs)},
		{"GET /v1/accounting/summary", operators, c.read(c.handleAccountingSummary)},
		{"GET /v1/accounting/usage", usersRead, c.read(c.handleAccountingUsage)},
		{"GET /v1/accounting/cluster", usersRead, c.read(c.handleAccountingCluster)},
		{"GET /v1/accounting/series", usersRead, c.read(c.handleAccountingSeries)},
		{"GET /v1/internal/accounting/records", members, c.read(c.handleAccountingRecords)},
		{"GET /ui/", usersRead, c.read(c.handleUIOverview)},
		{"GET /ui/jobs/{id}", usersRead, c.read(c.handleUIJob)},
		{"GET /ui/usage.svg", usersRead, c.read(c.handleUIUsage)},
	}
}

// jobIORouteTable lists the job I/O endpoints, served outside
// limitRequests (jobio.go).
func (c *Controller) jobIORouteTable() []route {
	return []route{
		{"POST /v1/jobs/{id}/exec", usersExec, c.jobIO("exec")},
		{"POST /v1/jobs/{id}/signal", usersCancel, c.jobIO("signal")},
		{"GET /v1/jobs/{id}/file", usersExec, c.jobIO("read")},
		{"PUT /v1/jobs/{id}/file", usersExec, c.jobIO("write")},
		{"GET /v1/jobs/{id}/output", usersExec, c.jobIO("output")},
	}
}

// guard decides the request's principal, charges the request to its rate
// limit (ratelimit.go), checks it against rt's access rule, and hands the
// request, carrying it, to rt's handler; the leader audits what
// rt.audited says, refusals included.
func (c *Controller) guard(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rt.writes() && !c.isLeading() {
			c.proxy.forward(w, r)
			return
		}
		p, err := c.principalOf(r)
		if err == nil {
			p, err = c.actingForJob(p, r)
		}
		var unknown *unknownToken
		if errors.As(err, &unknown) && !c.isLeading() && r.Header.Get("X-Corral-Forwarded") == "" {
			c.proxy.forward(w, r) // a token made a moment ago: the leader holds it
			return
		}
		if err != nil {
			p = principal{kind: kindAnonymous, via: "credentials refused"}
		} else if err = c.rateLimit(p, r); err == nil {
			err = c.check(rt.access, p, r)
		}
		serve := func(w http.ResponseWriter, r *http.Request) {
			if err != nil {
				c.writeErr(w, r, err)
				return
			}
			rt.handler(w, withPrincipal(r, p))
		}
		if rt.audited() {
			c.audited(w, r, p, serve)
			return
		}
		serve(w, r)
	}
}

// check says why p may not call the route r under a.
func (c *Controller) check(a access, p principal, r *http.Request) error {
	if a.allow(c, p) && (p.open || a.op == "" || p.allows(a.op)) {
		return nil
	}
	what := r.Method + " " + r.URL.Path
	switch {
	case a.name == "members":
		return forbidden("only controller members may call %s: show a member's certificate of the cluster's authority", what)
	case a.name == "nodes":
		return forbidden("only node daemons may call %s, each with its own certificate (corral ca issue --role node --name NODE)", what)
	case p.kind == kindAnonymous:
		return unauthorized("%s needs credentials: run the CLI on a host with an agent (corral authd), or set CORRAL_TOKEN to a token (corral token create)", what)
	case a.allow(c, p):
		return forbidden("%s may not call %s: its token is limited to %v; %s needs a token that allows %s", p, what, p.ops, what, a.op)
	}
	return forbidden("%s may not call %s: it takes %s (%s's role is %q)", p, what, a.name, p.name, p.role)
}

// routes maps the API; limitRequests answers what no route takes.
func (c *Controller) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range c.routeTable() {
		mux.HandleFunc(rt.pattern, c.metrics.countRequests(rt.pattern, c.guard(rt)))
	}
	return mux
}

// jobIORoutes maps the job I/O endpoints.
func (c *Controller) jobIORoutes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range c.jobIORouteTable() {
		mux.HandleFunc(rt.pattern, c.metrics.countRequests(rt.pattern, c.guard(rt)))
	}
	return mux
}
