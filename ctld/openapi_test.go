package ctld

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"corral/api"
)

// loadOpenAPI parses and validates the served document.
func loadOpenAPI(t testing.TB) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatalf("api/openapi.json does not parse: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

// TestOpenAPICoversEveryRoute walks the server's route tables: every route
// must be in the document with its access rule (x-corral-access), and the
// document may name no route the server lacks. A new route fails here
// until api/openapi_gen_test.go's endpoint table describes it.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	c := &Controller{}
	served := map[string]string{}
	for _, rt := range append(c.routeTable(), c.jobIORouteTable()...) {
		served[rt.pattern] = rt.access.name
	}
	documented := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			access, _ := op.Extensions["x-corral-access"].(string)
			documented[method+" "+path] = access
		}
	}
	for pattern, access := range served {
		got, ok := documented[pattern]
		switch {
		case !ok:
			t.Errorf("route %s (access %s) is not in api/openapi.json: add it to the endpoint table in api/openapi_gen_test.go and run go test ./api -run TestOpenAPIDocument -update", pattern, access)
		case got != access:
			t.Errorf("route %s: the document says access %q, the server %q", pattern, got, access)
		}
	}
	for pattern := range documented {
		if _, ok := served[pattern]; !ok {
			t.Errorf("api/openapi.json describes %s, which the server does not serve", pattern)
		}
	}
}

// validatingProxy stands between the API client and a member: it checks
// every request and every answer against the document (kin-openapi's
// openapi3filter) and keeps what failed and which operations were seen.
type validatingProxy struct {
	t      *testing.T
	router routers.Router
	mu     sync.Mutex
	fails  []string
	seen   map[string]int
	srv    *httptest.Server
}

func newValidatingProxy(t *testing.T, doc *openapi3.T, target string) *validatingProxy {
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	openapi3filter.RegisterBodyDecoder(api.JobRowsType, openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder(api.AcctRowsType, openapi3filter.FileBodyDecoder)
	vp := &validatingProxy{t: t, router: router, seen: map[string]int{}}
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = vp.checkResponse
	vp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vp.checkRequest(r)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(vp.srv.Close)
	return vp
}

type inputKey struct{}

// options skip authentication (the cluster is open) and check every
// answer's body, whatever its media type.
var validateOptions = &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}

func (vp *validatingProxy) fail(format string, args ...any) {
	vp.mu.Lock()
	defer vp.mu.Unlock()
	vp.fails = append(vp.fails, fmt.Sprintf(format, args...))
}

func (vp *validatingProxy) checkRequest(r *http.Request) {
	// The router matches on the document's server; the request's URL is
	// made absolute for it.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	probe := r.Clone(r.Context())
	probe.URL = &u
	if r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		probe.Body = io.NopCloser(bytes.NewReader(b))
	}
	route, params, err := vp.router.FindRoute(probe)
	if err != nil {
		vp.fail("%s %s: no operation in the document: %v", r.Method, r.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: probe, PathParams: params, Route: route, Options: validateOptions}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		vp.fail("request %s %s: %v", r.Method, r.URL.RequestURI(), err)
	}
	vp.mu.Lock()
	vp.seen[r.Method+" "+route.Path]++
	vp.mu.Unlock()
	*r = *r.WithContext(context.WithValue(r.Context(), inputKey{}, in))
}

func (vp *validatingProxy) checkResponse(resp *http.Response) error {
	in, _ := resp.Request.Context().Value(inputKey{}).(*openapi3filter.RequestValidationInput)
	if in == nil {
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(b)), Options: validateOptions}
	if err := openapi3filter.ValidateResponse(resp.Request.Context(), out); err != nil {
		vp.fail("answer %d to %s %s: %v\nbody: %.300s", resp.StatusCode, in.Request.Method, in.Request.URL.RequestURI(), err, b)
	}
	return nil
}

// TestOpenAPIValidationBites checks that the validation the traffic test
// relies on refuses what the document does not allow: an answer of the
// wrong shape, a request with a field no type has.
func TestOpenAPIValidationBites(t *testing.T) {
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		body, answer string
	}{
		"a request field no type has":    {body: `{"jobs": [], "priority": 9}`, answer: `{"results": []}`},
		"an answer of the wrong shape":   {body: `{"jobs": []}`, answer: `{"results": "job 1"}`},
		"an answer field the type lacks": {body: `{"jobs": []}`, answer: `{"results": [], "extra": 1}`},
		"a job id that is not a number":  {body: `{"jobs": []}`, answer: `{"results": [{"job_id": "one"}]}`},
	} {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatal(err)
			}
			in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: validateOptions}
			reqErr := openapi3filter.ValidateRequest(context.Background(), in)
			out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: 200,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(tc.answer)), Options: validateOptions}
			respErr := openapi3filter.ValidateResponse(context.Background(), out)
			if reqErr == nil && respErr == nil {
				t.Errorf("request %s answered %s: both validate; the document should refuse one", tc.body, tc.answer)
			}
		})
	}
}

// TestOpenAPIValidatesTraffic drives a real cluster through the API client
// — a node daemon's registration, heartbeats, watch and reports; submit,
// list, show, why, queue, hold, update, suspend, cancel; nodes, drain,
// partitions, policy, QoS, accounts, users, settings, priority, share,
// auth, tokens, audit, status, metrics, this document — through a proxy
// that validates every request and answer against api/openapi.json.
func TestOpenAPIValidatesTraffic(t *testing.T) {
	doc := loadOpenAPI(t)
	tc := startCluster(t, 1)
	tc.waitLeader(t)
	vp := newValidatingProxy(t, doc, tc.addrs[0])
	cl, err := api.NewClient(vp.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cl.User = "alice"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runNode(ctx, cl, "n1")

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// A refusal is an answer too: it must be an Error.
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: accepted; the test expects a refusal", what)
		}
	}
	must("account", cl.PutAccount(ctx, api.AccountRequest{Account: api.Account{Name: "phys", Parent: "root", Shares: 1}}))
	must("user", cl.PutUser(ctx, api.UserRequest{User: api.AccountUser{Name: "alice", Account: "phys", Shares: 1}}))
	must("qos", cl.PutQOS(ctx, api.QOSRequest{QOS: api.QOS{Name: "high", Priority: 10}}))
	must("config", cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "300"}}}))
	must("partition", cl.PutPartition(ctx, api.PartitionRequest{Name: "debug", Create: true}))
	runs, held := spec("runs"), spec("held")
	held.Hold = true
	res, err := cl.Submit(ctx, []api.JobSpec{runs, held})
	must("submit", err)
	_, err = cl.Submit(ctx, []api.JobSpec{{Name: "bad", NTasks: -5, Script: "#!/bin/sh\n"}})
	refused("a submission of ntasks=-5", err)
	done, pending := res[0].JobID, res[1].JobID
	waitState(t, cl, done, api.StateCompleted)
	_, err = cl.Jobs(ctx, api.JobFilter{}, false)
	must("list (rows)", err)
	for _, q := range []string{"", "?state=PENDING&user=alice", "?format=json&consistent"} {
		resp, err := http.Get(vp.srv.URL + "/v1/jobs" + q)
		must("list (json)", err)
		resp.Body.Close()
	}
	_, err = cl.Job(ctx, pending, true)
	must("show", err)
	_, err = cl.Job(ctx, 999999, false)
	refused("show of job 999999", err)
	_, err = cl.Why(ctx, fmt.Sprint(pending))
	must("why", err)
	_, err = cl.QueueText(ctx, api.QueueQuery{Long: true})
	must("queue", err)
	_, err = cl.Hold(ctx, api.HoldRequest{IDs: []uint64{pending}, Hold: true})
	must("hold", err)
	must("update", cl.UpdateJob(ctx, api.UpdateJobRequest{ID: pending}))
	_, err = cl.Suspend(ctx, api.SuspendRequest{IDs: []uint64{done}, Suspend: true})
	must("suspend of an ended job", err)
	_, err = cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{pending}}})
	must("cancel", err)
	_, err = cl.HeartbeatNode(ctx, "n1", "n1-boot")
	must("heartbeat", err)
	_, err = cl.Nodes(ctx)
	must("nodes", err)
	_, err = cl.Node(ctx, "n1")
	must("node", err)
	must("drain", cl.Drain(ctx, api.DrainRequest{Node: "n1", Drain: true, Reason: "openapi test"}))
	must("resume", cl.Drain(ctx, api.DrainRequest{Node: "n1"}))
	must("forget-key", cl.ForgetNodeKey(ctx, "n1"))
	_, err = cl.PutReservation(ctx, api.ReservationRequest{Create: true, Settings: [][2]string{{"ReservationName", "r1"}, {"Users", "alice"},
		{"StartTime", "now+1hour"}, {"Duration", "10"}, {"Nodes", "n1"}, {"Flags", "IGNORE_JOBS"}}})
	must("reservation", err)
	_, err = cl.Reservations(ctx)
	must("reservations", err)
	_, err = cl.PutReservation(ctx, api.ReservationRequest{Name: "nope", Delete: true})
	refused("a delete of no reservation", err)
	_, err = cl.Partitions(ctx)
	must("partitions", err)
	_, err = cl.Policy(ctx)
	must("policy", err)
	_, err = cl.Priorities(ctx)
	must("priority", err)
	_, err = cl.Shares(ctx)
	must("share", err)
	_, err = cl.AuthView(ctx)
	must("auth", err)
	_, err = cl.Token(ctx, api.TokenRequest{Description: "openapi"})
	must("token", err)
	_, err = cl.Audit(ctx, api.AuditFilter{})
	must("audit", err)
	_, err = cl.Status(ctx)
	must("status", err)
	_, err = cl.StatusWithHash(ctx)
	must("status with hash", err)
	for _, p := range []string{"/metrics", "/v1/openapi.json"} {
		resp, err := http.Get(vp.srv.URL + p)
		must(p, err)
		resp.Body.Close()
	}
	cancel()

	vp.mu.Lock()
	defer vp.mu.Unlock()
	for _, f := range vp.fails {
		t.Error(f)
	}
	// The node daemon's routes and the user's above were all seen.
	for _, op := range []string{"POST /v1/nodes/register", "POST /v1/nodes/status", "GET /v1/nodes/{name}/desired", "POST /v1/jobs",
		"GET /v1/jobs", "GET /v1/jobs/{id}", "POST /v1/jobs/cancel", "GET /v1/nodes", "GET /v1/status", "GET /metrics"} {
		if vp.seen[op] == 0 {
			t.Errorf("%s: never called through the validating proxy", op)
		}
	}
	var ops []string
	for op := range vp.seen {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	t.Logf("%d operations validated: %s", len(ops), strings.Join(ops, ", "))
}

// TestAPIDocListsEveryRoute fails for every route of the server that
// docs/api.md does not name (as `METHOD /path`).
func TestAPIDocListsEveryRoute(t *testing.T) {
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{}
	for _, rt := range append(c.routeTable(), c.jobIORouteTable()...) {
		if !bytes.Contains(b, []byte("`"+rt.pattern+"`")) {
			t.Errorf("docs/api.md does not list %s: add a row for it to the endpoint table", rt.pattern)
		}
	}
}
