package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// counterJob is a job that prints 0, 1, 2, ... to its output, a line every
// 20 ms, up to n lines, while a background loop rewrites mib MiB of its
// memory (a file in the guest's tmpfs) over and over: a busy guest, whose
// memory changes while the migration copies it.
func counterJob(n, mib int) string {
	return `#!/bin/bash
exec {never}<> <(:)
( while :; do dd if=/dev/zero of=/tmp/busy bs=1M count=` + strconv.Itoa(mib) + ` conv=notrunc 2>/dev/null; done ) &
for ((i = 0; i < ` + strconv.Itoa(n) + `; i++)); do echo $i; read -t 0.02 -u $never; done
kill %1
`
}

// counterLines returns the complete lines of a counter job's output, and
// fails t at the first that is not the next number: a line lost,
// repeated or out of order.
func counterLines(t *testing.T, path string) int {
	t.Helper()
	text := readFileOr(path)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	} else {
		return 0
	}
	for i, l := range strings.Split(text, "\n") {
		if l != strconv.Itoa(i) {
			t.Fatalf("%s: line %d is %q, want %d (a gap, a repeat or a reorder)", path, i+1, l, i)
		}
	}
	return strings.Count(text, "\n") + 1
}

// waitLines waits until the counter job's output has at least n lines.
func waitLines(t *testing.T, path string, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for counterLines(t, path) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d lines after %s, want %d", path, counterLines(t, path), limit, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vmCluster starts one controller (or n) and vm node daemons of the given
// names, 2 CPUs and 2 GiB each, and waits for them.
func vmCluster(t *testing.T, ctlds int, nodes ...string) *cluster {
	t.Helper()
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots VMs and migrates them")
	}
	c := startControllers(t, ctlds, "--node-timeout", "20s")
	c.leader(t, 15*time.Second)
	for _, n := range nodes {
		p := c.startNode(t, n, "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--log-level", "info")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's log:\n%s", p.name, p.tail())
			}
		})
	}
	c.waitNodes(t, len(nodes))
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.ctlds {
				t.Logf("%s's log:\n%s", p.name, p.tail())
			}
		}
	})
	return c
}

// waitMigration waits until job id's newest migration reached one of
// phases, and returns the job then.
func waitMigration(t *testing.T, cl *api.Client, id uint64, limit time.Duration, phases ...string) *api.Job {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j, err := cl.Job(context.Background(), id, false)
		if err == nil && len(j.Migrations) > 0 {
			m := j.Migrations[len(j.Migrations)-1]
			for _, p := range phases {
				if m.Phase == p {
					return j
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d's migration did not reach %v within %s: %+v %v", id, phases, limit, j, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// qemuOf returns the pids of the QEMU processes node name of cluster c runs.
func qemuOf(c *cluster, name string) string {
	out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+filepath.Join(c.dir, name)+"/").Output()
	return strings.TrimSpace(string(out))
}

// TestLiveMigrationOfABusyJob is the migration's acceptance test: a VM job
// that prints a counter every 20 ms while it rewrites 64 MiB of its memory
// is moved by `corral migrate` to the other node, which the scheduler
// chooses. Its output file (on the shared work directory) counts on with no
// line lost or repeated, the job completes on its new node, show job
// records the migration with its total time, downtime and bytes, and no
// QEMU is left on the source once it is released.
func TestLiveMigrationOfABusyJob(t *testing.T) {
	c := vmCluster(t, 1, "vm1", "vm2")
	cl := c.client(t)
	work := t.TempDir()
	out := filepath.Join(work, "count.out")
	script := filepath.Join(work, "count.sh")
	writeFile(t, script, counterJob(250, 64))
	id := mustID(t, c.submit(t, work, "--mem=256M", "-o", out, script))
	waitLines(t, out, 30, 2*time.Minute)
	j, _ := cl.Job(context.Background(), id, false)
	from := j.Node
	if got, err := cli(t, c.addr, work, "migrate", strconv.FormatUint(id, 10)); err != nil {
		t.Fatalf("corral migrate: %v %s", err, got)
	}
	j = waitMigration(t, cl, id, 2*time.Minute, "released", "aborted")
	m := j.Migrations[len(j.Migrations)-1]
	if m.Phase != "released" {
		t.Fatalf("the migration was aborted: %s", m.Error)
	}
	if j.Node == from || j.Node != m.To || m.From != from {
		t.Errorf("the job runs on %s after moving from %s to %s", j.Node, m.From, m.To)
	}
	if m.TotalMS <= 0 || m.DowntimeMS <= 0 || m.Bytes <= 0 {
		t.Errorf("the migration's figures are not recorded: %+v", m)
	}
	deadline := time.Now().Add(15 * time.Second)
	for qemuOf(c, from) != "" {
		if time.Now().After(deadline) {
			t.Fatalf("QEMU %s is still running on the source %s after the migration", qemuOf(c, from), from)
		}
		time.Sleep(50 * time.Millisecond)
	}
	shown, err := cli(t, c.addr, work, "show", "job", strconv.FormatUint(id, 10))
	if err != nil || !strings.Contains(shown, "Migration="+strconv.FormatUint(m.ID, 10)) || !strings.Contains(shown, "Phase=released") {
		t.Errorf("show job does not record the migration: %v\n%s", err, shown)
	}
	j = waitJob(t, cl, id, api.StateCompleted, 3*time.Minute)
	if n := counterLines(t, out); n != 250 {
		t.Errorf("the job counted %d lines, want 250", n)
	}
	t.Logf("moved %s -> %s: total %d ms, downtime %d ms (stopped %d ms at the source, %d ms waiting for the word), %d MiB sent",
		m.From, m.To, m.TotalMS, m.DowntimeMS, m.StopMS, m.SwitchMS, m.Bytes>>20)
}
