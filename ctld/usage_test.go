package ctld

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestClusterUtilizationEndpoint drives a controller with a fake clock:
// node n1 (4 CPUs) registers at 0 h; a job of 1 CPU runs from 0 h to 1 h;
// an operator drains n1 from 1 h to 2 h, while a job of 2 CPUs submitted
// at 1 h waits; it runs from 2 h to 3 h; a third job of 1 CPU starts at
// 3 h and still runs at 4 h. Over 0-4 h the cluster reported 16 CPU-h:
// 4 allocated (1 + 2 + 1), 4 planned down (the drain), 2 planned (the
// 2 CPUs' hour of waiting), 6 idle. The usage series shows the runs in
// their hours and the waits in their buckets.
func TestClusterUtilizationEndpoint(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := newFakeClock(t0)
	c := startOne(t, HTTPTimeouts{}, func(cfg *Config) { cfg.Clock, cfg.NodeTimeout = clock, 24*time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, _ := api.NewClient("http://" + c.HTTPAddr())
	if err := cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 4, MemMB: 4096, Runner: "test", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	submit := func(name string, cpus int) uint64 {
		t.Helper()
		s := spec(name)
		s.CPUsPerTask = cpus
		res, err := cl.Submit(ctx, []api.JobSpec{s})
		if err != nil || res[0].Error != "" {
			t.Fatalf("submitting %s: %v %+v", name, err, res)
		}
		return res[0].JobID
	}
	waitState := func(id uint64, want api.JobState) api.Job {
		t.Helper()
		var j *api.Job
		eventually(t, fmt.Sprintf("job %d %s", id, want), func() bool {
			var err error
			j, err = cl.Job(ctx, id, false)
			return err == nil && j.State == want
		})
		return *j
	}
	finish := func(id uint64) {
		t.Helper()
		j := waitState(id, api.StateRunning)
		if err := cl.Report(ctx, api.NodeStatus{Name: "n1", BootID: "b", Reports: []api.JobReport{{JobID: j.ID, StartIndex: j.StartIndex, State: api.StateCompleted}}}); err != nil {
			t.Fatal(err)
		}
		waitState(id, api.StateCompleted)
	}
	first := submit("first", 1)
	if j := waitState(first, api.StateRunning); !j.StartTime.Equal(t0) {
		t.Fatalf("the first job started at %v, want %v (the fake clock's)", j.StartTime, t0)
	}
	clock.Advance(time.Hour)
	finish(first)
	if err := cl.Drain(ctx, api.DrainRequest{Node: "n1", Drain: true, Reason: "firmware"}); err != nil {
		t.Fatal(err)
	}
	big := submit("big", 2)
	waitState(big, api.StatePending)
	clock.Advance(time.Hour)
	if err := cl.Drain(ctx, api.DrainRequest{Node: "n1", Drain: false}); err != nil {
		t.Fatal(err)
	}
	waitState(big, api.StateRunning)
	clock.Advance(time.Hour)
	finish(big)
	third := submit("third", 1)
	waitState(third, api.StateRunning)
	clock.Advance(time.Hour)

	rows, err := cl.AccountingCluster(ctx, t0, t0.Add(4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	h := 3600.0
	want := api.ClusterUtilization{TRES: "cpu", Count: 4, Allocated: 4 * h, PlannedDown: 4 * h, Planned: 2 * h, Idle: 6 * h, Reported: 16 * h}
	if len(rows) != 1 || !sameRow(rows[0], want) {
		t.Errorf("cluster utilization %+v\nwant %+v", rows, want)
	}
	// A window that ends after now ends now.
	want = api.ClusterUtilization{TRES: "cpu", Count: 4, Allocated: h, Idle: 3 * h, Reported: 4 * h}
	if rows, err := cl.AccountingCluster(ctx, t0.Add(3*time.Hour), t0.Add(100*time.Hour)); err != nil || len(rows) != 1 || !sameRow(rows[0], want) {
		t.Errorf("the last hour: %+v %v, want %+v", rows, err, want)
	}

	ser, err := cl.AccountingSeries(ctx, t0, t0.Add(4*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(ser.Accounts) != 1 || !slices.Equal(ser.Accounts[0].CPUSeconds, []float64{h, 0, 2 * h, h}) {
		t.Errorf("series %+v, want 1, 0, 2 and 1 CPU-h in hours 0-3", ser)
	}
	var waited []int
	for _, b := range ser.Waits {
		waited = append(waited, b.Jobs)
	}
	if !slices.Equal(waited, []int{2, 0, 0, 1, 0, 0, 0}) {
		t.Errorf("waits %v, want two jobs under a minute and one of 1-6 h", waited)
	}
	for q, field := range map[string]string{"start=yesterday": "start", "step=10": "step", "start=2026-12-02T00:00:00Z&end=2026-12-01T00:00:00Z": "end"} {
		resp, err := http.Get("http://" + c.HTTPAddr() + "/v1/accounting/series?" + q)
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Field != field {
			t.Errorf("series?%s: %d %+v, want 400 naming %s", q, resp.StatusCode, e, field)
		}
	}
}

func sameRow(a, b api.ClusterUtilization) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-3 }
	return a.TRES == b.TRES && a.Count == b.Count && near(a.Allocated, b.Allocated) && near(a.Down, b.Down) &&
		near(a.PlannedDown, b.PlannedDown) && near(a.Planned, b.Planned) && near(a.Idle, b.Idle) && near(a.Reported, b.Reported)
}

// TestUsageSeriesAccess: the series holds the usage of the runs the caller
// may see: a user of tenant A sees tenant A's running job, a user of
// tenant B does not, an operator does.
func TestUsageSeriesAccess(t *testing.T) {
	sc := newAuthScene(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n1cl, err := api.NewTLSClient(sc.base, sc.clients[pNode1].Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := n1cl.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "test", BootID: "n1-boot"}); err != nil {
		t.Fatal(err)
	}
	running := sc.submitAs(t, "alice", "phys", false)
	waitFor(t, func() bool {
		st, body := sc.do(t, pAdmin, "GET", fmt.Sprintf("/v1/jobs/%d", running), nil)
		return st == 200 && strings.Contains(body, `"state":"RUNNING"`)
	})
	for who, want := range map[string][]string{pUserA: {"phys"}, pUserB: nil, pOperator: {"phys"}, pCoord: {"phys"}} {
		status, body := sc.do(t, who, "GET", "/v1/accounting/series", nil)
		var ser api.AcctSeries
		if status != 200 || json.Unmarshal([]byte(body), &ser) != nil {
			t.Fatalf("series as %s: %d %s", who, status, body)
		}
		var got []string
		for _, l := range ser.Accounts {
			got = append(got, l.Account)
		}
		if !slices.Equal(got, want) {
			t.Errorf("series as %s shows accounts %v, want %v", who, got, want)
		}
	}
}
