package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"corral/api"
)

// TestPreemptionByMigrationAndCheckpoint is the acceptance test of the
// QoS preempt modes migrate and checkpoint, on two vm nodes: vm1 (1 CPU,
// 2 GiB) and vm2 (1 CPU, 1 GiB, started once the victim runs on vm1, so
// that it starts there). The victim, a besteffort counter, is preempted
// by migration for a guaranteed job too big for vm2: it moves to vm2 and
// counts on, and the guaranteed job starts on vm1. Then, with besteffort's
// mode checkpoint, a second guaranteed job needs vm2: the victim is saved
// there (the file is vm2's own), the guaranteed job runs, and the victim
// is restored on vm2 once it ended, its counter intact throughout.
func TestPreemptionByMigrationAndCheckpoint(t *testing.T) {
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots VMs, migrates and checkpoints one")
	}
	c := startControllers(t, 1, "--node-timeout", "20s")
	c.leader(t, 15*time.Second)
	node := func(name, mem string) {
		p := c.startNode(t, name, "--cpus", "1", "--mem", mem, "--runner", "vm", "--images", root, "--log-level", "info")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's log:\n%s", p.name, p.tail())
			}
		})
	}
	node("vm1", "2G")
	c.waitNodes(t, 1)
	cl := c.client(t)
	setBesteffort(t, cl, api.PreemptMigrate)
	work := t.TempDir()
	out, stop := filepath.Join(work, "count.out"), filepath.Join(work, "stop")
	script := filepath.Join(work, "count.sh")
	writeFile(t, script, stoppableCounter(stop, 8))
	victim := mustID(t, c.submit(t, work, "--qos", "besteffort", "--mem=256M", "-o", out, script))
	waitLines(t, out, 20, 2*time.Minute)
	node("vm2", "1G")
	c.waitNodes(t, 2)

	// Preemption by migration: the guaranteed job fits on vm1 only.
	bossStop := filepath.Join(work, "boss.stop")
	boss := mustID(t, c.submit(t, work, "--qos", "guaranteed", "--mem=1200M", "-o", filepath.Join(work, "boss.out"),
		"--wrap", "while [ ! -e "+bossStop+" ]; do sleep 0.1; done"))
	j := waitMigration(t, cl, victim, 2*time.Minute, "released", "aborted")
	m := j.Migrations[len(j.Migrations)-1]
	if m.Phase != "released" || m.Cause != "preempt" || m.By != "job "+strconv.FormatUint(boss, 10) || m.From != "vm1" || m.To != "vm2" {
		t.Fatalf("the victim's migration: %+v, want released from vm1 to vm2 for the preemption by job %d", m, boss)
	}
	if b := waitJob(t, cl, boss, api.StateRunning, 2*time.Minute); b.Node != "vm1" {
		t.Fatalf("the guaranteed job runs on %s, want vm1", b.Node)
	}
	at := counterLines(t, out)
	waitLines(t, out, at+20, 2*time.Minute) // it counts on at vm2
	if j, _ = cl.Job(context.Background(), victim, false); j.State != api.StateRunning || j.Node != "vm2" {
		t.Fatalf("the victim is %s on %s, want running on vm2", j.State, j.Node)
	}

	// Preemption by checkpoint: vm1 holds the guaranteed job, so a second
	// one needs vm2, the victim's.
	setBesteffort(t, cl, api.PreemptCheckpoint)
	boss2Stop := filepath.Join(work, "boss2.stop")
	boss2 := mustID(t, c.submit(t, work, "--qos", "guaranteed", "--mem=256M", "-o", filepath.Join(work, "boss2.out"),
		"--wrap", "while [ ! -e "+boss2Stop+" ]; do sleep 0.1; done"))
	if b := waitJob(t, cl, boss2, api.StateRunning, 2*time.Minute); b.Node != "vm2" {
		t.Fatalf("the second guaranteed job runs on %s, want vm2", b.Node)
	}
	j, _ = cl.Job(context.Background(), victim, false)
	if j.State != api.StatePending || j.Checkpoint == nil || j.Checkpoint.Phase != "restoring" || j.Checkpoint.By != "job "+strconv.FormatUint(boss2, 10) {
		t.Fatalf("the parked victim is %s, checkpoint %+v; want pending, to be restored, for job %d", j.State, j.Checkpoint, boss2)
	}
	parked := counterLines(t, out)
	time.Sleep(time.Second)
	if got := counterLines(t, out); got != parked {
		t.Fatalf("the parked victim counted on (%d to %d lines)", parked, got)
	}
	writeFile(t, boss2Stop, "")
	waitJob(t, cl, boss2, api.StateCompleted, 2*time.Minute)
	if j = waitJob(t, cl, victim, api.StateRunning, 2*time.Minute); j.Node != "vm2" {
		t.Errorf("the victim was restored on %s, want vm2, where its file is", j.Node)
	}
	waitLines(t, out, parked+20, 2*time.Minute)
	writeFile(t, stop, "")
	writeFile(t, bossStop, "")
	waitJob(t, cl, victim, api.StateCompleted, 2*time.Minute)
	waitJob(t, cl, boss, api.StateCompleted, 2*time.Minute)
	n := counterLines(t, out)
	j, _ = cl.Job(context.Background(), victim, false)
	t.Logf("moved vm1 -> vm2 for job %d: total %d ms, downtime %d ms; parked for job %d (%d MiB saved in %d ms, restored in %d ms); counted to %d",
		boss, m.TotalMS, m.DowntimeMS, boss2, j.Checkpoint.Size>>20, j.Checkpoint.SaveMS, j.Checkpoint.RestoreMS, n)
}
