package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// retentionFigures are what measureRetention saw of one `corral ctld`
// process: its resident memory (VmRSS, MB) idle, at its peak (VmHWM) and
// once the jobs and their request ids were purged, and the size (KB) of the
// snapshot the leader took after the purge.
type retentionFigures struct {
	idleMB, peakMB, afterMB float64
	// afterAnonMB and afterFileMB split afterMB: the heap and stacks, and
	// the pages of files mapped in (the Raft log's bbolt file).
	afterAnonMB, afterFileMB float64
	snapshotKB               float64
	purge                    time.Duration
}

// measureRetention starts a one-voter controller process, submits n held
// jobs with request ids, cancels them all, sets MinJobAge and
// RequestIDRetention to 2 s, and waits until every job is gone and the
// leader has written a snapshot without them.
func measureRetention(t testing.TB, n int) retentionFigures {
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	cl := c.client(t)
	ctx := context.Background()
	pid := c.ctlds[0].cmd.Process.Pid
	var f retentionFigures
	time.Sleep(2 * time.Second) // let start-up garbage go
	f.idleMB = procStatusMB(t, pid, "VmRSS")

	for sent := 0; sent < n; sent += 1000 {
		batch := make([]api.JobSpec, 0, 1000)
		for k := sent; k < sent+1000 && k < n; k++ {
			s := trivialJob("/tmp", k)
			s.Hold = true
			batch = append(batch, s)
		}
		if _, err := cl.Submit(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Cancel(ctx, api.CancelRequest{Filter: api.JobFilter{Users: []string{"bench"}}}); err != nil {
		t.Fatal(err)
	}
	if st, err := cl.Status(ctx); err != nil || st.Jobs[string(api.StateCancelled)] != n {
		t.Fatalf("status after cancelling %d jobs: %+v, %v", n, st, err)
	}
	// `corral queue -t all` shows finished jobs while they are retained.
	if listed := queuedAll(t, c.addr); listed != n {
		t.Fatalf("corral queue -t all listed %d jobs before the purge, want the %d cancelled", listed, n)
	}
	start := time.Now()
	settings := [][2]string{{"MinJobAge", "2"}, {"RequestIDRetention", "2"}}
	if err := cl.SetConfig(ctx, api.ConfigRequest{Settings: settings}); err != nil {
		t.Fatal(err)
	}
	snaps := filepath.Join(c.dir, "c1", "snapshots")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := cl.Status(ctx)
		left := -1
		if err == nil {
			left = 0
			for _, k := range st.Jobs {
				left += k
			}
		}
		size, ok := newestSnapshotKB(snaps)
		if left == 0 && ok && size < 64 {
			f.purge, f.snapshotKB = time.Since(start), size
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 minutes after MinJobAge=2: %d jobs left, newest snapshot %.0f KB (%v)\n%s", left, size, err, c.ctlds[0].tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if left := queuedAll(t, c.addr); left != 0 {
		t.Fatalf("corral queue -t all lists %d jobs after the purge, want none", left)
	}
	f.peakMB = procStatusMB(t, pid, "VmHWM")
	time.Sleep(5 * time.Second) // the memory is returned in the background
	f.afterMB = procStatusMB(t, pid, "VmRSS")
	f.afterAnonMB, f.afterFileMB = procStatusMB(t, pid, "RssAnon"), procStatusMB(t, pid, "RssFile")
	if os.Getenv("CORRAL_BENCH_DEBUG") != "" {
		smaps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
		var cur string
		for _, line := range strings.Split(string(smaps), "\n") {
			if fs := strings.Fields(line); len(fs) >= 6 && strings.Contains(fs[0], "-") {
				cur = fs[5]
			} else if strings.HasPrefix(line, "Rss:") && !strings.HasSuffix(line, " 0 kB") && cur != "" {
				t.Logf("%s %s", cur, line)
			}
		}
		t.Logf("controller log:\n%s", c.ctlds[0].tail())
	}
	return f
}

// queuedAll returns how many jobs `corral queue -t all` lists.
func queuedAll(t testing.TB, addr string) int {
	t.Helper()
	out, err := cli(t, addr, "/tmp", "queue", "-t", "all", "--noheader")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(out, "\n")
}

// procStatusMB reads a kB field of /proc/PID/status in MB.
func procStatusMB(t testing.TB, pid int, field string) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				t.Fatalf("%s in /proc/%d/status: %q", field, pid, line)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// newestSnapshotKB returns the size of the newest Raft snapshot in dir.
func newestSnapshotKB(dir string) (float64, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var newest os.FileInfo
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name(), "state.bin"))
		if err == nil && (newest == nil || st.ModTime().After(newest.ModTime())) {
			newest = st
		}
	}
	if newest == nil {
		return 0, false
	}
	return float64(newest.Size()) / 1024, true
}

// TestControllerMemoryReturnsAfterPurge is the small version of
// BenchmarkControllerMemoryAfterPurge: 20,000 held jobs cancelled and
// purged give back at least half of what they took, and the snapshot
// shrinks to near an empty cluster's.
func TestControllerMemoryReturnsAfterPurge(t *testing.T) {
	f := measureRetention(t, 20_000)
	t.Logf("RSS idle %.1f MB, peak %.1f MB, after the purge %.1f MB (%.1f anonymous, %.1f file); snapshot %.1f KB; purged %s after MinJobAge=2s",
		f.idleMB, f.peakMB, f.afterMB, f.afterAnonMB, f.afterFileMB, f.snapshotKB, f.purge.Round(time.Millisecond))
	if grew := f.peakMB - f.idleMB; f.afterMB > f.idleMB+grew/2 {
		t.Errorf("RSS after the purge %.1f MB: more than half of the %.1f MB the jobs took (idle %.1f MB) stayed", f.afterMB, grew, f.idleMB)
	}
}

// BenchmarkControllerMemoryAfterPurge is issue 9's measurement: 200,000
// held jobs submitted to a `corral ctld` process and cancelled, then
// purged with MinJobAge=2s; it reports the process's RSS idle, at its peak
// and after the purge, and the snapshot it wrote after the purge.
func BenchmarkControllerMemoryAfterPurge(b *testing.B) {
	for i := 0; i < b.N; i++ {
		f := measureRetention(b, 200_000)
		b.Logf("RSS idle %.1f MB, peak %.1f MB, after the purge %.1f MB (%.1f anonymous, %.1f file); snapshot %.1f KB; purged %s after MinJobAge=2s",
			f.idleMB, f.peakMB, f.afterMB, f.afterAnonMB, f.afterFileMB, f.snapshotKB, f.purge.Round(time.Millisecond))
		b.ReportMetric(f.idleMB, "idle-RSS-MB")
		b.ReportMetric(f.peakMB, "peak-RSS-MB")
		b.ReportMetric(f.afterMB, "after-RSS-MB")
		b.ReportMetric(f.afterAnonMB, "after-anon-MB")
		b.ReportMetric(f.afterFileMB, "after-file-MB")
		b.ReportMetric(f.snapshotKB, "snapshot-KB")
		b.ReportMetric(f.purge.Seconds(), "purge-s")
		if f.afterMB > 2*f.idleMB+50 {
			b.Errorf("RSS after the purge %.1f MB, above 2 × idle (%.1f MB) + 50 MB", f.afterMB, f.idleMB)
		}
	}
}
