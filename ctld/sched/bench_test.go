package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"corral/api"
)

// benchScene builds a cluster of nodes and a queue of pending jobs shaped like
// a busy site: nodes of 64 CPUs / 256 GiB, a tenth of them in a debug
// partition, a quarter half busy, a few down; jobs of 1–16 CPUs, half with no
// --mem (so DefMemPerCPU applies), spread priorities and submit times, 5%
// held, 5% with a future begin time and 10% with a dependency. The queue is
// far larger than the cluster, so most jobs end up waiting.
func benchScene(nodeCount, jobCount int) *Snapshot {
	r := rand.New(rand.NewPCG(uint64(nodeCount), uint64(jobCount)))
	sc := at(t0).defMemPerCPU(2048).partitions("batch", "batch", "debug")
	for i := range nodeCount {
		n := node(fmt.Sprintf("n%05d", i)).cpus(64).mem(256 * 1024)
		if i%10 == 9 {
			n.partition("debug")
		}
		if r.IntN(4) == 0 {
			sc.with(n)
			sc.running(n[0].Name, time.Duration(r.IntN(3600))*time.Second,
				job(uint64(2_000_000+i)).cpus(32).mem(128*1024).limit(time.Duration(1+r.IntN(4))*time.Hour))
			n = nil
		}
		if r.IntN(50) == 0 {
			n.down()
		}
		if n != nil {
			sc.with(n)
		}
	}
	for id := uint64(1_000_000); id < 1_000_100; id++ {
		sc.known(job(id).state(pick(r, api.StateRunning, api.StateCompleted, api.StateFailed)))
	}
	for i := range jobCount {
		j := job(uint64(i + 1)).cpus(1 + r.IntN(16)).priority(int64(r.IntN(1000))).
			limit(time.Duration(1+r.IntN(48*60)) * time.Minute).
			submitted(t0.Add(-time.Duration(r.IntN(86400)) * time.Second))
		if r.IntN(2) == 0 {
			j.mem(int64(1+r.IntN(64)) * 1024)
		}
		if r.IntN(10) == 0 {
			j.partition("debug")
		}
		switch r.IntN(20) {
		case 0:
			j.held()
		case 1:
			j.begin(t0.Add(time.Duration(1+r.IntN(3600)) * time.Second))
		case 2, 3:
			j.afterok(1_000_000 + uint64(r.IntN(100)))
		}
		sc.queue(j)
	}
	return sc.snapshot()
}

func BenchmarkSchedule(b *testing.B) {
	for _, size := range []struct {
		nodes, jobs int
		policy      Policy
	}{
		{10, 1_000, PolicyEASY},
		{100, 10_000, PolicyEASY},
		{1_000, 100_000, PolicyEASY},
		{10_000, 100_000, PolicyEASY},
		{10_000, 100_000, PolicyFCFS},
		{100, 10_000, PolicyConservative},
	} {
		b.Run(fmt.Sprintf("%s/nodes=%d/jobs=%d", size.policy, size.nodes, size.jobs), func(b *testing.B) {
			s := benchScene(size.nodes, size.jobs)
			s.Policy = size.policy
			// The controller's defaults: multifactor priority with every
			// weight set, and the default QoS.
			s.Config = api.DefaultSchedConfig()
			s.QOS = map[string]*api.QOS{}
			for _, q := range api.DefaultQOS() {
				s.QOS[q.Name] = &q
			}
			s.Fairshare = func(account, user string) float64 { return 0.5 }
			var p Plan
			for b.Loop() {
				p = Schedule(s)
			}
			b.ReportMetric(float64(len(p.Starts)), "starts")
		})
	}
}
