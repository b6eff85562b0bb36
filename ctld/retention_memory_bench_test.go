package ctld

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// BenchmarkMemoryPastRetention runs a one-member controller with its
// accounting store through rounds of 4,000 jobs each: submitted in
// batches, run to completion on one large node, recorded, and purged
// once past MinJobAge (1 s; request ids past RequestIDRetention, 1 s).
// After each round it reports the live heap, the part of it the Raft log
// cache holds (bounded: 8 MiB of the newest entries) and the process's
// anonymous resident memory: the heap outside the cache should not grow
// with the number of finished jobs once they are gone from the state (the
// records are in the store's file, not in memory). It fails when the last
// round's exceeds the first's by more than a quarter.
// CORRAL_BENCH_ROUNDS=N runs N rounds instead of 8; CORRAL_HEAP_PROFILES=DIR
// writes a heap profile after each round.
func BenchmarkMemoryPastRetention(b *testing.B) {
	const perRound, batch = 4000, 500
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("CORRAL_BENCH_ROUNDS")); err == nil && n > 1 {
		rounds = n
	}
	for i := 0; i < b.N; i++ {
		// The test node reports ends but sends no heartbeat: a long
		// timeout keeps it UP through a loaded machine's pauses.
		tc := startClusterTuned(b, 1, false, false, func(c *Config) { c.NodeTimeout = time.Hour })
		tc.waitLeader(b)
		cl := tc.client(b)
		ctx, cancel := context.WithCancel(context.Background())
		err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}, {"RequestIDRetention", "1"}}})
		if err != nil {
			b.Fatal(err)
		}
		go runNodeInfo(ctx, cl, api.NodeInfo{Name: "big", CPUs: 512, MemMB: 1 << 20, Runner: "test", BootID: "big-boot"})
		c := tc.ctls[0]
		var heaps []float64
		for r := range rounds {
			for from := 0; from < perRound; from += batch {
				var specs []api.JobSpec
				for k := from; k < from+batch; k++ {
					s := spec(fmt.Sprintf("r%d-%d", r, k))
					s.MemPerNode = 64
					specs = append(specs, s)
				}
				if _, err := cl.Submit(ctx, specs); err != nil {
					b.Fatal(err)
				}
			}
			waitPurged(b, c, 120*time.Second)
			heap, anon := liveHeap(), rssAnon()
			// The Raft log cache fills up to its bound (8 MiB) with the
			// newest entries whatever they hold: what grows with the
			// jobs is the heap outside it.
			cached := float64(c.node.logs.cachedBytes())
			heaps = append(heaps, heap-cached)
			if dir := os.Getenv("CORRAL_HEAP_PROFILES"); dir != "" {
				if f, err := os.Create(fmt.Sprintf("%s/heap-%d.pprof", dir, r+1)); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
			var recs uint64
			if sum, err := c.acctStore().Summary(); err == nil {
				recs = sum.Records
			}
			b.Logf("round %d: %d jobs finished and purged, %d records; live heap %.1f MB (%.1f MB of it the Raft log cache), anonymous RSS %.1f MB",
				r+1, (r+1)*perRound, recs, heap/1e6, cached/1e6, anon/1e6)
		}
		cancel()
		b.ReportMetric(heaps[0]/1e6, "heap-MB-round1")
		b.ReportMetric(heaps[len(heaps)-1]/1e6, "heap-MB-last")
		b.ReportMetric(slices.Max(heaps)/1e6, "heap-MB-max")
		b.ReportMetric(float64(rounds*perRound), "jobs")
		if last := heaps[len(heaps)-1]; last > heaps[0]*1.25 {
			b.Errorf("the live heap outside the log cache grew from %.1f MB after round 1 to %.1f MB after round %d", heaps[0]/1e6, last/1e6, rounds)
		}
		tc.stop()
	}
}

// waitPurged waits until the member's state holds no job and its
// accounting writer has written everything.
func waitPurged(b *testing.B, c *Controller, limit time.Duration) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for {
		var jobs, finished int
		c.FSM().Read(func(s *state.State) { jobs, finished = len(s.Jobs), s.FinishedIndexed() })
		if jobs == 0 && finished == 0 {
			c.fsm.flushAccounting()
			return
		}
		if time.Now().After(deadline) {
			states := map[string]int{}
			c.FSM().Read(func(s *state.State) {
				for _, j := range s.Jobs {
					states[string(j.State)+"/"+string(j.Reason)]++
				}
				for n, node := range s.Nodes {
					states["node "+n+" "+string(node.State())]++
				}
			})
			b.Fatalf("%d jobs (%d finished) still in the state after %s: %v", jobs, finished, limit, states)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rssAnon returns the process's anonymous resident memory (RssAnon), which
// leaves out the file-backed pages of the stores' memory maps.
func rssAnon() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}
