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

// BenchmarkStatusPage measures GET /ui/ over HTTP from a member whose
// state holds 10,000 jobs of 50 users on 20 nodes of 16 CPUs (320 of them
// running, the rest pending; every tenth job's name has markup to
// escape): what a browser's load of the status page costs the
// controller, the queue, nodes and summary rendered. It reports the
// page's size. BenchmarkStatusPagePlot measures the page's plot
// (/ui/usage.svg) over the same member's week.
//
//	go test ./ctld -run XXX -bench StatusPage -benchtime 20x
func BenchmarkStatusPage(b *testing.B) { benchStatusPage(b, "/ui/") }

func BenchmarkStatusPagePlot(b *testing.B) { benchStatusPage(b, "/ui/usage.svg") }

func benchStatusPage(b *testing.B, path string) {
	tc := benchMember(b, 20, 10_000, 320, func(k int) string {
		if k%10 == 0 {
			return "<b>sim</b>"
		}
		return "sim"
	})
	url := tc.addrs[0] + path
	size := 0
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		size = int(n)
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// benchMember starts a member holding nodes nodes of 16 CPUs and jobs
// jobs of 50 users in 5 accounts (named by name), submitted through Raft
// in entries of up to 10,000, and waits until running of them run (or
// two minutes). No node daemon heartbeats: the nodes must not go DOWN
// meanwhile.
func benchMember(b *testing.B, nodes, jobs, running int, name func(k int) string) *testCluster {
	tc := startClusterTuned(b, 1, false, false, func(c *Config) { c.NodeTimeout = time.Hour })
	leader := tc.waitLeader(b)
	now := time.Now().UTC()
	for i := 0; i < nodes; i++ {
		info := api.NodeInfo{Name: fmt.Sprintf("n%03d", i), CPUs: 16, MemMB: 65536, Runner: "test", BootID: "b", Partitions: []string{"batch"}}
		if _, err := leader.propose(state.CmdRegisterNode, &state.RegisterNode{Now: now, Info: info}); err != nil {
			b.Fatal(err)
		}
	}
	const chunk = 10_000
	for first := 0; first < jobs; first += chunk {
		cmd := &state.SubmitJobs{Now: now, FirstID: uint64(first + 1)}
		seen := map[string]bool{}
		for k := first; k < min(first+chunk, jobs); k++ {
			s := state.JobSpec{Name: name(k), User: fmt.Sprintf("u%02d", k%50), Account: fmt.Sprintf("a%d", k%5), NTasks: 1, CPUsPerTask: 1,
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
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		leader.fsm.Read(func(s *state.State) { n = len(s.Jobs) - len(s.Pending) })
		if n >= running || time.Now().After(deadline) {
			return tc
		}
		time.Sleep(100 * time.Millisecond)
	}
}
