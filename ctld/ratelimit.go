package ctld

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate limits. Every routed request is charged to its principal before its
// access check (guard): a write or a listing takes one token from the
// principal's bucket for that class, and an empty bucket answers 429 with
// Retry-After. A request counts once whatever it holds, so a batch of
// 10,000 jobs costs what one job does: batching is the way to submit fast.
//
// The limiter is the controller member's own, not replicated: every write
// reaches the leader (followers forward them), so the leader's buckets are
// the cluster's write limit; a follower charges a forwarded write too, to
// its own bucket for the same principal. Listings are limited by the member
// that serves them.

// Default rate limits, per principal and member. The write limit stops a
// runaway loop of single-job requests (one client sends 1,000 to 4,500 a
// second through the API, BenchmarkSubmitSingle) at a fraction of what the
// leader can commit, without slowing batched submissions: 32 clients
// sending batches of 64 jobs make about 530 requests a second at 34,000
// jobs/s, 2,346 requests in BenchmarkSubmitThroughput's longest run, all
// inside the burst and its refill. Listings cost the server time in
// proportion to the jobs (289 ms for 100,000); 20 a second is more than a
// watch loop needs.
const (
	defaultWriteRate  = 200
	defaultWriteBurst = 2000
	defaultReadRate   = 20
	defaultReadBurst  = 100
)

// RateLimits bound how often one principal (a user, node or member; an
// anonymous caller by its IP address) may call a controller member; zero
// fields take the defaults in parentheses and a negative rate turns that
// class's limit off. Admins are held to the same limits as users; the node
// daemons' own calls and the members' internal ones are never limited.
type RateLimits struct {
	// Writes is the sustained rate of POST and PUT requests a second
	// (200); WriteBurst how many may come at once after a quiet spell
	// (2,000). A submission counts once whatever jobs it holds.
	Writes     float64
	WriteBurst int
	// Reads is the sustained rate of listings a second: GET /v1/jobs,
	// /v1/queue, /v1/priority, /v1/share and /v1/policy (20); ReadBurst
	// how many may come at once (100). Reading one job, a node or the
	// cluster's status is not limited.
	Reads     float64
	ReadBurst int
}

func (l RateLimits) withDefaults() RateLimits {
	if l.Writes == 0 || math.IsNaN(l.Writes) {
		l.Writes = defaultWriteRate
	}
	if l.WriteBurst <= 0 {
		l.WriteBurst = defaultWriteBurst
	}
	if l.Reads == 0 || math.IsNaN(l.Reads) {
		l.Reads = defaultReadRate
	}
	if l.ReadBurst <= 0 {
		l.ReadBurst = defaultReadBurst
	}
	return l
}

// costClass is which bucket a route's requests are charged to.
type costClass uint8

const (
	costFree costClass = iota
	costWrite
	costList
	numCostClasses
)

// listingRoutes are the expensive reads: each answer grows with the jobs,
// users or accounts the cluster holds.
var listingRoutes = map[string]bool{
	"GET /v1/jobs":     true,
	"GET /v1/queue":    true,
	"GET /v1/priority": true,
	"GET /v1/share":    true,
	"GET /v1/audit":    true,
	"GET /v1/policy":   true,
	// accounting records grow with every job that ever ran.
	"GET /v1/accounting/jobs": true,
	// reports that read every run of their window (the run index).
	"GET /v1/accounting/cluster": true,
	"GET /v1/accounting/series":  true,
	// the status page lists the queue; its plot is the series.
	"GET /ui/":          true,
	"GET /ui/usage.svg": true,
}

// nodeDaemonRoutes are the writes a node daemon makes to stay in the
// cluster: limiting them would make a busy node look dead.
var nodeDaemonRoutes = map[string]bool{
	"POST /v1/nodes/register":      true,
	"POST /v1/nodes/heartbeat":     true,
	"POST /v1/nodes/status":        true,
	"POST /v1/nodes/attest/begin":  true,
	"POST /v1/nodes/attest/finish": true,
}

// costOf is the class of the route pattern ("POST /v1/jobs"): listings,
// writes (POST and PUT) except the node daemons' and the members' internal
// ones, and free for everything else.
func costOf(pattern string) costClass {
	method, path, _ := strings.Cut(pattern, " ")
	switch {
	case listingRoutes[pattern]:
		return costList
	case nodeDaemonRoutes[pattern], strings.HasPrefix(path, "/v1/internal/"):
		return costFree
	case method == http.MethodPost, method == http.MethodPut:
		return costWrite
	}
	return costFree
}

// limitKey names one bucket: a class and a principal. Callers without a
// name (anonymous ones, and nameless ones on a cluster without --auth)
// are keyed by their IP address under kindAnonymous.
type limitKey struct {
	class costClass
	kind  principalKind
	name  string
}

// limitKeyOf is p's key for class, and whether p's name was proved (a
// token, an agent's identity, a certificate): only unproved keys share the
// overflow bucket when the limiter holds too many.
func limitKeyOf(p principal, remoteAddr string, class costClass) (limitKey, bool) {
	if p.name == "" {
		host, _, err := net.SplitHostPort(remoteAddr)
		if err != nil {
			host = remoteAddr
		}
		return limitKey{class: class, kind: kindAnonymous, name: host}, false
	}
	proved := p.kind == kindNode || p.kind == kindMember || p.kind == kindUser && !p.open
	return limitKey{class: class, kind: p.kind, name: p.name}, proved
}

// Limiter bounds: past maxLimiterKeys buckets, a sweep drops the full ones
// (a full bucket is what a new one would be, so nothing is lost), at most
// once a limiterSweepEvery; if the limiter still holds maxLimiterKeys,
// new unproved callers share one overflow bucket per class. A flood from
// many addresses (or many claimed names without --auth) so grows memory by
// about 1.2 MB at most (measured: 100,000 IPv6 callers, 10,000 buckets).
const (
	maxLimiterKeys    = 10_000
	limiterSweepEvery = time.Second
)

// bucketRule is one class's rate (tokens a second; 0: unlimited) and
// burst (the bucket's size).
type bucketRule struct {
	rate, burst float64
}

// bucket is one principal's tokens for one class, as of at.
type bucket struct {
	tokens float64
	at     time.Duration // since the limiter's start
}

// refill brings b up to date at now.
func (b *bucket) refill(r bucketRule, now time.Duration) {
	if d := now - b.at; d > 0 {
		b.tokens = min(r.burst, b.tokens+d.Seconds()*r.rate)
		b.at = now
	}
}

// limiter holds the token buckets of every principal that called lately.
// It never sleeps or waits: take holds the mutex for a map lookup and a
// little arithmetic (a sweep, rare, for one pass over the map), so one
// caller's burst delays no one else's request.
type limiter struct {
	rules      [numCostClasses]bucketRule
	maxKeys    int
	sweepEvery time.Duration
	start      time.Time

	mu        sync.Mutex
	buckets   map[limitKey]*bucket
	overflow  [numCostClasses]bucket
	lastSweep time.Duration
}

// newLimiter returns a limiter for cfg (defaults applied) that counts time
// from start.
func newLimiter(cfg RateLimits, start time.Time) *limiter {
	cfg = cfg.withDefaults()
	l := &limiter{maxKeys: maxLimiterKeys, sweepEvery: limiterSweepEvery, start: start,
		buckets: map[limitKey]*bucket{}, lastSweep: -limiterSweepEvery}
	l.rules[costWrite] = bucketRule{rate: max(cfg.Writes, 0), burst: float64(cfg.WriteBurst)}
	l.rules[costList] = bucketRule{rate: max(cfg.Reads, 0), burst: float64(cfg.ReadBurst)}
	for c := range l.overflow {
		l.overflow[c].tokens = l.rules[c].burst
	}
	return l
}

// verdict is take's answer: allowed, or how long until the next token;
// shared says the caller was charged to the overflow bucket.
type verdict struct {
	ok     bool
	wait   time.Duration
	shared bool
}

// take charges one request of k (proved: see limitKeyOf) at now.
func (l *limiter) take(k limitKey, proved bool, now time.Time) verdict {
	rule := l.rules[k.class]
	if rule.rate <= 0 {
		return verdict{ok: true}
	}
	t := now.Sub(l.start)
	l.mu.Lock()
	defer l.mu.Unlock()
	b, shared := l.buckets[k], false
	if b == nil {
		b, shared = l.admit(k, proved, rule, t)
	}
	b.refill(rule, t)
	if b.tokens >= 1 {
		b.tokens--
		return verdict{ok: true, shared: shared}
	}
	return verdict{wait: time.Duration((1 - b.tokens) / rule.rate * float64(time.Second)), shared: shared}
}

// admit returns a new, full bucket for k, or the class's overflow bucket
// when the limiter holds too many and k's name is unproved. Called with mu
// held.
func (l *limiter) admit(k limitKey, proved bool, rule bucketRule, now time.Duration) (*bucket, bool) {
	if len(l.buckets) >= l.maxKeys && now-l.lastSweep >= l.sweepEvery {
		l.sweep(now)
	}
	if len(l.buckets) >= l.maxKeys && !proved {
		return &l.overflow[k.class], true
	}
	b := &bucket{tokens: rule.burst, at: now}
	l.buckets[k] = b
	return b, false
}

// sweep drops the buckets that have refilled: their principals have been
// quiet for as long as a burst takes to refill. Called with mu held.
func (l *limiter) sweep(now time.Duration) {
	for k, b := range l.buckets {
		r := l.rules[k.class]
		if b.tokens+(now-b.at).Seconds()*r.rate >= r.burst {
			delete(l.buckets, k)
		}
	}
	l.lastSweep = now
}

// keys returns how many buckets l holds.
func (l *limiter) keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// rateLimit charges r to p's bucket for r's route, or says why not: too
// many requests (429, with Retry-After). Nothing of a refused request is
// read or stored.
func (c *Controller) rateLimit(p principal, r *http.Request) error {
	class := costOf(r.Pattern)
	if class == costFree || c.limits == nil {
		return nil
	}
	k, proved := limitKeyOf(p, r.RemoteAddr, class)
	v := c.limits.take(k, proved, c.clock.Now())
	if v.ok {
		return nil
	}
	return c.limits.refusal(p, k, v)
}

// refusal is the 429 for k: who, which limit, when to retry, and how to
// need fewer requests.
func (l *limiter) refusal(p principal, k limitKey, v verdict) error {
	secs := max(1, int(math.Ceil(v.wait.Seconds())))
	who := p.String()
	switch {
	case v.shared:
		who = fmt.Sprintf("callers without credentials (more than %d principals called lately, so new unauthenticated ones share one limit)", l.maxKeys)
	case k.kind == kindAnonymous:
		who = "callers from " + k.name
	}
	r := l.rules[k.class]
	rate, burst := strconv.FormatFloat(r.rate, 'f', -1, 64), int64(r.burst)
	var msg string
	if k.class == costList {
		msg = fmt.Sprintf("%s: more than %s listings/s (burst %d); retry after %d s, or list less often", who, rate, burst, secs)
	} else {
		msg = fmt.Sprintf("%s: more than %s writes/s (burst %d); retry after %d s, or batch: one submission holds many jobs, one cancel or hold many job ids", who, rate, burst, secs)
	}
	return &httpError{status: http.StatusTooManyRequests, msg: msg, retryAfter: secs}
}
