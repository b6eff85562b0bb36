package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"corral/api"
)

// scrapeURL fetches and parses one /metrics.
func scrapeURL(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return fams
}

// seriesValue is the value of name's series whose labels include the
// pairs given (a histogram's: its count), or -1 without one.
func seriesValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range fams[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestMetricsOfARunningCluster runs three controller processes and a node
// daemon with --metrics-addr; jobs submitted with the CLI run, complete,
// fail and wait held; every member's /metrics shows them, the node's CPUs
// and one leader, and the node's own /metrics its runs and their start
// times, which its reports carried to the leader.
func TestMetricsOfARunningCluster(t *testing.T) {
	c := startControllers(t, 3)
	c.leader(t, 15*time.Second)
	nodeMetrics := freePorts(t, 1)[0]
	c.startNode(t, "m1", "--cpus", "4", "--mem", "4G", "--metrics-addr", nodeMetrics)
	c.waitNodes(t, 1)
	work := t.TempDir()
	runs := c.submit(t, work, "--mem", "100M", "-o", "/dev/null", "--wrap", "sleep 60")
	done := c.submit(t, work, "--mem", "100M", "-o", "/dev/null", "--wrap", "true")
	fails := c.submit(t, work, "--mem", "100M", "-o", "/dev/null", "--wrap", "exit 3")
	held := c.submit(t, work, "--mem", "100M", "--hold", "-o", "/dev/null", "--wrap", "true")
	want := map[string]api.JobState{runs: api.StateRunning, done: api.StateCompleted, fails: api.StateFailed, held: api.StatePending}
	cl := c.client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		jobs, settled := allJobs(t, cl), true
		for id, st := range want {
			n, _ := strconv.ParseUint(id, 10, 64)
			settled = settled && jobs[n].State == st
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not in their states after 30s: %+v", jobs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	leaders, starts := 0.0, 0.0
	expected := map[string]float64{
		"slurm_queue_running": 1, "slurm_queue_completed": 1, "slurm_queue_failed": 1, "slurm_queue_pending": 1,
		"slurm_nodes_mix": 1, "slurm_cpus_alloc": 1, "slurm_cpus_idle": 3, "slurm_cpus_total": 4,
	}
	matches := func(fams map[string]*dto.MetricFamily) bool {
		for name, v := range expected {
			if seriesValue(fams, name) != v {
				return false
			}
		}
		return true
	}
	for _, h := range c.http {
		var fams map[string]*dto.MetricFamily
		// A follower's replica may lag its leader by a moment: the held
		// job's submission can commit after the other jobs' ends.
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if fams = scrapeURL(t, h+"/metrics"); matches(fams) || time.Now().After(end) {
				break
			}
		}
		for name, v := range expected {
			if got := seriesValue(fams, name); got != v {
				t.Errorf("%s: %s = %v, want %v", h, name, got, v)
			}
		}
		leaders += seriesValue(fams, "corral_raft_leader")
		if s := seriesValue(fams, "corral_vm_start_seconds", "runner", "process"); s > 0 {
			starts += s
		}
	}
	if leaders != 1 {
		t.Errorf("corral_raft_leader sums to %v over the members, want 1", leaders)
	}
	if starts != 2 {
		t.Errorf("the leader observed %v start times, want 2 (the runs that ended reported theirs)", starts)
	}
	fams := scrapeURL(t, fmt.Sprintf("http://%s/metrics", nodeMetrics))
	for name, tc := range map[string]struct {
		labels []string
		want   float64
	}{
		"corral_noded_runs":              {[]string{"runner", "process"}, 1},
		"corral_noded_run_start_seconds": {[]string{"runner", "process"}, 3},
		"corral_noded_runs_ended_total":  {[]string{"state", "COMPLETED"}, 1},
	} {
		if got := seriesValue(fams, name, tc.labels...); got != tc.want {
			t.Errorf("node m1: %s%v = %v, want %v", name, tc.labels, got, tc.want)
		}
	}
	if got := seriesValue(fams, "corral_noded_runs_ended_total", "state", "FAILED"); got != 1 {
		t.Errorf("node m1: runs ended FAILED = %v, want 1", got)
	}
}
