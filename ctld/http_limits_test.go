package ctld

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"corral/api"
)

// startOne starts a single-voter controller with the given HTTP timeouts
// (and edit's changes to its configuration) and waits until it leads.
func startOne(t *testing.T, timeouts HTTPTimeouts, edit ...func(*Config)) *Controller {
	t.Helper()
	raftAddr := freeAddr(t)
	cfg := Config{ID: "c1", RaftAddr: raftAddr, HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "c1"),
		Peers: []Peer{{ID: "c1", Addr: raftAddr}}, Logger: quietLog(), HTTP: timeouts}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for !c.isLeading() {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// rawAnswer is a status, the Allow header and the decoded JSON error.
type rawAnswer struct {
	status int
	allow  string
	err    api.Error
}

func send(t *testing.T, req *http.Request) rawAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	a := rawAnswer{status: resp.StatusCode, allow: resp.Header.Get("Allow")}
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &a.err); err != nil {
			t.Fatalf("%s %s: %d with a body that is not a JSON error: %q", req.Method, req.URL, resp.StatusCode, data)
		}
	}
	return a
}

func TestHTTPLimits(t *testing.T) {
	c := startOne(t, HTTPTimeouts{})
	base := "http://" + c.HTTPAddr()
	job := `{"jobs":[{"name":"a","user":"u","script":"#!/bin/sh\n","ntasks":1,"cpus_per_task":1}]}`
	many := strings.Repeat("user=x&", maxQueryParams) + "user=y"
	tests := map[string]struct {
		method, path, ctype, body string
		length                    int64 // a declared Content-Length instead of len(body)
		status                    int
		field, want, allow        string
	}{
		"a job is accepted":             {method: "POST", path: "/v1/jobs", ctype: "application/json", body: job, status: 200},
		"JSON with a charset":           {method: "POST", path: "/v1/jobs", ctype: "application/json; charset=UTF-8", body: job, status: 200},
		"text/plain (cross-site form)":  {method: "POST", path: "/v1/jobs", ctype: "text/plain", body: job, status: 415, field: "Content-Type", want: "text/plain is not accepted"},
		"a form":                        {method: "POST", path: "/v1/jobs", ctype: "application/x-www-form-urlencoded", body: "a=b", status: 415, field: "Content-Type"},
		"no Content-Type":               {method: "POST", path: "/v1/jobs/hold", body: `{"ids":[1]}`, status: 415, field: "Content-Type", want: "no Content-Type"},
		"another charset":               {method: "POST", path: "/v1/jobs", ctype: "application/json; charset=latin1", body: job, status: 415, field: "Content-Type"},
		"wrong method on a known path":  {method: "DELETE", path: "/v1/jobs", status: 405, field: "method", allow: "GET, HEAD, POST"},
		"POST to a read-only path":      {method: "POST", path: "/v1/nodes/n1", ctype: "application/json", body: "{}", status: 405, field: "method", allow: "GET, HEAD"},
		"unknown path":                  {method: "GET", path: "/v1/nothing", status: 404, want: "no API endpoint GET /v1/nothing"},
		"too many query parameters":     {method: "GET", path: "/v1/jobs?" + many, status: 400, field: "query", want: "1001 parameters; the most is 1000"},
		"a malformed query":             {method: "GET", path: "/v1/jobs?user=%zz", status: 400, field: "query", want: "malformed query"},
		"declared too large":            {method: "POST", path: "/v1/nodes/drain", ctype: "application/json", body: "{}", length: 1 << 20, status: 413, field: "body"},
		"a submission over its limit":   {method: "POST", path: "/v1/jobs", ctype: "application/json", body: `{"jobs":[{"script":"` + strings.Repeat("x", maxSubmitBytes) + `"}]}`, status: 413, field: "body"},
		"a body on a GET":               {method: "GET", path: "/v1/jobs", body: "{}", status: 400, field: "body", want: "takes no request body"},
		"a state that does not exist":   {method: "GET", path: "/v1/jobs?state=SLEEPING", status: 400, want: "unknown job state"},
		"a job id that is not":          {method: "GET", path: "/v1/jobs/abc", status: 400, field: "id"},
		"a task that does not exist":    {method: "GET", path: "/v1/jobs/1_5", status: 404, field: "id", want: "array 1 has no task 5"},
		"a body that is not UTF-8":      {method: "POST", path: "/v1/jobs", ctype: "application/json", body: "{\"jobs\":[{\"name\":\"caf\xe9\"}]}", status: 400, field: "body", want: "not valid UTF-8 (byte 21)"},
		"a node name that is a path":    {method: "GET", path: "/v1/nodes/..%2F..%2Fx", status: 400, field: "name"},
		"a long poll index that is not": {method: "GET", path: "/v1/nodes/n1/desired?index=x", status: 400, field: "index"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.body == "" {
				req.Body, req.ContentLength = nil, 0
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			if tc.length > 0 {
				req.ContentLength = tc.length
				req.Body = io.NopCloser(strings.NewReader(tc.body + strings.Repeat(" ", int(tc.length)-len(tc.body))))
			}
			a := send(t, req)
			if a.status != tc.status || a.err.Field != tc.field || !strings.Contains(a.err.Error, tc.want) || a.allow != tc.allow {
				t.Fatalf("got %d field %q allow %q: %q; want %d field %q allow %q containing %q",
					a.status, a.err.Field, a.allow, a.err.Error, tc.status, tc.field, tc.allow, tc.want)
			}
		})
	}
}

// TestHTTPLimitsOnFollowers sends a refused request to a follower: it is
// refused there, before it is forwarded.
func TestHTTPLimitsOnFollowers(t *testing.T) {
	tc := startCluster(t, 3)
	leader := tc.waitLeader(t)
	for _, c := range tc.ctls {
		if c == leader {
			continue
		}
		req, _ := http.NewRequest("POST", "http://"+c.HTTPAddr()+"/v1/jobs", strings.NewReader(`{"jobs":[]}`))
		req.Header.Set("Content-Type", "text/plain")
		if a := send(t, req); a.status != http.StatusUnsupportedMediaType {
			t.Fatalf("follower %s: %d %q, want 415", c.cfg.ID, a.status, a.err.Error)
		}
		return
	}
}

// TestSlowClientsAreCut opens 500 connections that trickle their headers
// or their bodies a byte at a time: each is closed once its timeout
// passes, and the server answers other clients meanwhile.
func TestSlowClientsAreCut(t *testing.T) {
	const conns = 500
	timeouts := HTTPTimeouts{Header: 700 * time.Millisecond, Body: 700 * time.Millisecond, Idle: 700 * time.Millisecond}
	c := startOne(t, timeouts)
	addr := c.HTTPAddr()
	var closed atomic.Int64
	var slowest [3]atomic.Int64 // the longest time to close, by kind
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < conns; i++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		var head, trickle string
		switch i % 3 {
		case 0: // headers that never end
			head, trickle = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\n", "X-Slow: 1\r\n"
		case 1: // a body declared longer than it is sent
			head, trickle = "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", " "
		case 2: // a kept-alive connection that says nothing
			head = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n"
		}
		wg.Add(1)
		kind := i % 3
		go func() {
			defer wg.Done()
			opened := time.Now()
			if _, err := io.WriteString(conn, head); err != nil {
				return
			}
			go func() {
				for k := 0; trickle != "" && k < 100; k++ {
					time.Sleep(100 * time.Millisecond)
					if _, err := io.WriteString(conn, trickle[k%len(trickle):k%len(trickle)+1]); err != nil {
						return
					}
				}
			}()
			_ = conn.SetReadDeadline(time.Now().Add(8 * time.Second))
			br := bufio.NewReader(conn)
			for {
				if _, err := br.ReadByte(); err != nil {
					if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
						closed.Add(1)
						d := int64(time.Since(opened))
						for old := slowest[kind].Load(); d > old && !slowest[kind].CompareAndSwap(old, d); old = slowest[kind].Load() {
						}
					}
					return
				}
			}
		}()
	}
	// The server keeps serving while the slow clients wait.
	st := time.Now()
	if _, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/v1/status"); err != nil {
		t.Fatalf("the server did not answer during the slow clients: %v", err)
	}
	answered := time.Since(st)
	wg.Wait()
	took := time.Since(start)
	if n := closed.Load(); n != conns {
		t.Fatalf("%d of %d slow connections were closed by the server within 8s", n, conns)
	}
	t.Logf("%d slow connections closed, all within %s; each kind at most: trickled headers %s, trickled body %s, idle %s (timeouts %s); a status request meanwhile took %s",
		conns, took.Round(time.Millisecond), time.Duration(slowest[0].Load()).Round(time.Millisecond), time.Duration(slowest[1].Load()).Round(time.Millisecond),
		time.Duration(slowest[2].Load()).Round(time.Millisecond), timeouts.Header, answered.Round(time.Millisecond))
}

// TestLongPollOutlivesTheBodyTimeout waits on a node's desired state
// longer than every request timeout but the write one: the long poll must
// answer at its wait, not be cut.
func TestLongPollOutlivesTheBodyTimeout(t *testing.T) {
	c := startOne(t, HTTPTimeouts{Header: 300 * time.Millisecond, Body: 300 * time.Millisecond, Idle: 300 * time.Millisecond, Write: 300 * time.Millisecond})
	cl, err := api.NewClient("http://" + c.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Register(context.Background(), api.NodeInfo{Name: "n1", CPUs: 1, MemMB: 100, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	var d api.Desired
	start := time.Now()
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/nodes/n1/desired?index=%d&wait=1500ms", c.HTTPAddr(), 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != 200 || !d.Known {
		t.Fatalf("long poll: %d %+v %v", resp.StatusCode, d, err)
	}
	if took := time.Since(start); took < 1400*time.Millisecond {
		t.Fatalf("long poll answered after %s, want its wait of 1.5s", took)
	}
}

// TestUTF8Body reads bodies through utf8Body in one piece, a byte at a
// time and in halves, so characters split between reads are seen whole.
func TestUTF8Body(t *testing.T) {
	tests := map[string]struct {
		body string
		bad  int64 // offset of the first invalid byte; -1 when valid
	}{
		"ASCII":                        {`{"name":"job"}`, -1},
		"multibyte":                    {`{"name":"計算 été 🚀"}`, -1},
		"an invalid byte":              {"{\"name\":\"caf\xe9\"}", 12},
		"a truncated character at EOF": {"ab\xe3\x81", 2},
		"an overlong encoding":         {"a\xc0\xafb", 1},
		"a lone continuation byte":     {"ab\x80", 2},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":       func(r io.Reader) io.Reader { return r },
		"byte a time": iotest.OneByteReader,
		"halves":      iotest.HalfReader,
	}
	for name, tc := range tests {
		for how, wrap := range readers {
			t.Run(name+", "+how, func(t *testing.T) {
				_, err := io.ReadAll(&utf8Body{ReadCloser: io.NopCloser(wrap(strings.NewReader(tc.body)))})
				var nu *errNotUTF8
				switch {
				case tc.bad < 0 && err != nil:
					t.Fatalf("valid body refused: %v", err)
				case tc.bad >= 0 && (!errors.As(err, &nu) || nu.offset != tc.bad):
					t.Fatalf("got %v, want invalid UTF-8 at byte %d", err, tc.bad)
				}
			})
		}
	}
}
