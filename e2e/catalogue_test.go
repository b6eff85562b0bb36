package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// badHTTP is one request the API must refuse: what is sent and the status
// and field of the JSON error that must come back.
type badHTTP struct {
	method, path string
	ctype        string // application/json when empty, none when "-"
	body         []byte
	declared     int64 // a Content-Length larger than the body, sent slowly
	status       int
	field        string
}

// jobBody is a POST /v1/jobs body of one job: a valid one changed by edit.
func jobBody(dir string, edit func(j map[string]any)) []byte {
	j := map[string]any{
		"name": "catalogue", "user": "tester", "script": "#!/bin/sh\ntrue\n", "ntasks": 1, "cpus_per_task": 1,
		"submit_dir": dir, "work_dir": dir, "output": "/dev/null",
	}
	if edit != nil {
		edit(j)
	}
	body, _ := json.Marshal(map[string]any{"jobs": []any{j}})
	return body
}

// rawJob is a POST /v1/jobs body with text spliced in as the value of
// field, unescaped, for what json.Marshal cannot send (invalid UTF-8).
func rawJob(dir, field, raw string) []byte {
	body := string(jobBody(dir, func(j map[string]any) { j[field] = "@@" }))
	return []byte(strings.Replace(body, `"@@"`, `"`+raw+`"`, 1))
}

func marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// badHTTPRequests is the catalogue of raw API requests, by class.
func badHTTPRequests(dir string) map[string]badHTTP {
	job := func(field string, edit func(j map[string]any)) badHTTP {
		return badHTTP{method: "POST", path: "/v1/jobs", body: jobBody(dir, edit), status: 400, field: field}
	}
	set := func(k string, v any) func(j map[string]any) { return func(j map[string]any) { j[k] = v } }
	array := func(ranges ...[3]int64) map[string]any {
		var rs []map[string]int64
		for _, r := range ranges {
			rs = append(rs, map[string]int64{"first": r[0], "last": r[1], "step": r[2]})
		}
		return map[string]any{"ranges": rs}
	}
	dep := func(typ string, ids ...string) map[string]any {
		return map[string]any{"clauses": []map[string]any{{"type": typ, "job_ids": ids}}}
	}
	post := func(path, field string, status int, v any) badHTTP {
		return badHTTP{method: "POST", path: path, body: marshal(v), status: status, field: field}
	}
	get := func(path, field string, status int) badHTTP {
		return badHTTP{method: "GET", path: path, status: status, field: field}
	}
	node := func(edit func(n *api.NodeInfo)) api.NodeInfo {
		n := api.NodeInfo{Name: "cat1", CPUs: 2, MemMB: 1024, Runner: "test", BootID: "x"}
		edit(&n)
		return n
	}
	report := func(r api.JobReport) api.NodeStatus {
		return api.NodeStatus{Name: "n1", BootID: "x", Reports: []api.JobReport{r}}
	}
	hugeEnv := strings.Repeat("x", 50<<20)
	return map[string]badHTTP{
		// The two requests that killed every controller.
		"poison: gres count -5":          job("gres", set("gres", []map[string]any{{"name": "gpu", "count": -5}})),
		"poison: ntasks × cpus overflow": job("ntasks", func(j map[string]any) { j["ntasks"], j["cpus_per_task"] = int64(1)<<32, int64(1)<<32 }),
		"ntasks × cpus over the bound":   job("cpus_per_task", func(j map[string]any) { j["ntasks"], j["cpus_per_task"] = 1000000, 1000000 }),
		// Numbers.
		"nodes -5":         job("nodes", set("nodes", -5)),
		"nodes 2, tasks 1": job("ntasks", set("nodes", 2)),
		"nodes 2, tasks 2": job("nodes", func(j map[string]any) {
			j["nodes"], j["ntasks"] = 2, 2
		}),
		"cpus_per_task 0":        job("cpus_per_task", set("cpus_per_task", 0)),
		"ntasks -1":              job("ntasks", set("ntasks", -1)),
		"time_limit_s 2^63-1":    job("time_limit_s", set("time_limit_s", int64(1<<63-1))),
		"time_limit_s 2^63":      {method: "POST", path: "/v1/jobs", body: bytes.Replace(jobBody(dir, set("time_limit_s", 7)), []byte(`"time_limit_s":7`), []byte(`"time_limit_s":9223372036854775808`), 1), status: 400, field: "body"},
		"nice -2^63":             job("nice", set("nice", int64(-1<<63))),
		"negative nice, no root": job("nice", set("nice", -5)),
		"mem -1":                 job("mem_per_node_mb", set("mem_per_node_mb", -1)),
		"mem per cpu × cpus":     job("mem_per_cpu_mb", func(j map[string]any) { j["mem_per_cpu_mb"], j["ntasks"] = int64(1)<<39, 16 }),
		"begin in 2200":          job("begin", set("begin", "2200-01-01T00:00:00Z")),
		"begin before 1970":      job("begin", set("begin", "1969-07-20T20:17:00Z")),
		// Resources.
		"gres fpga":          job("gres", set("gres", []map[string]any{{"name": "fpga", "count": 1}})),
		"negative hugepages": job("hugepages", set("hugepages", []map[string]any{{"size_kb": 2048, "count": -3}})),
		"hugepages of 3M":    job("hugepages", set("hugepages", []map[string]any{{"size_kb": 3072, "count": 1}})),
		"numa sometimes":     job("numa", set("numa", "sometimes")),
		"more CPUs than any": job("cpus_per_task", set("cpus_per_task", 10000)),
		"more GPUs than any": job("gres", set("gres", []map[string]any{{"name": "gpu", "count": 64}})),
		// Arrays, sized arithmetically.
		"array 10-5":                  job("array", set("array", array([3]int64{10, 5, 1}))),
		"array step 0":                job("array", set("array", array([3]int64{0, 5, 0}))),
		"array step -2":               job("array", set("array", array([3]int64{0, 5, -2}))),
		"array 0-2^40 and 1-2":        job("array", set("array", array([3]int64{0, 1 << 40, 1}, [3]int64{1, 2, 1}))),
		"array interleaving on steps": job("array", set("array", array([3]int64{0, 1000000, 2}, [3]int64{1, 1000000, 3}))),
		"array raw disagrees":         job("array", set("array", map[string]any{"raw": "0-99", "ranges": []map[string]int{{"first": 0, "last": 1, "step": 1}}})),
		// Dependencies.
		"dependency type afterwards": job("dependency", set("dependency", dep("afterwards", "1"))),
		"dependency id x":            job("dependency", set("dependency", dep("afterok", "x"))),
		"dependency on no job":       job("dependency", set("dependency", dep("afterok", "424242"))),
		// Text.
		"NUL in the script":         job("script", set("script", "#!/bin/sh\necho \x00\n")),
		"script not UTF-8":          {method: "POST", path: "/v1/jobs", body: rawJob(dir, "script", `#!/bin/sh\n# caf`+"\xe9"), status: 400, field: "body"},
		"NUL in the name":           job("name", set("name", "a\x00b")),
		"name not UTF-8":            {method: "POST", path: "/v1/jobs", body: rawJob(dir, "name", "\xff\xfe"), status: 400, field: "body"},
		"escape sequence in a name": job("name", set("name", "\x1b[2J\x1b[Hgotcha")),
		"1 MB request id":           job("request_id", set("request_id", strings.Repeat("r", 1<<20))),
		"comment of 300 bytes":      job("comment", set("comment", strings.Repeat("c", 300))),
		"partition ../x":            job("partition", set("partition", "../x")),
		"partition nosuch":          job("partition", set("partition", "nosuch")),
		"image ../../etc":           job("image", set("image", "../../etc")),
		"qos nosuch":                job("qos", set("qos", "nosuch")),
		"work dir relative":         job("work_dir", set("work_dir", "relative/dir")),
		"no user":                   job("user", set("user", "")),
		"script without #!":         job("script", set("script", "echo hi\n")),
		"script over 4 MiB":         job("script", set("script", "#!/bin/sh\n"+strings.Repeat("#", 4<<20))),
		"2 MB environment":          job("env", set("env", []string{"BIG=" + strings.Repeat("x", 2<<20)})),
		"env entry without =":       job("env", set("env", []string{"NOVALUE"})),
		"50 MB environment":         {method: "POST", path: "/v1/jobs", body: jobBody(dir, set("env", []string{"BIG=" + hugeEnv})), status: 413, field: "body"},
		"4097 jobs in one request":  {method: "POST", path: "/v1/jobs", body: marshal(api.SubmitRequest{Jobs: make([]api.JobSpec, 4097)}), status: 400, field: "jobs"},
		"unknown JSON field":        {method: "POST", path: "/v1/jobs", body: []byte(`{"jobs":[],"jbos":[]}`), status: 400, field: "body"},
		"trailing data":             {method: "POST", path: "/v1/jobs", body: []byte(`{"jobs":[{}]} {}`), status: 400, field: "body"},
		// Nodes.
		"node named ../../x":          post("/v1/nodes/register", "name", 400, node(func(n *api.NodeInfo) { n.Name = "../../x" })),
		"node with garbage partition": post("/v1/nodes/register", "partitions", 400, node(func(n *api.NodeInfo) { n.Partitions = []string{"\x1b[31m"} })),
		"node with 0 CPUs":            post("/v1/nodes/register", "cpus", 400, node(func(n *api.NodeInfo) { n.CPUs = 0 })),
		"node with a ragged matrix": post("/v1/nodes/register", "inventory.topology.distances", 400, node(func(n *api.NodeInfo) {
			n.Inventory = &api.Inventory{Topology: &api.Topology{Nodes: []api.NUMANode{{ID: 0}, {ID: 1}}, Distances: [][]int{{10}}}}
		})),
		"report in state RUNNING": post("/v1/nodes/status", "reports.state", 400, report(api.JobReport{JobID: 1, State: api.StateRunning})),
		"report exit code 300":    post("/v1/nodes/status", "reports.exit_code", 400, report(api.JobReport{JobID: 1, State: api.StateFailed, ExitCode: 300})),
		"heartbeat from ../x":     post("/v1/nodes/heartbeat", "name", 400, api.NodeStatus{Name: "../x"}),
		"drain reason with ESC":   post("/v1/nodes/drain", "reason", 400, api.DrainRequest{Node: "n1", Drain: true, Reason: "\x1b]0;x\x07"}),
		// Job commands.
		"cancel state SLEEPING": post("/v1/jobs/cancel", "states", 400, api.CancelRequest{Filter: api.JobFilter{States: []api.JobState{"SLEEPING"}}}),
		"hold job 0":            post("/v1/jobs/hold", "ids", 400, api.HoldRequest{IDs: []uint64{0}, Hold: true}),
		"update to afterwards":  post("/v1/jobs/update", "dependency", 400, api.UpdateJobRequest{ID: 1, Dependency: &api.Dependency{Clauses: []api.DepClause{{Type: "afterwards", JobIDs: []string{"1"}}}}}),
		// Policy.
		"QoS priority -1":        post("/v1/qos", "priority", 400, api.QOSRequest{QOS: api.QOS{Name: "q", Priority: -1}}),
		"QoS preempt mode kill":  post("/v1/qos", "preempt_mode", 400, api.QOSRequest{QOS: api.QOS{Name: "q", PreemptMode: "kill"}}),
		"account named a b":      post("/v1/accounts", "name", 400, api.AccountRequest{Account: api.Account{Name: "a b"}}),
		"user shares -1":         post("/v1/users", "shares", 400, api.UserRequest{User: api.AccountUser{Name: "u", Account: "a", Shares: -1}}),
		"config weight 2^40":     post("/v1/config", "", 400, api.ConfigRequest{Settings: [][2]string{{"PriorityWeightAge", "1099511627776"}}}),
		"config billing NaN":     post("/v1/config", "", 400, api.ConfigRequest{Settings: [][2]string{{"BillingWeightCPU", "NaN"}}}),
		"config setting unknown": post("/v1/config", "", 400, api.ConfigRequest{Settings: [][2]string{{"Frobnicate", "1"}}}),
		// Queries.
		"10001 query parameters": get("/v1/jobs?"+strings.Repeat("user=tester&", 10000)+"user=x", "query", 400),
		"malformed query":        get("/v1/jobs?user=%zz", "query", 400),
		"state SLEEPING":         get("/v1/jobs?state=SLEEPING", "", 400),
		"id abc":                 get("/v1/jobs?id=abc", "", 400),
		"job 1_99":               get("/v1/jobs/1_99", "id", 404),
		"node ../x":              get("/v1/nodes/..%2Fx", "name", 400),
		// Transport.
		"Content-Type text/plain": {method: "POST", path: "/v1/jobs", ctype: "text/plain", body: jobBody(dir, nil), status: 415, field: "Content-Type"},
		"no Content-Type":         {method: "POST", path: "/v1/jobs/hold", ctype: "-", body: []byte(`{"ids":[1]}`), status: 415, field: "Content-Type"},
		"DELETE /v1/jobs":         {method: "DELETE", path: "/v1/jobs", status: 405, field: "method"},
		"PUT /v1/nodes/n1":        {method: "PUT", path: "/v1/nodes/n1", ctype: "-", status: 405, field: "method"},
		"oversized drain":         {method: "POST", path: "/v1/nodes/drain", body: marshal(api.DrainRequest{Node: "n1", Reason: strings.Repeat("r", 1<<20)}), status: 413, field: "body"},
		"a body on a GET":         {method: "GET", path: "/v1/jobs", body: []byte("{}"), status: 400, field: "body"},
		"a body sent too slowly":  {method: "POST", path: "/v1/jobs", body: []byte(`{"jobs":[`), declared: 1000, status: 408, field: "body"},
	}
}

// sendRaw sends a catalogue request over its own connection and returns
// the status and the decoded JSON error.
func sendRaw(t *testing.T, addr string, b badHTTP) (int, api.Error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", b.method, b.path, addr)
	switch b.ctype {
	case "":
		head.WriteString("Content-Type: application/json\r\n")
	case "-":
	default:
		fmt.Fprintf(&head, "Content-Type: %s\r\n", b.ctype)
	}
	length := int64(len(b.body))
	if b.declared > 0 {
		length = b.declared
	}
	if length > 0 || b.method == "POST" {
		fmt.Fprintf(&head, "Content-Length: %d\r\n", length)
	}
	head.WriteString("\r\n")
	w := bufio.NewWriter(conn)
	w.WriteString(head.String())
	go func() { // the body may be refused before it is read
		_, _ = w.Write(b.body)
		_ = w.Flush()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: b.method})
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", b.method, b.path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e api.Error
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("%s %s: %d with a body that is not a JSON error: %.200q", b.method, b.path, resp.StatusCode, data)
	}
	return resp.StatusCode, e
}

// badCLI is a command the CLI must refuse, with text its error must hold.
type badCLI struct {
	args []string
	want string
}

func badCLICommands(dir string) map[string]badCLI {
	script := filepath.Join(dir, "job.sh")
	latin1 := filepath.Join(dir, "latin1.sh")
	return map[string]badCLI{
		"submit /dev/zero":               {[]string{"submit", "/dev/zero"}, "not a regular file (it is a character device)"},
		"submit a directory":             {[]string{"submit", dir}, "not a regular file (it is a directory)"},
		"submit a script not UTF-8":      {[]string{"submit", latin1}, "is not valid UTF-8 (line 2)"},
		"submit --nice=-5":               {[]string{"submit", "--nice=-5", script}, "only root may give a negative nice"},
		"submit -n 1000000 -c 2":         {[]string{"submit", "-n", "1000000", "-c", "2", script}, "cpus_per_task"},
		"submit -J with an escape":       {[]string{"submit", "-J", "\x1b[2Jx", script}, "contains the control character"},
		"submit --array=0-2000000":       {[]string{"submit", "--array=0-2000000", script}, "--array"},
		"submit --array=0-9:0":           {[]string{"submit", "--array=0-9:0", script}, "step must be at least 1"},
		"submit --dependency=afterwards": {[]string{"submit", "--dependency=afterwards:1", script}, `unknown dependency type "afterwards"`},
		"submit --gres=gpu:-5":           {[]string{"submit", "--gres=gpu:-5", script}, "--gres"},
		"submit -c 10000 (no node)":      {[]string{"submit", "-c", "10000", script}, "Requested node configuration is not available"},
		"submit -p nosuch":               {[]string{"submit", "-p", "nosuch", script}, `invalid partition "nosuch"`},
		"submit --begin=2100-01-01":      {[]string{"submit", "--begin=2100-01-01", script}, "at most 10 years ahead"},
		"submit --hugepages=2M:-1":       {[]string{"submit", "--hugepages=2M:-1", script}, "--hugepages"},
		"queue --states=SLEEPING":        {[]string{"queue", "--states=SLEEPING"}, "SLEEPING"},
		"show job 1_99":                  {[]string{"show", "job", "1_99"}, "array 1 has no task 99"},
	}
}

// leaderRSS reads the resident memory of the controller process, in KiB.
func leaderRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// TestCatalogueOfBadRequests sends every class of bad request, through the
// API and through the CLI: each is refused with a 4xx whose JSON error
// names the field, nothing is queued, the leader stays up and its memory
// does not grow.
func TestCatalogueOfBadRequests(t *testing.T) {
	c := startControllers(t, 1, "--http-body-timeout", "1s")
	c.leader(t, 15*time.Second)
	c.startNode(t, "n1")
	c.waitNodes(t, 1)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "job.sh"), "#!/bin/sh\ntrue\n")
	writeFile(t, filepath.Join(dir, "latin1.sh"), "#!/bin/sh\n# caf\xe9\ntrue\n")
	held := c.submit(t, dir, "--hold", filepath.Join(dir, "job.sh"))
	cl := c.client(t)
	before := allJobs(t, cl)
	u, _ := url.Parse(c.http[0])
	rssBefore := leaderRSS(t, c.ctlds[0])

	reqs := badHTTPRequests(dir)
	cmds := badCLICommands(dir)
	if n := len(reqs) + len(cmds); n < 60 {
		t.Fatalf("the catalogue has %d requests, want at least 60", n)
	}
	start := time.Now()
	for name, b := range reqs {
		t.Run("api: "+name, func(t *testing.T) {
			t0 := time.Now()
			status, e := sendRaw(t, u.Host, b)
			if status != b.status || e.Field != b.field || e.Error == "" {
				t.Fatalf("got %d field %q: %.300q; want %d field %q", status, e.Field, e.Error, b.status, b.field)
			}
			if d := time.Since(t0); d > 3*time.Second && b.declared == 0 {
				t.Logf("answered after %s", d)
			}
		})
	}
	for name, b := range cmds {
		t.Run("cli: "+name, func(t *testing.T) {
			out, err := cli(t, c.addr, dir, b.args...)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("corral %q: %q, %v; want an error saying %q", b.args, out, err, b.want)
			}
		})
	}
	t.Logf("%d API requests and %d CLI commands refused in %s", len(reqs), len(cmds), time.Since(start).Round(time.Millisecond))

	after := allJobs(t, cl)
	if len(after) != len(before) || after[mustID(t, held)].State != api.StatePending {
		ids := make([]uint64, 0, len(after))
		for id := range after {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		t.Fatalf("the queue changed: %d jobs before, %d after (%v)", len(before), len(after), ids)
	}
	if _, err := cl.Status(context.Background()); err != nil {
		t.Fatalf("the leader is not answering: %v", err)
	}
	// The memory large bodies needed goes back to the system within
	// seconds of the last one (ctld's largeBodies): give it that long.
	var rssAfter int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if rssAfter = leaderRSS(t, c.ctlds[0]); rssAfter-rssBefore <= 20<<10 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("leader RSS %d MiB before the catalogue, %d MiB after", rssBefore>>10, rssAfter>>10)
	if rssAfter-rssBefore > 20<<10 {
		t.Fatalf("the leader's RSS grew by %d MiB (from %d to %d MiB)", (rssAfter-rssBefore)>>10, rssBefore>>10, rssAfter>>10)
	}
}
