package ctld

import (
	"io"
	"net/http"
	"testing"
	"time"

	"corral/ctld/state"
)

// BenchmarkMetricsScrape measures one scrape of GET /metrics over HTTP
// from a member whose state holds 100,000 jobs of 50 users on 100 nodes
// of 16 CPUs (1,600 of them running, the rest pending): what Prometheus
// costs the controller every scrape interval. It reports the scrape's
// size too.
func BenchmarkMetricsScrape(b *testing.B) {
	// The scheduler starts what fits before the measure.
	tc := benchMember(b, 100, 100_000, 1600, func(int) string { return "sim" })
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
