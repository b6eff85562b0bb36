package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
	"corral/internal/pki"
)

// The principals of the access matrix.
const (
	pAnon     = "anonymous"
	pUserA    = "user of tenant A"
	pUserB    = "user of tenant B"
	pCoord    = "coordinator of A"
	pOperator = "operator"
	pAdmin    = "admin"
	pNode1    = "node n1"
	pNode2    = "node n2"
)

var matrixPrincipals = []string{pAnon, pUserA, pUserB, pCoord, pOperator, pAdmin, pNode1, pNode2}

// authScene is an authenticating cluster of one member with two tenants:
// phys (alice, alice2; carol coordinates it) and bio (bob, bob2), an
// operator (oscar), an admin token, and two node daemons' certificates.
type authScene struct {
	tc      *testCluster
	leader  *Controller
	clients map[string]*http.Client
	tokens  map[string]string
	base    string
}

// newAuthScene starts the cluster and makes the principals' credentials:
// tokens committed through Raft as `corral token create` commits them,
// node certificates issued by the cluster's authority.
func newAuthScene(t *testing.T) *authScene {
	tc := startClusterOpts(t, 1, true, true)
	sc := &authScene{tc: tc, leader: tc.waitLeader(t), clients: map[string]*http.Client{}, tokens: map[string]string{}, base: tc.addrs[0]}
	for _, cmd := range []struct {
		t state.CommandType
		p any
	}{
		{state.CmdPutAccount, &state.PutAccount{Account: api.Account{Name: "phys", Parent: "root", Shares: 1}}},
		{state.CmdPutAccount, &state.PutAccount{Account: api.Account{Name: "hep", Parent: "phys", Shares: 1}}},
		{state.CmdPutAccount, &state.PutAccount{Account: api.Account{Name: "bio", Parent: "root", Shares: 1}}},
		{state.CmdPutUser, &state.PutUser{User: api.AccountUser{Name: "alice", Account: "phys", Shares: 1}}},
		{state.CmdPutUser, &state.PutUser{User: api.AccountUser{Name: "alice2", Account: "hep", Shares: 1}}},
		{state.CmdPutUser, &state.PutUser{User: api.AccountUser{Name: "bob", Account: "bio", Shares: 1}}},
		{state.CmdPutUser, &state.PutUser{User: api.AccountUser{Name: "bob2", Account: "bio", Shares: 1}}},
	} {
		if res, err := sc.leader.propose(cmd.t, cmd.p); err != nil || res != nil {
			t.Fatalf("setting up %s: %v %v", cmd.t, err, res)
		}
	}
	token := func(name, user string, role api.Role, account string) {
		sc.tokens[name] = addTokenFor(t, sc.leader, name, user, role, account)
	}
	token("alice", "alice", api.RoleUser, "")
	token("alice2", "alice2", api.RoleUser, "")
	token("bob", "bob", api.RoleUser, "")
	token("bob2", "bob2", api.RoleUser, "")
	token("carol", "carol", api.RoleCoordinator, "phys")
	token("oscar", "oscar", api.RoleOperator, "")
	token("root", "root", api.RoleAdmin, "")
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.tls}}
	for _, p := range []string{pAnon, pUserA, pUserB, pCoord, pOperator, pAdmin} {
		sc.clients[p] = anon
	}
	for _, n := range []string{"n1", "n2"} {
		cert, key, err := pki.Issue(tc.caDir, t.TempDir(), pki.Request{Role: pki.RoleNode, Name: n})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := (pki.Files{Cert: cert, Key: key, CA: filepath.Join(tc.caDir, pki.CACertFile)}).Client()
		if err != nil {
			t.Fatal(err)
		}
		sc.clients["node "+n] = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	return sc
}

// addToken commits a token of user's with role, as corral token create
// does, and returns its text.
func addToken(tb testing.TB, leader *Controller, name, user string, role api.Role) string {
	return addTokenFor(tb, leader, name, user, role, "")
}

// addTokenFor is addToken for a coordinator's token of account.
func addTokenFor(tb testing.TB, leader *Controller, name, user string, role api.Role, account string) string {
	tb.Helper()
	now := time.Now().UTC()
	secret := "secret-" + name
	rec := state.TokenRecord{Hash: state.HashSecret(secret), Token: api.Token{ID: name, User: user, Role: role, Account: account,
		CreatedBy: "test", Created: now, Expires: now.Add(time.Hour)}}
	if res, err := leader.propose(state.CmdPutToken, &state.PutToken{Now: now, Token: rec}); err != nil || res != nil {
		tb.Fatalf("token %s: %v %v", name, err, res)
	}
	return tokenPrefix + name + "_" + secret
}

// tokenOf is the token each user principal sends.
var tokenOf = map[string]string{pUserA: "alice", pUserB: "bob", pCoord: "carol", pOperator: "oscar", pAdmin: "root"}

// do sends one request as principal who and returns the status and body.
func (sc *authScene) do(t *testing.T, who, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, sc.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := tokenOf[who]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+sc.tokens[tok])
	}
	if strings.HasPrefix(who, "user ") || who == pCoord {
		// What a client says of itself changes nothing once it
		// authenticates.
		req.Header.Set(api.UserHeader, "root")
	}
	resp, err := sc.clients[who].Do(req)
	if err != nil {
		t.Fatalf("%s %s as %s: %v", method, path, who, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submitAs submits one job as a user's token and returns its id.
func (sc *authScene) submitAs(t *testing.T, token, account string, hold bool) uint64 {
	t.Helper()
	cl, err := api.NewTLSClient(sc.base, sc.tc.tls)
	if err != nil {
		t.Fatal(err)
	}
	cl.Auth = api.BearerToken(sc.tokens[token])
	res, err := cl.Submit(context.Background(), []api.JobSpec{{Name: "j-" + token, Account: account, Script: "#!/bin/sh\necho secret-script\n",
		Env: []string{"SECRET=" + token}, WorkDir: "/home/" + token, Output: "/home/" + token + "/out", NTasks: 1, CPUsPerTask: 1, Hold: hold}})
	if err != nil {
		t.Fatalf("submitting as %s: %v", token, err)
	}
	return res[0].JobID
}

// denied reads an answer as a refusal: 401, 403 or 404, or a write's 200
// whose per-job errors refuse it.
func denied(method string, status int, body string) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return method != "GET" && status == http.StatusOK && (strings.Contains(body, "permission denied") || strings.Contains(body, "no such job"))
}

// matrixEntry is one endpoint's request and who may make it.
type matrixEntry struct {
	method, path string
	body         any
	allowed      []string
}

var (
	everyone  = matrixPrincipals
	allUsers  = []string{pUserA, pUserB, pCoord, pOperator, pAdmin}
	ownerSide = []string{pUserA, pCoord, pAdmin}
	opsAdmin  = []string{pOperator, pAdmin}
	adminOnly = []string{pAdmin}
	node1     = []string{pNode1}
	nobody    = []string{}
)

// TestEndpointPrincipalMatrix sends a request to every endpoint as each of
// the eight principals and checks who is let through. Job 1 is alice's
// (tenant A), running on n1; job 2 is alice's, held. It fails when an
// endpoint lacks an entry.
func TestEndpointPrincipalMatrix(t *testing.T) {
	sc := newAuthScene(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n1 := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "test", BootID: "n1-boot"}
	n1cl, err := api.NewTLSClient(sc.base, sc.clients[pNode1].Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := n1cl.Register(ctx, n1); err != nil {
		t.Fatalf("node n1 registering with its certificate: %v", err)
	}
	running := sc.submitAs(t, "alice", "phys", false)
	held := sc.submitAs(t, "alice", "phys", true)
	waitFor(t, func() bool {
		st, body := sc.do(t, pAdmin, "GET", fmt.Sprintf("/v1/jobs/%d", running), nil)
		return st == 200 && strings.Contains(body, `"state":"RUNNING"`)
	})
	j1 := fmt.Sprint(running)
	matrix := []matrixEntry{
		{"GET", "/v1/status", nil, everyone},
		{"POST", "/v1/jobs", map[string]any{"jobs": []map[string]any{{"script": "#!/bin/sh\ntrue\n", "ntasks": 1, "hold": true}}}, allUsers},
		{"GET", "/v1/jobs", nil, allUsers},
		{"GET", "/v1/queue", nil, allUsers},
		{"GET", "/v1/jobs/" + j1, nil, []string{pUserA, pCoord, pOperator, pAdmin}},
		{"GET", "/v1/jobs/" + j1 + "/why", nil, []string{pUserA, pCoord, pOperator, pAdmin}},
		{"POST", "/v1/jobs/hold", map[string]any{"ids": []uint64{held}, "hold": true}, ownerSide},
		{"POST", "/v1/jobs/update", map[string]any{"id": held, "dependency": nil}, ownerSide},
		{"POST", "/v1/jobs/" + j1 + "/steps", map[string]any{"ntasks": 1}, []string{pUserA, pAdmin}},
		{"POST", "/v1/jobs/" + j1 + "/steps/0/end", map[string]any{"state": "COMPLETED"}, []string{pUserA, pAdmin}},
		{"POST", "/v1/jobs/" + j1 + "/steps/1/cancel", map[string]any{}, ownerSide},
		{"GET", "/v1/steps", nil, allUsers},
		{"POST", "/v1/jobs/suspend", map[string]any{"ids": []uint64{running}, "suspend": false}, ownerSide},
		{"POST", "/v1/jobs/requeue", map[string]any{"ids": []uint64{held}, "hold": true}, ownerSide},
		{"POST", "/v1/jobs/migrate", map[string]any{"ids": []uint64{running}, "cancel": true}, ownerSide},
		{"POST", "/v1/jobs/checkpoint", map[string]any{"ids": []uint64{held}, "restore": true}, ownerSide},
		{"POST", "/v1/jobs/top", map[string]any{"ids": []uint64{held}}, ownerSide},
		{"POST", "/v1/jobs/" + j1 + "/exec", map[string]any{"argv": []string{"true"}}, []string{pUserA, pAdmin}},
		{"POST", "/v1/jobs/" + j1 + "/signal", map[string]any{"signal": "USR1"}, ownerSide},
		{"GET", "/v1/jobs/" + j1 + "/file?path=/etc/hostname", nil, []string{pUserA, pAdmin}},
		{"PUT", "/v1/jobs/" + j1 + "/file?path=/tmp/x", nil, []string{pUserA, pAdmin}},
		{"GET", "/v1/jobs/" + j1 + "/output", nil, []string{pUserA, pAdmin}},
		{"GET", "/v1/nodes", nil, allUsers},
		{"GET", "/v1/licenses", nil, allUsers},
		{"GET", "/v1/nodes/n1", nil, allUsers},
		{"GET", "/v1/nodes/n1/desired", nil, node1},
		{"POST", "/v1/nodes/register", n1, node1},
		{"POST", "/v1/nodes/heartbeat", map[string]any{"name": "n1", "boot_id": "n1-boot"}, node1},
		{"POST", "/v1/nodes/status", map[string]any{"name": "n1", "boot_id": "n1-boot"}, node1},
		{"POST", "/v1/nodes/drain", map[string]any{"node": "n1", "drain": false}, opsAdmin},
		{"POST", "/v1/nodes/forget-key", map[string]any{"node": "n9"}, opsAdmin},
		{"POST", "/v1/nodes/features", map[string]any{"node": "n1", "reset": true}, opsAdmin},
		{"POST", "/v1/nodes/join", map[string]any{"name": "n9"}, everyone},
		{"POST", "/v1/nodes/attest/begin", map[string]any{"name": "n1"}, node1},
		{"POST", "/v1/nodes/attest/finish", map[string]any{"name": "n1"}, node1},
		{"GET", "/v1/partitions", nil, allUsers},
		{"POST", "/v1/partitions", map[string]any{"name": "debug", "create": true}, opsAdmin},
		{"GET", "/v1/reservations", nil, allUsers},
		{"POST", "/v1/reservations", map[string]any{"create": true, "settings": [][2]string{{"Users", "alice"},
			{"StartTime", "now+1hour"}, {"Duration", "10"}, {"Nodes", "n1"}, {"Flags", "IGNORE_JOBS"}}}, opsAdmin},
		{"POST", "/v1/internal/members", map[string]any{"id": "c1", "http_addr": sc.leader.HTTPAddr()}, nobody},
		{"POST", "/v1/internal/members/join", map[string]any{"id": "c9", "raft_addr": "127.0.0.1:1"}, nobody},
		{"GET", "/v1/policy", nil, allUsers},
		{"POST", "/v1/config", map[string]any{"settings": [][2]string{{"MinJobAge", "300"}}}, adminOnly},
		{"POST", "/v1/qos", map[string]any{"qos": map[string]any{"name": "t"}}, opsAdmin},
		{"POST", "/v1/accounts", map[string]any{"account": map[string]any{"name": "tmp", "parent": "root"}}, adminOnly},
		{"POST", "/v1/users", map[string]any{"user": map[string]any{"name": "dave", "account": "hep"}}, []string{pCoord, pAdmin}},
		{"GET", "/v1/priority", nil, allUsers},
		{"GET", "/v1/share", nil, allUsers},
		{"GET", "/v1/auth", nil, allUsers},
		{"GET", "/v1/audit", nil, allUsers},
		{"GET", "/metrics", nil, opsAdmin},
		{"GET", "/v1/openapi.json", nil, everyone},
		{"GET", "/v1/accounting/jobs?all=1", nil, allUsers},
		{"GET", "/v1/accounting/summary", nil, opsAdmin},
		{"GET", "/v1/accounting/usage", nil, allUsers},
		{"GET", "/v1/accounting/cluster", nil, allUsers},
		{"GET", "/v1/accounting/series", nil, allUsers},
		{"GET", "/v1/internal/accounting/records", nil, nobody},
		{"GET", "/ui/", nil, allUsers},
		{"GET", "/ui/jobs/" + j1, nil, []string{pUserA, pCoord, pOperator, pAdmin}},
		{"GET", "/ui/usage.svg", nil, allUsers},
		{"POST", "/v1/tokens", map[string]any{"description": "matrix"}, allUsers},
		{"POST", "/v1/roles", map[string]any{"grant": map[string]any{"user": "erin", "role": "operator"}}, adminOnly},
		// Last: it ends job 2 for the first principal let through.
		{"POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{held}}}, ownerSide},
	}
	checkMatrixCoversRoutes(t, sc.leader, matrix)
	for _, e := range matrix {
		for _, who := range matrixPrincipals {
			status, body := sc.do(t, who, e.method, e.path, e.body)
			want := slices.Contains(e.allowed, who)
			if got := !denied(e.method, status, body); got != want {
				t.Errorf("%s %s as %s: status %d (%s); want allowed=%v", e.method, e.path, who, status, strings.TrimSpace(body), want)
			}
		}
	}
	t.Run("a node forwards its own job's steps only", func(t *testing.T) { testNodeForwardsSteps(t, sc, running, held) })
}

// testNodeForwardsSteps sends step requests as node n1, naming a job with
// api.JobHeader as a node daemon forwards srun's: taken for the job n1
// runs (as its owner's), refused for a job it does not run and for a
// path of another job.
func testNodeForwardsSteps(t *testing.T, sc *authScene, running, held uint64) {
	send := func(header uint64, path uint64) (int, string) {
		b, _ := json.Marshal(map[string]any{"ntasks": 1})
		req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/jobs/%d/steps", sc.base, path), bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.JobHeader, fmt.Sprint(header))
		resp, err := sc.clients[pNode1].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if st, body := send(running, running); st != 200 || !strings.Contains(body, `"nodes":["n1"]`) {
		t.Errorf("n1 forwarding a step of its job %d: %d %s", running, st, body)
	}
	if st, body := send(held, held); st != 403 || !strings.Contains(body, "holds no run of job") {
		t.Errorf("n1 forwarding a step of job %d, which it does not run: %d %s", held, st, body)
	}
	if st, body := send(running, held); st != 403 || !strings.Contains(body, "a job's requests reach its own routes only") {
		t.Errorf("n1 naming job %d on job %d's route: %d %s", running, held, st, body)
	}
}

// checkMatrixCoversRoutes fails for every route of the API that no matrix
// entry calls, so an endpoint cannot be added without deciding who may
// call it.
func checkMatrixCoversRoutes(t *testing.T, c *Controller, matrix []matrixEntry) {
	t.Helper()
	mux, io := c.routes(), c.jobIORoutes()
	called := map[string]bool{}
	for _, e := range matrix {
		req, _ := http.NewRequest(e.method, "https://x"+e.path, nil)
		_, pattern := io.Handler(req)
		if pattern == "" {
			_, pattern = mux.Handler(req)
		}
		called[pattern] = true
	}
	for _, rt := range append(c.routeTable(), c.jobIORouteTable()...) {
		if !called[rt.pattern] {
			t.Errorf("endpoint %s (access %s) has no entry in the access matrix: add one with who may call it", rt.pattern, rt.access.name)
		}
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTenantIsolation checks what the query layer shows and lets change,
// with two tenants of two users each: listings, show, why, cancel, hold,
// update, policy, usage and tokens.
func TestTenantIsolation(t *testing.T) {
	sc := newAuthScene(t)
	a1 := sc.submitAs(t, "alice", "phys", true)
	a2 := sc.submitAs(t, "alice2", "hep", true)
	b1 := sc.submitAs(t, "bob", "bio", true)
	b2 := sc.submitAs(t, "bob2", "bio", true)
	as := func(token string) string { // a principal of the scene's shape for do
		tokenOf["t-"+token] = token
		sc.clients["t-"+token] = sc.clients[pAnon]
		return "t-" + token
	}
	alice, alice2, bob := as("alice"), as("alice2"), as("bob")
	defer func() {
		for _, k := range []string{alice, alice2, bob} {
			delete(tokenOf, k)
		}
	}()
	get := func(who, path string) (int, string) { return sc.do(t, who, "GET", path, nil) }
	has := func(body string, id uint64) bool { return strings.Contains(body, fmt.Sprintf(`"id":%d,`, id)) }

	_, list := get(alice, "/v1/jobs")
	_, queue := get(bob, "/v1/queue")
	_, own := get(alice, fmt.Sprintf("/v1/jobs/%d", a1))
	_, other := get(alice, fmt.Sprintf("/v1/jobs/%d", a2))
	hidden, _ := get(bob, fmt.Sprintf("/v1/jobs/%d", a1))
	why, _ := get(bob, fmt.Sprintf("/v1/jobs/%d/why", a1))
	_, policy := get(alice, "/v1/policy")
	_, share := get(bob, "/v1/share")
	_, auth := get(alice, "/v1/auth")
	_, cancelOther := sc.do(t, bob, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{a1}}})
	_, cancelSame := sc.do(t, alice, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{a2}}})
	_, cancelByUser := sc.do(t, bob, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"users": []string{"alice", "bob2"}}})
	_, holdOther := sc.do(t, bob, "POST", "/v1/jobs/hold", map[string]any{"ids": []uint64{a1}, "hold": false})
	update, _ := sc.do(t, bob, "POST", "/v1/jobs/update", map[string]any{"id": a1, "dependency": nil})
	coordStatus, coordCancel := sc.do(t, pCoord, "POST", "/v1/jobs/cancel", map[string]any{"filter": map[string]any{"ids": []uint64{a2}}})
	asBob, _ := sc.do(t, alice, "POST", "/v1/jobs", map[string]any{"jobs": []map[string]any{{"script": "#!/bin/sh\n", "ntasks": 1, "user": "bob"}}})
	intoBio, _ := sc.do(t, alice, "POST", "/v1/jobs", map[string]any{"jobs": []map[string]any{{"script": "#!/bin/sh\n", "ntasks": 1, "account": "bio"}}})
	nice, _ := sc.do(t, alice, "POST", "/v1/jobs", map[string]any{"jobs": []map[string]any{{"script": "#!/bin/sh\n", "ntasks": 1, "nice": -5}}})
	_, b2state := get(pAdmin, fmt.Sprintf("/v1/jobs/%d", b2))
	sc.do(t, pAdmin, "POST", "/v1/jobs/hold", map[string]any{"ids": []uint64{a1}, "hold": true})
	_, releaseAdmins := sc.do(t, alice, "POST", "/v1/jobs/hold", map[string]any{"ids": []uint64{a1}, "hold": false})

	checks := map[string]bool{
		"alice lists her own job":                         has(list, a1),
		"alice lists her tenant's other job":              has(list, a2),
		"alice does not list tenant B's jobs":             !has(list, b1) && !has(list, b2),
		"tenant A's job listed without paths":             !strings.Contains(list, "/home/alice2"),
		"bob's queue shows no alice":                      !strings.Contains(queue, "alice"),
		"alice sees her own script":                       strings.Contains(own, "secret-script") && strings.Contains(own, "SECRET=alice"),
		"alice2's script, env and paths hidden from her":  !strings.Contains(other, "secret-script") && !strings.Contains(other, "SECRET=") && !strings.Contains(other, "/home/alice2"),
		"bob: alice's job does not exist":                 hidden == http.StatusNotFound && why == http.StatusNotFound,
		"policy shows alice her tenant only":              strings.Contains(policy, `"phys"`) && strings.Contains(policy, `"hep"`) && !strings.Contains(policy, `"bio"`) && !strings.Contains(policy, "bob"),
		"share shows bob his tenant only":                 strings.Contains(share, `"bio"`) && !strings.Contains(share, `"phys"`),
		"alice sees her tokens only":                      strings.Contains(auth, `"id":"alice"`) && !strings.Contains(auth, `"id":"bob"`) && !strings.Contains(auth, `"id":"root"`),
		"bob cannot cancel alice's job":                   strings.Contains(cancelOther, "no such job") && !strings.Contains(cancelOther, `"cancelled":[`+fmt.Sprint(a1)),
		"alice cannot cancel alice2's job":                strings.Contains(cancelSame, "permission denied"),
		"scancel -u alice by bob cancels only bob's kind": !strings.Contains(cancelByUser, fmt.Sprint(a1)) && strings.Contains(b2state, `"state":"PENDING"`),
		"bob cannot release alice's job":                  strings.Contains(holdOther, "no such job"),
		"bob cannot update alice's job":                   update == http.StatusNotFound,
		"carol, phys's coordinator, cancels alice2's job": coordStatus == 200 && strings.Contains(coordCancel, fmt.Sprintf(`"cancelled":[%d]`, a2)),
		"alice cannot submit as bob":                      asBob == http.StatusForbidden,
		"alice cannot charge tenant B":                    intoBio == http.StatusBadRequest,
		"alice cannot raise her priority with nice":       nice == http.StatusForbidden,
		"alice cannot release an admin's hold":            strings.Contains(releaseAdmins, "only an administrator may release it"),
	}
	// PrivateData=jobs,usage: a user sees only their own jobs and usage.
	if st, body := sc.do(t, pAdmin, "POST", "/v1/config", map[string]any{"settings": [][2]string{{"PrivateData", "usage,jobs"}}}); st != http.StatusOK {
		t.Fatalf("PrivateData: %d %s", st, body)
	}
	_, privList := get(alice, "/v1/jobs")
	_, privShare := get(bob, "/v1/share")
	_, coordList := get(pCoord, "/v1/jobs")
	checks["private: alice lists her own job only"] = has(privList, a1) && !has(privList, a2)
	checks["private: bob's share lacks bob2"] = strings.Contains(privShare, `"user":"bob"`) && !strings.Contains(privShare, "bob2")
	checks["private: the coordinator still lists the tenant's jobs"] = has(coordList, a1) && has(coordList, a2)
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: no", name)
		}
	}
	if t.Failed() {
		t.Logf("alice's list: %s\nalice2's job as alice: %s\npolicy: %s\nshare as bob: %s\ncancel by bob: %s\ncancel -u: %s", list, other, policy, share, cancelOther, cancelByUser)
	}
}
