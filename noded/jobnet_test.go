package noded

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"corral/api"
)

// netRunner is the process runner whose handles follow a job's network,
// recording what they were handed.
type netRunner struct {
	Runner
	mu  sync.Mutex
	got []*api.JobNet
}

type netHandle struct {
	Handle
	r *netRunner
}

func (r *netRunner) Start(ctx context.Context, spec LaunchSpec) (Handle, error) {
	h, err := r.Runner.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return netHandle{h, r}, nil
}

func (h netHandle) SetJobNet(n *api.JobNet) error {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	h.r.got = append(h.r.got, n)
	return nil
}

func (r *netRunner) calls() []*api.JobNet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*api.JobNet(nil), r.got...)
}

// TestDaemonFollowsTheJobNetwork changes a running job's network on the
// controller (a member's node moved its endpoint): the daemon hands the
// new one to the job's handle once, records it, and does not repeat it
// at later reconciles.
func TestDaemonFollowsTheJobNetwork(t *testing.T) {
	f := newFakeCtl(t)
	data, work := t.TempDir(), t.TempDir()
	r := &netRunner{Runner: NewProcessRunner()}
	startDaemon(t, f, data, func(c *Config) { c.Runner = r })
	net := func(ep string) *api.JobNet {
		return &api.JobNet{VNI: 9, Addr: netip.MustParsePrefix("10.214.0.1/16"), Members: []api.JobNetMember{
			{Node: "n1", Addr: netip.MustParseAddr("10.214.0.1"), Endpoint: "192.0.2.1:4789"},
			{Node: "n2", Addr: netip.MustParseAddr("10.214.0.2"), Endpoint: ep}}}
	}
	job := counterJob(21, work, 100)
	job.Net = net("192.0.2.2:4789")
	job = f.addJob("n1", job)
	k := jobKey{job.ID, job.StartIndex}
	watchOutput(job.Spec.Output).waitLines(t, job.Spec.Output, 1, 10*time.Second)
	f.setState("n1", 21, api.StateRunning) // a reconcile with the same network
	time.Sleep(200 * time.Millisecond)
	if got := r.calls(); len(got) != 0 {
		t.Fatalf("the unchanged network was handed to the job: %+v", got)
	}
	f.mu.Lock()
	f.allocs["n1"][0].Net = net("192.0.2.7:4790")
	f.bump()
	f.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.calls()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.setState("n1", 21, api.StateRunning)
	time.Sleep(200 * time.Millisecond)
	got := r.calls()
	if len(got) != 1 || got[0].Members[1].Endpoint != "192.0.2.7:4790" {
		t.Fatalf("the job was handed %d networks (%+v), want the moved one once", len(got), got)
	}
	if rec := readRecord(t, data, k); rec.Job.Net == nil || rec.Job.Net.Members[1].Endpoint != "192.0.2.7:4790" {
		t.Errorf("the record keeps the old network: %+v", rec.Job.Net)
	}
}
