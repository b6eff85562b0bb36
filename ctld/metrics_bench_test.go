package ctld

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// BenchmarkMetricsScrape measures one scrape of GET /metrics over HTTP
// from a member whose state holds 100,000 jobs of 50 users on 100 nodes
// of 16 CPUs (1,600 of them running, the rest pending): what Prometheus
// costs the controller every scrape interval. It reports the scrape's
// size too.
func BenchmarkMetricsScrape(b *testing.B) {
	// No node daemon heartbeats here: the nodes must not go DOWN meanwhile.
	tc := startClusterTuned(b, 1, false, false, func(c *Config) { c.NodeTimeout = time.Hour })
	leader := tc.waitLeader(b)
	now := time.Now().UTC()
	for i := 0; i < 100; i++ {
		info := api.NodeInfo{Name: fmt.Sprintf("n%03d", i), CPUs: 16, MemMB: 65536, Runner: "test", BootID: "b", Partitions: []string{"batch"}}
		if _, err := leader.propose(state.CmdRegisterNode, &state.RegisterNode{Now: now, Info: info}); err != nil {
			b.Fatal(err)
		}
	}
	const jobs, chunk = 100_000, 10_000
	for first := 0; first < jobs; first += chunk {
		cmd := &state.SubmitJobs{Now: now, FirstID: uint64(first + 1)}
		seen := map[string]bool{}
		for k := first; k < first+chunk; k++ {
			s := state.JobSpec{Name: "sim", User: fmt.Sprintf("u%02d", k%50), Account: fmt.Sprintf("a%d", k%5), NTasks: 1, CPUsPerTask: 1,
				SubmitDir: "/home/u", WorkDir: "/home/u", Partition: "batch", RequestID: fmt.Sprintf("%032x", k)}
			s = state.Inline(s, "#!/bin/sh\ntrue\n", nil)
			for _, r := range state.OutOfLine(&s) {
				if !seen[r.Key] {
					cmd.Blobs = append(cmd.Blobs, r)
					seen[r.Key] = true
				}
			}
			cmd.Jobs = append(cmd.Jobs, s)
		}
		if _, err := leader.propose(state.CmdSubmitJobs, cmd); err != nil {
			b.Fatal(err)
		}
	}
	// Let the scheduler start what fits before measuring.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var running int
		leader.fsm.Read(func(s *state.State) { running = len(s.Jobs) - len(s.Pending) })
		if running >= 1600 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	url := tc.addrs[0] + "/metrics"
	size := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("scrape: %d", resp.StatusCode)
		}
		size = int(n)
	}
	b.ReportMetric(float64(size), "bytes/scrape")
}

// BenchmarkMetricsFigures measures the part of a scrape that holds the
// state's read lock (and so delays the next apply): reading the figures of
// 100,000 pending jobs.
func BenchmarkMetricsFigures(b *testing.B) {
	f := NewFSM(quietLog())
	fillPending(f, 100_000)
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Read(func(s *state.State) { figuresOf(s, now, nil) })
	}
}
