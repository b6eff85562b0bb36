package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/api"
	"corral/noded/cgroup"
)

// cliAs runs the CLI as the user name says ($USER), the way a user on a
// login host would.
func cliAs(t testing.TB, addr, dir, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CORRAL_ADDR="+addr, "USER="+name)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("corral %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// userDir returns a directory owned by the user nobody that nobody can
// reach, outside the test's 0700 temporary directories.
func userDir(t *testing.T) (string, *user.User) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the node runs the job as another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base := t.TempDir()
	os.Chmod(filepath.Dir(base), 0o755)
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "submit")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(dir, uid, gid)
	return dir, u
}

// TestVMScriptsWorkUnchanged submits, as a user of the host, a #!/bin/bash
// script with arrays, [[ =~ ]] and source that reads input.txt from its
// submit directory, runs the host's python3 and writes result.txt there:
// the host sees result.txt with the right content, owned by the user. An
// afterok chain passes a file from step 1 to step 2. The job's processes
// run as the user's uid, cannot read a root-only file, cannot write a
// root-only directory or /etc (EACCES), write nothing that reaches the
// host outside the shared paths, and reach neither a listener on the
// host's loopback nor the controller, on loopback or on the node's own
// address, nor anything beyond the node: the default partition's network
// is none, and the guest has no default route. The job's files go over
// the default NFS share;
// the chain's second step asks --no-migrate and gets virtiofs.
func TestVMScriptsWorkUnchanged(t *testing.T) {
	root := imageRoot(t)
	dir, u := userDir(t)
	// A partition's shared path, outside /tmp (which the guest has its own
	// of), owned by the user.
	shared, err := os.MkdirTemp(".", "shared-")
	if err != nil {
		t.Fatal(err)
	}
	shared, _ = filepath.Abs(shared)
	t.Cleanup(func() { os.RemoveAll(shared) })
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.Chown(shared, uid, gid)
	partsFile := filepath.Join(t.TempDir(), "partitions.json")
	writeFile(t, partsFile, `[{"name": "batch", "default": true, "shared_paths": ["`+shared+`"]}]`)
	c := startControllers(t, 1, "--partitions-file", partsFile)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--run-jobs-as", "user")
	c.waitNodes(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("reached\n"))
			conn.Close()
		}
	}()
	_, lport, _ := net.SplitHostPort(ln.Addr().String())
	_, cport, _ := net.SplitHostPort(strings.TrimPrefix(c.addr, "http://"))
	writeFile(t, filepath.Join(dir, "input.txt"), "6 7\n")
	writeFile(t, filepath.Join(dir, "helpers.sh"), "twice() { echo $(( $1 * 2 )); }\n")
	writeFile(t, filepath.Join(dir, "secret"), "root only\n")
	os.Chmod(filepath.Join(dir, "secret"), 0o600)
	// Host directories that are not shared, outside /tmp (which the guest
	// has its own of): one only root may write, one anybody may. Writes to
	// the first fail with EACCES in the guest; writes to the second stay
	// in the guest's overlay and never reach the host.
	rootOnly := hostDir(t, "root-only-", 0o755)
	anybody := hostDir(t, "not-shared-", 0o777)
	// The node's own address on its network, where the controller
	// listens too (on every address of the node but loopback-only ones).
	nodeIP := "192.0.2.1"
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				nodeIP = ipn.IP.String()
				break
			}
		}
	}
	probe := `import socket
for host, port in (("10.0.2.2", ` + lport + `), ("127.0.0.1", ` + lport + `), ("10.0.2.2", ` + cport + `), ("127.0.0.1", ` + cport + `), ("` + nodeIP + `", ` + cport + `), ("192.0.2.1", 80), ("1.1.1.1", 53)):
    try:
        socket.create_connection((host, port), timeout=2).close()
        print("reached", host, port)
    except OSError:
        print("blocked", host, port)
`
	writeFile(t, filepath.Join(dir, "probe.py"), probe)
	writeFile(t, filepath.Join(dir, "job.sh"), `#!/bin/bash
#SBATCH --mem=256M
source ./helpers.sh
source ./not-there.sh 2>/dev/null || true
read -r a b < input.txt
pair=("$a" "$b")
if [[ "${pair[0]}${pair[1]}" =~ ^[0-9]+$ ]]; then echo "numbers ${#pair[@]}"; fi
python3 -c "import sys; print(int(sys.argv[1]) * int(sys.argv[2]))" "${pair[@]}" > result.txt
echo "twice $(twice "$a")"
echo "uid $(id -u) user $USER"
cat secret 2>/dev/null || echo "secret refused"
touch `+rootOnly+`/x 2>&1 | sed 's/.*: /root-only dir: /'
{ echo x > /etc/corral-job-was-here; } 2>&1 | sed 's/.*: /etc: /'
echo x > `+anybody+`/x && echo "not-shared write: $(cat `+anybody+`/x) in the guest"
python3 probe.py
echo "default routes $(awk 'NR > 1 && $2 == "00000000"' /proc/net/route | wc -l)"
echo from-the-job > `+shared+`/out.txt
`)
	id := submitAs(t, c, dir, u.Username, "-o", filepath.Join(dir, "job-%j.out"), "job.sh")
	cl := c.client(t)
	j := waitJob(t, cl, id, api.StateCompleted, 90*time.Second)
	out := readFile(t, filepath.Join(dir, "job-"+strconv.FormatUint(id, 10)+".out"))
	for _, want := range []string{"numbers 2", "twice 12", "uid " + u.Uid + " user nobody", "secret refused",
		"root-only dir: Permission denied", "etc: Permission denied", "not-shared write: x in the guest",
		"blocked 10.0.2.2 " + lport, "blocked 127.0.0.1 " + lport, "blocked 10.0.2.2 " + cport, "blocked 127.0.0.1 " + cport,
		"blocked " + nodeIP + " " + cport, "blocked 192.0.2.1 80", "blocked 1.1.1.1 53", "default routes 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("job output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "reached") {
		t.Errorf("the job reached a host service:\n%s", out)
	}
	for _, p := range []string{filepath.Join(rootOnly, "x"), filepath.Join(anybody, "x"), "/etc/corral-job-was-here"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the job's write to %s, which is not a shared path, reached the host", p)
		}
	}
	if got := readFile(t, filepath.Join(dir, "result.txt")); got != "42\n" {
		t.Errorf("result.txt = %q, want 42", got)
	}
	assertOwner(t, filepath.Join(dir, "result.txt"), u.Uid)
	if got := readFileOr(filepath.Join(shared, "out.txt")); got != "from-the-job\n" {
		t.Errorf("the partition's shared path %s holds %q after the job, want from-the-job", shared, got)
	}
	assertOwner(t, filepath.Join(dir, "job-"+strconv.FormatUint(id, 10)+".out"), u.Uid)
	if _, err := cgroup.Detect(); err == nil {
		show, _ := cli(t, c.addr, dir, "show", "job", strconv.FormatUint(id, 10))
		if j.CPUSeconds <= 0 || j.PeakMemKB < 64<<10 || !strings.Contains(show, "TotalCPU=") || !strings.Contains(show, "MaxRSS=") {
			t.Errorf("the job's VM usage was not reported (cpu %.2f s, peak %d KiB); show job:\n%s", j.CPUSeconds, j.PeakMemKB, show)
		}
	} else {
		t.Logf("no cgroups on this host (%v): usage not checked", err)
	}
	if j.Spec.User != u.Username {
		t.Errorf("job user %q, want %q", j.Spec.User, u.Username)
	}

	// An afterok chain passes a file from one step to the next; the
	// second step gives up migration, so its files go over virtiofs.
	step1 := submitAs(t, c, dir, u.Username, "-o", "/dev/null", "--mem=256M", "--wrap", "echo from-step1 > step1.txt")
	step2 := submitAs(t, c, dir, u.Username, "-o", "/dev/null", "--mem=256M", "--dependency=afterok:"+strconv.FormatUint(step1, 10),
		"--no-migrate", "--wrap", "tr a-z A-Z < step1.txt > step2.txt")
	waitJob(t, cl, step2, api.StateCompleted, 120*time.Second)
	if got := readFile(t, filepath.Join(dir, "step2.txt")); got != "FROM-STEP1\n" {
		t.Errorf("step2.txt = %q, want FROM-STEP1", got)
	}
	waitNoQEMU(t, c)
}

// hostDir makes a directory of root's with mode perm under the package's
// directory (not under /tmp, which the guest replaces with its own), removed
// when the test ends.
func hostDir(t *testing.T, prefix string, perm os.FileMode) string {
	t.Helper()
	// The guest has /tmp, /var/tmp and /run of its own: a host directory
	// there (a checkout under /tmp, say) is not what the job would see.
	cwd, _ := os.Getwd()
	for _, parent := range []string{cwd, "/var/cache", "/srv", "/opt"} {
		if guestPrivate(parent) {
			continue
		}
		d, err := os.MkdirTemp(parent, prefix)
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, perm); err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Skip("no host directory outside /tmp, /var/tmp and /run to write to")
	return ""
}

// guestPrivate reports whether path lies in a tree the guest has its own
// copy of.
func guestPrivate(path string) bool {
	for _, p := range []string{"/tmp", "/var/tmp", "/run"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func submitAs(t *testing.T, c *cluster, dir, name string, args ...string) uint64 {
	t.Helper()
	out, err := cliAs(t, c.addr, dir, name, append([]string{"submit", "--parsable"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("submit printed %q", out)
	}
	return id
}

func assertOwner(t *testing.T, path, uid string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Error(err)
		return
	}
	if strconv.Itoa(int(st.Uid)) != uid {
		t.Errorf("%s is owned by uid %d, want %s", path, st.Uid, uid)
	}
}

// TestVMPartitionRoot runs a job of user nobody in a partition whose Root
// is a directory of the node holding a static busybox and its own
// /etc: the job's #!/bin/sh is that root's, it sees that root's /etc and
// not the node's /usr, and its submit directory is still the node's, at
// the same path, read-write.
func TestVMPartitionRoot(t *testing.T) {
	root := imageRoot(t)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox on this host to build a root from")
	}
	dir, u := userDir(t)
	site := hostDir(t, "site-root-", 0o755)
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
	writeFile(t, filepath.Join(site, "etc", "site-release"), "site root 1.0\n")
	partsFile := filepath.Join(t.TempDir(), "partitions.json")
	writeFile(t, partsFile, `[{"name": "site", "default": true, "root": "`+site+`"}]`)
	c := startControllers(t, 1, "--partitions-file", partsFile)
	c.leader(t, 15*time.Second)
	c.startNode(t, "vm1", "--cpus", "2", "--mem", "2G", "--runner", "vm", "--images", root, "--run-jobs-as", "user", "--partitions", "site")
	c.waitNodes(t, 1)
	writeFile(t, filepath.Join(dir, "job.sh"), `#!/bin/sh
#SBATCH --mem=256M
cat /etc/site-release
ls /usr/bin/python3 2>/dev/null || echo "no node python"
echo "uid $(id -u)"
echo from-the-site-root > written.txt
`)
	id := submitAs(t, c, dir, u.Username, "-o", filepath.Join(dir, "job.out"), "job.sh")
	waitJob(t, c.client(t), id, api.StateCompleted, 120*time.Second)
	out := readFile(t, filepath.Join(dir, "job.out"))
	for _, want := range []string{"site root 1.0", "no node python", "uid " + u.Uid} {
		if !strings.Contains(out, want) {
			t.Errorf("job output lacks %q:\n%s", want, out)
		}
	}
	if got := readFileOr(filepath.Join(dir, "written.txt")); got != "from-the-site-root\n" {
		t.Errorf("written.txt in the submit directory holds %q", got)
	}
	assertOwner(t, filepath.Join(dir, "written.txt"), u.Uid)
	waitNoQEMU(t, c)
}
