package ctld

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// BenchmarkSubmitThroughput measures distinct jobs per second accepted
// through the HTTP API of a 3-voter cluster over real TCP with fsync'd
// bbolt logs: 32 concurrent clients each send batches of 64 jobs.
func BenchmarkSubmitThroughput(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchSubmitBatches(b, false, false) })
	b.Run("tls", func(b *testing.B) { benchSubmitBatches(b, true, false) })
	b.Run("tls+auth", func(b *testing.B) { benchSubmitBatches(b, true, true) })
}

// benchClients returns a client of tc for the benchmarks: with auth, it
// sends a token of alice's, who submits the benchmarks' jobs.
func benchClients(b *testing.B, tc *testCluster, auth bool) func() *api.Client {
	var token string
	if auth {
		token = addToken(b, tc.waitLeader(b), "bench", "alice", api.RoleUser)
	}
	return func() *api.Client {
		cl := tc.client(b)
		if auth {
			cl.Auth = api.BearerToken(token)
		}
		return cl
	}
}

func benchSubmitBatches(b *testing.B, withTLS, auth bool) {
	tc := startClusterOpts(b, 3, withTLS, auth)
	tc.waitLeader(b)
	client := benchClients(b, tc, auth)
	const clients, batch, total = 32, 64, 50_000
	for i := 0; i < b.N; i++ {
		var seq atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				cl := client()
				for seq.Add(batch) <= total {
					specs := make([]api.JobSpec, batch)
					for k := range specs {
						specs[k] = spec(fmt.Sprintf("b%d-c%d-%d-%d", i, c, seq.Load(), k))
					}
					if _, err := cl.Submit(context.Background(), specs); err != nil {
						b.Error(err)
						return
					}
				}
			}(c)
		}
		wg.Wait()
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "jobs/s")
	}
}

// BenchmarkSubmitSingle measures one job per request, many requests in
// flight (64 concurrent clients): the leader coalesces them into few
// entries. The clients are one principal, which the default write limit
// (200/s after a burst of 2,000) would hold to 200 requests a second:
// the benchmark measures the controller, so it turns the limit off.
func BenchmarkSubmitSingle(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchSubmitSingle(b, false, false) })
	b.Run("tls", func(b *testing.B) { benchSubmitSingle(b, true, false) })
	b.Run("tls+auth", func(b *testing.B) { benchSubmitSingle(b, true, true) })
}

func benchSubmitSingle(b *testing.B, withTLS, auth bool) {
	// One principal sends every request here: the write limit would hold
	// it to its rate, which is the limit doing its job, not the cost
	// measured.
	tc := startClusterTuned(b, 3, withTLS, auth, func(c *Config) { c.RateLimits.Writes = -1 })
	tc.waitLeader(b)
	client := benchClients(b, tc, auth)
	const clients, total = 64, 10_000
	for i := 0; i < b.N; i++ {
		var seq atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := client()
				for n := seq.Add(1); n <= total; n = seq.Add(1) {
					if _, err := cl.Submit(context.Background(), []api.JobSpec{spec(fmt.Sprintf("s%d-%d", i, n))}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "jobs/s")
	}
}

// fillPending applies n pending jobs straight into an FSM.
func fillPending(f *FSM, n int) { fillPendingEnv(f, n, nil) }

// fillPendingEnv applies n pending jobs with the environments env gives
// (none when nil), as the leader proposes them: out of line, each entry
// carrying the blobs it introduces.
func fillPendingEnv(f *FSM, n int, env func(k int) []string) {
	const chunk = 10_000
	for first := 0; first < n; first += chunk {
		cmd := &state.SubmitJobs{Now: t0, FirstID: uint64(first + 1)}
		seen := map[string]bool{}
		for k := 0; k < chunk && first+k < n; k++ {
			s := state.JobSpec{Name: "sim", User: "alice", NTasks: 1, CPUsPerTask: 1,
				SubmitDir: "/home/alice", WorkDir: "/home/alice", Partition: "batch",
				RequestID: fmt.Sprintf("%032x", first+k)}
			var lines []string
			if env != nil {
				lines = env(first + k)
			}
			s = state.Inline(s, "#!/bin/sh\ntrue\n", lines)
			for _, r := range state.OutOfLine(&s) {
				if !seen[r.Key] {
					cmd.Blobs = append(cmd.Blobs, r)
					seen[r.Key] = true
				}
			}
			cmd.Jobs = append(cmd.Jobs, s)
		}
		data, _ := state.Encode(state.CmdSubmitJobs, cmd)
		f.Apply(rlog(uint64(first/chunk+1), data))
	}
}

// benchEnv is a 4 KB login environment of 40 variables whose last one
// differs for each job, as in a submission loop that exports its loop
// variable.
func benchEnv(k int) []string {
	var env []string
	for i := 0; i < 39; i++ {
		env = append(env, fmt.Sprintf("VAR_%02d=%s", i, strings.Repeat("x", 95)))
	}
	return append(env, fmt.Sprint("ZZ_SAMPLE=", k))
}

// BenchmarkMemoryPerPendingJob reports the controller's heap per pending
// job (with a 32-character request id each).
func BenchmarkMemoryPerPendingJob(b *testing.B) { benchMemoryPerPendingJob(b, nil) }

// BenchmarkMemoryPerPendingJobWithEnv is BenchmarkMemoryPerPendingJob
// with a 4 KB environment per job, each different in one variable
// (benchEnv): what the environments cost once they are out of line.
func BenchmarkMemoryPerPendingJobWithEnv(b *testing.B) { benchMemoryPerPendingJob(b, benchEnv) }

// benchMemoryPerPendingJob fills an FSM with 100,000 pending jobs with the
// environments env gives (none when nil) and reports the heap they hold.
func benchMemoryPerPendingJob(b *testing.B, env func(int) []string) {
	for i := 0; i < b.N; i++ {
		// Collecting twice, before and after: encoding/json's pooled
		// buffers (4 MB after a 10,000-job entry) outlive one collection in
		// sync.Pool's victim cache, which made the figure jump by 42
		// bytes/job from run to run (and drop after other benchmarks).
		runtime.GC()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f := NewFSM(quietLog())
		fillPendingEnv(f, 100_000, env)
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/100_000, "bytes/job")
		runtime.KeepAlive(f)
	}
}

// BenchmarkListPending measures the server side of `corral queue`:
// selecting and encoding every pending job.
func BenchmarkListPending(b *testing.B) {
	open := principal{kind: kindUser, role: api.RoleAdmin, open: true}
	for _, n := range []int{5_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchListPending(b, n, open) })
	}
	// Through the query layer: the jobs' owner, who sees every one, and
	// a user of no tenant of theirs, who sees none.
	b.Run("100000-owner", func(b *testing.B) {
		benchListPending(b, 100_000, principal{kind: kindUser, name: "alice", role: api.RoleUser})
	})
	b.Run("100000-other", func(b *testing.B) {
		benchListPending(b, 100_000, principal{kind: kindUser, name: "bob", role: api.RoleUser})
	})
}

func benchListPending(b *testing.B, n int, p principal) {
	c := &Controller{fsm: NewFSM(quietLog())}
	fillPending(c.fsm, n)
	f := api.JobFilter{States: []api.JobState{api.StatePending, api.StateRunning}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		jobs := c.selectJobs(p, &f)
		if err := writeJobList(discard{}, jobs, c.priorityFunc(time.Now()), c.migrationFunc()); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkSubmitSequential measures what a workflow manager's sbatch
// loop costs the controllers: one job per request, one request at a time,
// each on a new connection from a new client (as each sbatch process
// makes), with a script and an environment of 40 variables as the CLI
// sends, to the leader of 3 voters. It reports the jobs a second, the CPU
// of this process per job (the three voters and the client), and the Raft
// entries per job.
func BenchmarkSubmitSequential(b *testing.B) {
	tc := startClusterTuned(b, 3, false, false, func(c *Config) { c.RateLimits.Writes = -1 })
	leader := tc.waitLeader(b)
	addr := "http://" + leader.HTTPAddr()
	const total = 1000
	for i := 0; i < b.N; i++ {
		first := leader.Raft().LastIndex()
		cpu0 := processCPU()
		start := time.Now()
		for n := 0; n < total; n++ {
			cl, err := api.NewClient(addr)
			if err != nil {
				b.Fatal(err)
			}
			s := spec(fmt.Sprintf("q%d-%d", i, n))
			s.Env = benchEnv(n)
			if _, err := cl.Submit(context.Background(), []api.JobSpec{s}); err != nil {
				b.Fatal(err)
			}
			cl.CloseIdle()
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(total)/elapsed.Seconds(), "jobs/s")
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/total, "cpu-ms/job")
		b.ReportMetric(float64(leader.Raft().LastIndex()-first)/total, "entries/job")
	}
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
