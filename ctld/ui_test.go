package ctld

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"corral/api"
	"corral/ctld/state"
	"corral/ctld/statuspage"
)

// htmlTable returns the text of each row's cells of the table with id in
// an HTML document (the header row left out).
func htmlTable(t *testing.T, doc []byte, id string) [][]string {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var table *html.Node
	var find func(n *html.Node)
	find = func(n *html.Node) {
		for _, a := range n.Attr {
			if a.Key == "id" && a.Val == id {
				table = n
			}
		}
		for ch := n.FirstChild; ch != nil && table == nil; ch = ch.NextSibling {
			find(ch)
		}
	}
	find(root)
	if table == nil {
		return nil
	}
	var rows [][]string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" {
			var cells []string
			for td := n.FirstChild; td != nil; td = td.NextSibling {
				if td.Type == html.ElementNode && td.Data == "td" {
					cells = append(cells, textOf(td))
				}
			}
			if cells != nil {
				rows = append(rows, cells)
			}
			return
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(table)
	return rows
}

func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		b.WriteString(textOf(ch))
	}
	return b.String()
}

// get fetches url with the client, the header set when given.
func get(t *testing.T, cl *http.Client, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestStatusPage loads the page of a controller with a node and jobs:
// its queue holds the rows GET /v1/queue prints (ids, states, users,
// reasons) in the same order, a job named <script>alert(1)</script> as
// text, under a policy that allows no script; a job's page shows scontrol
// show job and corral why; the usage plot is SVG; errors are pages too.
func TestStatusPage(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	base := "http://" + c.HTTPAddr()
	cl, _ := api.NewClient(base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 3, MemMB: 4096, Runner: "test", BootID: "b", Partitions: []string{"batch"}}); err != nil {
		t.Fatal(err)
	}
	evil := spec("<script>alert(1)</script>")
	held := spec("held")
	held.Hold = true
	big := spec("big")
	big.CPUsPerTask = 2
	res, err := cl.Submit(ctx, []api.JobSpec{evil, held, big, spec("waits")})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first and the big job run", func() bool {
		j, err := cl.Job(ctx, res[0].JobID, false)
		b, err2 := cl.Job(ctx, res[2].JobID, false)
		return err == nil && err2 == nil && j.State == api.StateRunning && b.State == api.StateRunning
	})
	resp, page := get(t, http.DefaultClient, base+"/ui/")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		resp.Header.Get("Content-Security-Policy") != statuspage.ContentSecurityPolicy {
		t.Fatalf("GET /ui/: %d %v\n%s", resp.StatusCode, resp.Header, page)
	}
	queue := htmlTable(t, page, "queue-table")
	resp, text := get(t, http.DefaultClient, base+"/v1/queue?"+"format="+strings.ReplaceAll("%i|%t|%u|%R", "%", "%25")+"&noheader=1")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/queue: %d %s", resp.StatusCode, text)
	}
	want := strings.Split(strings.TrimRight(string(text), "\n"), "\n")
	if len(queue) != len(want) || len(want) != 4 {
		t.Fatalf("the page's queue has %d rows %q, GET /v1/queue %d: %q", len(queue), queue, len(want), want)
	}
	for i, row := range queue {
		// JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)
		if got := strings.Join([]string{row[0], row[4], row[3], row[7]}, "|"); got != want[i] {
			t.Errorf("queue row %d: %s, want %s", i, got, want[i])
		}
	}
	if !slices.ContainsFunc(queue, func(r []string) bool { return r[2] == "<script>alert(1)</script>" }) {
		t.Errorf("no queue row shows the name <script>alert(1)</script> as text: %q", queue)
	}
	if bytes.Contains(page, []byte("<script")) || !bytes.Contains(page, []byte("&lt;script&gt;alert(1)&lt;/script&gt;")) {
		t.Error("the job's name reached the page as markup")
	}
	if nodes := htmlTable(t, page, "node-table"); len(nodes) != 1 || nodes[0][0] != "n1" || nodes[0][1] != "allocated" || nodes[0][2] != "3/3" {
		t.Errorf("the nodes table: %q, want n1 allocated with 3 of 3 CPUs", nodes)
	}
	if !bytes.Contains(page, []byte(`<a href="/ui/jobs/`+fmt.Sprint(res[3].JobID)+`">`)) || !bytes.Contains(page, []byte(`src="/ui/usage.svg?days=7"`)) {
		t.Error("the page links no job page or no plot")
	}

	resp, jobPage := get(t, http.DefaultClient, fmt.Sprintf("%s/ui/jobs/%d", base, res[3].JobID))
	if resp.StatusCode != 200 || !bytes.Contains(jobPage, []byte(fmt.Sprintf("JobId=%d ", res[3].JobID))) ||
		!bytes.Contains(jobPage, []byte(fmt.Sprintf("Job %d is PENDING, reason Resources", res[3].JobID))) {
		t.Errorf("the job page: %d\n%s", resp.StatusCode, jobPage)
	}
	resp, svg := get(t, http.DefaultClient, base+"/ui/usage.svg?days=2")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/svg+xml" || !wellFormed(svg) {
		t.Errorf("the plot: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(svg))
	}
	for path, status := range map[string]int{"/ui/jobs/999": 404, "/ui/?days=0": 400, "/ui/jobs/x": 400, "/ui/nope": 404} {
		resp, body := get(t, http.DefaultClient, base+path)
		if resp.StatusCode != status || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || !bytes.Contains(body, []byte(`<p id="error">`)) {
			t.Errorf("GET %s: %d %s, want %d and an error page\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), status, body)
		}
	}
	resp, refresh := get(t, http.DefaultClient, base+"/ui/?refresh=1&user=alice")
	if resp.StatusCode != 200 || !bytes.Contains(refresh, []byte(`<meta http-equiv="refresh" content="5">`)) || !bytes.Contains(refresh, []byte("(user=alice)")) {
		t.Errorf("?refresh=1&user=alice: %d\n%s", resp.StatusCode, refresh)
	}
}

func wellFormed(doc []byte) bool {
	dec := xml.NewDecoder(bytes.NewReader(doc))
	for {
		if _, err := dec.Token(); err != nil {
			return err == io.EOF
		}
	}
}

// TestStatusPageAccess checks the page under --auth: a browser without
// credentials is asked for them (401, WWW-Authenticate: Basic); with a
// token as the Basic password a user sees their tenant's jobs and not the
// other's, whose job page is not found; the API takes no Basic
// credentials.
func TestStatusPageAccess(t *testing.T) {
	sc := newAuthScene(t)
	aJob := sc.submitAs(t, "alice", "phys", true)
	bJob := sc.submitAs(t, "bob", "bio", true)
	basic := func(token string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+sc.tokens[token]))
	}
	cl := sc.clients[pAnon]
	resp, body := get(t, cl, sc.base+"/ui/")
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") || !bytes.Contains(body, []byte("token as the password")) {
		t.Errorf("no credentials: %d %q\n%s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	ids := func(token string) []string {
		resp, page := get(t, cl, sc.base+"/ui/", "Authorization", basic(token))
		if resp.StatusCode != 200 {
			t.Fatalf("GET /ui/ as %s: %d\n%s", token, resp.StatusCode, page)
		}
		var out []string
		for _, r := range htmlTable(t, page, "queue-table") {
			out = append(out, r[0])
		}
		return out
	}
	if got := ids("alice"); !slices.Contains(got, fmt.Sprint(aJob)) || slices.Contains(got, fmt.Sprint(bJob)) {
		t.Errorf("alice's page lists jobs %v; want her tenant's %d and not bob's %d", got, aJob, bJob)
	}
	if got := ids("bob"); slices.Contains(got, fmt.Sprint(aJob)) || !slices.Contains(got, fmt.Sprint(bJob)) {
		t.Errorf("bob's page lists jobs %v; want his %d and not alice's %d", got, bJob, aJob)
	}
	if resp, _ := get(t, cl, fmt.Sprintf("%s/ui/jobs/%d", sc.base, aJob), "Authorization", basic("bob")); resp.StatusCode != 404 {
		t.Errorf("bob opens alice's job page: %d, want 404", resp.StatusCode)
	}
	if resp, _ := get(t, cl, fmt.Sprintf("%s/ui/jobs/%d", sc.base, aJob), "Authorization", basic("alice")); resp.StatusCode != 200 {
		t.Errorf("alice opens her job's page: %d", resp.StatusCode)
	}
	if resp, body := get(t, cl, sc.base+"/v1/jobs", "Authorization", basic("alice")); resp.StatusCode != 401 || !bytes.Contains(body, []byte("status page")) {
		t.Errorf("Basic credentials on the API: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, _ := get(t, cl, sc.base+"/ui/", "Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("x:corral_nope_nope"))); resp.StatusCode != 401 {
		t.Errorf("an unknown token: %d, want 401", resp.StatusCode)
	}
}

// FuzzUIAuthorization decides the principal of status page requests with
// arbitrary Authorization headers on an authenticating member that holds
// one token: nothing may panic, and only that token, as a bearer or as
// the password of Basic credentials, makes a user; the same Basic
// credentials make no one on the API.
func FuzzUIAuthorization(f *testing.F) {
	fsm := NewFSM(quietLog())
	now := time.Now().UTC()
	fsm.state.Apply(1, state.CmdPutToken, &state.PutToken{Now: now, Token: state.TokenRecord{Hash: state.HashSecret("sesame"),
		Token: api.Token{ID: "t1", User: "alice", Role: api.RoleUser, Expires: now.Add(time.Hour)}}})
	c := &Controller{cfg: Config{Auth: true}, fsm: fsm, log: quietLog(), clock: realClock{}}
	for _, h := range []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("x:corral_t1_sesame")),
		"Basic " + base64.StdEncoding.EncodeToString([]byte(":corral_t1_sesame")), "Basic " + base64.StdEncoding.EncodeToString([]byte("corral_t1_sesame")),
		"Basic !!", "Basic ", "Bearer corral_t1_sesame", "basic eDp5"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, header string) {
		for _, path := range []string{"/ui/", "/v1/jobs"} {
			r := httptest.NewRequest("GET", "/", nil)
			r.URL.Path = path
			r.Header.Set("Authorization", header)
			p, err := c.principalOf(r)
			if err != nil || p.kind != kindUser {
				continue
			}
			if p.name != "alice" {
				t.Fatalf("%s with %q made user %q", path, header, p.name)
			}
			cred := strings.TrimSpace(strings.TrimPrefix(header, "Bearer "))
			if scheme, rest, _ := strings.Cut(r.Header.Get("Authorization"), " "); scheme == "Basic" {
				raw, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
				_, cred, _ = strings.Cut(string(raw), ":")
				if path != "/ui/" {
					t.Fatalf("Basic credentials %q made a user on %s", header, path)
				}
			}
			if cred != "corral_t1_sesame" {
				t.Fatalf("%s with %q made user %s", path, header, p)
			}
		}
	})
}
