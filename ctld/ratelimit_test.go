package ctld

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// limiterT0 is the fake clock's start in the limiter's tests.
var limiterT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func userKey(class costClass, name string) limitKey {
	return limitKey{class: class, kind: kindUser, name: name}
}

// TestRateLimiterTake runs sequences of requests against a limiter of 10
// writes/s (burst 3) and 2 listings/s (burst 2) on a fake clock; each step
// is a request at a time after the start, and what it must get.
func TestRateLimiterTake(t *testing.T) {
	type step struct {
		at   time.Duration
		key  limitKey
		ok   bool
		wait time.Duration // when refused
	}
	alice, bob := userKey(costWrite, "alice"), userKey(costWrite, "bob")
	aliceList := userKey(costList, "alice")
	tests := map[string]struct {
		limits RateLimits
		steps  []step
	}{
		"a burst, then refused until a token refills": {
			steps: []step{{0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0},
				{0, alice, false, 100 * time.Millisecond}, {40 * time.Millisecond, alice, false, 60 * time.Millisecond},
				{100 * time.Millisecond, alice, true, 0}, {100 * time.Millisecond, alice, false, 100 * time.Millisecond}},
		},
		"refills at the rate": {
			// 250 ms at 10/s is 2.5 tokens: two requests, and half a token
			// left (50 ms to the next).
			steps: []step{{0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0},
				{250 * time.Millisecond, alice, true, 0}, {250 * time.Millisecond, alice, true, 0},
				{250 * time.Millisecond, alice, false, 50 * time.Millisecond}},
		},
		"an idle hour refills no more than the burst": {
			steps: []step{{0, alice, true, 0}, {time.Hour, alice, true, 0}, {time.Hour, alice, true, 0},
				{time.Hour, alice, true, 0}, {time.Hour, alice, false, 100 * time.Millisecond}},
		},
		"one principal's burst leaves another's untouched": {
			steps: []step{{0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0}, {0, alice, false, 100 * time.Millisecond},
				{0, bob, true, 0}, {0, bob, true, 0}, {0, bob, true, 0}, {0, bob, false, 100 * time.Millisecond}},
		},
		"writes and listings are separate buckets": {
			steps: []step{{0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0}, {0, alice, false, 100 * time.Millisecond},
				{0, aliceList, true, 0}, {0, aliceList, true, 0}, {0, aliceList, false, 500 * time.Millisecond}},
		},
		"a user and a node of the same name are separate": {
			steps: []step{{0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0}, {0, alice, false, 100 * time.Millisecond},
				{0, limitKey{class: costWrite, kind: kindNode, name: "alice"}, true, 0}},
		},
		"a negative rate turns the class off": {
			limits: RateLimits{Writes: -1, WriteBurst: 1, Reads: 2, ReadBurst: 1},
			steps: []step{{0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0}, {0, alice, true, 0},
				{0, aliceList, true, 0}, {0, aliceList, false, 500 * time.Millisecond}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			limits := tc.limits
			if limits == (RateLimits{}) {
				limits = RateLimits{Writes: 10, WriteBurst: 3, Reads: 2, ReadBurst: 2}
			}
			l := newLimiter(limits, limiterT0)
			for i, s := range tc.steps {
				v := l.take(s.key, true, limiterT0.Add(s.at))
				if v.ok != s.ok || !s.ok && (v.wait-s.wait).Abs() > time.Microsecond {
					t.Fatalf("step %d (%s %s at %s): ok %v wait %s; want ok %v wait %s", i, s.key.kind, s.key.name, s.at, v.ok, v.wait, s.ok, s.wait)
				}
			}
		})
	}
}

// TestRateLimitDefaults checks that zero fields take the defaults and set
// ones are kept.
func TestRateLimitDefaults(t *testing.T) {
	got := RateLimits{Reads: 5}.withDefaults()
	want := RateLimits{Writes: defaultWriteRate, WriteBurst: defaultWriteBurst, Reads: 5, ReadBurst: defaultReadBurst}
	if got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestRateLimitKeys checks whom a request is charged to: users, nodes and
// members by name, anonymous and nameless callers by IP address (the port
// ignored), and which names count as proved.
func TestRateLimitKeys(t *testing.T) {
	tests := map[string]struct {
		p      principal
		remote string
		want   limitKey
		proved bool
	}{
		"a user by token": {principal{kind: kindUser, name: "alice", via: "token t1"}, "10.0.0.5:4242",
			userKey(costWrite, "alice"), true},
		"a node by certificate": {principal{kind: kindNode, name: "n1", open: true}, "10.0.0.6:1",
			limitKey{costWrite, kindNode, "n1"}, true},
		"an anonymous caller by IP": {principal{kind: kindAnonymous}, "10.0.0.7:5555",
			limitKey{costWrite, kindAnonymous, "10.0.0.7"}, false},
		"an anonymous caller over IPv6": {principal{kind: kindAnonymous}, "[2001:db8::1]:5555",
			limitKey{costWrite, kindAnonymous, "2001:db8::1"}, false},
		"a claimed name without --auth": {principal{kind: kindUser, name: "bob", open: true}, "10.0.0.8:1",
			userKey(costWrite, "bob"), false},
		"a nameless caller without --auth, by IP": {principal{kind: kindUser, open: true}, "10.0.0.9:1",
			limitKey{costWrite, kindAnonymous, "10.0.0.9"}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			k, proved := limitKeyOf(tc.p, tc.remote, costWrite)
			if k != tc.want || proved != tc.proved {
				t.Fatalf("%+v proved %v; want %+v proved %v", k, proved, tc.want, tc.proved)
			}
		})
	}
}

// TestRateLimiterCapsKeys floods a limiter that holds at most 4 buckets
// with callers from 20 addresses, all active: past the cap they share one
// overflow bucket (burst 3), while proved users still get their own.
func TestRateLimiterCapsKeys(t *testing.T) {
	l := newLimiter(RateLimits{Writes: 1, WriteBurst: 3}, limiterT0)
	l.maxKeys = 4
	var refused, shared int
	for i := 0; i < 20; i++ {
		k := limitKey{class: costWrite, kind: kindAnonymous, name: fmt.Sprintf("10.0.0.%d", i)}
		v := l.take(k, false, limiterT0)
		if !v.ok {
			refused++
		}
		if v.shared {
			shared++
		}
	}
	if n := l.keys(); n != 4 {
		t.Errorf("the limiter holds %d buckets, want its cap of 4", n)
	}
	// 16 addresses past the cap share a burst of 3: 13 refused.
	if shared != 16 || refused != 13 {
		t.Errorf("%d callers shared the overflow bucket and %d were refused; want 16 and 13", shared, refused)
	}
	if v := l.take(userKey(costWrite, "alice"), true, limiterT0); !v.ok || v.shared {
		t.Errorf("a proved user past the cap: %+v, want its own bucket", v)
	}
	if n := l.keys(); n != 5 {
		t.Errorf("the limiter holds %d buckets after a proved user, want 5", n)
	}
	err := l.refusal(principal{kind: kindAnonymous}, limitKey{class: costWrite, kind: kindAnonymous, name: "10.0.0.19"}, verdict{wait: time.Second, shared: true})
	if !strings.Contains(err.Error(), "share one limit") {
		t.Errorf("the overflow's refusal %q does not say the callers share a limit", err)
	}
}

// TestRateLimiterSweepsIdle fills a limiter of 4 buckets, lets three of
// them refill (burst 2 at 1/s: 2 s) while one keeps calling, and checks
// that the next new caller sweeps the full ones away and gets a bucket of
// its own.
func TestRateLimiterSweepsIdle(t *testing.T) {
	l := newLimiter(RateLimits{Writes: 1, WriteBurst: 2}, limiterT0)
	l.maxKeys = 4
	busy := userKey(costWrite, "busy")
	for _, name := range []string{"a", "b", "c"} {
		l.take(userKey(costWrite, name), false, limiterT0)
	}
	l.take(busy, false, limiterT0)
	l.take(busy, false, limiterT0.Add(2*time.Second)) // back to 1 of 2
	if v := l.take(userKey(costWrite, "new"), false, limiterT0.Add(2*time.Second)); !v.ok || v.shared {
		t.Fatalf("a new caller after the sweep: %+v, want its own bucket", v)
	}
	if n := l.keys(); n != 2 {
		t.Fatalf("the limiter holds %d buckets after the sweep, want 2 (busy and new)", n)
	}
	// busy's bucket survived the sweep with its count: one token left.
	if v := l.take(busy, false, limiterT0.Add(2*time.Second)); !v.ok {
		t.Fatal("busy's last token was lost in the sweep")
	}
	if v := l.take(busy, false, limiterT0.Add(2*time.Second)); v.ok {
		t.Fatal("busy got a token it did not have: the sweep dropped a bucket that was not full")
	}
}

// TestRouteCostClasses lists the class of every endpoint; it fails when
// an endpoint is added without deciding whether it is limited.
func TestRouteCostClasses(t *testing.T) {
	want := map[string]costClass{
		"POST /v1/jobs": costWrite, "GET /v1/jobs": costList, "GET /v1/queue": costList,
		"GET /v1/jobs/{id}": costFree, "GET /v1/jobs/{id}/why": costFree,
		"POST /v1/jobs/cancel": costWrite, "POST /v1/jobs/hold": costWrite, "POST /v1/jobs/suspend": costWrite, "POST /v1/jobs/requeue": costWrite, "POST /v1/jobs/top": costWrite, "GET /v1/licenses": costFree,
		"POST /v1/jobs/migrate": costWrite, "POST /v1/jobs/checkpoint": costWrite,
		"POST /v1/jobs/update": costWrite, "POST /v1/jobs/{id}/steps": costWrite, "POST /v1/jobs/{id}/steps/{step}/end": costWrite,
		"POST /v1/jobs/{id}/steps/{step}/cancel": costWrite, "GET /v1/steps": costFree, "GET /v1/nodes": costFree, "GET /v1/nodes/{name}": costFree,
		"GET /v1/nodes/{name}/desired": costFree, "POST /v1/nodes/register": costFree,
		"POST /v1/nodes/heartbeat": costFree, "POST /v1/nodes/status": costFree, "POST /v1/nodes/drain": costWrite,
		"GET /v1/partitions": costFree, "POST /v1/partitions": costWrite,
		"GET /v1/reservations": costFree, "POST /v1/reservations": costWrite, "GET /v1/status": costFree,
		"POST /v1/internal/members": costFree, "POST /v1/internal/members/join": costFree, "GET /v1/policy": costList, "POST /v1/config": costWrite,
		"POST /v1/qos": costWrite, "POST /v1/accounts": costWrite, "POST /v1/users": costWrite,
		"GET /v1/priority": costList, "GET /v1/share": costList, "GET /v1/auth": costFree,
		"POST /v1/tokens": costWrite, "POST /v1/roles": costWrite, "GET /v1/audit": costList,
		"POST /v1/nodes/forget-key": costWrite, "POST /v1/nodes/features": costWrite, "POST /v1/nodes/join": costWrite,
		"POST /v1/nodes/attest/begin": costFree, "POST /v1/nodes/attest/finish": costFree,
		"POST /v1/jobs/{id}/exec": costWrite, "POST /v1/jobs/{id}/signal": costWrite,
		"GET /v1/jobs/{id}/file": costFree, "PUT /v1/jobs/{id}/file": costWrite, "GET /v1/jobs/{id}/output": costFree,
		"GET /metrics": costFree, "GET /v1/openapi.json": costFree,
		"GET /v1/accounting/jobs": costList, "GET /v1/accounting/summary": costFree, "GET /v1/accounting/usage": costFree,
		"GET /v1/internal/accounting/records": costFree,
		"GET /v1/accounting/cluster":          costList, "GET /v1/accounting/series": costList,
		"GET /ui/": costList, "GET /ui/jobs/{id}": costFree, "GET /ui/usage.svg": costList,
	}
	c := &Controller{}
	for _, rt := range append(c.routeTable(), c.jobIORouteTable()...) {
		w, ok := want[rt.pattern]
		if !ok {
			t.Errorf("%s: no rate-limit class in this test: decide whether it is a write, a listing or free, and add it", rt.pattern)
			continue
		}
		if got := costOf(rt.pattern); got != w {
			t.Errorf("%s: class %d, want %d", rt.pattern, got, w)
		}
	}
}

// rateScene is an authenticating cluster of one member whose limits are
// 3 writes and 2 listings, refilling at one token per 1,000 s (so that
// nothing refills during the test), with tokens for alice and bob.
func rateScene(t *testing.T) (tc *testCluster, client func(user string) *api.Client) {
	tc = startClusterTuned(t, 1, true, true, func(c *Config) {
		c.RateLimits = RateLimits{Writes: 0.001, WriteBurst: 3, Reads: 0.001, ReadBurst: 2}
	})
	leader := tc.waitLeader(t)
	now := time.Now().UTC()
	tokens := map[string]string{}
	for _, user := range []string{"alice", "bob"} {
		rec := state.TokenRecord{Hash: state.HashSecret("secret-" + user), Token: api.Token{ID: user, User: user, Role: api.RoleUser,
			CreatedBy: "test", Created: now, Expires: now.Add(time.Hour)}}
		if res, err := leader.propose(state.CmdPutToken, &state.PutToken{Now: now, Token: rec}); err != nil || res != nil {
			t.Fatalf("token %s: %v %v", user, err, res)
		}
		tokens[user] = tokenPrefix + user + "_secret-" + user
	}
	return tc, func(user string) *api.Client {
		cl := tc.client(t)
		cl.RetryFor = 0 // a 429 is returned, not waited out
		if user != "" {
			cl.Auth = api.BearerToken(tokens[user])
		}
		return cl
	}
}

func jobSpecs(prefix string, n int) []api.JobSpec {
	specs := make([]api.JobSpec, n)
	for i := range specs {
		specs[i] = api.JobSpec{Name: prefix, Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1, Hold: true,
			RequestID: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return specs
}

// tooMany reports the 429 err is, with its Retry-After, or fails.
func tooMany(t *testing.T, what string, err error) *api.APIError {
	t.Helper()
	var ae *api.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Fatalf("%s: %v, want 429 Too Many Requests", what, err)
	}
	if ae.RetryAfter < time.Second {
		t.Fatalf("%s: Retry-After %s, want at least 1 s", what, ae.RetryAfter)
	}
	return ae
}

// TestRateLimitOverHTTP checks the limits through the API: alice's batch
// of 1,000 jobs costs one of her 3 writes; her fourth write is refused
// with 429 and a Retry-After and stores nothing, while bob, at the same
// moment, is served; her reads of one job are not limited and her
// listings are, separately; anonymous callers are limited by address.
func TestRateLimitOverHTTP(t *testing.T) {
	tc, client := rateScene(t)
	ctx := context.Background()
	alice, bob := client("alice"), client("bob")
	res, err := alice.Submit(ctx, jobSpecs("batch", 1000))
	if err != nil || len(res) != 1000 {
		t.Fatalf("alice's batch of 1,000 jobs: %d results, %v", len(res), err)
	}
	for i := 0; i < 2; i++ {
		if _, err := alice.Submit(ctx, jobSpecs(fmt.Sprint("single", i), 1)); err != nil {
			t.Fatalf("alice's write %d of 3 (the batch was one): %v", i+2, err)
		}
	}
	_, err = alice.Submit(ctx, jobSpecs("refused", 1))
	ae := tooMany(t, "alice's fourth write", err)
	for _, want := range []string{"user alice", "writes/s (burst 3)", "retry after", "one submission holds many jobs"} {
		if !strings.Contains(ae.Message, want) {
			t.Errorf("the 429's message %q does not say %q", ae.Message, want)
		}
	}
	if ae.RetryAfter < 900*time.Second {
		t.Errorf("Retry-After %s; a token comes back in 1,000 s at 0.001/s", ae.RetryAfter)
	}
	_, err = alice.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{res[0].JobID}}})
	tooMany(t, "alice's cancel, a write too", err)
	for i := 0; i < 3; i++ {
		if _, err := bob.Submit(ctx, jobSpecs(fmt.Sprint("bob", i), 1)); err != nil {
			t.Fatalf("bob's write %d while alice is refused: %v", i+1, err)
		}
	}
	var jobs int
	tc.ctls[0].fsm.Read(func(s *state.State) { jobs = len(s.Jobs) })
	if jobs != 1000+2+3 {
		t.Errorf("%d jobs stored, want 1,005: a refused write must store nothing", jobs)
	}

	for i := 0; i < 5; i++ {
		if _, err := alice.Job(ctx, res[0].JobID, false); err != nil {
			t.Fatalf("alice's read %d of one job (not limited): %v", i+1, err)
		}
	}
	for i := 0; i < 2; i++ {
		if _, err := alice.Jobs(ctx, api.JobFilter{}, false); err != nil {
			t.Fatalf("alice's listing %d of 2: %v", i+1, err)
		}
	}
	_, err = alice.Jobs(ctx, api.JobFilter{}, false)
	if ae := tooMany(t, "alice's third listing", err); !strings.Contains(ae.Message, "listings/s") {
		t.Errorf("the listing's 429 %q does not name the listing limit", ae.Message)
	}
	if _, err := bob.Jobs(ctx, api.JobFilter{}, false); err != nil {
		t.Errorf("bob's listing while alice is refused: %v", err)
	}

	anon := client("")
	for i := 0; i < 3; i++ {
		_, err := anon.Submit(ctx, jobSpecs("anon", 1))
		var ae *api.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("anonymous write %d: %v, want 401", i+1, err)
		}
	}
	_, err = anon.Submit(ctx, jobSpecs("anon", 1))
	if ae := tooMany(t, "the fourth anonymous write", err); !strings.Contains(ae.Message, "callers from 127.0.0.1") {
		t.Errorf("the anonymous 429 %q does not name the address", ae.Message)
	}
}

// TestRateLimitClientWaits checks that the CLI's client waits out a 429's
// Retry-After within its RetryFor and then succeeds: bob's second write in
// a burst of one, at one write a second.
func TestRateLimitClientWaits(t *testing.T) {
	tc := startClusterTuned(t, 1, false, false, func(c *Config) {
		c.RateLimits = RateLimits{Writes: 1, WriteBurst: 1}
	})
	tc.waitLeader(t)
	cl := tc.client(t)
	cl.User = "bob"
	submit := func(name string) error {
		specs := jobSpecs(name, 1)
		specs[0].User = "bob"
		_, err := cl.Submit(context.Background(), specs)
		return err
	}
	start := time.Now()
	for i := 0; i < 2; i++ {
		if err := submit(fmt.Sprint("wait", i)); err != nil {
			t.Fatalf("write %d: %v (the client should have waited out the 429)", i+1, err)
		}
	}
	// The second write could not pass before its token refilled, 1 s
	// after the first: the client waited the Retry-After.
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("two writes at 1/s (burst 1) took %s: the second was not limited", took)
	}
	cl.RetryFor = 0
	tooMany(t, "a third write without time to wait", submit("now"))
}

// BenchmarkRateLimiterAllow measures what the limit adds to a request that
// passes it: the route's class, the principal's key, the clock and the
// bucket, from parallel goroutines, each its own principal ("principals")
// or all one ("one principal").
func BenchmarkRateLimiterAllow(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "principals"
		if shared {
			name = "one principal"
		}
		b.Run(name, func(b *testing.B) {
			c := &Controller{clock: realClock{}, limits: newLimiter(RateLimits{Writes: 1e12, WriteBurst: 1 << 30}, time.Now())}
			var seq atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				p := principal{kind: kindUser, name: "alice", via: "token t1"}
				if !shared {
					p.name = fmt.Sprint("user", seq.Add(1))
				}
				r := &http.Request{Method: http.MethodPost, Pattern: "POST /v1/jobs", RemoteAddr: "10.0.0.1:5000"}
				for pb.Next() {
					if err := c.rateLimit(p, r); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
