package noded

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"corral/api"
)

// TestDaemonMetrics runs two jobs on a daemon with --metrics-addr, one
// that completes and one that fails, and scrapes its /metrics over HTTP:
// the runs' start times, their ends by state, heartbeats and the
// controllers' reachability. The controller says it takes start times,
// so the reports carry them.
func TestDaemonMetrics(t *testing.T) {
	f := newFakeCtl(t)
	f.leaseMS.Store(10_000)
	f.timeoutMS.Store(20_000)
	f.startTimes.Store(true)
	work := t.TempDir()
	td := startDaemon(t, f, t.TempDir(), func(c *Config) { c.MetricsListen = "127.0.0.1:0" })
	f.waitRegistered(t)
	time.Sleep(100 * time.Millisecond) // a heartbeat's answer or two
	f.addJob("n1", shJob(10, work, "exit 0"))
	f.addJob("n1", shJob(11, work, "exit 3"))
	ok := f.waitReport(t, 10, 10*time.Second)
	f.waitReport(t, 11, 10*time.Second)
	if !(ok.StartSeconds > 0 && ok.StartSeconds < 10) {
		t.Errorf("job 10's report carries start_s %v; want the run's start time", ok.StartSeconds)
	}
	resp, err := http.Get("http://" + td.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	counter := func(name, label, value string) float64 {
		for _, m := range fams[name].GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if match {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return -1
	}
	checks := map[string]bool{
		"two runs started (process runner)": counter("corral_noded_run_start_seconds", "runner", "process") == 2,
		"one run completed":                 counter("corral_noded_runs_ended_total", "state", string(api.StateCompleted)) == 1,
		"one run failed":                    counter("corral_noded_runs_ended_total", "state", string(api.StateFailed)) == 1,
		"heartbeats counted":                counter("corral_noded_heartbeats_total", "", "") > 0,
		"no heartbeat failed":               counter("corral_noded_controller_call_failures_total", "op", "heartbeat") <= 0,
		"the controllers reachable":         counter("corral_noded_controller_reachable", "", "") == 1,
		"no run left":                       counter("corral_noded_runs", "runner", "process") == 0,
		"a lease held":                      counter("corral_noded_lease_remaining_seconds", "", "") > 0,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: no", name)
		}
	}
}

// TestDaemonMetricsHeartbeatFailures checks that failed heartbeats are
// counted while the controllers answer 503.
func TestDaemonMetricsHeartbeatFailures(t *testing.T) {
	f := newFakeCtl(t)
	td := startDaemon(t, f, t.TempDir(), func(c *Config) { c.Client.RetryFor = 20 * time.Millisecond })
	f.waitRegistered(t)
	f.setDown(true)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := testCounterValue(td.metrics.callFailures.WithLabelValues("heartbeat"))
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat failure counted in 5s while the controllers answered 503")
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.setDown(false)
}

// testCounterValue reads a counter's value.
func testCounterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
