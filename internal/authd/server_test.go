package authd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/internal/ident"
	"corral/internal/pki"
)

// helperSocketEnv makes the test binary a client of the agent on that
// socket: it prints the token it got and exits (see TestMain).
const helperSocketEnv = "CORRAL_AUTHD_TEST_CLIENT_SOCKET"

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperSocketEnv); sock != "" {
		auth, err := (&Agent{Socket: sock}).Authorization(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Print(strings.TrimPrefix(auth, Scheme+" "))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockedBuffer is a log destination the test may read while the agent
// writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startAgent runs Serve with cfg until the test ends and returns once the
// socket accepts connections; the function it returns stops the agent and returns
// Serve's error.
func startAgent(t *testing.T, cfg Config) (stop func() error) {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg) }()
	var once sync.Once
	var serveErr error
	stop = func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("Serve ended before it answered: %v", err)
		default:
		}
		// A stale socket is there before Serve replaces it: wait until one
		// answers.
		if c, err := net.Dial("unix", cfg.Socket); err == nil {
			c.Close()
			return stop
		}
	}
	t.Fatalf("no agent on %s after 10s", cfg.Socket)
	return nil
}

func TestAgentAnswersWithThePeersUID(t *testing.T) {
	roots, h := authority(t, pki.Request{Role: pki.RoleLogin, Name: "login1"})
	sock := filepath.Join(t.TempDir(), "run", "authd.sock")
	var logs lockedBuffer
	stop := startAgent(t, Config{Socket: sock, Files: h[0].files, Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for path, want := range map[string]fs.FileMode{sock: 0o666, filepath.Dir(sock): 0o755} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	auth, err := (&Agent{Socket: sock}).Authorization(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	token, ok := strings.CutPrefix(auth, "Corral-Agent ")
	if !ok {
		t.Fatalf("Authorization = %q; want the Corral-Agent scheme", auth)
	}
	c, id, err := Verify(token, roots, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	me, err := ident.LookupID(uint32(os.Geteuid()))
	if err != nil {
		t.Fatal(err)
	}
	want := Claims{User: me.Name, UID: me.UID, GID: uint32(os.Getegid()), Groups: me.Groups, Host: "login1"}
	got := c
	got.IssuedAt, got.Expires, got.Nonce = time.Time{}, time.Time{}, ""
	if !reflect.DeepEqual(got, want) || id.Name != "login1" {
		t.Fatalf("claims %+v from %+v; want %+v from login1", got, id, want)
	}
	if life := c.Expires.Sub(c.IssuedAt); life != DefaultTTL {
		t.Errorf("token lives %s; want the default %s", life, DefaultTTL)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("identity token minted\" uid=%d user=%s", me.UID, me.Name)) {
		t.Errorf("the agent's log does not record the mint:\n%s", logs.String())
	}
	if _, err := os.Lstat(sock); err == nil {
		t.Errorf("the socket %s is left behind after the agent stopped", sock)
	}
}

func TestAgentCachesAndRenews(t *testing.T) {
	_, h := authority(t, pki.Request{Role: pki.RoleNode, Name: "n1"})
	dir := t.TempDir()
	long, short := filepath.Join(dir, "long.sock"), filepath.Join(dir, "short.sock")
	startAgent(t, Config{Socket: long, Files: h[0].files})
	startAgent(t, Config{Socket: short, Files: h[0].files, TTL: 10 * time.Second})
	for name, tc := range map[string]struct {
		sock string
		same bool
	}{
		"a minute's token is kept": {long, true},
		// Less than renewBefore left from the start: each call asks.
		"a 10s token is renewed each time": {short, false},
	} {
		t.Run(name, func(t *testing.T) {
			a := &Agent{Socket: tc.sock}
			got := make([]string, 8)
			var wg sync.WaitGroup
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := a.Authorization(context.Background())
					if err != nil {
						t.Error(err)
					}
					got[i] = v
				}()
			}
			wg.Wait()
			distinct := map[string]bool{}
			for _, v := range got {
				distinct[v] = true
			}
			if same := len(distinct) == 1; same != tc.same {
				t.Fatalf("8 concurrent calls gave %d distinct tokens; want the same one: %v", len(distinct), tc.same)
			}
		})
	}
}

func TestServeRefuses(t *testing.T) {
	_, h := authority(t, pki.Request{Role: pki.RoleLogin, Name: "login1"}, pki.Request{Role: pki.RoleClient, Name: "ops"})
	dir := t.TempDir()
	busy := filepath.Join(dir, "busy.sock")
	startAgent(t, Config{Socket: busy, Files: h[0].files})
	notSocket := filepath.Join(dir, "file")
	if err := os.WriteFile(notSocket, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wrongCA := h[0].files
	wrongCA.CA = otherCA(t)
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"a client's certificate": {Config{Socket: filepath.Join(dir, "a.sock"), Files: h[1].files}, "may not vouch"},
		"another authority":      {Config{Socket: filepath.Join(dir, "b.sock"), Files: wrongCA}, "not valid under this cluster's authority"},
		"no files":               {Config{Socket: filepath.Join(dir, "c.sock")}, "--tls-cert, --tls-key and --tls-ca are required"},
		"too long a life":        {Config{Socket: filepath.Join(dir, "d.sock"), Files: h[0].files, TTL: 5 * time.Minute}, "give 2s to 2m0s"},
		"another agent":          {Config{Socket: busy, Files: h[0].files}, "another agent already answers"},
		"not a socket":           {Config{Socket: notSocket, Files: h[0].files}, "not a socket"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := Serve(ctx, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// otherCA makes an authority no certificate here was issued by and
// returns its ca.crt.
func otherCA(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "ca")
	if err := pki.InitCA(dir, "another cluster"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, pki.CACertFile)
}

func TestServeReplacesAStaleSocket(t *testing.T) {
	_, h := authority(t, pki.Request{Role: pki.RoleLogin, Name: "login1"})
	sock := filepath.Join(t.TempDir(), "authd.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // as a killed agent leaves it
	startAgent(t, Config{Socket: sock, Files: h[0].files})
	if _, err := (&Agent{Socket: sock}).Authorization(context.Background()); err != nil {
		t.Fatalf("after replacing a stale socket: %v", err)
	}
}

func TestAgentClientErrors(t *testing.T) {
	_, h := authority(t, pki.Request{Role: pki.RoleLogin, Name: "login1"})
	dir := t.TempDir()
	now := time.Now()
	someoneElse := mustMint(t, h[0], Claims{User: "mallory", UID: uint32(os.Geteuid()) + 1, Host: "login1", IssuedAt: now, Expires: now.Add(time.Minute)})
	for name, tc := range map[string]struct {
		answer string // what a fake agent writes; "" is no agent at all
		want   string
	}{
		"no agent":            {"", "is corral authd running?"},
		"a refusal":           {`{"error":"host login1 cannot vouch for you"}`, "refused: host login1 cannot vouch for you"},
		"not a token":         {`{"token":"hello"}`, "not one"},
		"garbage":             {"hello", "no answer"},
		"someone else's uid":  {mustJSON(t, answer{Token: someoneElse}), "it is not this host's agent"},
		"an endless answer":   {strings.Repeat("x", MaxTokenBytes+8192), "no answer"},
		"an empty connection": {"\x00", "no answer"},
	} {
		t.Run(name, func(t *testing.T) {
			sock := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".sock")
			if tc.answer != "" {
				fakeAgent(t, sock, tc.answer)
			}
			_, err := (&Agent{Socket: sock}).Authorization(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Authorization: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeAgent answers every connection on sock with answer.
func fakeAgent(t *testing.T, sock, answer string) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(answer))
			c.Close()
		}
	}()
}

// TestTwoUnixUsersEachGetTheirOwn creates two Unix users and runs a client
// as each against one agent: each must get a token naming its own uid,
// name and groups, which the authority verifies.
func TestTwoUnixUsersEachGetTheirOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates two Unix users with useradd and runs a client as each")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: the passwd package): %v", tool, err)
		}
	}
	roots, h := authority(t, pki.Request{Role: pki.RoleLogin, Name: "login1"})
	dir := reachableDir(t)
	bin := copyTestBinary(t, dir)
	sock := filepath.Join(dir, "run", "authd.sock")
	startAgent(t, Config{Socket: sock, Files: h[0].files})

	pid := os.Getpid()
	group := fmt.Sprintf("corraltest-g-%d", pid)
	mustRun(t, "groupadd", group)
	t.Cleanup(func() { exec.Command("groupdel", group).Run() })
	users := map[string][]string{
		fmt.Sprintf("corraltest-a-%d", pid): {"-G", group},
		fmt.Sprintf("corraltest-b-%d", pid): nil,
	}
	tokens := map[string]bool{}
	for name, extra := range users {
		mustRun(t, "useradd", append([]string{"-M", "-s", "/bin/false"}, append(extra, name)...)...)
		t.Cleanup(func() {
			if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
				t.Errorf("userdel %s: %v: %s", name, err, out)
			}
		})
		u, err := ident.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Dir = "/"
		cmd.Env = []string{helperSocketEnv + "=" + sock, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the client as %s (uid %d): %v: %s", name, u.UID, err, stderr.String())
		}
		c, _, err := Verify(string(out), roots, time.Now())
		if err != nil {
			t.Fatalf("the token %s got: %v", name, err)
		}
		if c.User != name || c.UID != u.UID || c.GID != u.GID || !reflect.DeepEqual(c.Groups, u.Groups) {
			t.Fatalf("%s (uid %d, gid %d, groups %v) got a token for %s (uid %d, gid %d, groups %v)",
				name, u.UID, u.GID, u.Groups, c.User, c.UID, c.GID, c.Groups)
		}
		if extra != nil && len(u.Groups) < 2 {
			t.Fatalf("%s should be in group %s too: groups %v", name, group, u.Groups)
		}
		tokens[string(out)] = true
	}
	if len(tokens) != 2 {
		t.Fatalf("the two users got %d distinct tokens", len(tokens))
	}
}

// reachableDir returns a temporary directory every user may enter
// (t.TempDir's parent is 0700).
func reachableDir(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// copyTestBinary copies the running test binary into dir, where the users
// may run it (go test builds it in a directory only its owner reads).
func copyTestBinary(t *testing.T, dir string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "authd.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
