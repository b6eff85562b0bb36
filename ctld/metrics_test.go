package ctld

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"corral/api"
)

// scrape fetches url (a member's /metrics) over HTTP and parses it with
// Prometheus' own text parser.
func scrape(t testing.TB, client *http.Client, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %d %s", url, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape of %s: %v", url, err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want (pairs of name and value), and whether there is one; a
// histogram's value is its sample count.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			ok = ok && labels[want[i]] == want[i+1]
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// TestMetricsScrape drives a real single-member cluster: a node of 4 CPUs
// registers, four jobs are submitted (one runs and completes, one runs
// on, one is held, one is cancelled), and a scrape of /metrics over HTTP
// shows each in its state, the node's CPUs, the API's requests and the
// member's scheduler and Raft figures.
func TestMetricsScrape(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	info := api.NodeInfo{Name: "n1", CPUs: 4, MemMB: 8192, Runner: "test", BootID: "n1-boot"}
	if err := cl.Register(ctx, info); err != nil {
		t.Fatal(err)
	}
	go func() { // heartbeats, so the node stays up
		for ctx.Err() == nil {
			_ = cl.Heartbeat(ctx, "n1", "n1-boot")
			time.Sleep(200 * time.Millisecond)
		}
	}()
	done, runs, held, gone := spec("done"), spec("runs"), spec("held"), spec("gone")
	done.CPUsPerTask = 2
	held.Hold, gone.Hold = true, true
	res, err := cl.Submit(ctx, []api.JobSpec{done, runs, held, gone})
	if err != nil {
		t.Fatal(err)
	}
	ids := []uint64{res[0].JobID, res[1].JobID, res[2].JobID, res[3].JobID}
	first := waitState(t, cl, ids[0], api.StateRunning)
	running := waitState(t, cl, ids[1], api.StateRunning)
	if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{ids[3]}}}); err != nil {
		t.Fatal(err)
	}
	rep := api.JobReport{JobID: ids[0], StartIndex: first.StartIndex, State: api.StateCompleted, StartSeconds: 1.5}
	if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "n1-boot", Reports: []api.JobReport{rep}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, ids[0], api.StateCompleted)
	waitState(t, cl, ids[3], api.StateCancelled)

	fams := scrape(t, http.DefaultClient, tc.addrs[0]+"/metrics", "")
	want := map[string]struct {
		labels []string
		value  float64
	}{
		"slurm_queue_pending":          {nil, 1},
		"slurm_queue_running":          {nil, 1},
		"slurm_queue_completed":        {nil, 1},
		"slurm_queue_cancelled":        {nil, 1},
		"slurm_queue_failed":           {nil, 0},
		"corral_jobs":                  {[]string{"state", "RUNNING", "partition", "batch"}, 1},
		"corral_jobs_pending_reason":   {[]string{"reason", string(api.ReasonJobHeldUser)}, 1},
		"slurm_partition_jobs_pending": {[]string{"partition", "batch"}, 1},
		"slurm_nodes_mix":              {nil, 1},
		"slurm_nodes_idle":             {nil, 0},
		"corral_nodes":                 {[]string{"state", "MIXED"}, 1},
		"slurm_cpus_alloc":             {nil, 1},
		"slurm_cpus_idle":              {nil, 3},
		"slurm_cpus_total":             {nil, 4},
		"slurm_partition_cpus_total":   {[]string{"partition", "batch"}, 4},
		"slurm_node_cpu_alloc":         {[]string{"node", "n1", "status", "mixed"}, 1},
		"slurm_node_mem_total":         {[]string{"node", "n1"}, 8192},
		"corral_memory_total_bytes":    {nil, 8192 << 20},
		"slurm_account_cpus_running":   {[]string{"account", running.Spec.Account}, 1},
		"slurm_user_jobs_pending":      {[]string{"user", running.Spec.User}, 1},
		"corral_jobs_submitted_total":  {nil, 4},
		"corral_raft_leader":           {nil, 1},
		"corral_api_requests_total":    {[]string{"route", "/v1/jobs", "method", "post", "code", "200"}, 1},
	}
	for name, w := range want {
		got, ok := value(fams, name, w.labels...)
		if !ok || got != w.value {
			t.Errorf("%s%v = %v (present %v), want %v", name, w.labels, got, ok, w.value)
		}
	}
	atLeast := map[string][]string{
		"corral_scheduler_pass_seconds":     nil,
		"slurm_scheduler_cycle_per_minute":  nil,
		"corral_raft_commit_seconds":        nil,
		"corral_raft_apply_seconds":         {"command", "SubmitJobs"},
		"corral_raft_propose_seconds":       {"command", "ApplyPlan"},
		"corral_api_requests_total":         {"route", "/v1/jobs/{id}", "code", "200"},
		"slurm_scheduler_last_cycle":        nil,
		"corral_node_heartbeat_age_seconds": {"node", "n1"},
	}
	for name, labels := range atLeast {
		if _, ok := value(fams, name, labels...); !ok {
			t.Errorf("%s%v: no such series in the scrape", name, labels)
		}
	}
	if age, _ := value(fams, "corral_node_heartbeat_age_seconds", "node", "n1"); age > 5 {
		t.Errorf("node n1's heartbeat age is %.1fs; it heartbeats every 0.2s", age)
	}
	if t.Failed() {
		names := []string{}
		for n := range fams {
			names = append(names, n)
		}
		t.Logf("families: %s", strings.Join(names, " "))
	}
}

// TestMetricsAccess checks the access rule of /metrics on a cluster that
// authenticates: an operator's token scrapes, an anonymous caller and a
// user do not; with MetricsOpen anyone scrapes.
func TestMetricsAccess(t *testing.T) {
	for name, tc := range map[string]struct {
		open             bool
		anonymous, admin int
	}{
		"operators only": {open: false, anonymous: http.StatusUnauthorized, admin: http.StatusOK},
		"--metrics-open": {open: true, anonymous: http.StatusOK, admin: http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			cl := startClusterTuned(t, 1, true, true, func(c *Config) { c.MetricsOpen = tc.open })
			leader := cl.waitLeader(t)
			token := addToken(t, leader, "ops", "oscar", api.RoleOperator)
			user := addToken(t, leader, "u", "alice", api.RoleUser)
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cl.tls}}
			get := func(tok string) int {
				req, _ := http.NewRequest(http.MethodGet, cl.addrs[0]+"/metrics", nil)
				if tok != "" {
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if got := get(""); got != tc.anonymous {
				t.Errorf("anonymous scrape: %d, want %d", got, tc.anonymous)
			}
			if got := get(token); got != tc.admin {
				t.Errorf("operator's scrape: %d, want %d", got, tc.admin)
			}
			if got, want := get(user), map[bool]int{false: http.StatusForbidden, true: http.StatusOK}[tc.open]; got != want {
				t.Errorf("user's scrape: %d, want %d", got, want)
			}
		})
	}
}

// TestMetricsOnFollower checks that a follower answers /metrics from its
// own replica: the same job gauges as the leader's, and corral_raft_leader 0.
func TestMetricsOnFollower(t *testing.T) {
	tc := startCluster(t, 3)
	leader := tc.waitLeader(t)
	cl := tc.client(t)
	s := spec("held")
	s.Hold = true
	res, err := cl.Submit(context.Background(), []api.JobSpec{s})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].JobID
	for i, c := range tc.ctls {
		if c == leader {
			continue
		}
		waitFor(t, func() bool { return c.FSM().Hash() == leader.FSM().Hash() })
		fams := scrape(t, http.DefaultClient, tc.addrs[i]+"/metrics", "")
		if v, _ := value(fams, "slurm_queue_pending"); v != 1 {
			t.Errorf("follower %s: slurm_queue_pending = %v, want 1 (job %d)", c.cfg.ID, v, want)
		}
		if v, ok := value(fams, "corral_raft_leader"); !ok || v != 0 {
			t.Errorf("follower %s: corral_raft_leader = %v, want 0", c.cfg.ID, v)
		}
		if v, _ := value(fams, "corral_raft_leader_changes_total"); v < 1 {
			t.Errorf("follower %s: corral_raft_leader_changes_total = %v; it saw the election", c.cfg.ID, v)
		}
		if _, ok := value(fams, "slurm_scheduler_last_cycle"); ok {
			t.Errorf("follower %s publishes slurm_scheduler_last_cycle; only the leader schedules", c.cfg.ID)
		}
	}
}
