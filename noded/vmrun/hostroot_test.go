package vmrun

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/internal/ident"
	"corral/vmimage"
)

// userWorkDir returns a directory owned by u that u can reach (the test's
// temporary directories are root's, 0700).
func userWorkDir(t *testing.T, u ident.User) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(work, int(u.UID), int(u.GID))
	return work
}

// hostOnlyDir makes a temporary directory on the host in a place the guest
// sees through the host's root (not under /tmp, /var/tmp or /run, which the
// guest replaces with its own): the package directory, unless the checkout
// itself lives under one of those, else /var/cache or /srv.
func hostOnlyDir(t *testing.T) string {
	t.Helper()
	cwd, _ := os.Getwd()
	for _, parent := range []string{cwd, "/var/cache", "/srv", "/opt"} {
		if vmimage.InTempDir(parent) {
			continue
		}
		dir, err := os.MkdirTemp(parent, "corral-outside-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	t.Skip("no host directory outside /tmp, /var/tmp and /run to write to")
	return ""
}

func lookupNobody(t *testing.T) ident.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a job as another user")
	}
	u, err := ident.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	return u
}

// TestHostRootAsTheUser runs a bash script with arrays, [[ =~ ]] and source
// in a VM whose root is the host's: it reads input.txt from its shared
// working directory, runs the host's python3 and writes result.txt there,
// which the host then sees, owned by the job's user. The job runs with the
// user's uid; it cannot read a root-only host file or write into a
// root-only host directory (EACCES), and what it writes outside its shared
// paths stays in the guest. Its standard input is a file (sbatch -i,
// opened in the guest as the user), it has the soft limits it was given
// (--propagate, set by init's limit stub) and its output is appended to
// what an earlier run left (--open-mode=append). TestWarmStart runs the
// same job restored from a snapshot.
func TestHostRootAsTheUser(t *testing.T) {
	guestOnly(t)
	hostRootAsTheUser(t, testRunner(t), false)
}

// hostRootAsTheUser runs TestHostRootAsTheUser's job with r, checks it and
// that it started warm or not as warm says, and returns its output. The
// script's last lines print what must be the job's own: random bytes of
// /dev/urandom and of python's os.urandom, its machine and boot ids, and
// its wall clock (identityLines).
func hostRootAsTheUser(t *testing.T, r *Runner, warm bool) string {
	t.Helper()
	u := lookupNobody(t)
	work := userWorkDir(t, u)
	os.WriteFile(filepath.Join(work, "input.txt"), []byte("3 4\n"), 0o644)
	os.WriteFile(filepath.Join(work, "lib.sh"), []byte("greet() { echo \"hello $1\"; }\n"), 0o644)
	secret := filepath.Join(work, "secret") // root's, 0600
	os.WriteFile(secret, []byte("root only\n"), 0o600)
	rootDir := filepath.Join(work, "root-only") // root's, 0755
	os.Mkdir(rootDir, 0o755)
	// A directory the user may write on the host but that is not shared:
	// outside /tmp, /var/tmp and /run, which the guest has its own of.
	outside := hostOnlyDir(t)
	t.Cleanup(func() { os.RemoveAll(outside) })
	os.Chmod(outside, 0o777)
	script := `#!/bin/bash
set -u
source ./lib.sh
source ./missing.sh 2>/dev/null || true
read -r a b
nums=("$a" "$b")
echo "limits $(ulimit -S -n) $(ulimit -S -c)"
[[ "${nums[1]}" =~ ^[0-9]+$ ]] && echo "array ok ${#nums[@]}"
python3 -c "import sys; print(int(sys.argv[1]) * int(sys.argv[2]))" "$a" "$b" > result.txt
greet "$(id -un)"
echo "uid $(id -u) gid $(id -g) home $HOME"
cat ` + secret + ` 2>&1 | sed 's/.*: //'
touch ` + rootDir + `/x 2>&1 | sed 's/.*: //'
touch ` + outside + `/x && echo guest-write-ok
echo "urandom $(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
echo "python $(python3 -c 'import os; print(os.urandom(16).hex())')"
echo "machine-id $(cat /etc/machine-id)"
echo "boot-id $(cat /proc/sys/kernel/random/boot_id)"
echo "clock $(date +%s)"
`
	spec := jobSpec(t, script, 1, 256)
	spec.User = u
	spec.WorkDir = work
	spec.Stdout = filepath.Join(work, "out.txt") // created as the user
	spec.Shares = []string{work}
	spec.Stdin = filepath.Join(work, "input.txt")
	spec.Rlimits = []api.Rlimit{{Name: "CORE", Value: 0}, {Name: "NOFILE", Value: 77}}
	spec.AppendOutput = true
	os.WriteFile(spec.Stdout, []byte("an earlier run\n"), 0o644)
	os.Chown(spec.Stdout, int(u.UID), int(u.GID))
	spec.Env = append(spec.Env, "HOME="+u.Home, "USER="+u.Name)
	v := start(t, r, spec)
	// A bound, not a timing: a warm runner may be booting a snapshot's
	// VM meanwhile, on a machine that is busy already.
	res := waitResult(t, v, 3*time.Minute)
	out := readFile(t, spec.Stdout)
	if res.ExitCode != 0 || res.Message != "" {
		t.Fatalf("result %+v, output:\n%s\nconsole: %s\nnfsd: %s", res, out, tailFile(filepath.Join(spec.Dir, consoleFile), 10, 2000), tailFile(filepath.Join(spec.Dir, nfsLogFile), 30, 4000))
	}
	if v.StartedWarm() != warm {
		t.Errorf("the job's VM started warm: %v, want %v", v.StartedWarm(), warm)
	}
	want := []string{"an earlier run\n", "limits 77 0", "array ok 2", "hello " + u.Name, "uid " + strconv.Itoa(int(u.UID)) + " gid " + strconv.Itoa(int(u.GID)),
		"Permission denied", "guest-write-ok"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Count(out, "Permission denied") < 2 {
		t.Errorf("want EACCES for both the root-only file and the root-only directory:\n%s", out)
	}
	got, err := os.ReadFile(filepath.Join(work, "result.txt"))
	if err != nil || string(got) != "12\n" {
		t.Errorf("result.txt on the host = %q, %v; want 12", got, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(work, "result.txt"), &st); err != nil || st.Uid != u.UID {
		t.Errorf("result.txt is owned by uid %d, want %d", st.Uid, u.UID)
	}
	if cpu, peak, ok := v.Usage(); r.cg == nil {
		t.Logf("no cgroup usage measured: %s", r.cgNote)
	} else if !ok || cpu <= 0 || peak < 64<<20 {
		t.Errorf("cgroup usage cpu %v peak %d MiB (measured %v): want CPU time and the VM's memory", cpu, peak>>20, ok)
	} else {
		t.Logf("the VM used %v of CPU, %d MiB at its peak (%s)", cpu, peak>>20, r.cgNote)
	}
	for _, p := range []string{filepath.Join(outside, "x"), filepath.Join(rootDir, "x")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the job's write to %s reached the host: only shared paths may be written", p)
		}
	}
	return out
}

// identityLines returns the lines of a hostRootAsTheUser output that must
// be the job's own, by name.
func identityLines(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			switch k {
			case "urandom", "python", "machine-id", "boot-id", "clock":
				m[k] = v
			}
		}
	}
	return m
}

// TestPartitionRoot gives the job a root of its own, as a partition's root
// setting does: a directory holding a static busybox and a release file.
// The job runs the root's /bin/sh, sees the root's /etc and none of the
// node's /usr, and its shared working directory is still the node's, at
// the same path, read-write.
func TestPartitionRoot(t *testing.T) {
	guestOnly(t)
	r := testRunner(t)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox on this host to build a root from")
	}
	site := t.TempDir()
	for _, d := range []string{"bin", "etc"} {
		os.Mkdir(filepath.Join(site, d), 0o755)
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(site, "bin", "busybox"), b, 0o755)
	for _, applet := range []string{"sh", "cat", "echo", "ls", "id"} {
		os.Symlink("busybox", filepath.Join(site, "bin", applet))
	}
	os.WriteFile(filepath.Join(site, "etc", "site-release"), []byte("site root 1.0\n"), 0o644)
	spec := jobSpec(t, `#!/bin/sh
cat /etc/site-release
ls /usr/bin/python3 2>/dev/null || echo "no node python"
echo from-the-site-root > "$1/written.txt"
`, 1, 256)
	spec.Args = []string{spec.Dir}
	spec.Root = site
	v := start(t, r, spec)
	res := waitResult(t, v, 60*time.Second)
	out := readFile(t, spec.Stdout)
	if res.ExitCode != 0 {
		t.Fatalf("result %+v, output %q; console: %s", res, out, tailFile(filepath.Join(spec.Dir, consoleFile), 10, 2000))
	}
	for _, w := range []string{"site root 1.0", "no node python"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if got := readFile(t, filepath.Join(spec.Dir, "written.txt")); got != "from-the-site-root\n" {
		t.Errorf("the shared path on the node holds %q", got)
	}

	spec = jobSpec(t, "#!/bin/sh\ntrue\n", 1, 256)
	spec.Root, spec.Share = site, vmimage.ShareVirtiofs
	if _, err := r.Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "needs the nfs share") {
		t.Errorf("a root of its own over virtiofs: Start = %v, want an error saying it needs the nfs share", err)
	}
	spec.Root, spec.Share = filepath.Join(site, "missing"), ""
	if _, err := r.Start(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "not a directory on this node") {
		t.Errorf("a missing root: Start = %v", err)
	}
}
