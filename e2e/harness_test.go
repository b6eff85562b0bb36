package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/api"
)

// corralBin is the full binary (daemons and every command); clientBin the
// client binary beside it, which the Slurm aliases point at: the CLI
// tests run every command through it (runBinary), as users do.
var corralBin, clientBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv(binEnv); bin != "" {
		// A child of inOwnNetns: its parent built the binaries.
		corralBin = bin
		clientBin = filepath.Join(filepath.Dir(bin), "corral-client")
		if rec := os.Getenv(probeEnv); rec != "" {
			vmProbe.record = []byte(rec)
		}
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "corral-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	corralBin = filepath.Join(dir, "corral")
	build := exec.Command("go", "build", "-o", corralBin, "corral/cmd/corral")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building corral:", err)
		os.Exit(1)
	}
	clientBin = filepath.Join(dir, "corral-client")
	build = exec.Command("go", "build", "-tags", "corral_client", "-o", clientBin, "corral/cmd/corral")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building corral-client:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePorts returns n distinct 127.0.0.1 addresses nobody listens on now.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var ls []net.Listener
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// proc is a daemon process started by a test.
type proc struct {
	name string
	args []string
	cmd  *exec.Cmd
	log  string
	// done is closed when the process has exited, so any number of
	// waiters (a kill, then the cleanup's kill) see it.
	done chan struct{}
}

func startProc(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, args: args, log: filepath.Join(dir, name+".log")}
	p.start(t)
	t.Cleanup(func() { p.kill(syscall.SIGKILL) })
	return p
}

func (p *proc) start(t testing.TB) {
	t.Helper()
	if err := p.launch(); err != nil {
		t.Fatal(err)
	}
}

// launch starts the process, its output appended to its log.
func (p *proc) launch() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(corralBin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	p.done = done
	cmd := p.cmd
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	return nil
}

// kill signals the process (only the one this test started) and waits.
func (p *proc) kill(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return string(data)
}

// cli runs the corral CLI with CORRAL_ADDR set and returns stdout.
func cli(t testing.TB, addr, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CORRAL_ADDR="+addr, "USER=tester")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("corral %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// cluster is a set of controller and node daemon processes.
type cluster struct {
	dir    string
	ctlds  []*proc
	nodeds []*proc
	http   []string
	addr   string
	// tls verifies the controllers of a cluster that runs over TLS (and
	// shows the test's client certificate); nil without TLS. auth, when
	// set, is what the test's clients authenticate with.
	tls  *tls.Config
	auth api.Credentials
	// freshProbe makes startNode's vm nodes probe their runner, booting
	// the probe guest, instead of reusing the recorded probe (vmProbe).
	freshProbe bool
}

// vmProbe holds the probe record (probe.json) the first vm node of this
// test run wrote. startNode gives it to the later vm nodes in their data
// directories, where they reuse it as a node daemon restarted on the same
// boot with the same build does, instead of each booting a probe guest
// (seconds under TCG). TestVMReadoptedAfterNodeDaemonKill checks the
// probe and its reuse themselves, with freshProbe.
var vmProbe struct {
	sync.Mutex
	record []byte
}

// shareProbe seeds dataDir, the data directory of a vm node about to
// start, with vmProbe's record; without one yet, it records the node's
// own probe when the test ends.
func shareProbe(t testing.TB, dataDir string) {
	vmProbe.Lock()
	rec := vmProbe.record
	vmProbe.Unlock()
	if rec == nil {
		t.Cleanup(func() {
			if b, err := os.ReadFile(filepath.Join(dataDir, "probe.json")); err == nil {
				vmProbe.Lock()
				vmProbe.record = b
				vmProbe.Unlock()
			}
		})
		return
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "probe.json"), rec, 0o600); err != nil {
		t.Fatal(err)
	}
}

// startControllers starts n ctld processes that form one Raft cluster.
func startControllers(t testing.TB, n int, extra ...string) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir()}
	ports := freePorts(t, 2*n)
	var peers []string
	for i := 0; i < n; i++ {
		peers = append(peers, fmt.Sprintf("c%d=%s", i+1, ports[i]))
		c.http = append(c.http, "http://"+ports[n+i])
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%d", i+1)
		args := append([]string{"ctld", "--id", id, "--data", filepath.Join(c.dir, id),
			"--raft", ports[i], "--http", ports[n+i], "--peers", strings.Join(peers, ","), "--log-level", "warn"}, extra...)
		c.ctlds = append(c.ctlds, startProc(t, c.dir, id, args...))
	}
	c.addr = strings.Join(c.http, ",")
	return c
}

// startNode starts a node daemon; it runs jobs as processes unless extra
// names a --runner.
func (c *cluster) startNode(t testing.TB, name string, extra ...string) *proc {
	args := append([]string{"noded", "--name", name, "--ctld", c.addr, "--data", filepath.Join(c.dir, name), "--log-level", "warn"}, extra...)
	if i := slices.Index(extra, "--runner"); i < 0 {
		args = append(args, "--runner", "process")
	} else if i+1 < len(extra) && extra[i+1] == "vm" {
		if !c.freshProbe {
			shareProbe(t, filepath.Join(c.dir, name))
		}
		if !slices.Contains(extra, "--warm-max") {
			// No warm starts' snapshots unless the test asks for them:
			// making one is a VM booted in the background, which other
			// tests' timings and their checks that no QEMU is left would
			// meet (TestVMWarmStart has them).
			args = append(args, "--warm-max", "0")
		}
	}
	if !slices.Contains(extra, "--run-jobs-as") {
		// The CLI submits as USER=tester, whom the host does not know.
		args = append(args, "--run-jobs-as", "daemon")
	}
	p := startProc(t, c.dir, name, args...)
	c.nodeds = append(c.nodeds, p)
	return p
}

func (c *cluster) client(t testing.TB, addrs ...string) *api.Client {
	if len(addrs) == 0 {
		addrs = c.http
	}
	cl, err := api.NewTLSClient(strings.Join(addrs, ","), c.tls)
	if err != nil {
		t.Fatal(err)
	}
	cl.Auth = c.auth
	return cl
}

// leader returns the index of the member that leads, waiting up to d.
func (c *cluster) leader(t testing.TB, d time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for i, h := range c.http {
			cl := c.client(t, h)
			cl.RetryFor = 200 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := cl.Status(ctx)
			cancel()
			if err == nil && st.State == "Leader" {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range c.ctlds {
		t.Logf("%s log:\n%s", p.name, p.tail())
	}
	t.Fatalf("no leader within %s", d)
	return -1
}

// waitNodes waits until n nodes are registered and up.
func (c *cluster) waitNodes(t testing.TB, n int) {
	t.Helper()
	cl := c.client(t)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		nodes, err := cl.Nodes(context.Background())
		up := 0
		for _, nd := range nodes {
			// A node whose runner still probes the host (a vm node
			// boots its test guest after it registered) takes no job.
			if nd.State() != api.NodeDown && !nd.Probing {
				up++
			}
		}
		if err == nil && up >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range c.nodeds {
		t.Logf("%s log:\n%s", p.name, p.tail())
	}
	t.Fatalf("fewer than %d nodes up and ready after 60s (a vm node probes its accelerator by booting a guest first)", n)
}

func allJobs(t testing.TB, cl *api.Client) map[uint64]api.Job {
	t.Helper()
	jobs, err := cl.Jobs(context.Background(), api.JobFilter{}, true)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[uint64]api.Job, len(jobs))
	for _, j := range jobs {
		m[j.ID] = j
	}
	return m
}

func decodeJSON(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
}

// submit runs `corral submit --parsable ARGS` in dir and returns the job id
// it printed, as text (dependencies and task names are built from it).
func (c *cluster) submit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := cli(t, c.addr, dir, append([]string{"submit", "--parsable"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	mustID(t, id)
	return id
}

// oneNodeCluster starts one controller and one node daemon (name, with
// args) and waits until both serve.
func oneNodeCluster(t *testing.T, name string, args ...string) *cluster {
	t.Helper()
	c := startControllers(t, 1)
	c.leader(t, 15*time.Second)
	c.startNode(t, name, args...)
	c.waitNodes(t, 1)
	return c
}
