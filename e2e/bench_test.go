package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld"
	"corral/noded"
	"corral/noded/vmrun"
)

// inProcess is a cluster of in-process controllers and node daemons: the
// same code as the daemons, real TCP and fsync'd bbolt files, without
// process start-up in the measurement.
type inProcess struct {
	cl     *api.Client
	cancel context.CancelFunc
	done   []chan error
}

func startInProcess(b *testing.B, voters, nodes, cpus int) *inProcess {
	return startInProcessWith(b, voters, nodes, cpus, nil)
}

// startInProcessWith is startInProcess with the node daemons' runner.
func startInProcessWith(b *testing.B, voters, nodes, cpus int, runner noded.Runner) *inProcess {
	b.Helper()
	dir := b.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ports := freePorts(b, voters)
	var peers []ctld.Peer
	for i := 0; i < voters; i++ {
		peers = append(peers, ctld.Peer{ID: fmt.Sprintf("c%d", i+1), Addr: ports[i]})
	}
	ctx, cancel := context.WithCancel(context.Background())
	ip := &inProcess{cancel: cancel}
	var addrs []string
	for _, p := range peers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		c, err := ctld.New(ctld.Config{ID: p.ID, RaftAddr: p.Addr, DataDir: filepath.Join(dir, p.ID), Peers: peers, Logger: log, HTTPListener: ln})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		ip.done = append(ip.done, done)
		addrs = append(addrs, "http://"+c.HTTPAddr())
	}
	cl, err := api.NewClient(strings.Join(addrs, ","))
	if err != nil {
		b.Fatal(err)
	}
	ip.cl = cl
	var ncl *api.Client
	for {
		st, err := cl.Status(context.Background())
		if err == nil && st.Leader != "" {
			for i, p := range peers {
				if p.ID == st.Leader {
					order := append([]string{addrs[i]}, addrs...)
					ncl, _ = api.NewClient(strings.Join(order, ","))
				}
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	nodeDir := dir
	if os.Getenv("CORRAL_BENCH_NODE_TMPFS") != "" {
		nodeDir, _ = os.MkdirTemp("/dev/shm", "corral-bench")
		b.Cleanup(func() { os.RemoveAll(nodeDir) })
	}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("n%d", i+1)
		d, err := noded.New(noded.Config{Name: name, CPUs: cpus, MemMB: 16 << 10, DataDir: filepath.Join(nodeDir, name), Client: ncl, Logger: log, Runner: runner,
			// The benchmark's user does not exist on the host.
			RunJobsAs: noded.RunAsDaemon})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		ip.done = append(ip.done, done)
	}
	b.Cleanup(ip.stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ns, err := cl.Nodes(context.Background())
		if err == nil && len(ns) == nodes {
			return ip
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes registered", len(ns), nodes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (ip *inProcess) stop() {
	ip.cancel()
	for _, d := range ip.done {
		<-d
	}
}

func trivialJob(dir string, n int) api.JobSpec {
	return api.JobSpec{Name: "trivial", User: "bench", Script: "#!/bin/sh\ntrue\n", NTasks: 1, CPUsPerTask: 1,
		MemPerNode: 64, WorkDir: dir, SubmitDir: dir, Output: "/dev/null", RequestID: fmt.Sprintf("%s-%d", dir, n)}
}

// BenchmarkTrivialJobsCompleted measures trivial jobs completed per second
// with 3 voters and 16 job slots (8 node daemons of 2 CPUs, process runner).
func BenchmarkTrivialJobsCompleted(b *testing.B) {
	ip := startInProcess(b, 3, 8, 2)
	const total = 2000
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		st, err := ip.cl.Status(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		base := st.Jobs[string(api.StateCompleted)]
		start := time.Now()
		for k := 0; k < total; k += 100 {
			batch := make([]api.JobSpec, 100)
			for m := range batch {
				batch[m] = trivialJob(dir, k+m)
			}
			if _, err := ip.cl.Submit(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		for {
			st, err := ip.cl.Status(context.Background())
			if err == nil && st.Jobs[string(api.StateCompleted)]-base >= total {
				break
			}
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("only %d of %d jobs completed", st.Jobs[string(api.StateCompleted)]-base, total)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.ReportMetric(total/time.Since(start).Seconds(), "jobs/s")
		if os.Getenv("CORRAL_BENCH_DEBUG") != "" {
			jobs, _ := ip.cl.Jobs(context.Background(), api.JobFilter{}, true)
			var run, wait time.Duration
			for _, j := range jobs {
				run += j.EndTime.Sub(j.StartTime)
				wait += j.StartTime.Sub(j.SubmitTime)
			}
			b.Logf("avg start→end %s, avg submit→start %s", run/time.Duration(len(jobs)), wait/time.Duration(len(jobs)))
		}
	}
}

// BenchmarkSubmitToCompleted measures one trivial job from submit to
// COMPLETED on an idle cluster (3 voters, 8 nodes); it reports the median
// and the 95th percentile over 50 jobs.
func BenchmarkSubmitToCompleted(b *testing.B) {
	ip := startInProcess(b, 3, 8, 2)
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		var lat []time.Duration
		for k := 0; k < 50; k++ {
			start := time.Now()
			res, err := ip.cl.Submit(context.Background(), []api.JobSpec{trivialJob(dir, i*1000+k)})
			if err != nil {
				b.Fatal(err)
			}
			for {
				j, err := ip.cl.Job(context.Background(), res[0].JobID, false)
				if err == nil && j.State == api.StateCompleted {
					break
				}
				if err == nil && j.State.Terminal() {
					b.Fatalf("job ended %s: %s", j.State, j.Message)
				}
				time.Sleep(500 * time.Microsecond)
			}
			lat = append(lat, time.Since(start))
		}
		sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
	}
}

// BenchmarkQueueCLI times the `corral queue` command (a fresh process, the
// default format) against a 3-voter cluster holding 5,000 and 100,000
// pending jobs; it reports the median of 5 runs.
func BenchmarkQueueCLI(b *testing.B) {
	ip := startInProcess(b, 3, 0, 0)
	addr := strings.Join(ip.cl.Addrs(), ",")
	held := 0
	for _, n := range []int{5_000, 100_000} {
		for held < n {
			batch := make([]api.JobSpec, 1000)
			for m := range batch {
				batch[m] = trivialJob("/tmp", held+m)
			}
			if _, err := ip.cl.Submit(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			held += len(batch)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var runs []time.Duration
				for r := 0; r < 5; r++ {
					start := time.Now()
					out, err := cli(b, addr, "/tmp", "queue")
					if err != nil {
						b.Fatal(err)
					}
					runs = append(runs, time.Since(start))
					if lines := strings.Count(out, "\n"); lines != n+1 {
						b.Fatalf("queue printed %d lines, want %d", lines, n+1)
					}
				}
				sort.Slice(runs, func(a, c int) bool { return runs[a] < runs[c] })
				b.ReportMetric(float64(runs[2].Microseconds())/1000, "median-ms")
			}
		})
	}
}

// BenchmarkVMSubmitToFirstOutput measures, with the vm runner, the time
// from submit to the first line of the job's output, for #!/bin/bash echo
// hi over the default share (the node's root over NFS), over 20 jobs run
// one at a time (3 voters, one node): it reports the median and the 95th
// percentile. The VMs' file servers are the corral binary's nfsd, as on a
// node. cold boots every VM (warm starts off); warm restores them from the
// node's snapshot of the shape, which a first job, not measured, makes
// the node take (with its default settling).
func BenchmarkVMSubmitToFirstOutput(b *testing.B) {
	root, _ := filepath.Abs("../build/images")
	if _, err := os.Stat(filepath.Join(root, "default", "image.json")); err != nil {
		b.Skipf("no guest image in %s: run make image", root)
	}
	for _, warm := range []bool{false, true} {
		name := map[bool]string{false: "cold", true: "warm"}[warm]
		b.Run(name, func(b *testing.B) {
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg := vmrun.Config{ImageRoot: root, DefaultImage: "default", Logger: log, NFSServer: []string{corralBin, "nfsd"}}
			if warm {
				cfg.WarmDir = filepath.Join(b.TempDir(), "warm")
			}
			runner, err := vmrun.New(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			ip := startInProcessWith(b, 3, 1, 2, runner)
			dir := b.TempDir()
			var last uint64
			if warm {
				_, last = firstOutput(b, ip, dir, "first.out", 0)
				deadline := time.Now().Add(5 * time.Minute)
				for len(runner.WarmSnapshots()) == 0 {
					if time.Now().After(deadline) {
						b.Fatal("no warm start's snapshot after 5 minutes")
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(time.Second) // the first VM gone
			}
			for i := 0; i < b.N; i++ {
				var lat []time.Duration
				for k := 0; k < 20; k++ {
					d, id := firstOutput(b, ip, dir, fmt.Sprintf("first-%d-%d.out", i, k), i*100+k+1)
					lat, last = append(lat, d), id
					// Let the VM finish so the next job finds the node idle.
					time.Sleep(300 * time.Millisecond)
				}
				sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
				b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*95/100].Milliseconds()), "p95-ms")
			}
			// The last VM ends before the cluster does.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
				j, err := ip.cl.Job(context.Background(), last, false)
				if err == nil && j.State.Terminal() || time.Now().After(deadline) {
					if want := map[bool]string{false: api.VMStartCold, true: api.VMStartWarm}[warm]; err == nil && j.VMStart != want {
						b.Errorf("the last job's VM started %q, want %q", j.VMStart, want)
					}
					break
				}
			}
		})
	}
}

// firstOutput submits #!/bin/bash echo hi (256 MiB) with its output in
// dir/name and returns the time until the output file has its first
// bytes, and the job's id.
func firstOutput(b *testing.B, ip *inProcess, dir, name string, n int) (time.Duration, uint64) {
	b.Helper()
	out := filepath.Join(dir, name)
	spec := trivialJob(dir, n)
	spec.Script, spec.Output, spec.MemPerNode = "#!/bin/bash\necho hi\n", out, 256
	start := time.Now()
	res, err := ip.cl.Submit(context.Background(), []api.JobSpec{spec})
	if err != nil {
		b.Fatal(err)
	}
	for {
		if st, err := os.Stat(out); err == nil && st.Size() > 0 {
			return time.Since(start), res[0].JobID
		}
		if time.Since(start) > time.Minute {
			b.Fatal("no output after a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkAfterokChain measures how fast a dependency chain moves: 10
// trivial jobs, each afterok on the one before, submitted at once (3
// voters, 8 nodes, process runner); the figure is the time from the first
// job's end to the last job's end, divided by the 9 links.
func BenchmarkAfterokChain(b *testing.B) {
	ip := startInProcess(b, 3, 8, 2)
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		const n = 10
		var prev uint64
		ids := make([]uint64, 0, n)
		for k := 0; k < n; k++ {
			spec := trivialJob(dir, i*1000+k)
			if prev != 0 {
				spec.Dependency = &api.Dependency{Raw: fmt.Sprintf("afterok:%d", prev),
					Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{strconv.FormatUint(prev, 10)}}}}
			}
			res, err := ip.cl.Submit(context.Background(), []api.JobSpec{spec})
			if err != nil {
				b.Fatal(err)
			}
			prev = res[0].JobID
			ids = append(ids, prev)
		}
		var first, last api.Job
		for {
			j1, err1 := ip.cl.Job(context.Background(), ids[0], false)
			jn, errn := ip.cl.Job(context.Background(), ids[n-1], false)
			if err1 == nil && errn == nil && jn.State.Terminal() {
				if jn.State != api.StateCompleted {
					b.Fatalf("last job ended %s (%s)", jn.State, jn.Reason)
				}
				first, last = *j1, *jn
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(last.EndTime.Sub(first.EndTime).Microseconds())/1000/(n-1), "ms/link")
	}
}

// BenchmarkPreemption measures a preempting job's submit → RUNNING on a
// full cluster (3 voters, 8 nodes × 2 CPUs, process runner): every CPU
// runs a besteffort job (requeue mode); a guaranteed job needing a whole
// node is submitted; the figure is until it runs, and the requeued victim
// is checked to be PENDING (eligible at once) by then.
func BenchmarkPreemption(b *testing.B) {
	ip := startInProcess(b, 3, 8, 2)
	ctx := context.Background()
	dir := b.TempDir()
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		var fill []api.JobSpec
		for k := 0; k < 16; k++ {
			s := trivialJob(dir, i*10000+k)
			s.Script, s.QOS = "#!/bin/sh\nsleep 600\n", "besteffort"
			fill = append(fill, s)
		}
		res, err := ip.cl.Submit(ctx, fill)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			for {
				j, err := ip.cl.Job(ctx, r.JobID, false)
				if err == nil && j.State == api.StateRunning {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		boss := trivialJob(dir, i*10000+100)
		boss.QOS, boss.CPUsPerTask = "guaranteed", 2
		start := time.Now()
		br, err := ip.cl.Submit(ctx, []api.JobSpec{boss})
		if err != nil {
			b.Fatal(err)
		}
		for {
			j, err := ip.cl.Job(ctx, br[0].JobID, false)
			if err == nil && j.State != api.StatePending {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
		requeued := 0
		for _, r := range res {
			if j, err := ip.cl.Job(ctx, r.JobID, false); err == nil && j.State == api.StatePending && j.Restarts > 0 {
				requeued++
			}
		}
		if requeued == 0 {
			b.Fatal("no victim was requeued")
		}
		ids := make([]uint64, 0, len(res))
		for _, r := range res {
			ids = append(ids, r.JobID)
		}
		if _, err := ip.cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{IDs: ids}}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}
