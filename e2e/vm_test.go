package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// imageRoot returns the guest images `make image` builds, or skips.
func imageRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 is not installed (make deps installs it)")
	}
	root, _ := filepath.Abs("../build/images")
	if _, err := os.Stat(filepath.Join(root, "default", "image.json")); err != nil {
		t.Skipf("no guest image in %s: run make image", root)
	}
	return root
}

// TestVMRunnerEndToEnd runs a job inside a VM through ctld and noded
// processes: the output shows the requested vCPUs, a guest memory close to
// --mem and the guest kernel; the job's exit code 3 makes it FAILED 3:0.
// The node runs in a network namespace of its own inside a site
// (inOwnNetns, siteNet), its controller on another host of the site; a job
// of the partition whose network is node reaches the site's server through
// the node, and not the controller, the node's loopback or its address
// (checkNodeNetwork). Without root, which network namespaces need, it
// runs the first job only, on the machine's network.
func TestVMRunnerEndToEnd(t *testing.T) {
	root := imageRoot(t)
	if os.Geteuid() != 0 {
		t.Log("not root: no network namespace for the node, so no job of the node network")
		c := oneNodeCluster(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root)
		checkVMJobShape(t, c, t.TempDir())
		return
	}
	if !inOwnNetns(t) {
		return
	}
	site, siteHits := siteNet(t)
	partsFile := filepath.Join(t.TempDir(), "partitions.json")
	writeFile(t, partsFile, `[{"name": "batch", "default": true}, {"name": "site", "network": "node"}]`)
	c := startControllerIn(t, site, siteController, "--partitions-file", partsFile)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--partitions", "batch,site")
	c.waitNodes(t, 1)
	work := t.TempDir()
	checkVMJobShape(t, c, work)
	checkNodeNetwork(t, c, work, siteHits)
}

// checkVMJobShape is TestVMRunnerEndToEnd's first job, in work: show node
// lists the image and the accelerator, an unknown image is refused, and a
// job's VM has its vCPUs, memory, kernel and environment; it ends FAILED
// with its exit code 3.
func checkVMJobShape(t *testing.T, c *cluster, work string) {
	t.Helper()
	nodes, err := cli(t, c.addr, work, "show", "node", "vm1")
	if err != nil || !strings.Contains(nodes, "default") || !strings.Contains(nodes, "Accel=") {
		t.Fatalf("show node vm1 does not list its image and accelerator: %q %v", nodes, err)
	}
	if _, err := cli(t, c.addr, work, "submit", "--image", "nosuch", "--wrap", "true"); err == nil || !strings.Contains(err.Error(), "default") {
		t.Fatalf("an unknown image was not refused with the list of images: %v", err)
	}

	script := filepath.Join(work, "shape.sh")
	writeFile(t, script, "#!/bin/sh\nnproc\nfree -m | awk '/Mem:/ {print \"mem\", $2}'\nuname -r\necho \"job $SLURM_JOB_ID cpus $SLURM_CPUS_ON_NODE\"\nexit 3\n")
	out, err := cli(t, c.addr, work, "submit", "--parsable", "-c", "2", "--mem", "256M", "-o", filepath.Join(work, "shape-%j.out"), script)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	j := waitJob(t, c.client(t), id, api.StateFailed, 60*time.Second)
	if j.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", j.ExitCode)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, filepath.Join(work, "shape-"+strconv.FormatUint(id, 10)+".out"))), "\n")
	if len(lines) != 4 {
		t.Fatalf("output %q: want 4 lines", lines)
	}
	if lines[0] != "2" {
		t.Errorf("nproc in the guest = %q, want 2", lines[0])
	}
	mem, _ := strconv.Atoi(strings.TrimPrefix(lines[1], "mem "))
	if mem < 180 || mem > 256 {
		t.Errorf("guest memory %d MiB, want close to 256", mem)
	}
	if !strings.HasSuffix(lines[2], "-cloud-amd64") {
		t.Errorf("guest kernel %q, want Debian's cloud kernel", lines[2])
	}
	if want := "job " + strconv.FormatUint(id, 10) + " cpus 2"; lines[3] != want {
		t.Errorf("job environment line %q, want %q", lines[3], want)
	}
	show, _ := cli(t, c.addr, work, "show", "job", strconv.FormatUint(id, 10))
	if !strings.Contains(show, "ExitCode=3:0") {
		t.Errorf("show job does not say ExitCode=3:0:\n%s", show)
	}
}

// TestVMRunnerLimits checks, with jobs in VMs, that a time limit ends a job
// TIMEOUT within 10 s, a cancelled job's QEMU is gone, and a job that
// allocates more than --mem ends OUT_OF_MEMORY.
func TestVMRunnerLimits(t *testing.T) {
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots several VMs")
	}
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root)
	c.waitNodes(t, 1)
	work := t.TempDir()
	cl := c.client(t)
	submit := func(args ...string) uint64 {
		t.Helper()
		out, err := cli(t, c.addr, work, append([]string{"submit", "--parsable", "-o", filepath.Join(work, "%j.out")}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		return id
	}
	timed := submit("--time=0:05", "--mem=256M", "--wrap", "sleep 60")
	cancelled := submit("--mem=256M", "--wrap", "echo up; sleep 60")
	oom := submit("--mem=128M", "--wrap", "head -c 400m /dev/zero | tail -n 1")

	start := time.Now()
	waitJob(t, cl, cancelled, api.StateRunning, 30*time.Second)
	for !strings.Contains(readFileOr(filepath.Join(work, strconv.FormatUint(cancelled, 10)+".out")), "up") {
		if time.Since(start) > 30*time.Second {
			t.Fatal("the job to cancel never started in its VM")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cli(t, c.addr, work, "cancel", strconv.FormatUint(cancelled, 10)); err != nil {
		t.Fatal(err)
	}
	waitJob(t, cl, cancelled, api.StateCancelled, 20*time.Second)
	j := waitJob(t, cl, timed, api.StateTimeout, 30*time.Second)
	if run := j.EndTime.Sub(j.StartTime); run > 10*time.Second {
		t.Errorf("a 5 s time limit ended the job after %s, want ≤ 10 s", run)
	}
	waitJob(t, cl, oom, api.StateOutOfMemory, 60*time.Second)
	waitNoQEMU(t, c)
}

func readFileOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestVMReadoptedAfterNodeDaemonKill kills the node daemon with SIGKILL
// while a VM runs and restarts it: the job still completes, and no QEMU
// remains afterwards. A restarted daemon must register within the node's
// lease (half the node timeout, 15 s here) or its jobs are stopped. Its
// probe guest, which takes seconds under TCG and longer on a loaded
// machine, boots after it registered: the test removes the probe the first
// daemon recorded, as a new build of the daemon would find it, so the
// restarted daemon probes while its re-adopted VM runs. A second restart on
// the same boot with the same build reuses the recorded probe and boots no
// probe guest at all.
func TestVMReadoptedAfterNodeDaemonKill(t *testing.T) {
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots a VM and restarts a node daemon")
	}
	c := startControllers(t, 1, "--node-timeout", "30s")
	c.freshProbe = true
	c.leader(t, 15*time.Second)
	node := c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--log-level", "info")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the node daemon's log:\n%s", node.tail())
		}
	})
	c.waitNodes(t, 1)
	cl := c.client(t)
	work := t.TempDir()
	out, err := cli(t, c.addr, work, "submit", "--parsable", "--mem=256M", "-o", filepath.Join(work, "r.out"),
		"--wrap", "echo before; sleep 4; echo after")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	start := time.Now()
	for !strings.Contains(readFileOr(filepath.Join(work, "r.out")), "before") {
		if time.Since(start) > 2*time.Minute {
			t.Fatal("the job never started in its VM")
		}
		time.Sleep(50 * time.Millisecond)
	}
	first, err := cl.Node(context.Background(), "vm1")
	if err != nil {
		t.Fatal(err)
	}
	node.kill(syscall.SIGKILL)
	if err := os.Remove(filepath.Join(c.dir, "vm1", "probe.json")); err != nil {
		t.Fatalf("the first daemon recorded no probe: %v", err)
	}
	killed := time.Now()
	node.start(t)
	registered := waitReregistered(t, cl, "vm1", first.BootID)
	t.Logf("the restarted daemon registered %.2fs after the kill (probing=%v)", time.Since(killed).Seconds(), registered.Probing)
	j := waitJob(t, cl, id, api.StateCompleted, 120*time.Second)
	if j.Restarts != 0 {
		t.Errorf("the job was restarted %d times; it should have been re-adopted", j.Restarts)
	}
	if got := readFileOr(filepath.Join(work, "r.out")); got != "before\nafter\n" {
		t.Errorf("output %q, want before and after", got)
	}
	c.waitNodes(t, 1) // ready: the probe in the background is done
	if n, _ := cl.Node(context.Background(), "vm1"); n == nil || n.Accel == "" || n.Probing {
		t.Errorf("after its probe the node reports %+v, want an accelerator and not probing", n)
	}
	for _, line := range strings.Split(readFileOr(node.log), "\n") {
		if strings.Contains(line, "runner probed") {
			t.Logf("node log: %s", line)
		}
	}
	if n := strings.Count(readFileOr(node.log), "probing the runner"); n != 2 {
		t.Errorf("the node daemons' log says %d times that they probed after registering, want 2 (the first start, the restart)", n)
	}
	waitNoQEMU(t, c)

	second, _ := cl.Node(context.Background(), "vm1")
	node.kill(syscall.SIGKILL)
	killed = time.Now()
	node.start(t)
	if n := waitReregistered(t, cl, "vm1", second.BootID); n.Probing {
		t.Error("a daemon restarted on the same boot with the same build registered as probing; it should reuse the recorded probe")
	}
	t.Logf("restarted on the same boot: registered ready %.2fs after the kill", time.Since(killed).Seconds())
	logText := readFileOr(node.log)
	if !strings.Contains(logText, "reusing the probe an earlier daemon recorded on this boot") || strings.Count(logText, "probing the runner") != 2 {
		t.Error("the daemon restarted on the same boot with the same build did not say it reused the recorded probe, or probed again")
	}
}

// waitReregistered waits until node registered with another boot id than
// old, and returns it as the controllers hold it then.
func waitReregistered(t *testing.T, cl *api.Client, name, old string) *api.Node {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := cl.Node(context.Background(), name)
		if err == nil && n.BootID != old && n.State() != api.NodeDown {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not register again within 60s (%+v, %v)", name, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVMManyJobsOnTwoCPUs submits 20 jobs at once to a node of 2 CPUs: all
// complete, and the node never runs more vCPUs than it has.
func TestVMManyJobsOnTwoCPUs(t *testing.T) {
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots 20 VMs")
	}
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "4G", "--runner", "vm", "--images", root)
	c.waitNodes(t, 1)
	work := t.TempDir()
	cl := c.client(t)
	var ids []uint64
	for i := 0; i < 20; i++ {
		out, err := cli(t, c.addr, work, "submit", "--parsable", "--mem=192M", "-o", filepath.Join(work, "m-%j.out"), "--wrap", "echo ok")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		ids = append(ids, id)
	}
	// A guard against a hang, not a speed limit: 20 boots under TCG take
	// about 2 minutes on 2 quiet cores and far longer on a loaded machine.
	deadline := time.Now().Add(10 * time.Minute)
	maxCPUs := 0
	for {
		n, err := cl.Node(context.Background(), "vm1")
		if err == nil && n.AllocCPUs > maxCPUs {
			maxCPUs = n.AllocCPUs
		}
		jobs := allJobs(t, cl)
		done := 0
		for _, id := range ids {
			if jobs[id].State == api.StateCompleted {
				done++
			} else if jobs[id].State.Terminal() {
				t.Fatalf("job %d ended %s: %s", id, jobs[id].State, jobs[id].Message)
			}
		}
		if done == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs completed in 10 minutes", done, len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if maxCPUs > 2 {
		t.Errorf("the node ran %d vCPUs at once on 2 CPUs", maxCPUs)
	}
	for _, id := range ids {
		if got := readFileOr(filepath.Join(work, "m-"+strconv.FormatUint(id, 10)+".out")); got != "ok\n" {
			t.Errorf("job %d output %q", id, got)
		}
	}
	waitNoQEMU(t, c)
}

// waitNoQEMU waits until no QEMU started for this cluster is left.
func waitNoQEMU(t *testing.T, c *cluster) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+c.dir).Output()
		mounts := mountsUnder(c.dir)
		if len(strings.TrimSpace(string(out))) == 0 && len(mounts) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU processes %q or mounts %q (the VMs' network namespaces) left after their jobs ended", out, mounts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mountsUnder lists the mount points under dir: a VM's network namespace
// is a bind mount in its state directory until the node removes it, just
// after QEMU and the VM's file server have exited.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			found = append(found, f[4])
		}
	}
	return found
}

// TestVMPinnedToPlacement: on a node that reported this host's topology, a
// 1-CPU job's VM has its vCPU thread pinned to exactly the CPU the
// scheduler placed it on (Cpus_allowed_list of the thread QEMU names
// "CPU 0/TCG" or "CPU 0/KVM").
func TestVMPinnedToPlacement(t *testing.T) {
	root := imageRoot(t)
	if _, err := os.Stat("/sys/devices/system/node/node0"); err != nil {
		t.Skip("this host has no NUMA topology in sysfs")
	}
	c := oneNodeCluster(t, "vm1", "--cpus", strconv.Itoa(runtime.NumCPU()), "--mem", "2G", "--runner", "vm", "--images", root)
	work := t.TempDir()
	id := c.submit(t, work, "-c", "1", "--mem", "256M", "-o", "/dev/null", "--wrap", "sleep 30")
	j := waitJob(t, c.client(t), mustID(t, id), api.StateRunning, 60*time.Second)
	if j.Placement == nil || len(j.Placement.CPUs) != 1 {
		t.Fatalf("job placement %+v, want one CPU", j.Placement)
	}
	want := strconv.Itoa(j.Placement.CPUs[0])
	// The job is RUNNING once its plan commits; QEMU starts, answers QMP
	// and is pinned a moment later: wait for it, and fail if it never is.
	deadline := time.Now().Add(30 * time.Second)
	var seen []string
	for {
		seen = vcpuAffinities(c.dir)
		if len(seen) > 0 && !slices.ContainsFunc(seen, func(s string) bool { return !strings.HasSuffix(s, "="+want) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vCPU threads' Cpus_allowed_list: %q, want every one %q", seen, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cli(t, c.addr, work, "cancel", id)
	waitNoQEMU(t, c)
}

// vcpuAffinities returns "THREAD NAME=Cpus_allowed_list" for each vCPU
// thread of the one QEMU started under dir (none while it is not up).
func vcpuAffinities(dir string) []string {
	out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+dir).Output()
	pids := strings.Fields(string(out))
	if len(pids) != 1 {
		return nil
	}
	tasks, _ := filepath.Glob("/proc/" + pids[0] + "/task/*")
	var seen []string
	for _, task := range tasks {
		comm, _ := os.ReadFile(task + "/comm")
		if !strings.HasPrefix(string(comm), "CPU ") {
			continue
		}
		status, _ := os.ReadFile(task + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				seen = append(seen, filepath.Base(task)+" "+strings.TrimSpace(string(comm))+"="+strings.TrimSpace(v))
			}
		}
	}
	return seen
}

// TestVMKilledOnNodeShutdown: a node daemon started with --on-exit=kill
// and stopped with SIGTERM ends its job's VM (QMP quit, then SIGKILL)
// before it exits; no QEMU is left.
func TestVMKilledOnNodeShutdown(t *testing.T) {
	root := imageRoot(t)
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	nd := c.startNode(t, "vm1", "--cpus", "2", "--mem", "1G", "--runner", "vm", "--images", root, "--on-exit", "kill")
	c.waitNodes(t, 1)
	work := t.TempDir()
	id := c.submit(t, work, "-c", "1", "--mem", "256M", "-o", "/dev/null", "--wrap", "sleep 60")
	waitJob(t, c.client(t), mustID(t, id), api.StateRunning, 60*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for len(vcpuAffinities(c.dir)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the job's VM never came up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	nd.kill(syscall.SIGTERM)
	waitNoQEMU(t, c)
}
