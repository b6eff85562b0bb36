package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// cutProxy is a TCP proxy between one node daemon and a controller that a
// test can cut: while cut, the bytes of every connection, open or new, go
// nowhere (as through a network partition that drops packets), and nothing
// answers.
type cutProxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: strings.TrimPrefix(target, "http://")}
	go p.serve()
	t.Cleanup(func() { l.Close(); p.setCut(true) })
	return p
}

func (p *cutProxy) addr() string { return "http://" + p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.conns = append(p.conns, in)
		p.mu.Unlock()
		if cut {
			go io.Copy(io.Discard, in) // hold it, answer nothing
			continue
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, out)
		p.mu.Unlock()
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies src to dst until the proxy is cut; what arrives afterwards
// is swallowed.
func (p *cutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if n > 0 && !cut {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !cut {
				dst.Close()
			}
			return
		}
	}
}

// setCut cuts the proxy, or mends it: connections held while it was cut are
// closed then, as a partition that heals leaves them reset.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if !cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// tickScript is a --requeue job's script: every run records its pid, then
// appends a line with its restart count and a nanosecond timestamp to the
// file ticks (shared by all runs, opened for appending) and to its output,
// every 50 ms. The first run never ends by itself; a later one ends after 20
// ticks.
const tickScript = `#!/bin/sh
echo $$ > "pid-$SLURM_RESTART_COUNT"
i=0
while :; do
	i=$((i+1))
	echo "run $SLURM_RESTART_COUNT on $SLURMD_NODENAME tick $i at $(date +%s%N)" >> ticks
	echo "run $SLURM_RESTART_COUNT tick $i"
	if [ "$SLURM_RESTART_COUNT" -ge 1 ] && [ "$i" -ge 20 ]; then exit 0; fi
	sleep 0.05
done
`

// tick is one line of the ticks file.
type tick struct {
	run  int
	node string
	at   int64
}

func readTicks(t *testing.T, path string) []tick {
	t.Helper()
	var out []tick
	for _, line := range strings.Split(readFileOr(path), "\n") {
		if line == "" {
			continue
		}
		var tk tick
		var n int
		if _, err := fmt.Sscanf(line, "run %d on %s tick %d at %d", &tk.run, &tk.node, &n, &tk.at); err != nil {
			t.Fatalf("ticks line %q: %v", line, err)
		}
		out = append(out, tk)
	}
	return out
}

// fenceScenario runs a --requeue job on n1, cuts n1 off from the
// controllers with cut, and checks that n1 stopped the job before the
// controllers requeued it to n2: every tick of the first run comes before
// the first of the second, the first run's processes are gone by then, and
// the output file holds the second run's lines only. heal then lets n1 reach
// the controllers again, and the job must not run a third time.
func fenceScenario(t *testing.T, c *cluster, n1 *proc, cut, heal func()) {
	work := t.TempDir()
	cl := c.client(t)
	script := work + "/tick.sh"
	writeFile(t, script, tickScript)
	id := submitParsable(t, c.addr, work, "--requeue", "-o", work+"/out", script)
	waitJob(t, cl, id, api.StateRunning, 20*time.Second)
	pid0 := sleeperPID(t, work+"/pid-0")
	t.Cleanup(func() { killScript(pid0, "tick.sh") })
	eventually(t, 10*time.Second, func() string {
		if n := len(readTicks(t, work+"/ticks")); n < 3 {
			return fmt.Sprintf("%d ticks of the first run", n)
		}
		return ""
	})
	c.startNode(t, "n2", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 2)

	cut()
	cutAt := time.Now()
	j := waitJob(t, cl, id, api.StateCompleted, 40*time.Second)
	t.Logf("requeued and completed %s after the cut", time.Since(cutAt).Round(time.Millisecond))
	if j.Restarts != 1 || j.Node != "n2" {
		t.Errorf("job after the cut: restarts %d on %s, want 1 on n2", j.Restarts, j.Node)
	}
	ticks := readTicks(t, work+"/ticks")
	var lastOld, firstNew int64
	for _, tk := range ticks {
		switch {
		case tk.run == 0 && tk.node == "n1":
			lastOld = max(lastOld, tk.at)
		case tk.run == 1 && tk.node == "n2":
			if firstNew == 0 {
				firstNew = tk.at
			}
		default:
			t.Errorf("a tick of run %d on %s", tk.run, tk.node)
		}
	}
	if lastOld == 0 || firstNew == 0 || lastOld >= firstNew {
		t.Fatalf("the first run's last tick at %d, the second's first at %d: the runs overlapped", lastOld, firstNew)
	}
	t.Logf("the first run stopped %s after the cut, %s before the second started",
		time.Unix(0, lastOld).Sub(cutAt).Round(time.Millisecond), time.Duration(firstNew-lastOld).Round(time.Millisecond))
	if processLive(pid0) {
		t.Errorf("process %d of the first run still runs", pid0)
	}
	out := readFile(t, work+"/out")
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&want, "run 1 tick %d\n", i)
	}
	if out != want.String() {
		t.Errorf("output file holds %q, want the second run's 20 lines only", out)
	}
	if bytes.ContainsRune([]byte(out), 0) || strings.Contains(out, "Terminated") {
		t.Errorf("output file has the first run's leftovers: %q", out)
	}

	heal()
	eventually(t, 20*time.Second, func() string {
		n, err := cl.Node(t.Context(), "n1")
		if err != nil || n.State() == api.NodeDown {
			return fmt.Sprintf("n1 not back: %+v %v", n, err)
		}
		return ""
	})
	time.Sleep(time.Second) // room for a stale report to do harm
	if j, err := cl.Job(t.Context(), id, false); err != nil || j.State != api.StateCompleted || j.Restarts != 1 {
		t.Errorf("job after n1 came back: %+v %v, want COMPLETED with 1 restart", j, err)
	}
	if n := len(readTicks(t, work+"/ticks")); n != len(ticks) {
		t.Errorf("%d more ticks after n1 came back", n-len(ticks))
	}
}

// TestLeaseFencesCutOffNode cuts a node daemon's traffic to the controllers
// with a proxy: the daemon stops its job when its lease runs out, before the
// controllers declare the node DOWN and requeue the job.
func TestLeaseFencesCutOffNode(t *testing.T) {
	c := startControllers(t, 1, "--node-timeout", "4s")
	c.leader(t, 15*time.Second)
	proxy := startCutProxy(t, c.http[0])
	args := []string{"noded", "--name", "n1", "--ctld", proxy.addr(), "--data", c.dir + "/n1", "--log-level", "warn",
		"--runner", "process", "--cpus", "2", "--mem", "1G", "--run-jobs-as", "daemon"}
	n1 := startProc(t, c.dir, "n1", args...)
	c.waitNodes(t, 1)
	fenceScenario(t, c, n1, func() { proxy.setCut(true) }, func() { proxy.setCut(false) })
	if log := readFileOr(n1.log); !strings.Contains(log, "lease expired") {
		t.Errorf("n1 did not log its lease's expiry:\n%s", n1.tail())
	}
}

// TestLeaseFencesFrozenDaemon stops a node daemon with SIGSTOP: a frozen
// daemon kills nothing, so the node's lease keeper must stop the job before
// the controllers requeue it. SIGCONT then brings the daemon back.
func TestLeaseFencesFrozenDaemon(t *testing.T) {
	c := startControllers(t, 1, "--node-timeout", "4s")
	c.leader(t, 15*time.Second)
	n1 := c.startNode(t, "n1", "--cpus", "2", "--mem", "1G")
	c.waitNodes(t, 1)
	signal := func(sig syscall.Signal) func() {
		return func() {
			if err := n1.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { n1.cmd.Process.Signal(syscall.SIGCONT) })
	fenceScenario(t, c, n1, signal(syscall.SIGSTOP), signal(syscall.SIGCONT))
}

// killScript kills pid if it still runs script (a run the test left
// behind when it failed).
func killScript(pid int, script string) {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if processLive(pid) && strings.Contains(string(cmdline), script) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestLeaseFencesFrozenVMNode freezes a vm runner's daemon (SIGSTOP) under
// a --requeue job: the node's lease keeper must end the job's QEMU before
// the controllers declare the node DOWN. After SIGCONT the node comes back
// and runs the requeued job once more, in a new VM.
func TestLeaseFencesFrozenVMNode(t *testing.T) {
	root := imageRoot(t)
	if testing.Short() {
		t.Skip("boots two VMs and waits for a node timeout")
	}
	c := startControllers(t, 1, "--node-timeout", "6s")
	c.leader(t, 15*time.Second)
	n1 := c.startNode(t, "vm1", "--cpus", "2", "--mem", "1G", "--runner", "vm", "--images", root)
	c.waitNodes(t, 1)
	t.Cleanup(func() { n1.cmd.Process.Signal(syscall.SIGCONT) })
	work := t.TempDir()
	cl := c.client(t)
	id := submitParsable(t, c.addr, work, "--requeue", "--mem=256M", "-o", work+"/out", "--wrap",
		`if [ "$SLURM_RESTART_COUNT" -ge 1 ]; then echo second; exit 0; fi; echo first; sleep 1000`)
	eventually(t, 60*time.Second, func() string {
		if !strings.Contains(readFileOr(work+"/out"), "first") {
			return "the job's first run did not start in its VM"
		}
		return ""
	})
	out, _ := exec.Command("pgrep", "-f", "qemu-system.*"+c.dir).Output()
	qemu, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if qemu <= 0 {
		t.Fatalf("no single QEMU process for the job: %q", out)
	}

	if err := n1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	var gone time.Duration
	eventually(t, 30*time.Second, func() string {
		if gone == 0 && !processLive(qemu) {
			gone = time.Since(frozen)
		}
		n, err := cl.Node(t.Context(), "vm1")
		if err != nil || n.State() != api.NodeDown {
			return fmt.Sprintf("vm1 not DOWN: %+v %v", n, err)
		}
		return ""
	})
	down := time.Since(frozen)
	if gone == 0 || gone >= down {
		t.Fatalf("the frozen node's QEMU (pid %d) gone after %s, the node DOWN after %s: it must go first", qemu, gone, down)
	}
	t.Logf("QEMU gone %s after the daemon froze, the node DOWN after %s", gone.Round(time.Millisecond), down.Round(time.Millisecond))

	if err := n1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, cl, id, api.StateCompleted, 90*time.Second)
	if j.Restarts != 1 {
		t.Errorf("job after the node came back: restarts %d, want 1", j.Restarts)
	}
	if got := readFileOr(work + "/out"); got != "second\n" {
		t.Errorf("output %q, want the second run's only", got)
	}
	waitNoQEMU(t, c)
}
