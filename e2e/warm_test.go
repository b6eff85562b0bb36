package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/api"
)

// TestVMWarmStart runs VM jobs of one shape through a controller and a node
// daemon that keeps warm starts' snapshots (saved at once: --warm-settle
// 0). The first boots and the node makes the shape's snapshot; the next is
// restored from it and prints its output as a booted one does; a job of a
// partition that says Warm=no boots. corral show job says which started
// how (VMStart=), and no QEMU is left once they ended.
func TestVMWarmStart(t *testing.T) {
	root := imageRoot(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: a VM's share is served from a network namespace of its own")
	}
	partsFile := filepath.Join(t.TempDir(), "partitions.json")
	writeFile(t, partsFile, `[{"name": "batch", "default": true}, {"name": "cold", "warm": "no"}]`)
	c := startControllers(t, 1, "--partitions-file", partsFile)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--partitions", "batch,cold",
		"--warm-max", "2", "--warm-settle", "0")
	c.waitNodes(t, 1)
	work := t.TempDir()
	cl := c.client(t)
	run := func(args ...string) (uint64, string) {
		t.Helper()
		out, err := cli(t, c.addr, work, append([]string{"submit", "--parsable", "--mem=256M", "-o", filepath.Join(work, "%j.out")}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		waitJob(t, cl, id, api.StateCompleted, 120*time.Second)
		show, _ := cli(t, c.addr, work, "show", "job", strconv.FormatUint(id, 10))
		return id, show
	}
	_, show := run("--wrap", "echo booted")
	if !strings.Contains(show, "VMStart=cold") {
		t.Errorf("the shape's first job: show job does not say VMStart=cold:\n%s", show)
	}
	warmDir := filepath.Join(c.dir, "vm1", "warm")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		states, _ := filepath.Glob(filepath.Join(warmDir, "*.state"))
		if len(states) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot in %s after 3 minutes", warmDir)
		}
		time.Sleep(100 * time.Millisecond)
	}
	id, show := run("--wrap", "echo restored; cat /proc/sys/kernel/random/boot_id")
	if out := readFile(t, filepath.Join(work, strconv.FormatUint(id, 10)+".out")); !strings.HasPrefix(out, "restored\n") || !strings.Contains(show, "VMStart=warm") {
		t.Errorf("the next job: output %q; show job:\n%s", out, show)
	}
	if _, show := run("-p", "cold", "--wrap", "echo booted again"); !strings.Contains(show, "VMStart=cold") {
		t.Errorf("a job of a partition that says Warm=no: show job does not say VMStart=cold:\n%s", show)
	}
	waitNoQEMU(t, c)
}
