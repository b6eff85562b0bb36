package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/internal/ident"
)

// unixUser is a Unix user a test created, with a work directory of its own.
type unixUser struct {
	ident.User
	dir string
}

// makeUsers creates a Unix user per name (useradd; removed with userdel
// when the test ends), each with a work directory under pub that only it
// may enter. It skips the test unless it runs as root with useradd.
func makeUsers(t *testing.T, pub string, names ...string) map[string]unixUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates Unix users with useradd and runs the CLI as each")
	}
	for _, tool := range []string{"useradd", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: the passwd package): %v", tool, err)
		}
	}
	out := map[string]unixUser{}
	for _, name := range names {
		if b, err := exec.Command("useradd", "-M", "-s", "/bin/false", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v: %s", name, err, b)
		}
		t.Cleanup(func() {
			// -f: a job the test left running must not keep the user.
			if b, err := exec.Command("userdel", "-f", name).CombinedOutput(); err != nil {
				t.Errorf("userdel %s: %v: %s", name, err, b)
			}
		})
		u, err := ident.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(pub, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
		out[name] = unixUser{User: u, dir: dir}
	}
	return out
}

// TestAuthenticatedTenants runs a cluster with --auth over TLS and two
// real Unix users in two tenants, each using the CLI on a host whose agent
// vouches for them: their jobs carry their own user (whatever $USER says)
// and run as their uid, each sees and touches only its own tenant, and
// anonymous, forged, narrowed and revoked credentials are refused.
func TestAuthenticatedTenants(t *testing.T) {
	c := startTLSClusterWith(t, true)
	pid := os.Getpid()
	ua, ub := fmt.Sprintf("corraltest-u1-%d", pid), fmt.Sprintf("corraltest-u2-%d", pid)
	ua2, ub2 := fmt.Sprintf("corraltest-u3-%d", pid), fmt.Sprintf("corraltest-u4-%d", pid) // a second user of each tenant
	users := makeUsers(t, c.pub, ua, ub, ua2, ub2)
	bin := filepath.Join(c.pub, "corral")
	if b, err := exec.Command("cp", corralBin, bin).CombinedOutput(); err != nil {
		t.Fatalf("copying the CLI: %v: %s", err, b)
	}
	ca := filepath.Join(c.pub, "ca.crt")
	if b, err := exec.Command("cp", c.ca, ca).CombinedOutput(); err != nil {
		t.Fatalf("copying the authority's certificate: %v: %s", err, b)
	}
	base := []string{"CORRAL_ADDR=" + c.addr, "CORRAL_CA=" + ca, "CORRAL_AUTHD=" + c.agentSocket("n1"), "PATH=/usr/bin:/bin"}
	run := func(u *unixUser, env []string, args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = append(append([]string{}, base...), env...), c.pub
		if u != nil {
			cmd.Dir = u.dir
			cmd.Env = append(cmd.Env, "HOME="+u.dir, "USER=root") // $USER claims root; the agent knows better
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
		}
		return runCommand(t, cmd)
	}
	must := func(u *unixUser, env []string, args ...string) string {
		t.Helper()
		out, stderr, code := run(u, env, args...)
		if code != 0 {
			t.Fatalf("corral %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	a, b, a2, b2 := users[ua], users[ub], users[ua2], users[ub2]
	// Root on n1, through its agent, is an admin: it makes the tenants.
	for _, args := range [][]string{{"account", "add", "phys"}, {"account", "add", "bio"},
		{"user", "add", ua, "--account", "phys"}, {"user", "add", ub, "--account", "bio"},
		{"user", "add", ua2, "--account", "phys"}, {"user", "add", ub2, "--account", "bio"}} {
		must(nil, nil, args...)
	}
	if who := must(&a, nil, "whoami"); !strings.Contains(who, "user "+ua) || !strings.Contains(who, "agent on node n1") {
		t.Fatalf("whoami as %s: %q", ua, who)
	}
	idA := mustID(t, strings.TrimSpace(must(&a, nil, "submit", "--parsable", "--wrap", "id -u; id -un")))
	idB := mustID(t, strings.TrimSpace(must(&b, nil, "submit", "--parsable", "--wrap", "id -u; id -un")))
	idA2 := mustID(t, strings.TrimSpace(must(&a2, nil, "submit", "--parsable", "--wrap", "sleep 600")))
	idB2 := mustID(t, strings.TrimSpace(must(&b2, nil, "submit", "--parsable", "--wrap", "sleep 600")))
	admin := c.client(t)
	for _, id := range []uint64{idA, idB} {
		waitJob(t, admin, id, api.StateCompleted, 60*time.Second)
	}
	for _, id := range []uint64{idA2, idB2} {
		waitJob(t, admin, id, api.StateRunning, 60*time.Second)
	}
	ja, err := admin.Job(context.Background(), idA, false)
	if err != nil {
		t.Fatal(err)
	}
	if ja.Spec.User != ua {
		t.Errorf("job %d submitted by %s with USER=root belongs to %q", idA, ua, ja.Spec.User)
	}
	outFile := filepath.Join(a.dir, fmt.Sprintf("slurm-%d.out", idA))
	got, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d\n%s\n", a.UID, ua); string(got) != want {
		t.Errorf("job %d ran as %q; want %q", idA, got, want)
	}
	if fi, err := os.Stat(outFile); err != nil || fi.Sys().(*syscall.Stat_t).Uid != a.UID {
		t.Errorf("job %d's output %s does not belong to %s: %v", idA, outFile, ua, err)
	}

	t.Run("each user sees and touches only its own tenant", func(t *testing.T) {
		rows := func(u *unixUser) string {
			q := strings.Fields(must(u, nil, "queue", "--states", "all", "--noheader", "--format", "%i|%u"))
			slices.Sort(q)
			return strings.Join(q, " ")
		}
		row := func(id uint64, user string) string { return fmt.Sprintf("%d|%s", id, user) }
		sorted := func(r ...string) string { slices.Sort(r); return strings.Join(r, " ") }
		if q, want := rows(&a), sorted(row(idA, ua), row(idA2, ua2)); q != want {
			t.Errorf("%s's queue: %q; want its tenant's jobs %q", ua, q, want)
		}
		if q, want := rows(&b2), sorted(row(idB, ub), row(idB2, ub2)); q != want {
			t.Errorf("%s's queue: %q; want its tenant's jobs %q", ub2, q, want)
		}
		for _, c := range []struct {
			who  *unixUser
			args []string
			want string
		}{
			{&b, []string{"cancel", fmt.Sprint(idA)}, "no such job"},
			{&a, []string{"cancel", fmt.Sprint(idA2)}, "permission denied"},
			{&b, []string{"release", fmt.Sprint(idB2)}, "permission denied"},
			{&b, []string{"update", fmt.Sprint(idA2), "Dependency=afterany:" + fmt.Sprint(idB)}, "no such job"},
			{&a, []string{"attach", fmt.Sprint(idA2)}, "only its owner"},
			{&b, []string{"attach", fmt.Sprint(idA2)}, "no such job"},
		} {
			if out, stderr, code := run(c.who, nil, c.args...); code == 0 || !strings.Contains(out+stderr, c.want) {
				t.Errorf("corral %s as %s: exit %d, %q; want it refused with %q", strings.Join(c.args, " "), c.who.Name, code, stderr, c.want)
			}
		}
		if share := must(&b, nil, "share", "--all"); strings.Contains(share, "phys") || !strings.Contains(share, "bio") {
			t.Errorf("%s's sshare shows another tenant's usage:\n%s", ub, share)
		}
		must(&a2, nil, "cancel", fmt.Sprint(idA2))
		must(&b2, nil, "cancel", fmt.Sprint(idB2))
	})
	t.Run("every write is audited, each reads its own, the chains verify", func(t *testing.T) {
		var all string
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if all = must(nil, nil, "audit", "--json"); strings.Contains(all, ub) && strings.Contains(all, "POST /v1/accounts") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, want := range []string{`"op": "POST /v1/accounts"`, `"user": "` + ua + `"`, `"user": "` + ub + `"`, `"tenant": "phys"`, `"tenant": "bio"`} {
			if !strings.Contains(all, want) {
				t.Errorf("root's audit lacks %s:\n%s", want, all)
			}
		}
		if mine := must(&a, nil, "audit", "--json"); !strings.Contains(mine, ua) || strings.Contains(mine, ub) || strings.Contains(mine, "POST /v1/accounts") {
			t.Errorf("%s's audit shows others' records:\n%s", ua, mine)
		}
		if out := must(nil, nil, "audit", "verify"); !strings.Contains(out, "verify") {
			t.Errorf("audit verify: %q", out)
		}
		copyDir := filepath.Join(t.TempDir(), "c1")
		if b, err := exec.Command("cp", "-a", filepath.Join(c.dir, "c1"), copyDir).CombinedOutput(); err != nil {
			t.Fatalf("copying c1's store: %v: %s", err, b)
		}
		if out, stderr, code := run(nil, nil, "audit", "verify", "--data", copyDir); code != 0 || !strings.Contains(out, "verify") {
			t.Errorf("audit verify --data on a copy of c1's store: exit %d, %q %q", code, out, stderr)
		}
	})
	t.Run("the attacks of issue 12 are refused, the legitimate paths work", func(t *testing.T) {
		secret := strings.TrimSpace(must(&b, nil, "token", "create", "--expires", "1h"))
		as := func(method, path, body string) (int, string) {
			return authRequest(t, c, "Bearer "+secret, method, path, body)
		}
		refused := func(name string, status int, body string, want ...int) {
			t.Helper()
			for _, w := range want {
				if status == w {
					return
				}
			}
			t.Errorf("%s as %s: %d %s; want one of %v", name, ub, status, body, want)
		}
		ja := fmt.Sprint(idA)
		st, body := as("GET", "/v1/jobs/"+ja, "")
		refused("reading another tenant's job and script", st, body, http.StatusNotFound)
		st, body = as("GET", "/v1/nodes/n1/desired", "")
		refused("reading a node's desired state", st, body, http.StatusForbidden)
		for _, w := range []struct{ path, body string }{
			{"/v1/jobs/cancel", `{"filter":{"ids":[` + ja + `]}}`},
			{"/v1/jobs/hold", `{"ids":[` + ja + `],"hold":true}`},
			{"/v1/jobs/suspend", `{"ids":[` + ja + `],"suspend":true}`},
		} {
			st, body = as("POST", w.path, w.body)
			if st != http.StatusOK || !strings.Contains(body, "no such job") {
				t.Errorf("POST %s on %s's job as %s: %d %s; want it refused as no such job", w.path, ua, ub, st, body)
			}
		}
		st, body = as("POST", "/v1/jobs/update", `{"id":`+ja+`,"dependency":{"raw":"afterany:1","clauses":[{"type":"afterany","job_ids":["1"]}]}}`)
		refused("re-depending another's job", st, body, http.StatusNotFound)
		for _, w := range []struct{ path, body string }{
			{"/v1/qos", `{"qos":{"name":"mine","priority":100000}}`},
			{"/v1/accounts", `{"account":{"name":"mine","parent":"root"}}`},
			{"/v1/config", `{"settings":[["PriorityWeightFairshare","0"]]}`},
			{"/v1/nodes/register", `{"name":"n9","cpus":64,"mem_mb":1024,"boot_id":"x","runner":"process"}`},
			{"/v1/nodes/heartbeat", `{"name":"n1","boot_id":"x"}`},
			{"/v1/nodes/status", `{"name":"n1","boot_id":"x","reports":[{"job_id":` + ja + `,"state":"COMPLETED"}]}`},
			{"/v1/internal/members", `{"id":"c1","http_addr":"127.0.0.1:1"}`},
		} {
			st, body = as("POST", w.path, w.body)
			refused("POST "+w.path, st, body, http.StatusForbidden)
		}
		st, body = as("POST", "/v1/jobs", `{"jobs":[{"script":"#!/bin/sh\ntrue\n","ntasks":1,"cpus_per_task":1,"user":"`+ua+`"}]}`)
		refused("submitting as another user", st, body, http.StatusForbidden)
		st, body = as("POST", "/v1/jobs", `{"jobs":[{"script":"#!/bin/sh\ntrue\n","ntasks":1,"cpus_per_task":1,"nice":-1000}]}`)
		refused("raising its priority with a negative nice", st, body, http.StatusForbidden)

		// The job runs as its user: a root-only file can be neither
		// read nor written through it.
		target := filepath.Join("/root", fmt.Sprintf("corral-attack-%d", pid))
		id := mustID(t, strings.TrimSpace(must(&b, nil, "submit", "--parsable", "--output", target, "--wrap", "cat /etc/shadow")))
		j := waitJob(t, admin, id, api.StateFailed, 60*time.Second)
		if _, err := os.Stat(target); err == nil {
			os.Remove(target)
			t.Errorf("job %d of %s wrote root's %s", id, ub, target)
		}
		if !strings.Contains(j.Message, target) {
			t.Errorf("job %d's output onto root's file: FAILED with %q; want a reason naming %s", id, j.Message, target)
		}
		id = mustID(t, strings.TrimSpace(must(&b, nil, "submit", "--parsable", "--wrap", "cat /etc/shadow")))
		if j := waitJob(t, admin, id, api.StateFailed, 60*time.Second); j.ExitCode == 0 {
			t.Errorf("job %d of %s read /etc/shadow", id, ub)
		}
		// The legitimate path: bob's own job, through his token.
		st, body = as("GET", fmt.Sprintf("/v1/jobs/%d", idB), "")
		if st != http.StatusOK || !strings.Contains(body, "id -un") {
			t.Errorf("%s reading its own job %d: %d %s", ub, idB, st, body)
		}
	})
	t.Run("a node daemon restarts with its own credential", func(t *testing.T) {
		id := mustID(t, strings.TrimSpace(must(&a, nil, "submit", "--parsable", "--wrap", "echo started; sleep 3; echo survived")))
		j := waitJob(t, admin, id, api.StateRunning, 60*time.Second)
		// Killed once the job runs on its node, not while it starts.
		out := filepath.Join(a.dir, fmt.Sprintf("slurm-%d.out", id))
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if got, _ := os.ReadFile(out); strings.HasPrefix(string(got), "started") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d did not start on %s within 30 s", id, j.Node)
			}
		}
		var daemon *proc
		for _, p := range c.nodeds {
			if p.name == j.Node {
				daemon = p
			}
		}
		if daemon == nil {
			t.Fatalf("job %d runs on %q, which is no node this test started", id, j.Node)
		}
		daemon.kill(syscall.SIGKILL)
		daemon.start(t)
		waitJob(t, admin, id, api.StateCompleted, 60*time.Second)
		if got, err := os.ReadFile(out); err != nil || string(got) != "started\nsurvived\n" {
			t.Errorf("job %d across its node daemon's restart: %q %v", id, got, err)
		}
	})
	t.Run("a new node joins with a join token", func(t *testing.T) {
		secret := strings.TrimSpace(must(nil, nil, "token", "create", "--join"))
		c.startNode(t, "n3", "--cpus", "2", "--mem", "2G", "--listen", "127.0.0.1:0", "--tls-ca", c.ca, "--join", secret, "--run-jobs-as", "user")
		c.waitNodes(t, 3)
		if _, err := os.Stat(filepath.Join(c.dir, "n3", "credential", "n3.crt")); err != nil {
			t.Errorf("n3 kept no credential: %v", err)
		}
		out, stderr, code := run(nil, nil, "noded", "--name", "n4", "--data", filepath.Join(c.dir, "n4"), "--ctld", c.addr, "--tls-ca", c.ca, "--join", secret)
		if code == 0 || !strings.Contains(stderr, "used already") {
			t.Errorf("a second node with the single-use token: exit %d, %q %q; want refused", code, out, stderr)
		}
	})
	t.Run("anonymous and forged requests are refused", func(t *testing.T) {
		for name, hdr := range map[string]string{"anonymous": "", "forged": "Corral-Agent v1.e30.AAAA.AAAA", "not a token": "Bearer nope"} {
			st, body := authRequest(t, c, hdr, http.MethodGet, "/v1/jobs", "")
			if st != http.StatusUnauthorized {
				t.Errorf("%s: %d %q; want 401", name, st, body)
			}
		}
	})
	t.Run("a read-only token reads, cannot submit, and ends when revoked", func(t *testing.T) {
		secret := strings.TrimSpace(must(&a, nil, "token", "create", "--ops", "read", "--expires", "1h"))
		tok := []string{"CORRAL_TOKEN=" + secret, "CORRAL_AUTHD="}
		q := strings.Join(strings.Fields(must(nil, tok, "queue", "--states", "all", "--noheader", "--format", "%i|%u")), " ")
		if !strings.Contains(q, fmt.Sprintf("%d|%s", idA, ua)) || !strings.Contains(q, fmt.Sprintf("%d|%s", idA2, ua2)) || strings.Contains(q, ub) || strings.Contains(q, ub2) {
			t.Errorf("the read-only token's queue: %q; want %s's tenant's jobs and none of %s's", q, ua, ub)
		}
		if _, stderr, code := run(nil, tok, "submit", "--wrap", "true"); code == 0 || !strings.Contains(stderr, "limited to") {
			t.Errorf("submitting with a read-only token: exit %d, %q; want refused", code, stderr)
		}
		id := strings.TrimPrefix(secret, "corral_")
		id, _, _ = strings.Cut(id, "_")
		must(&a, nil, "token", "revoke", id)
		if _, stderr, code := run(nil, tok, "queue"); code == 0 || !strings.Contains(stderr, "revoked") {
			t.Errorf("a revoked token: exit %d, %q; want refused as revoked", code, stderr)
		}
	})
}

// authRequest sends one request with the Authorization header hdr (none
// when empty) and no client certificate, returning the status and body.
func authRequest(t *testing.T, c *tlsCluster, hdr, method, path, body string) (int, string) {
	t.Helper()
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: c.tls}, Timeout: 20 * time.Second}
	req, _ := http.NewRequest(method, c.http[0]+path, strings.NewReader(body))
	if hdr != "" {
		req.Header.Set("Authorization", hdr)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
