package ctld

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/api"
	"corral/ctld/state"
)

// TestFourthMemberJoins runs and purges jobs on a 3-member cluster whose
// members then snapshot and compact their logs, and adds a fourth member
// with Join (asking a follower, which forwards to the leader): it becomes
// a voter, is sent the snapshot, copies the records of the purged jobs
// from a peer and answers sacct with the whole history, its store and its
// change feed equal to the others'. Asking again changes nothing; another
// address for its id, or its address for another id, is refused.
func TestFourthMemberJoins(t *testing.T) {
	// The test node sends no heartbeat: a long timeout keeps it UP while
	// the fourth member joins.
	tc := startClusterTuned(t, 3, false, false, func(c *Config) { c.Raft.TrailingLogs, c.NodeTimeout = 5, time.Hour })
	leader := tc.waitLeader(t)
	cl := tc.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: [][2]string{{"MinJobAge", "1"}}}); err != nil {
		t.Fatal(err)
	}
	go runNode(ctx, cl, "n1")
	res, err := cl.Submit(ctx, []api.JobSpec{spec("j1"), spec("j2"), spec("j3")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		waitGone(t, cl, r.JobID)
	}
	waitConverged(t, tc)
	for _, c := range tc.ctls {
		if err := c.node.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	one, _ := api.NewClient(tc.addrs[0])
	want, err := one.AccountingSummary(ctx)
	if err != nil || want.Records != 3 {
		t.Fatalf("member 1 holds %+v (%v), want 3 records", want, err)
	}

	follower := tc.ctls[0]
	if follower == leader {
		follower = tc.ctls[1]
	}
	cfg := Config{ID: "c4", RaftAddr: freeAddr(t), HTTPAddr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "c4"),
		Join: []string{"127.0.0.1:1", follower.HTTPAddr()}, Logger: quietLog(), NodeTimeout: 2 * time.Second}
	if _, err := New(Config{ID: "c5", Join: cfg.Join, Peers: []Peer{{ID: "c5", Addr: "127.0.0.1:1"}}}); err == nil || !strings.Contains(err.Error(), "--join") {
		t.Errorf("a member given both --join and --peers: %v", err)
	}
	c4, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c4.Run(rctx) }()
	tc.ctls, tc.cancels, tc.done = append(tc.ctls, c4), append(tc.cancels, rcancel), append(tc.done, done)

	four, _ := api.NewClient("http://" + c4.HTTPAddr())
	eventually(t, "the fourth member is a voter with the whole history", func() bool {
		got, err := four.AccountingSummary(ctx)
		gap, _ := c4.acctStore().Gap()
		return c4.isVoter() && err == nil && got == want && gap == 0
	})
	if f := leader.node.raft.GetConfiguration(); f.Error() != nil || len(f.Configuration().Servers) != 4 {
		t.Errorf("the leader's configuration: %+v (%v), want 4 voters", f.Configuration().Servers, f.Error())
	}
	recs, err := four.Accounting(ctx, api.AcctQuery{AllUsers: true})
	if err != nil || len(recs) != 3 {
		t.Errorf("the fourth member answers sacct with %d records (%v), want 3", len(recs), err)
	}
	if a, b := feedOf(t, tc.ctls[0]), feedOf(t, c4); !slices.Equal(a, b) {
		t.Errorf("the fourth member's change feed %v differs from member 1's %v", b, a)
	}
	eventually(t, "the fourth member's API address is replicated", func() bool {
		var addr string
		leader.FSM().Read(func(s *state.State) { addr = s.Members["c4"] })
		return addr == c4.HTTPAddr()
	})

	join := func(body memberJoin) int {
		b, _ := json.Marshal(body)
		resp, err := http.Post(tc.addrs[0]+"/v1/internal/members/join", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		body memberJoin
		want int
	}{
		{memberJoin{ID: "c4", RaftAddr: cfg.RaftAddr}, 200},
		{memberJoin{ID: "c4", RaftAddr: "127.0.0.1:1"}, 409},
		{memberJoin{ID: "c9", RaftAddr: cfg.RaftAddr}, 409},
	} {
		if got := join(c.body); got != c.want {
			t.Errorf("join %+v: %d, want %d", c.body, got, c.want)
		}
	}
	// Jobs keep running with four voters, and the new member records them.
	more, err := cl.Submit(ctx, []api.JobSpec{spec("after-join")})
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, cl, more[0].JobID)
	eventually(t, fmt.Sprintf("the fourth member records job %d", more[0].JobID), func() bool {
		got, err := four.Accounting(ctx, api.AcctQuery{Jobs: []uint64{more[0].JobID}})
		return err == nil && len(got) == 1
	})
}
