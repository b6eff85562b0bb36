package noded

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// nodeMetrics are the daemon's own Prometheus figures, served on
// Config.MetricsListen (noded --metrics-addr; docs/metrics.md). Each
// daemon has a registry of its own: `corral dev` runs several in one
// process.
type nodeMetrics struct {
	reg *prometheus.Registry
	// startSeconds is how long the runner took to start a run (a VM's
	// boot until the job's script runs, a process's start).
	startSeconds  *prometheus.HistogramVec
	startFailures prometheus.Counter
	ended         *prometheus.CounterVec
	heartbeats    prometheus.Counter
	callFailures  *prometheus.CounterVec
}

// runStartBuckets span a process start (milliseconds) to a VM's boot
// under TCG (a minute or two).
var runStartBuckets = []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120}

func newNodeMetrics(d *Daemon) *nodeMetrics {
	m := &nodeMetrics{reg: prometheus.NewRegistry()}
	m.startSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "corral_noded_run_start_seconds", Help: "Time the runner took to start a run (a VM: its boot until the job's script runs), by runner.", Buckets: runStartBuckets,
	}, []string{"runner"})
	m.startFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_noded_run_start_failures_total", Help: "Runs the runner could not start.",
	})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_noded_runs_ended_total", Help: "Runs that ended on this node, by the state reported.",
	}, []string{"state"})
	m.heartbeats = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "corral_noded_heartbeats_total", Help: "Heartbeats the daemon sent.",
	})
	m.callFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_noded_controller_call_failures_total", Help: "Calls to the controllers that failed (no answer, or an error other than 'register again'), by call: heartbeat, report, register, watch.",
	}, []string{"op"})
	runner := d.runner.Name()
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_noded_runs", Help: "Runs with live processes on this node (VMs, for the vm runner).", ConstLabels: prometheus.Labels{"runner": runner},
	}, func() float64 {
		if p := d.running.Load(); p != nil {
			return float64(len(*p))
		}
		return 0
	})
	reachable := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_noded_controller_reachable", Help: "1 while the controllers answer the daemon's calls, 0 after a call failed.",
	}, func() float64 {
		d.reg.mu.Lock()
		defer d.reg.mu.Unlock()
		if d.reg.down {
			return 0
		}
		return 1
	})
	lease := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "corral_noded_lease_remaining_seconds", Help: "Time until the node's lease runs out (it stops its jobs then); 0 without a lease.",
	}, func() float64 {
		_, deadline := d.lease.current()
		if deadline.IsZero() {
			return 0
		}
		return max(time.Until(deadline).Seconds(), 0)
	})
	m.reg.MustRegister(m.startSeconds, m.startFailures, m.ended, m.heartbeats, m.callFailures, running, reachable, lease,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// MetricsHandler serves the daemon's metrics (what --metrics-addr serves).
func (d *Daemon) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.ContinueOnError})
}

// listenMetrics serves GET /metrics on Config.MetricsListen until ctx
// ends. The figures hold no job's data (counts and durations only), so
// they are served without credentials: bind the address to a network the
// scrapers share.
func (d *Daemon) listenMetrics(ctx context.Context) error {
	if d.cfg.MetricsListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", d.cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("noded: the metrics endpoint cannot listen on %s: %w (choose another --metrics-addr)", d.cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	d.metricsAddr.Store(ln.Addr().String())
	d.log.Info("metrics listening", "addr", ln.Addr().String())
	return nil
}

// MetricsAddr returns the address the metrics endpoint listens on, or ""
// before Run started it (or without Config.MetricsListen).
func (d *Daemon) MetricsAddr() string {
	if v, ok := d.metricsAddr.Load().(string); ok {
		return v
	}
	return ""
}
