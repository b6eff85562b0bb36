package ctld

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
)

// TestPartitionsSurviveFailover starts three members with different
// --partitions and --def-mem-per-cpu: the first leader seeds the cluster
// from its own; the flags of the members that lead after it change
// nothing, so a failover keeps the partitions, the memory per CPU and the
// default partition jobs go to.
func TestPartitionsSurviveFailover(t *testing.T) {
	dir := t.TempDir()
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{ID: fmt.Sprintf("c%d", i+1), Addr: freeAddr(t)})
	}
	flags := [][]api.Partition{
		{{Name: "batch", Default: true}, {Name: "debug", MaxTime: 600}},
		{{Name: "other", Default: true}},
		{{Name: "third", Default: true}},
	}
	tc := &testCluster{}
	for i, p := range peers {
		c, err := New(Config{ID: p.ID, RaftAddr: p.Addr, HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(dir, p.ID),
			Peers: peers, Logger: quietLog(), NodeTimeout: 10 * time.Second, Partitions: flags[i], DefMemPerCPU: int64(100 * (i + 1))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		tc.ctls, tc.cancels, tc.done = append(tc.ctls, c), append(tc.cancels, cancel), append(tc.done, done)
		tc.addrs = append(tc.addrs, "http://"+c.HTTPAddr())
	}
	t.Cleanup(tc.stop)
	first := tc.waitLeader(t)
	cl := tc.client(t)
	ctx := context.Background()
	var before []api.Partition
	var mem int64
	eventually(t, "the cluster seeded", func() bool {
		var err error
		before, err = cl.Partitions(ctx)
		p, perr := cl.Policy(ctx)
		if perr == nil {
			mem = p.Config.DefMemPerCPU
		}
		return err == nil && perr == nil && len(before) > 0
	})
	for i, c := range tc.ctls {
		if c != first {
			continue
		}
		tc.cancels[i]()
		<-tc.done[i]
		tc.cancels[i] = func() {}
		tc.done[i] = closedErr()
	}
	var next *Controller
	eventually(t, "a new leader", func() bool {
		for _, c := range tc.ctls {
			if c != first && c.Raft().State() == raft.Leader && c.isLeading() {
				next = c
				return true
			}
		}
		return false
	})
	ncl, _ := api.NewClient("http://" + next.HTTPAddr())
	time.Sleep(200 * time.Millisecond) // the new leader's seeding, were it to seed, would be applied by now
	after, err := ncl.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("partitions after the failover %+v, before %+v", after, before)
	}
	p, err := ncl.Policy(ctx)
	if err != nil || p.Config.DefMemPerCPU != mem {
		t.Errorf("DefMemPerCPU after the failover %d (%v), before %d", p.Config.DefMemPerCPU, err, mem)
	}
	res, err := ncl.Submit(ctx, []api.JobSpec{spec("where")})
	if err != nil {
		t.Fatal(err)
	}
	j, err := ncl.Job(ctx, res[0].JobID, true)
	if err != nil {
		t.Fatal(err)
	}
	def := ""
	for _, p := range before {
		if p.Default {
			def = p.Name
		}
	}
	if j.Spec.Partition != def || j.Spec.MemPerCPU != mem {
		t.Errorf("a job without a partition went to %s with %d MiB per CPU; the seeded default is %s with %d", j.Spec.Partition, j.Spec.MemPerCPU, def, mem)
	}
}

func closedErr() chan error {
	c := make(chan error, 1)
	c <- nil
	return c
}
