package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/internal/authd"
	"corral/internal/pki"
)

// tlsCluster is a cluster of three controllers and two nodes running over
// TLS with an authority made by `corral ca`, and each holder's files.
type tlsCluster struct {
	*cluster
	ca    string
	files map[string]pki.Files
	// pub is a directory every local user can reach (the agents' sockets,
	// the CLI binary and the users' work directories); set with auth.
	pub string
}

// startTLSCluster makes the authority with the CLI, issues a certificate
// for each member, node and a client "ops", and starts the daemons with
// --tls-cert, --tls-key and --tls-ca.
func startTLSCluster(t *testing.T) *tlsCluster { return startTLSClusterWith(t, false) }

// startTLSClusterWith is startTLSCluster that, with auth, authenticates
// every request (ctld --auth): each node daemon runs the host's agent
// (noded --authd-socket DATA/authd.sock) and jobs run as their users, and
// the test's clients are root through n1's agent, an admin.
func startTLSClusterWith(t *testing.T, auth bool) *tlsCluster {
	t.Helper()
	c := &tlsCluster{cluster: &cluster{dir: t.TempDir()}, files: map[string]pki.Files{}}
	caDir := filepath.Join(c.dir, "ca")
	c.ca = filepath.Join(caDir, pki.CACertFile)
	ca := func(args ...string) {
		if out, err := exec.Command(corralBin, append([]string{"ca"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("corral ca %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ca("init", "--dir", caDir, "--name", "e2e")
	issue := func(role, name string) {
		ca("issue", "--dir", caDir, "--out", filepath.Join(c.dir, "certs"), "--role", role, "--name", name, "--host", "127.0.0.1,localhost")
		c.files[name] = pki.Files{Cert: filepath.Join(c.dir, "certs", name+".crt"), Key: filepath.Join(c.dir, "certs", name+".key"), CA: c.ca}
	}
	for _, m := range []string{"c1", "c2", "c3"} {
		issue("member", m)
	}
	issue("node", "n1")
	issue("node", "n2")
	issue("client", "ops")
	flags := func(name string) []string {
		f := c.files[name]
		return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
	}
	if auth {
		c.pub = publicDir(t)
	}
	ports := freePorts(t, 6)
	var peers []string
	for i := 0; i < 3; i++ {
		peers = append(peers, fmt.Sprintf("c%d=%s", i+1, ports[i]))
		c.http = append(c.http, "https://"+ports[3+i])
	}
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("c%d", i+1)
		args := append([]string{"ctld", "--id", id, "--data", filepath.Join(c.dir, id), "--raft", ports[i], "--http", ports[3+i],
			"--peers", strings.Join(peers, ","), "--log-level", "warn"}, flags(id)...)
		if auth {
			args = append(args, "--auth", "--node-ca", caDir)
		}
		c.ctlds = append(c.ctlds, startProc(t, c.dir, id, args...))
	}
	c.addr = strings.Join(c.http, ",")
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append(c.ctlds, c.nodeds...) {
				t.Logf("%s log:\n%s", p.name, p.tail())
			}
		}
	})
	cfg, err := c.files["ops"].Client()
	if err != nil {
		t.Fatal(err)
	}
	c.tls = cfg
	c.leader(t, 30*time.Second)
	for _, n := range []string{"n1", "n2"} {
		extra := append([]string{"--cpus", "2", "--mem", "2G", "--listen", "127.0.0.1:0"}, flags(n)...)
		if auth {
			extra = append(extra, "--authd-socket", c.agentSocket(n), "--run-jobs-as", "user")
		}
		c.startNode(t, n, extra...)
	}
	if auth {
		c.auth = &authd.Agent{Socket: c.agentSocket("n1")}
	}
	c.waitNodes(t, 2)
	return c
}

// agentSocket is where node's daemon serves the host's agent.
func (c *tlsCluster) agentSocket(node string) string {
	return filepath.Join(c.pub, "agents", node, "authd.sock")
}

// publicDir makes a directory every local user may read and enter.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-e2e-pub-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cliTLS runs the CLI against the cluster with env added (CORRAL_CA and
// the like), returning stdout, stderr and the exit code.
func (c *tlsCluster) cliTLS(t *testing.T, addr string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, args...)
	cmd.Dir = c.dir
	cmd.Env = append(append(os.Environ(), "CORRAL_ADDR="+addr, "USER=tester"), env...)
	return runCommand(t, cmd)
}

// runCommand runs cmd and returns its stdout, its stderr and its exit
// code; a command that cannot run at all fails the test.
func runCommand(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// asHolder sends one request to url as the holder of files (no client
// certificate when files names only the authority) and returns the status
// and body; an error when no HTTP answer came.
func asHolder(t *testing.T, files pki.Files, method, url, body string) (int, string, error) {
	t.Helper()
	cfg, err := files.Client()
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 20 * time.Second}
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestClusterOverTLS runs three voters and two nodes over TLS: a job
// submitted through a follower runs, exec reaches it through the node's
// TLS job API; plain HTTP, an unknown authority, a client posing as a
// member or as a node, and a node posing as another are refused.
func TestClusterOverTLS(t *testing.T) {
	c := startTLSCluster(t)
	withCA := []string{"CORRAL_CA=" + c.ca}
	leader := c.leader(t, 30*time.Second)
	follower := c.http[(leader+1)%3]

	out, stderr, code := c.cliTLS(t, follower, withCA, "submit", "--parsable", "--wrap", "echo over-tls; sleep 300")
	if code != 0 {
		t.Fatalf("submit through follower %s: exit %d: %s", follower, code, stderr)
	}
	id := mustID(t, strings.TrimSpace(out))
	waitJob(t, c.client(t), id, api.StateRunning, 60*time.Second)
	got, stderr, code := c.cliTLS(t, c.addr, withCA, "exec", fmt.Sprint(id), "--", "echo", "exec-over-tls")
	if code != 0 || !strings.Contains(got, "exec-over-tls") {
		t.Fatalf("exec into job %d: exit %d, stdout %q, stderr %q", id, code, got, stderr)
	}
	if _, stderr, code := c.cliTLS(t, c.addr, withCA, "cancel", fmt.Sprint(id)); code != 0 {
		t.Fatalf("cancel %d: %s", id, stderr)
	}

	t.Run("plain HTTP is refused", func(t *testing.T) {
		plain := "http://" + strings.TrimPrefix(c.http[0], "https://")
		resp, err := http.Get(plain + "/v1/jobs")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTPS") {
				t.Fatalf("plain HTTP to a TLS controller: %d %q; want 400 naming HTTPS", resp.StatusCode, b)
			}
		}
		if _, stderr, code := c.cliTLS(t, plain, nil, "queue"); code == 0 || !strings.Contains(stderr, "serves HTTPS") {
			t.Fatalf("the CLI over plain HTTP: exit %d, %q; want a hint that the controller serves HTTPS", code, stderr)
		}
	})
	t.Run("an unknown authority is refused", func(t *testing.T) {
		_, stderr, code := c.cliTLS(t, c.addr, nil, "queue")
		if code == 0 || !strings.Contains(stderr, "CORRAL_CA") {
			t.Fatalf("the CLI without CORRAL_CA: exit %d, %q; want a certificate error", code, stderr)
		}
	})
	t.Run("only members use the internal endpoints", func(t *testing.T) {
		body := `{"id":"c1","http_addr":"127.0.0.1:1"}`
		for _, who := range []string{"ops", ""} {
			files := c.files[who]
			if who == "" {
				files = pki.Files{CA: c.ca}
			}
			for _, u := range c.http {
				st, b, err := asHolder(t, files, http.MethodPost, u+"/v1/internal/members", body)
				if err != nil || st != http.StatusForbidden {
					t.Fatalf("members announced by %q at %s: %d %q %v; want 403", who, u, st, b, err)
				}
			}
		}
		// A member may announce only itself.
		st, b, _ := asHolder(t, c.files["c2"], http.MethodPost, c.http[leader]+"/v1/internal/members", body)
		if st != http.StatusForbidden || !strings.Contains(b, "only by itself") {
			t.Fatalf("c2 announcing c1: %d %q; want 403", st, b)
		}
	})
	t.Run("a node acts only as itself", func(t *testing.T) {
		for _, tc := range []struct {
			who, method, path, body string
		}{
			{"ops", http.MethodPost, "/v1/nodes/register", `{"name":"n9","cpus":64,"mem_mb":1024,"boot_id":"x"}`},
			{"n1", http.MethodPost, "/v1/nodes/register", `{"name":"n9","cpus":64,"mem_mb":1024,"boot_id":"x"}`},
			{"n2", http.MethodPost, "/v1/nodes/heartbeat", `{"name":"n1","boot_id":"x"}`},
			{"n2", http.MethodPost, "/v1/nodes/status", `{"name":"n1","boot_id":"x","reports":[{"job_id":1,"state":"COMPLETED"}]}`},
			{"ops", http.MethodGet, "/v1/nodes/n1/desired", ""},
			{"n2", http.MethodGet, "/v1/nodes/n1/desired", ""},
		} {
			for _, u := range []string{c.http[leader], follower} {
				st, b, err := asHolder(t, c.files[tc.who], tc.method, u+tc.path, tc.body)
				if err != nil || st != http.StatusForbidden || !strings.Contains(b, "only node") {
					t.Fatalf("%s %s as %s at %s: %d %q %v; want 403", tc.method, tc.path, tc.who, u, st, b, err)
				}
			}
		}
		if st, b, err := asHolder(t, c.files["n1"], http.MethodGet, follower+"/v1/nodes/n1/desired", ""); err != nil || st != http.StatusOK {
			t.Fatalf("n1 reading its own desired state: %d %q %v", st, b, err)
		}
		nodes, err := c.client(t).Nodes(context.Background())
		if err != nil || len(nodes) != 2 {
			t.Fatalf("nodes after the forgeries: %v, %v; want n1 and n2 only", nodes, err)
		}
	})
	t.Run("raft takes members only", func(t *testing.T) {
		raft := c.ctlds[0].args[6] // --raft's value
		cfg, err := c.files["ops"].Client()
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = "127.0.0.1"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", raft, cfg)
		if err == nil {
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "tls") {
			t.Fatalf("a client certificate on the Raft port: %v; want the handshake refused", err)
		}
	})
	t.Run("a new leader is elected over TLS", func(t *testing.T) {
		c.ctlds[leader].kill(syscall.SIGKILL)
		var rest []string
		for i, u := range c.http {
			if i != leader {
				rest = append(rest, u)
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, stderr, code := c.cliTLS(t, strings.Join(rest, ","), withCA, "submit", "--parsable", "--wrap", "true")
			if code == 0 {
				waitJob(t, c.client(t, rest...), mustID(t, strings.TrimSpace(out)), api.StateCompleted, 60*time.Second)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no submission after killing leader c%d: %s", leader+1, stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}
