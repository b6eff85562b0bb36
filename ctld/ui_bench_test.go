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
	tc := startClusterTuned(b, 1, false, false, func(c *Config) { c.NodeTimeout = time.Hour })
	leader := tc.waitLeader(b)
	now := time.Now().UTC()
	for i := 0; i < 20; i++ {
		info := api.NodeInfo{Name: fmt.Sprintf("n%02d", i), CPUs: 16, MemMB: 65536, Runner: "test", BootID: "b", Partitions: []string{"batch"}}
		if _, err := leader.propose(state.CmdRegisterNode, &state.RegisterNode{Now: now, Info: info}); err != nil {
			b.Fatal(err)
		}
	}
	const jobs = 10_000
	cmd := &state.SubmitJobs{Now: now, FirstID: 1}
	seen := map[string]bool{}
	for k := 0; k < jobs; k++ {
		name := "sim"
		if k%10 == 0 {
			name = "<b>sim</b>"
		}
		s := state.JobSpec{Name: name, User: fmt.Sprintf("u%02d", k%50), Account: fmt.Sprintf("a%d", k%5), NTasks: 1, CPUsPerTask: 1,
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
	deadline := time.Now().Add(time.Minute)
	for {
		var running int
		leader.fsm.Read(func(s *state.State) { running = len(s.Jobs) - len(s.Pending) })
		if running >= 320 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
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
