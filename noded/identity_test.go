package noded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/internal/ident"
)

// TestProcessRunsAsTheJobUser runs a job of user nobody with the process
// runner from a state directory nobody cannot enter: the job's processes
// have nobody's uid and groups, its output and the files it creates are
// nobody's, a root-only file is refused it, and its exit status is still
// recorded.
func TestProcessRunsAsTheJobUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a job as another user")
	}
	nobody, err := ident.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	spec := testSpec(t, `id -u; id -g
touch made
cat `+"$SECRET"+` && echo read-the-secret
exit 7`)
	os.Chmod(filepath.Dir(spec.WorkDir), 0o755) // t.TempDir's parent is 0700
	os.Chown(spec.WorkDir, int(nobody.UID), int(nobody.GID))
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root only\n"), 0o600)
	spec.User = nobody
	spec.Env = userEnv(append(spec.Env, "SECRET="+secret, "USER=root", "HOME=/root"), nobody)
	h, err := NewProcessRunner().Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Kill(0); h.Wait() })
	if res := waitResult(t, h, 10*time.Second); res.ExitCode != 7 || res.Message != "" {
		t.Fatalf("result %+v, want exit code 7 (recorded through the exit file)", res)
	}
	out, _ := os.ReadFile(spec.Stdout)
	want := strconv.Itoa(int(nobody.UID)) + "\n" + strconv.Itoa(int(nobody.GID)) + "\n"
	if string(out) != want {
		t.Errorf("the job printed %q, want its uid and gid %q", out, want)
	}
	errOut, _ := os.ReadFile(spec.Stderr)
	if !strings.Contains(string(errOut), "Permission denied") {
		t.Errorf("reading a root-only file did not fail with EACCES: stderr %q", errOut)
	}
	for _, f := range []string{spec.Stdout, filepath.Join(spec.WorkDir, "made")} {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil || st.Uid != nobody.UID {
			t.Errorf("%s is owned by uid %d (%v), want nobody's %d", f, st.Uid, err, nobody.UID)
		}
	}
}

// TestUserEnv checks that HOME, USER and LOGNAME are the job user's,
// whatever the submitter exported, and that the rest is kept.
func TestUserEnv(t *testing.T) {
	u := ident.User{Name: "alice", UID: 1000, GID: 1000, Home: "/home/alice"}
	got := userEnv([]string{"A=1", "HOME=/root", "USER=root", "Z=2"}, u)
	want := []string{"A=1", "HOME=/home/alice", "LOGNAME=alice", "USER=alice", "Z=2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("userEnv = %v, want %v", got, want)
	}
}

func TestJobShares(t *testing.T) {
	home := t.TempDir()
	u := ident.User{Name: "alice", Home: home}
	got := jobShares("/work/a/", "/work/a", u, []string{"/scratch", "relative", "/", "/scratch"})
	want := []string{home, "/scratch", "/work/a"}
	if len(got) != len(want) {
		t.Fatalf("jobShares = %v, want %v", got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("jobShares = %v lacks %s", got, w)
		}
	}
}

// TestVMSpec checks what a job and its partition make of its VM's spec:
// the share, root and network, and whether it may start warm (not when
// the job asked --no-warm, nor in a partition that says Warm=no).
func TestVMSpec(t *testing.T) {
	base := LaunchSpec{WorkDir: "/work", Shares: []string{"/work"}}
	cases := map[string]struct {
		p              api.Partition
		js             api.JobSpec
		share, network string
		noWarm         bool
	}{
		"the defaults":     {share: api.ShareNFS},
		"--no-warm":        {js: api.JobSpec{NoWarm: true}, share: api.ShareNFS, noWarm: true},
		"a cold partition": {p: api.Partition{Warm: api.WarmNo}, share: api.ShareNFS, noWarm: true},
		"a warm partition": {p: api.Partition{Warm: api.WarmYes}, share: api.ShareNFS},
		"--no-migrate":     {js: api.JobSpec{NoMigrate: true}, share: api.ShareVirtiofs},
		"a way out":        {p: api.Partition{Network: api.NetworkNode}, share: api.ShareNFS, network: api.NetworkNode},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := vmSpec(base, tc.p, tc.js)
			if got.Share != tc.share || got.Network != tc.network || got.NoWarm != tc.noWarm {
				t.Errorf("vmSpec = share %q network %q no-warm %v; want %q %q %v", got.Share, got.Network, got.NoWarm, tc.share, tc.network, tc.noWarm)
			}
		})
	}
	got := vmSpec(base, api.Partition{SharedPaths: []string{"/scratch"}, Root: "/srv/el9"}, api.JobSpec{SubmitDir: "/work"})
	if got.Root != "/srv/el9" || strings.Join(got.Shares, " ") != "/scratch /work" {
		t.Errorf("vmSpec with shared paths and a root: %+v", got)
	}
}

// TestUnknownUserRefused runs a job of a user the node does not know: it
// fails at once with a message naming the user and the node.
func TestUnknownUserRefused(t *testing.T) {
	f := newFakeCtl(t)
	startDaemon(t, f, t.TempDir(), func(c *Config) { c.RunJobsAs = RunAsJobUser })
	f.addJob("n1", api.Job{ID: 41, Spec: api.JobSpec{Name: "x", User: "no-such-user-corral", Script: "#!/bin/sh\ntrue\n", WorkDir: t.TempDir()}})
	r := f.waitReport(t, 41, 10*time.Second)
	if r.State != api.StateFailed || !strings.Contains(r.Message, `user "no-such-user-corral" does not exist on node n1`) {
		t.Fatalf("report %+v, want FAILED saying the user does not exist on n1", r)
	}
}

// TestUserCache checks that the daemon looks a user up once per userTTL:
// the second answer, known user or unknown, comes from the cache.
func TestUserCache(t *testing.T) {
	var c users
	self, err := c.selfUser()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.selfUser(); again.UID != self.UID || c.self == nil {
		t.Fatalf("selfUser gave %+v then %+v", self, again)
	}
	if _, err := c.lookup("no-such-user-corral"); !errors.Is(err, ident.ErrUnknownUser) {
		t.Fatalf("lookup of an unknown user: %v", err)
	}
	if e, ok := c.byName["no-such-user-corral"]; !ok || !errors.Is(e.err, ident.ErrUnknownUser) {
		t.Fatalf("the unknown user was not cached: %+v", c.byName)
	}
	u, err := c.lookup(self.Name)
	if err != nil || u.UID != self.UID {
		t.Fatalf("lookup(%q) = %+v, %v", self.Name, u, err)
	}
	if _, ok := c.byName[self.Name]; !ok {
		t.Fatal("a known user was not cached")
	}
}
