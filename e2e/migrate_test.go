package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/noded/hardware"
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

// stoppableCounter is counterJob's counter, without an end: it stops when
// the file stop appears.
func stoppableCounter(stop string, mib int) string {
	return `#!/bin/bash
exec {never}<> <(:)
( while :; do dd if=/dev/zero of=/tmp/busy bs=1M count=` + strconv.Itoa(mib) + ` conv=notrunc 2>/dev/null; done ) &
for ((i = 0; ; i++)); do [ -e ` + stop + ` ] && break; echo $i; read -t 0.02 -u $never; done
kill %1
`
}

// nodeProc returns node daemon name's process.
func (c *cluster) nodeProc(t *testing.T, name string) *proc {
	t.Helper()
	for _, p := range c.nodeds {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("no node daemon %s", name)
	return nil
}

// qemuCount returns how many QEMU processes cluster c's nodes run.
func qemuCount(c *cluster) int {
	out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+c.dir+"/").Output()
	return len(strings.Fields(string(out)))
}

// TestMigrationFaults breaks one job's migrations in the middle of their
// stream (a slow stream, 4 MiB/s, so that each fault lands in it): the
// destination's daemon killed, the source's daemon killed, the stream cut
// (its connection reset), and the controllers' leader killed. After the
// first three the migration is aborted and the job runs on at its source;
// after the last the new leader completes it. Each time the job runs
// exactly once (one QEMU between the two nodes) and its output counts on
// with no line lost or repeated, through to its end.
func TestMigrationFaults(t *testing.T) {
	c := vmCluster(t, 3, "vm1", "vm2")
	cl := c.client(t)
	work := t.TempDir()
	out, stop := filepath.Join(work, "count.out"), filepath.Join(work, "stop")
	script := filepath.Join(work, "count.sh")
	writeFile(t, script, stoppableCounter(stop, 16))
	id := mustID(t, c.submit(t, work, "--mem=256M", "-o", out, script))
	ids := strconv.FormatUint(id, 10)
	waitLines(t, out, 20, 2*time.Minute)
	mustCLI(t, corralBin, c.addr, work, "config", "set", "MigrationBandwidth=4")
	j, _ := cl.Job(context.Background(), id, false)
	src, dst := j.Node, "vm1"
	if src == "vm1" {
		dst = "vm2"
	}
	restart := func(name string) func() {
		return func() {
			p := c.nodeProc(t, name)
			p.kill(syscall.SIGKILL)
			p.start(t)
		}
	}
	faults := []struct {
		name   string
		inject func()
		moves  bool
	}{
		{"the destination's daemon is killed", restart(dst), false},
		{"the source's daemon is killed", restart(src), false},
		{"the stream is cut", func() {
			n, err := cl.Node(context.Background(), dst)
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := strings.Cut(strings.TrimPrefix(n.APIAddr, "http://"), ":")
			if out, err := exec.Command("ss", "-K", "( sport = :"+port+" or dport = :"+port+" )").CombinedOutput(); err != nil {
				t.Fatalf("ss -K: %v %s", err, out)
			}
		}, false},
		{"the leader is killed", func() { c.ctlds[c.leader(t, 10*time.Second)].kill(syscall.SIGKILL) }, true},
	}
	for i, f := range faults {
		if _, err := cli(t, c.addr, work, "migrate", "--to", dst, ids); err != nil {
			t.Fatalf("%s: corral migrate: %v", f.name, err)
		}
		waitMigration(t, cl, id, time.Minute, "streaming", "aborted", "released")
		time.Sleep(500 * time.Millisecond) // into the stream
		j = waitMigration(t, cl, id, time.Minute, "streaming")
		f.inject()
		j = waitMigration(t, cl, id, 3*time.Minute, "aborted", "released")
		m := j.Migrations[len(j.Migrations)-1]
		if len(j.Migrations) != i+1 {
			t.Fatalf("%s: the job has %d migrations, want %d", f.name, len(j.Migrations), i+1)
		}
		want, phase := src, "aborted"
		if f.moves {
			want, phase = dst, "released"
		}
		if m.Phase != phase || j.Node != want || j.State != api.StateRunning {
			t.Fatalf("%s: migration %s (%s), job %s on %s; want %s, running on %s", f.name, m.Phase, m.Error, j.State, j.Node, phase, want)
		}
		deadline := time.Now().Add(30 * time.Second)
		for qemuCount(c) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d QEMU processes run for the one job", f.name, qemuCount(c))
			}
			time.Sleep(100 * time.Millisecond)
		}
		n := counterLines(t, out)
		waitLines(t, out, n+10, time.Minute)
		t.Logf("%s: migration %s (%s); the job runs on %s and counted %d lines", f.name, m.Phase, m.Error, j.Node, n)
		c.waitNodes(t, 2)
	}
	writeFile(t, stop, "")
	waitJob(t, cl, id, api.StateCompleted, 2*time.Minute)
	t.Logf("counted %d lines through %d faults, without a gap or a repeat", counterLines(t, out), len(faults))
}

// fixtureVMNode starts a vm node daemon on a fixture topology of cpus CPUs
// (one NUMA node): the placement then has that many CPUs to give, however
// many the machine has (the VMs' vCPUs cannot be pinned to the ones it
// lacks, which the runner only logs).
func (c *cluster) fixtureVMNode(t *testing.T, name string, cpus int) *proc {
	t.Helper()
	root, gpus := fixtureNode(t, hardware.FixtureHost{Sockets: 1, NodesPerSocket: 1, CoresPerNode: cpus, ThreadsPerCore: 1, MemMBPerNode: 4096}, nil, nil)
	p := c.startNode(t, name, "--cpus", strconv.Itoa(cpus), "--mem", "2G", "--runner", "vm", "--images", imageRoot(t),
		"--topology-root", root, "--gpus-file", gpus, "--log-level", "info")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's log:\n%s", p.name, p.tail())
		}
	})
	return p
}

// TestDrainByMigration drains a node that runs three VM jobs with
// --migrate onto two others that have room for two of them: two move, the
// third stays and the node says why (show node's DrainWaits, sinfo -R);
// once room appears (the job in its way ends) it moves too and the node
// ends DRAINED. Every job's counter goes on without a gap or a repeat to
// its end.
func TestDrainByMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("boots VMs and migrates them")
	}
	imageRoot(t)
	c := startControllers(t, 1, "--node-timeout", "20s")
	c.leader(t, 15*time.Second)
	c.fixtureVMNode(t, "vm1", 3)
	c.waitNodes(t, 1)
	cl := c.client(t)
	work := t.TempDir()
	stop := filepath.Join(work, "stop")
	script := filepath.Join(work, "count.sh")
	writeFile(t, script, stoppableCounter(stop, 8))
	var ids []uint64
	var outs []string
	for i := 0; i < 3; i++ {
		out := filepath.Join(work, "count"+strconv.Itoa(i)+".out")
		outs = append(outs, out)
		ids = append(ids, mustID(t, c.submit(t, work, "--mem=256M", "-o", out, script)))
	}
	for _, out := range outs {
		waitLines(t, out, 10, 3*time.Minute)
	}
	c.fixtureVMNode(t, "vm2", 2)
	c.waitNodes(t, 2)
	blocker := mustID(t, c.submit(t, work, "--mem=256M", "-o", filepath.Join(work, "blocker.out"), "--wrap", "echo up; sleep 600"))
	waitJob(t, cl, blocker, api.StateRunning, 2*time.Minute)
	c.fixtureVMNode(t, "vm3", 1)
	c.waitNodes(t, 3)
	mustCLI(t, corralBin, c.addr, work, "node", "drain", "vm1", "--migrate", "--reason", "new firmware")

	// Two move; the third waits, and the node says so.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n, err := cl.Node(context.Background(), "vm1")
		if err == nil && len(n.Jobs) == 1 && strings.Contains(n.DrainNote, "fits on no other node") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vm1 does not hold one job and say why: %+v %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	shown, _ := cli(t, c.addr, work, "show", "node", "vm1")
	reasons, _ := cli(t, c.addr, work, "nodes", "-R")
	if !strings.Contains(shown, "DrainWaits=job") || !strings.Contains(reasons, "(waits:") {
		t.Errorf("show node and sinfo -R do not say why the drain waits:\n%s\n%s", shown, reasons)
	}
	if _, err := cli(t, c.addr, work, "cancel", strconv.FormatUint(blocker, 10)); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(3 * time.Minute)
	for {
		n, err := cl.Node(context.Background(), "vm1")
		if err == nil && n.State() == api.NodeDrained {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vm1 is not DRAINED: %+v %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, id := range ids {
		j, _ := cl.Job(context.Background(), id, false)
		if j.State != api.StateRunning || j.Node == "vm1" || len(j.Migrations) == 0 || j.Migrations[len(j.Migrations)-1].Phase != "released" {
			t.Errorf("job %d is %s on %s after the drain (migrations %+v)", id, j.State, j.Node, j.Migrations)
		}
		n := counterLines(t, outs[i])
		waitLines(t, outs[i], n+5, time.Minute)
	}
	writeFile(t, stop, "")
	for i, id := range ids {
		waitJob(t, cl, id, api.StateCompleted, 2*time.Minute)
		t.Logf("job %d counted %d lines", id, counterLines(t, outs[i]))
	}
}

// TestCheckpointAndRestoreElsewhere parks a running counter job in a
// checkpoint (a directory both nodes share): the job is SUSPENDED,
// Checkpointed, and its CPU goes to a job that waited for it. Restored, it
// starts on the other node from its file and counts on where it stopped,
// with no line lost or repeated, to its end; its checkpoint file is gone
// once it ended.
func TestCheckpointAndRestoreElsewhere(t *testing.T) {
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots VMs and checkpoints one")
	}
	ckDir := t.TempDir()
	c := startControllers(t, 1, "--node-timeout", "20s")
	c.leader(t, 15*time.Second)
	for _, n := range []string{"vm1", "vm2"} {
		p := c.startNode(t, n, "--cpus", "1", "--mem", "2G", "--runner", "vm", "--images", root, "--log-level", "info",
			"--checkpoint-dir", ckDir, "--checkpoint-shared")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's log:\n%s", p.name, p.tail())
			}
		})
	}
	c.waitNodes(t, 2)
	cl := c.client(t)
	work := t.TempDir()
	out, stop := filepath.Join(work, "count.out"), filepath.Join(work, "stop")
	script := filepath.Join(work, "count.sh")
	writeFile(t, script, stoppableCounter(stop, 8))
	id := mustID(t, c.submit(t, work, "--mem=256M", "-o", out, script))
	ids := strconv.FormatUint(id, 10)
	waitLines(t, out, 20, 2*time.Minute)
	filler := mustID(t, c.submit(t, work, "--mem=256M", "-o", filepath.Join(work, "filler.out"), "--wrap", "echo up; sleep 600"))
	waitJob(t, cl, filler, api.StateRunning, 2*time.Minute)
	waiter := mustID(t, c.submit(t, work, "--mem=256M", "-o", filepath.Join(work, "waiter.out"), "--wrap", "echo waited"))
	j, _ := cl.Job(context.Background(), id, false)
	from := j.Node

	mustCLI(t, corralBin, c.addr, work, "checkpoint", ids)
	j = waitJob(t, cl, id, api.StateSuspended, 2*time.Minute)
	if j.Reason != api.ReasonCheckpointed || j.Checkpoint == nil || j.Checkpoint.Phase != "saved" || j.Checkpoint.Size <= 0 {
		t.Fatalf("the checkpointed job: %s (%s), checkpoint %+v", j.State, j.Reason, j.Checkpoint)
	}
	at := counterLines(t, out)
	// Its CPU goes to the job that waited for one.
	if w := waitJob(t, cl, waiter, api.StateCompleted, 2*time.Minute); w.Node != from {
		t.Errorf("the waiting job ran on %s, want %s, the node the checkpoint freed", w.Node, from)
	}
	if got := counterLines(t, out); got != at {
		t.Fatalf("the checkpointed job counted on (%d to %d lines)", at, got)
	}
	if _, err := cli(t, c.addr, work, "cancel", strconv.FormatUint(filler, 10)); err != nil {
		t.Fatal(err)
	}
	waitJob(t, cl, filler, api.StateCancelled, time.Minute)
	// Restored on the other node (the one the filler left): both may take
	// it, the pass picks; --to says which.
	to := "vm1"
	if from == "vm1" {
		to = "vm2"
	}
	mustCLI(t, corralBin, c.addr, work, "restore", "--to", to, ids)
	j = waitJob(t, cl, id, api.StateRunning, 2*time.Minute)
	waitLines(t, out, at+20, 2*time.Minute)
	j, _ = cl.Job(context.Background(), id, false)
	if j.Node != to || j.Checkpoint == nil || j.Checkpoint.Phase != "restored" {
		t.Errorf("the restored job runs on %s (want %s), checkpoint %+v", j.Node, to, j.Checkpoint)
	}
	writeFile(t, stop, "")
	waitJob(t, cl, id, api.StateCompleted, 2*time.Minute)
	n := counterLines(t, out)
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(ckDir, "*.ckpt"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint files %v outlive their job", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("saved on %s after %d lines (%d MiB in %d ms), restored on %s in %d ms, counted to %d",
		from, at, j.Checkpoint.Size>>20, j.Checkpoint.SaveMS, to, j.Checkpoint.RestoreMS, n)
}
