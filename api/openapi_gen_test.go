package api

import (
	"encoding"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"time"
)

// The OpenAPI document is made here, from the package's types (by
// reflection, as encoding/json sees them) and their doc comments (parsed
// from the package's sources), and from the endpoint table below, which
// says what each route takes and answers. ctld's tests check the table's
// routes and access rules against the server's route table.

// param is a query parameter of an endpoint.
type param struct {
	name, typ, desc string
	// many marks a parameter that may repeat (?id=1&id=2).
	many bool
}

// body is what a request or an answer carries: a value of a wire type
// (its type is what counts), or raw bytes of media type media.
type body struct {
	v     any
	media string
	// schema, when set, is the schema of a body without a Go type.
	schema map[string]any
}

func jsonBody(v any) *body { return &body{v: v, media: "application/json"} }

// empty is the answer of the writes that return nothing: {}.
var empty = &body{media: "application/json", schema: map[string]any{"type": "object", "additionalProperties": false}}

// endpoint is one route of the API.
type endpoint struct {
	method, path string
	// access is the rule of ctld/access.go that decides who may call it.
	access  string
	summary string
	query   []param
	req     *body
	resp    *body
	// alt is another media type the answer may come in (as the query
	// asks).
	alt *body
	// status is the success status (200 when zero).
	status int
}

var filterParams = []param{
	{"id", "string", "a job id (12) or an array task (12_5)", true},
	{"user", "string", "a user", true},
	{"name", "string", "a job name", true},
	{"state", "string", "a job state (PENDING, RUNNING, ...; short forms as squeue takes them)", true},
	{"partition", "string", "a partition", true},
	{"account", "string", "an account", true},
	{"reservation", "string", "an advance reservation the job names (squeue -R, scancel --reservation)", true},
}

var consistentParam = param{"consistent", "string", "present: the leader answers, after confirming its leadership", false}

// endpoints lists every route of the API, in the order of ctld's route
// tables.
var endpoints = []endpoint{
	{method: "POST", path: "/v1/jobs", access: "users", summary: "Submit a batch of jobs (accepted or refused whole); a retried request_id returns the original job.",
		req: jsonBody(SubmitRequest{}), resp: jsonBody(SubmitResponse{})},
	{method: "GET", path: "/v1/jobs", access: "users", summary: "List the jobs the caller may see, without scripts and environments.",
		query: append(append([]param{}, filterParams...), consistentParam, param{"format", "string", "json (the default) or rows (the compact listing of " + JobRowsType + ")", false}),
		resp:  &body{v: []Job{}, media: "application/json"}, alt: &body{media: JobRowsType, schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/v1/queue", access: "users", summary: "The job listing as squeue renders it, as text.",
		query: append(append([]param{}, filterParams...), consistentParam, param{"format", "string", "squeue's % codes", false},
			param{"noheader", "string", "present: no header line", false}, param{"long", "string", "present: squeue --long", false}, param{"start", "string", "present: squeue --start", false}),
		resp: &body{media: "text/plain", schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/v1/jobs/{id}", access: "users", summary: "One job (12), or one task of an array (12_5).", query: []param{consistentParam}, resp: jsonBody(Job{})},
	{method: "GET", path: "/v1/jobs/{id}/why", access: "users", summary: "Why a job is in its state, in plain words (corral why).", resp: jsonBody(Why{})},
	{method: "POST", path: "/v1/jobs/cancel", access: "users", summary: "Cancel the jobs a filter selects (scancel).", req: jsonBody(CancelRequest{}), resp: jsonBody(CancelResponse{})},
	{method: "POST", path: "/v1/jobs/hold", access: "users", summary: "Hold or release jobs.", req: jsonBody(HoldRequest{}), resp: jsonBody(HoldResponse{})},
	{method: "POST", path: "/v1/jobs/suspend", access: "users", summary: "Suspend or resume running jobs.", req: jsonBody(SuspendRequest{}), resp: jsonBody(HoldResponse{})},
	{method: "POST", path: "/v1/jobs/top", access: "users", summary: "Move pending jobs to the top of their user's queue, in the order given (scontrol top): nice values are exchanged among the user's pending jobs of the same partition, account and QoS.", req: jsonBody(TopRequest{}), resp: jsonBody(HoldResponse{})},
	{method: "POST", path: "/v1/jobs/requeue", access: "users", summary: "Put running, suspended or finished jobs back in the queue (scontrol requeue, requeuehold).", req: jsonBody(RequeueRequest{}), resp: jsonBody(HoldResponse{})},
	{method: "POST", path: "/v1/jobs/checkpoint", access: "users", summary: "Save running jobs to checkpoints, releasing their nodes, or restore checkpointed jobs.", req: jsonBody(CheckpointRequest{}), resp: jsonBody(HoldResponse{})},
	{method: "POST", path: "/v1/jobs/migrate", access: "users", summary: "Move running jobs to other nodes while they run (live migration), or abort their migrations.", req: jsonBody(MigrateRequest{}), resp: jsonBody(HoldResponse{})},
	{method: "POST", path: "/v1/jobs/{id}/steps", access: "users", summary: "Begin a step of a running job (srun): its id and its tasks' layout over the job's nodes.", req: jsonBody(StepRequest{}), resp: jsonBody(Step{})},
	{method: "POST", path: "/v1/jobs/{id}/steps/{step}/end", access: "users", summary: "Report how a step ended (srun).", req: jsonBody(StepEnd{}), resp: empty},
	{method: "POST", path: "/v1/jobs/{id}/steps/{step}/cancel", access: "users", summary: "Cancel a step and kill its tasks (scancel JOB.STEP).", req: jsonBody(struct{}{}), resp: empty},
	{method: "GET", path: "/v1/steps", access: "users", summary: "The steps of the jobs the caller may see (squeue -s); ?job=ID for one job's.", query: []param{{"job", "integer", "one job's steps", false}}, resp: jsonBody([]Step{})},
	{method: "POST", path: "/v1/jobs/update", access: "users", summary: "Change a job's request (scontrol update).", req: jsonBody(UpdateJobRequest{}), resp: empty},
	{method: "GET", path: "/v1/nodes", access: "users", summary: "Every node.", query: []param{consistentParam}, resp: jsonBody([]Node{})},
	{method: "GET", path: "/v1/nodes/{name}", access: "users", summary: "One node.", query: []param{consistentParam}, resp: jsonBody(Node{})},
	{method: "GET", path: "/v1/nodes/{name}/desired", access: "nodes", summary: "A node's desired allocations; blocks until its allocation index passes index, or wait ends.",
		query: []param{{"index", "integer", "the allocation index the daemon has", false}, {"wait", "string", "how long to wait, up to 5m (30s)", false}}, resp: jsonBody(Desired{})},
	{method: "POST", path: "/v1/nodes/register", access: "nodes", summary: "A node daemon registers (with the runs it holds and its unacknowledged reports).", req: jsonBody(NodeInfo{}), resp: jsonBody(NodeAck{})},
	{method: "POST", path: "/v1/nodes/heartbeat", access: "nodes", summary: "A node daemon's heartbeat; 404 tells it to register again.", req: jsonBody(NodeStatus{}), resp: jsonBody(NodeAck{})},
	{method: "POST", path: "/v1/nodes/status", access: "nodes", summary: "A node daemon's job reports.", req: jsonBody(NodeStatus{}), resp: empty},
	{method: "POST", path: "/v1/nodes/drain", access: "operators", summary: "Drain a node (with a reason) or resume it.", req: jsonBody(DrainRequest{}), resp: empty},
	{method: "POST", path: "/v1/nodes/features", access: "operators", summary: "Set a node's features in place of those its daemon reports (corral node update NAME Features=...), or give them back to the daemon's (reset).", req: jsonBody(NodeFeaturesRequest{}), resp: empty},
	{method: "POST", path: "/v1/nodes/forget-key", access: "operators", summary: "Let a node's next registration bring a new key (a reinstalled node).", req: jsonBody(DrainRequest{}), resp: empty},
	{method: "POST", path: "/v1/nodes/join", access: "anyone", summary: "A node with a join token gets a certificate of the cluster's authority; 501 without ctld --node-ca.", req: jsonBody(JoinRequest{}), resp: jsonBody(JoinResponse{})},
	{method: "POST", path: "/v1/nodes/attest/begin", access: "nodes", summary: "Begin a TPM attestation: a credential to activate, the nonce and PCRs to quote; 501 without ctld --tpm-policy.", req: jsonBody(AttestBegin{}), resp: jsonBody(AttestChallenge{})},
	{method: "POST", path: "/v1/nodes/attest/finish", access: "nodes", summary: "Finish a TPM attestation with the quote; 403 with the reason when it fails (the node is drained).", req: jsonBody(AttestFinish{}), resp: empty},
	{method: "GET", path: "/v1/partitions", access: "users", summary: "Every partition.", query: []param{consistentParam}, resp: jsonBody([]Partition{})},
	{method: "GET", path: "/v1/licenses", access: "users", summary: "The cluster's licenses and what running jobs hold (scontrol show lic).", query: []param{consistentParam}, resp: jsonBody([]LicenseUse{})},
	{method: "POST", path: "/v1/partitions", access: "operators", summary: "Create, change or delete a partition.", req: jsonBody(PartitionRequest{}), resp: empty},
	{method: "GET", path: "/v1/reservations", access: "users", summary: "Every advance reservation, with its window in force or next and whether it is in force (scontrol show reservation, sinfo -T).",
		query: []param{consistentParam}, resp: jsonBody([]ReservationInfo{})},
	{method: "POST", path: "/v1/reservations", access: "operators", summary: "Create, change or delete an advance reservation from scontrol's KEY=VALUE settings (docs/scheduling.md); answers its name.",
		req: jsonBody(ReservationRequest{}), resp: jsonBody(ReservationResponse{})},
	{method: "GET", path: "/v1/status", access: "anyone", summary: "The cluster's members, leader, term, Raft indexes, node and job counts.",
		query: []param{{"hash", "string", "present: add a digest of the replicated state", false}}, resp: jsonBody(ClusterStatus{})},
	{method: "POST", path: "/v1/internal/members", access: "members", summary: "A controller member announces its HTTP address (members only).",
		req: &body{media: "application/json", schema: map[string]any{"type": "object", "additionalProperties": false,
			"properties": map[string]any{"id": map[string]any{"type": "string"}, "http_addr": map[string]any{"type": "string"}}}}, resp: empty},
	{method: "POST", path: "/v1/internal/members/join", access: "members", summary: "A new controller member (ctld --join) asks to be added to the cluster as a voter (members only: under TLS its own member certificate); asking again changes nothing.",
		req: &body{media: "application/json", schema: map[string]any{"type": "object", "additionalProperties": false,
			"properties": map[string]any{"id": map[string]any{"type": "string"}, "raft_addr": map[string]any{"type": "string"}}}}, resp: empty},
	{method: "GET", path: "/v1/policy", access: "users", summary: "The scheduler's configuration, QoS, accounts and users the caller may see.", query: []param{consistentParam}, resp: jsonBody(PolicyView{})},
	{method: "POST", path: "/v1/config", access: "admins", summary: "Set scheduler settings (corral config set).", req: jsonBody(ConfigRequest{}), resp: empty},
	{method: "POST", path: "/v1/qos", access: "operators", summary: "Create, change or delete a QoS.", req: jsonBody(QOSRequest{}), resp: empty},
	{method: "POST", path: "/v1/accounts", access: "admins", summary: "Create, change or delete an account.", req: jsonBody(AccountRequest{}), resp: empty},
	{method: "POST", path: "/v1/users", access: "users", summary: "Add, change or remove a user of an account (admins, or the account's coordinator).", req: jsonBody(UserRequest{}), resp: empty},
	{method: "GET", path: "/v1/priority", access: "users", summary: "The pending jobs' priority factors (sprio).", query: []param{consistentParam}, resp: jsonBody([]PriorityRow{})},
	{method: "GET", path: "/v1/share", access: "users", summary: "The fair-share tree with usage (sshare).", query: []param{consistentParam}, resp: jsonBody([]ShareRow{})},
	{method: "GET", path: "/v1/auth", access: "users", summary: "Who the controllers take the caller for, the tokens and role grants it may see.", query: []param{consistentParam}, resp: jsonBody(AuthView{})},
	{method: "POST", path: "/v1/tokens", access: "users", summary: "Create, renew or revoke a token; the secret is shown once, when created.", req: jsonBody(TokenRequest{}), resp: jsonBody(TokenResponse{})},
	{method: "POST", path: "/v1/roles", access: "admins", summary: "Grant or remove a user's role.", req: jsonBody(RoleRequest{}), resp: empty},
	{method: "GET", path: "/v1/audit", access: "users", summary: "The audit records the caller may read, oldest first, and the tenants' chain heads.",
		query: []param{{"tenant", "string", "a tenant", true}, {"user", "string", "a user", true}, {"since", "string", "RFC 3339 time", false},
			{"limit", "integer", "the most records (1000)", false}, consistentParam},
		resp: jsonBody(AuditView{})},
	{method: "GET", path: "/v1/accounting/jobs", access: "users", summary: "Accounting records by job and allocation from this member's own store (sacct; never forwarded): the caller's own unless users, jobs or all are named, and of those the jobs the caller may see.",
		query: []param{{"job", "integer", "a job id (an array's selects its tasks)", true}, {"user", "string", "a user", true}, {"account", "string", "an account", true},
			{"tenant", "string", "a tenant", true}, {"state", "string", "a job state", true}, {"all", "string", "1: every user's records the caller may see (sacct -a)", false},
			{"duplicates", "string", "1: every run of a job (sacct -D)", false}, {"start", "string", "RFC 3339: runs that overlap from then", false},
			{"end", "string", "RFC 3339: runs that overlap until then (now)", false},
			{"format", "string", "json (the default), rows (the compact listing of " + AcctRowsType + ", streamed), or an export file streamed as the store reads it: csv, ndjson or parquet (corral acct export), ended by the trailer " + AcctRecordsTrailer + " with the record count", false}},
		resp: &body{v: []AcctRecord{}, media: "application/json"}, alt: &body{media: AcctRowsType, schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/v1/accounting/usage", access: "users", summary: "Usage by account and user of the runs that ended in a window, from the store's day sums (corral acct report), the rows the caller may see.",
		query: []param{{"start", "string", "RFC 3339: the window's start (open when absent)", false}, {"end", "string", "RFC 3339: the window's end (open when absent)", false}},
		resp:  jsonBody([]AcctUsage{})},
	{method: "GET", path: "/v1/accounting/cluster", access: "users", summary: "The cluster's utilization over a window, one row per TRES (cpu; gres/gpu when the cluster had GPUs): allocated, down, planned down, idle, planned (reserved) and reported TRES-seconds, from this member's node facts and run index plus the runs and waits still going (corral acct report cluster; sreport cluster Utilization).",
		query: []param{{"start", "string", "RFC 3339: the window's start (default: the first node fact)", false}, {"end", "string", "RFC 3339: the window's end (default and at most: now)", false}},
		resp:  jsonBody([]ClusterUtilization{})},
	{method: "GET", path: "/v1/accounting/series", access: "users", summary: "Usage over time by account in fixed bins, and the distribution of the jobs' waits, over the runs the caller may see (corral acct report --svg; the status page's plot).",
		query: []param{{"start", "string", "RFC 3339: the window's start (default: a week before its end)", false}, {"end", "string", "RFC 3339: the window's end (default: now)", false},
			{"step", "integer", "the bins' length in seconds, at least 60 (default: by the window's length)", false}},
		resp: jsonBody(AcctSeries{})},
	{method: "GET", path: "/v1/accounting/summary", access: "operators", summary: "This member's record count and an order-free digest of its accounting store, to compare members.", resp: jsonBody(AcctSummary{})},
	{method: "GET", path: "/v1/internal/accounting/records", access: "members", summary: "A page of this member's accounting store in key order, for a member that copies the records it lacks.",
		query: []param{{"after", "string", "the hex key a previous page returned as next", false}, {"limit", "integer", "the most records (at most 5000)", false}},
		resp: &body{media: "application/json", schema: map[string]any{"type": "object", "properties": map[string]any{
			"records": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
			"changed": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "description": "each record's place in the member's change feed: the Raft index of the entry that last changed it"},
			"next":    map[string]any{"type": "string"},
			"nodes":   map[string]any{"type": "array", "items": map[string]any{"type": "object"}}}}}},
	{method: "GET", path: "/ui/", access: "users", summary: "The status page (HTML, no script): a summary, the queue as corral queue shows it to the caller (the filters of GET /v1/queue), the nodes, and the usage plot. Under --auth a browser sends HTTP Basic credentials with a token as the password; only the status page takes them.",
		query: []param{{"refresh", "integer", "reload the page every N seconds (5 to 3600)", false}, {"days", "integer", "the plot's window in days (1 to 366; default 7)", false},
			{"user", "string", "a user", true}, {"state", "string", "a job state", true}, {"partition", "string", "a partition", true}},
		resp: &body{media: "text/html", schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/ui/jobs/{id}", access: "users", summary: "A job's page: scontrol show job's text and corral why's explanation, for a job the caller may see (404 otherwise).",
		query: []param{{"refresh", "integer", "reload the page every N seconds (5 to 3600)", false}},
		resp:  &body{media: "text/html", schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/ui/usage.svg", access: "users", summary: "The status page's plot: usage by account over time and the jobs' waits, over the runs the caller may see (corral acct report --svg's image).",
		query: []param{{"days", "integer", "the window in days up to now (1 to 366; default 7)", false}},
		resp:  &body{media: "image/svg+xml", schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/metrics", access: "scrapers", summary: "The member's Prometheus metrics (docs/metrics.md), in the text exposition format (OpenMetrics when asked for).",
		resp: &body{media: "text/plain", schema: map[string]any{"type": "string"}}},
	{method: "GET", path: "/v1/openapi.json", access: "anyone", summary: "This document.", resp: &body{media: "application/json", schema: map[string]any{"type": "object"}}},
	{method: "POST", path: "/v1/jobs/{id}/exec", access: "users", summary: "Run a command in a running job: with Connection: Upgrade and Upgrade: corral-exec/1, answered 101 and then exec stream frames (docs/api.md).",
		query: []param{{"node", "string", "the node of the job's run to run it on (a step's task); default the batch script's", false},
			{"step", "integer", "the step the command is a task of, so that cancelling the step kills it", false}},
		req: jsonBody(ExecRequest{}), status: 101},
	{method: "POST", path: "/v1/jobs/{id}/signal", access: "users", summary: "Signal a running job's processes.", req: jsonBody(SignalRequest{}), resp: empty},
	{method: "GET", path: "/v1/jobs/{id}/file", access: "users", summary: "Read a file in a running job, streamed; X-Corral-Mode and X-Corral-Size headers.",
		query: []param{{"path", "string", "absolute, or relative to the job's working directory", false}}, resp: &body{media: "application/octet-stream", schema: map[string]any{"type": "string", "format": "binary"}}},
	{method: "PUT", path: "/v1/jobs/{id}/file", access: "users", summary: "Write a file in a running job; answered once it is written and synced.",
		query: []param{{"path", "string", "absolute, or relative to the job's working directory", false}, {"mode", "string", "octal permissions (644)", false}},
		req:   &body{media: "application/octet-stream", schema: map[string]any{"type": "string", "format": "binary"}}, resp: empty},
	{method: "GET", path: "/v1/jobs/{id}/output", access: "users", summary: "A running job's output file from its node, streamed as it grows.",
		query: []param{{"stream", "string", "stdout (the default) or stderr", false}}, resp: &body{media: "application/octet-stream", schema: map[string]any{"type": "string", "format": "binary"}}},
}

// openAPIDocument builds the document.
func openAPIDocument() (map[string]any, error) {
	docs, err := readDocComments(".")
	if err != nil {
		return nil, err
	}
	g := &schemaGen{docs: docs, schemas: map[string]any{}}
	paths := map[string]any{}
	for _, e := range endpoints {
		item, _ := paths[e.path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[e.path] = item
		}
		item[strings.ToLower(e.method)] = g.operation(e)
	}
	g.schemaOf(reflect.TypeOf(Error{}))
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "corral API",
			"version": "1",
			"description": "The HTTP API every corral controller member serves (docs/api.md). Reads are answered from the member's replica " +
				"(?consistent: by the leader); writes reaching a follower are forwarded to the leader. Bodies are JSON; unknown fields and " +
				"trailing data are refused. Every error is an Error. Generated from package api's types: go test ./api -run TestOpenAPIDocument -update.",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": g.schemas,
			"securitySchemes": map[string]any{
				"token": map[string]any{"type": "http", "scheme": "bearer", "description": "a token (corral token create): corral_ID_SECRET"},
				"agent": map[string]any{"type": "apiKey", "in": "header", "name": "Authorization",
					"description": "a host agent's identity (corral authd): Corral-Agent TOKEN"},
			},
		},
	}, nil
}

// operation is one endpoint's OpenAPI operation.
func (g *schemaGen) operation(e endpoint) map[string]any {
	op := map[string]any{
		"summary":         e.summary,
		"operationId":     operationID(e),
		"x-corral-access": e.access,
	}
	var params []any
	for _, seg := range strings.Split(e.path, "/") {
		if strings.HasPrefix(seg, "{") {
			params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
	}
	for _, p := range e.query {
		s := map[string]any{"type": p.typ}
		if p.many {
			s = map[string]any{"type": "array", "items": s}
		}
		params = append(params, map[string]any{"name": p.name, "in": "query", "description": p.desc, "schema": s})
	}
	if params != nil {
		op["parameters"] = params
	}
	if e.req != nil {
		op["requestBody"] = map[string]any{"required": true, "content": g.content(e.req)}
	}
	status := e.status
	if status == 0 {
		status = 200
	}
	ok := map[string]any{"description": "the answer"}
	if status == 101 {
		ok["description"] = "Switching Protocols: the command runs; exec stream frames follow both ways"
	}
	if e.resp != nil {
		content := g.content(e.resp)
		if e.alt != nil {
			for k, v := range g.content(e.alt) {
				content[k] = v
			}
		}
		ok["content"] = content
	}
	op["responses"] = map[string]any{
		fmt.Sprint(status): ok,
		"default": map[string]any{"description": "a refusal or failure: the field at fault and what to do",
			"content": map[string]any{"application/json": map[string]any{"schema": ref("Error")}}},
	}
	if e.access != "anyone" {
		op["security"] = []any{map[string]any{"token": []any{}}, map[string]any{"agent": []any{}}, map[string]any{}}
	}
	return op
}

func (g *schemaGen) content(b *body) map[string]any {
	s := b.schema
	if s == nil {
		s = g.schemaOf(reflect.TypeOf(b.v))
	}
	return map[string]any{b.media: map[string]any{"schema": s}}
}

// operationID names an operation after its method and path:
// getV1JobsId, postV1NodesAttestBegin.
func operationID(e endpoint) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(e.method))
	for _, seg := range strings.FieldsFunc(e.path, func(r rune) bool { return r == '/' || r == '-' || r == '.' || r == '{' || r == '}' }) {
		b.WriteString(strings.ToUpper(seg[:1]) + seg[1:])
	}
	return b.String()
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// schemaGen turns Go types into JSON schemas as encoding/json writes them:
// named structs of this package become components, everything else is
// inline.
type schemaGen struct {
	docs    map[string]string
	schemas map[string]any
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	durationType = reflect.TypeOf(time.Duration(0))
	rawType      = reflect.TypeOf(json.RawMessage(nil))
	textType     = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
)

// schemaOf is t's schema.
func (g *schemaGen) schemaOf(t reflect.Type) map[string]any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case durationType:
		return map[string]any{"type": "integer", "format": "int64", "description": "nanoseconds"}
	case rawType:
		return map[string]any{}
	}
	if t.Kind() == reflect.Struct && t.Implements(textType) {
		// A value that encodes itself as text (netip.Addr, netip.Prefix).
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := g.schemaOf(t.Elem())
		return nullable(s)
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return map[string]any{"type": "integer", "format": intFormat(t)}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer", "format": intFormat(t), "minimum": 0}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": g.schemaOf(t.Elem())}
	case reflect.Array:
		return map[string]any{"type": "array", "items": g.schemaOf(t.Elem()), "minItems": t.Len(), "maxItems": t.Len()}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schemaOf(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" || t.PkgPath() != reflect.TypeOf(Error{}).PkgPath() {
			return g.structSchema(t)
		}
		if _, ok := g.schemas[t.Name()]; !ok {
			g.schemas[t.Name()] = map[string]any{} // placeholder: recursive types
			s := g.structSchema(t)
			if d := g.docs[t.Name()]; d != "" {
				s["description"] = d
			}
			g.schemas[t.Name()] = s
		}
		return ref(t.Name())
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

func intFormat(t reflect.Type) string {
	if t.Bits() > 32 {
		return "int64"
	}
	return "int32"
}

// nullable marks s as taking null too; a reference is wrapped, as
// OpenAPI 3.0 ignores siblings of $ref.
func nullable(s map[string]any) map[string]any {
	if _, ok := s["$ref"]; ok {
		return map[string]any{"allOf": []any{s}, "nullable": true}
	}
	out := map[string]any{"nullable": true}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// structSchema is a struct's object schema: its JSON fields (embedded
// structs' fields promoted, as encoding/json does), none other allowed.
func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	g.addFields(t, props)
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}
}

func (g *schemaGen) addFields(t reflect.Type, props map[string]any) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				g.addFields(ft, props)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := g.schemaOf(f.Type)
		omit := strings.Contains(opts, "omitempty")
		if k := f.Type.Kind(); !omit && (k == reflect.Slice || k == reflect.Map) {
			s = nullable(s) // a nil slice or map is written as null
		}
		if d := g.docs[t.Name()+"."+f.Name]; d != "" {
			if _, isRef := s["$ref"]; isRef {
				s = map[string]any{"allOf": []any{s}, "description": d}
			} else {
				s["description"] = d
			}
		}
		props[name] = s
	}
}

// readDocComments returns the doc comments of the package's types
// ("Job") and struct fields ("Job.State"), from its sources in dir.
func readDocComments(dir string) (map[string]string, error) {
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				text := ts.Doc.Text()
				if text == "" && len(gd.Specs) == 1 {
					text = gd.Doc.Text()
				}
				out[ts.Name.Name] = oneParagraph(text)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, fld := range st.Fields.List {
					text := fld.Doc.Text()
					if text == "" {
						text = fld.Comment.Text()
					}
					for _, n := range fld.Names {
						out[ts.Name.Name+"."+n.Name] = oneParagraph(text)
					}
				}
			}
		}
	}
	return out, nil
}

// oneParagraph joins a comment's lines into one paragraph.
func oneParagraph(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
