package ctld

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"corral/api"
	"corral/internal/pki"
)

// freeAddr returns a 127.0.0.1 address with a port nobody listens on now,
// and one it has not returned before in this test binary: the kernel may
// hand a port just closed out again, and two members given one address
// fail to bootstrap ("duplicate address in configuration").
func freeAddr(t testing.TB) string {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, dup := givenAddrs.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
}

// givenAddrs are the addresses freeAddr returned.
var givenAddrs sync.Map

type testCluster struct {
	ctls    []*Controller
	cancels []context.CancelFunc
	done    []chan error
	addrs   []string
	// tls verifies the members when the cluster runs over TLS; caDir is
	// its authority's directory, to issue more certificates from.
	tls   *tls.Config
	caDir string
}

// startCluster starts n controllers over real TCP with bbolt files.
func startCluster(t testing.TB, n int) *testCluster { return startClusterWith(t, n, false) }

// startClusterWith is startCluster, over TLS with an authority made for the
// test when withTLS is set.
func startClusterWith(t testing.TB, n int, withTLS bool) *testCluster {
	t.Helper()
	return startClusterOpts(t, n, withTLS, false)
}

// startClusterOpts is startClusterWith that also authenticates requests
// (Config.Auth) when auth is set.
func startClusterOpts(t testing.TB, n int, withTLS, auth bool) *testCluster {
	t.Helper()
	return startClusterTuned(t, n, withTLS, auth, nil)
}

// startClusterTuned is startClusterOpts with each member's Config passed
// through tune (when set) before it starts.
func startClusterTuned(t testing.TB, n int, withTLS, auth bool, tune func(*Config)) *testCluster {
	t.Helper()
	dir := t.TempDir()
	var peers []Peer
	for i := 0; i < n; i++ {
		peers = append(peers, Peer{ID: fmt.Sprintf("c%d", i+1), Addr: freeAddr(t)})
	}
	tc := &testCluster{}
	scheme := "http://"
	files := map[string]pki.Files{}
	if withTLS {
		scheme = "https://"
		ca := filepath.Join(dir, "ca")
		tc.caDir = ca
		if err := pki.InitCA(ca, "test"); err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			cert, key, err := pki.Issue(ca, ca, pki.Request{Role: pki.RoleMember, Name: p.ID, Hosts: []string{"127.0.0.1"}})
			if err != nil {
				t.Fatal(err)
			}
			files[p.ID] = pki.Files{Cert: cert, Key: key, CA: filepath.Join(ca, pki.CACertFile)}
		}
		var err error
		if tc.tls, err = (pki.Files{CA: filepath.Join(ca, pki.CACertFile)}).Client(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		cfg := Config{
			ID: peers[i].ID, RaftAddr: peers[i].Addr, HTTPAddr: "127.0.0.1:0",
			DataDir: filepath.Join(dir, peers[i].ID), Peers: peers, Logger: quietLog(),
			NodeTimeout: 2 * time.Second, TLS: files[peers[i].ID], Auth: auth,
		}
		if tune != nil {
			tune(&cfg)
		}
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		tc.ctls = append(tc.ctls, c)
		tc.cancels = append(tc.cancels, cancel)
		tc.done = append(tc.done, done)
		tc.addrs = append(tc.addrs, scheme+c.HTTPAddr())
	}
	t.Cleanup(tc.stop)
	return tc
}

func (tc *testCluster) stop() {
	for i, cancel := range tc.cancels {
		cancel()
		<-tc.done[i]
	}
	tc.cancels = nil
}

func (tc *testCluster) client(t testing.TB) *api.Client {
	c, err := api.NewTLSClient(strings.Join(tc.addrs, ","), tc.tls)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (tc *testCluster) waitLeader(t testing.TB) *Controller {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range tc.ctls {
			if c.Raft().State() == raft.Leader && c.isLeading() {
				return c
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader elected within 10s")
	return nil
}

// runNode plays a minimal node daemon: it runs every allocation by
// reporting it COMPLETED at once.
func runNode(ctx context.Context, cl *api.Client, name string) {
	runNodeInfo(ctx, cl, api.NodeInfo{Name: name, CPUs: 2, MemMB: 4096, Runner: "test", BootID: name + "-boot"})
}

// runNodeInfo is runNode for a node that registers with info; it registers
// again when the controllers forget it.
func runNodeInfo(ctx context.Context, cl *api.Client, info api.NodeInfo) {
	name := info.Name
	for cl.Register(ctx, info) != nil && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	var index uint64
	for ctx.Err() == nil {
		d, err := cl.Desired(ctx, name, index, 2*time.Second)
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !d.Known {
			_ = cl.Register(ctx, info)
			continue
		}
		index = d.Index
		var reps []api.JobReport
		for _, a := range d.Allocations {
			reps = append(reps, api.JobReport{JobID: a.Job.ID, StartIndex: a.Job.StartIndex, State: api.StateCompleted})
		}
		if len(reps) > 0 {
			_ = cl.Report(ctx, api.NodeStatus{Name: name, BootID: info.BootID, Reports: reps})
		}
	}
}

func TestClusterRunsJobsThroughAnyMember(t *testing.T) {
	tc := startCluster(t, 3)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go runNode(ctx, cl, "n1")

	// Submit through each member in turn: followers forward to the leader.
	var ids []uint64
	for i := range tc.addrs {
		one, _ := api.NewClient(tc.addrs[i])
		s := spec(fmt.Sprintf("j%d", i))
		res, err := one.Submit(ctx, []api.JobSpec{s})
		if err != nil {
			t.Fatalf("submit via %s: %v", tc.addrs[i], err)
		}
		ids = append(ids, res[0].JobID)
		again, err := one.Submit(ctx, []api.JobSpec{s})
		if err != nil || again[0].JobID != res[0].JobID || !again[0].Duplicate {
			t.Fatalf("retried submit via %s: %+v, %v; want the original job %d", tc.addrs[i], again, err, res[0].JobID)
		}
	}
	for _, id := range ids {
		waitState(t, cl, id, api.StateCompleted)
	}
	// Every replica converges on the same state.
	deadline := time.Now().Add(5 * time.Second)
	for {
		h0, h1, h2 := tc.ctls[0].FSM().Hash(), tc.ctls[1].FSM().Hash(), tc.ctls[2].FSM().Hash()
		if h0 == h1 && h1 == h2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replicas did not converge")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitState(t testing.TB, cl *api.Client, id uint64, want api.JobState) *api.Job {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		j, err := cl.Job(context.Background(), id, false)
		if err == nil && j.State == want {
			return j
		}
		if time.Now().After(deadline) {
			st := "unknown"
			if j != nil {
				st = string(j.State) + " " + string(j.Reason)
			}
			t.Fatalf("job %d: %s after 15s, want %s (err %v)", id, st, want, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNodeGoesDownAndRequeues(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx := context.Background()
	info := api.NodeInfo{Name: "n1", CPUs: 2, MemMB: 4096, Runner: "test", BootID: "b"}
	if err := cl.Register(ctx, info); err != nil {
		t.Fatal(err)
	}
	a, b := spec("fails"), spec("requeues")
	b.Requeue = true
	res, err := cl.Submit(ctx, []api.JobSpec{a, b})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, cl, res[0].JobID, api.StateRunning)
	// No heartbeats: after the 2s timeout the node is DOWN.
	waitState(t, cl, res[0].JobID, api.StateNodeFail)
	j := waitState(t, cl, res[1].JobID, api.StatePending)
	if j.Restarts != 1 {
		t.Errorf("requeued job restarts = %d, want 1", j.Restarts)
	}
	n, err := cl.Node(ctx, "n1")
	if err != nil || n.State() != api.NodeDown {
		t.Fatalf("node: %+v %v, want DOWN", n, err)
	}
	if err := cl.Heartbeat(ctx, "n1", "b"); err == nil {
		t.Error("a heartbeat from a DOWN node was accepted; it must register again")
	}
}

func TestBadRequestsStoreNothing(t *testing.T) {
	tc := startCluster(t, 1)
	tc.waitLeader(t)
	cl := tc.client(t)
	ctx := context.Background()
	big := spec("big")
	big.Script = "#!/bin/sh\n" + strings.Repeat("x", 10<<20)
	noShebang := spec("noshebang")
	noShebang.Script = "echo hi\n"
	empty := spec("empty")
	empty.Script = ""
	neg := spec("neg")
	neg.CPUsPerTask = -1
	dep := spec("dep")
	dep.Dependency = &api.Dependency{Raw: "afterok:999", Clauses: []api.DepClause{{Type: "afterok", JobIDs: []string{"999"}}}}
	part := spec("part")
	part.Partition = "nosuch"
	img := spec("img")
	img.Image = "centos7"
	cases := map[string]struct {
		job  api.JobSpec
		want string
	}{
		"10 MB script":         {big, "larger than 4194304 bytes"},
		"script without #!":    {noShebang, "#!"},
		"empty script":         {empty, "empty"},
		"negative cpus":        {neg, "--cpus-per-task must be between 1"},
		"dependency on no job": {dep, "job 999 does not exist"},
		"unknown partition":    {part, "invalid partition"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := cl.Submit(ctx, []api.JobSpec{spec("ok-" + name), c.job})
			var ae *api.APIError
			if err == nil || !errorsAs(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, c.want) {
				t.Fatalf("got %v, want a 400 mentioning %q", err, c.want)
			}
		})
	}
	jobs, err := cl.Jobs(ctx, api.JobFilter{}, true)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("refused batches stored %d jobs (err %v)", len(jobs), err)
	}
}
