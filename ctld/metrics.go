package ctld

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"corral/api"
	"corral/ctld/state"
)

// metrics are one member's Prometheus figures (GET /metrics, described in
// docs/metrics.md). Each member has a registry of its own, never the
// process's global one: a test or `corral dev` runs several members in one
// process. Two kinds live here: what this member counts as it works
// (requests, submissions, passes, Raft latencies) and, in a collector read
// at scrape time (metrics_state.go), what the replicated state holds now.
type metrics struct {
	reg *prometheus.Registry

	requests  *prometheus.CounterVec
	submitted prometheus.Counter

	passSeconds prometheus.Histogram
	considered  prometheus.Gauge
	started     prometheus.Counter
	passes      passStats

	commitSeconds prometheus.Histogram
	applySeconds  *prometheus.HistogramVec
	proposeSecs   *prometheus.HistogramVec
	leaderChanges prometheus.Counter

	vmStartSeconds *prometheus.HistogramVec
	migration      migrationMetrics

	// serve writes the registry in Prometheus' text format (or
	// OpenMetrics when the scraper asks for it).
	serve http.Handler
}

// latencyBuckets span a fraction of a millisecond (an apply) to seconds
// (a commit across a slow disk).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// vmStartBuckets span a process start (milliseconds) to a VM's boot under
// TCG (a minute).
var vmStartBuckets = []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120}

// newMetrics makes c's registry: its own counters and histograms, the
// state collector, and Go's and the process's figures.
func newMetrics(c *Controller) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_api_requests_total", Help: "API requests this member answered, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})
	m.submitted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_jobs_submitted_total", Help: "Jobs this member accepted as leader (an array counts once; a retried request id not again).",
	})
	m.passSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "corral_scheduler_pass_seconds", Help: "Duration of this member's scheduling passes (leader only), snapshot to plan.", Buckets: latencyBuckets,
	})
	m.considered = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "corral_scheduler_jobs_considered", Help: "Pending jobs the last scheduling pass considered.",
	})
	m.started = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_scheduler_jobs_started_total", Help: "Job starts the scheduling passes of this member planned.",
	})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "corral_raft_commit_seconds", Help: "Time from the leader appending a Raft entry to this member applying it.", Buckets: latencyBuckets,
	})
	m.applySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_raft_apply_seconds", Help: "Time this member's state machine took to apply a Raft entry, by command.", Buckets: latencyBuckets,
	}, []string{"command"})
	m.proposeSecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_raft_propose_seconds", Help: "Time from proposing a command on the leader to its result (commit and apply), by command.", Buckets: latencyBuckets,
	}, []string{"command"})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_raft_leader_changes_total", Help: "Leader changes this member observed.",
	})
	m.vmStartSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_vm_start_seconds", Help: "Time node runners took to start a job's run (a VM's boot to its agent), as node reports carry it, by runner.", Buckets: vmStartBuckets,
	}, []string{"runner"})
	m.migration = newMigrationMetrics()
	m.reg.MustRegister(m.migration.collectors()...)
	m.reg.MustRegister(m.requests, m.submitted, m.passSeconds, m.considered, m.started,
		m.commitSeconds, m.applySeconds, m.proposeSecs, m.leaderChanges, m.vmStartSeconds,
		newStateCollector(c), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.serve = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError})
	return m
}

// handleMetrics serves GET /metrics: the member's registry, gathered at
// the scrape.
func (c *Controller) handleMetrics(w http.ResponseWriter, r *http.Request) {
	c.metrics.serve.ServeHTTP(w, r)
}

// countRequests wraps a route's handler so that its answers are counted
// by route, method and status code; promhttp's wrapper keeps the writer's
// Hijacker and Flusher (job I/O upgrades and streams).
func (m *metrics) countRequests(pattern string, h http.HandlerFunc) http.HandlerFunc {
	_, route := splitPattern(pattern)
	counter := m.requests.MustCurryWith(prometheus.Labels{"route": route})
	return promhttp.InstrumentHandlerCounter(counter, h)
}

// splitPattern cuts "GET /v1/jobs" into its method and path.
func splitPattern(pattern string) (method, path string) {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == ' ' {
			return pattern[:i], pattern[i+1:]
		}
	}
	return "", pattern
}

// observePass records one scheduling pass: how long it took, how many
// pending jobs it considered and how many starts it planned.
func (m *metrics) observePass(took time.Duration, considered, starts int, now time.Time) {
	m.passSeconds.Observe(took.Seconds())
	m.considered.Set(float64(considered))
	m.started.Add(float64(starts))
	m.passes.add(took, considered, now)
}

// observeApply records one applied entry: its command's apply time and,
// when the entry carries the leader's append time, its commit latency.
func (m *metrics) observeApply(t state.CommandType, appended time.Time, began time.Time, took time.Duration) {
	m.applySeconds.WithLabelValues(t.String()).Observe(took.Seconds())
	if !appended.IsZero() {
		if d := began.Sub(appended); d >= 0 {
			m.commitSeconds.Observe(d.Seconds())
		}
	}
}

// takeStartTimes observes the start times node's reports carry (its
// runner's, or runner when given) in corral_vm_start_seconds, and clears
// them: the state does not keep them, and the Raft entries stay as they
// were. A time that is not a sane duration (negative, not finite, over a
// day) is dropped.
func (c *Controller) takeStartTimes(node, runner string, reps []api.JobReport) {
	for i := range reps {
		s := reps[i].StartSeconds
		if s == 0 {
			continue
		}
		reps[i].StartSeconds = 0
		if !(s > 0 && s <= 86400) {
			continue
		}
		if runner == "" {
			c.fsm.Read(func(st *state.State) {
				if n := st.Nodes[node]; n != nil {
					runner = n.Runner
				}
			})
		}
		c.metrics.vmStartSeconds.WithLabelValues(runner).Observe(s)
	}
}

// passStats keeps what Slurm's sdiag shows of the main scheduler, which
// the widely used exporter publishes: the last and mean cycle and the
// cycles in the last minute.
type passStats struct {
	mu         sync.Mutex
	last       time.Duration
	total      time.Duration
	count      int64
	queue      int
	recent     []time.Time
	recentHead int
}

// maxRecentPasses bounds the passes kept for cycles per minute.
const maxRecentPasses = 100_000

func (p *passStats) add(took time.Duration, queue int, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.queue = took, queue
	p.total += took
	p.count++
	p.prune(now)
	if len(p.recent)-p.recentHead < maxRecentPasses {
		p.recent = append(p.recent, now)
	}
}

// prune forgets the passes older than a minute before now.
func (p *passStats) prune(now time.Time) {
	for p.recentHead < len(p.recent) && now.Sub(p.recent[p.recentHead]) > time.Minute {
		p.recentHead++
	}
	if p.recentHead > 1024 && p.recentHead*2 > len(p.recent) {
		p.recent = append(p.recent[:0], p.recent[p.recentHead:]...)
		p.recentHead = 0
	}
}

// read returns the last and mean pass, the passes of the last minute and
// the queue the last pass saw; ok is false before the first pass.
func (p *passStats) read(now time.Time) (last, mean time.Duration, perMinute, queue int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count == 0 {
		return 0, 0, 0, 0, false
	}
	p.prune(now)
	return p.last, p.total / time.Duration(p.count), len(p.recent) - p.recentHead, p.queue, true
}
